"""A stand-in diagnosis agent: probes the endpoints in its manifest and blames what it sees.

It knows nothing of the fault: it reads the manifest, requests every endpoint, and walks
the topology's ``calls`` edges. A service that refuses connections is the root cause;
if every service answers on its own but a caller fails, the caller's configuration is.
Run as ``python -m orchestrator.agents.probe`` with OPSBENCH_MANIFEST set.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def probe(url: str) -> int:
    """HTTP status of GET url; -1 when the connection fails."""
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return -1


def diagnose(manifest: dict[str, Any]) -> dict[str, Any]:
    status = {name: probe(url + "/") for name, url in manifest["endpoints"].items()}
    edges = manifest["topology"].get("edges", [])
    owned: dict[str, list[str]] = {}
    for e in edges:
        if e["type"] == "owns":
            owned.setdefault(e["source"], []).append(e["target"])
    down = [s for s, code in status.items() if code == -1]
    failing = [s for s, code in status.items() if code >= 500]
    entities: list[dict[str, Any]] = []
    propagations: list[dict[str, Any]] = []
    if down:
        for svc in down:
            entities.append({"id": svc, "root_cause": True, "layer": "runtime", "fault_type": "process_down"})
            for e in edges:
                if e["type"] == "calls" and e["target"] == svc and e["source"] in failing:
                    entities.append({"id": e["source"], "root_cause": False})
                    propagations.append({"source": svc, "target": e["source"],
                                         "condition": f"{svc} refuses connections",
                                         "effect": f"{e['source']} answers 5xx"})
    elif failing:
        for svc in failing:
            configs = [o for o in owned.get(svc, []) if o.endswith("-config")]
            entities.append({"id": configs[0] if configs else svc, "root_cause": True,
                             "layer": "configuration", "fault_type": "wrong_endpoint"})
            entities.append({"id": svc, "root_cause": False})
    return {
        "schema": "opsbench/diagnosis/v1",
        "incident": bool(down or failing),
        "entities": entities,
        "propagations": propagations,
        "explanation": f"probe results: {status}",
    }


def main() -> int:
    manifest_path = os.environ.get("OPSBENCH_MANIFEST")
    if not manifest_path:
        print("OPSBENCH_MANIFEST is not set; run me through `opsbench run`", file=sys.stderr)
        return 2
    manifest = json.loads(Path(manifest_path).read_text())
    result = diagnose(manifest)
    Path(manifest["output"]["path"]).write_text(json.dumps(result, indent=2))
    print(json.dumps({"wrote": manifest["output"]["path"], "incident": result["incident"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
