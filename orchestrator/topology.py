"""The run's topology: the entities and edges the environment declares, plus the calls its
traces show. Format (documented in docs/backends.md):

    {"entities": [{"id", "kind", ...}],
     "edges": [{"source", "target", "type": "owns"|"calls", "declared": bool,
                "observed": bool, "calls": int, "errors": int, "p95_ms": float}]}

`owns` edges are always declared; `calls` edges are declared, observed in traces, or both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.errors import OpsBenchError
from orchestrator.telemetry import TelemetryStore


def run_topology(run_dir: Path, since_ns: int | None = None, until_ns: int | None = None) -> dict[str, Any]:
    """Declared topology of a deployed run merged with the service calls measured from its traces."""
    env = json.loads((run_dir / "environment.json").read_text())
    declared = env["topology"]
    edges: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in declared.get("edges", []):
        edges[(e["source"], e["target"], e["type"])] = {**e, "declared": True, "observed": False}
    known = {e["id"] for e in declared.get("entities", [])}
    if env.get("telemetry"):
        with TelemetryStore(Path(env["telemetry"])) as store:
            for call in store.service_calls(since_ns=since_ns, until_ns=until_ns):
                if call["source"] not in known or call["target"] not in known:
                    continue
                key = (call["source"], call["target"], "calls")
                edge = edges.setdefault(key, {"source": call["source"], "target": call["target"],
                                              "type": "calls", "declared": False})
                edge.update(observed=True, calls=call["calls"], errors=call["errors"], p95_ms=call["p95_ms"])
    return {"entities": declared.get("entities", []), "edges": list(edges.values())}


def deployed_run_topology(run_id: str) -> dict[str, Any]:
    """`run_topology` of a run recorded under the state dir, which must still be deployed."""
    run_dir = paths.runs_dir() / run_id
    if not (run_dir / "environment.json").is_file():
        raise OpsBenchError(f"run '{run_id}' has no deployed environment (is it kept with --keep, or still running?)")
    return run_topology(run_dir)
