"""The frozen environment: the Python half of roles/env_snapshot (deploy and teardown).

    python -m orchestrator.snapshots.frozen_env deploy --snapshot DIR --run-dir RUN
    python -m orchestrator.snapshots.frozen_env teardown --run-dir RUN

deploy verifies the snapshot (format.verify: nothing unverified is ever served), copies what replay serves into
the run directory (`<run>/snapshot/`: the JSON answers and the telemetry, hard-linked when the file system allows,
since nothing writes to them), starts the frozen Prometheus on a private copy of the TSDB (`<run>/prometheus/`,
pid file included, so `opsbench cleanup` after a SIGKILL can stop it) and writes `<run>/environment.json` with a
`frozen` section, which the gateway's load_context turns into a FrozenEvidence. teardown stops that Prometheus and
removes the copies. A snapshot's billing table (`billing/<table>.parquet`) is loaded into a read-only DuckDB
file in the copy, which the gateway's billing tools query as they queried the live dataset. Both are idempotent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from . import format as fmt
from .frozen_prometheus import FrozenPrometheus, kill_leftover

COPY_DIR = "snapshot"
PROMETHEUS_DIR = "prometheus"
ENVIRONMENT = "environment.json"
SERVED_FILES = (fmt.MANIFEST, fmt.ALERTS, fmt.TOPOLOGY, fmt.SERVICES, fmt.CHANGES)
SERVED_DIRS = (fmt.TELEMETRY_DIR, fmt.BROWSER_DIR)
"""Directories served whole: telemetry (logs, traces) and the browser capture."""


def _link_or_copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def copy_served(info: fmt.SnapshotInfo, dest: Path) -> None:
    """The files replay serves (not the TSDB: the frozen Prometheus makes its own private copy)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for rel in sorted(info.files):
        if rel in SERVED_FILES or rel.startswith(tuple(f"{d}/" for d in SERVED_DIRS)):
            _link_or_copy(info.path / rel, dest / rel)


def billing_table(info: fmt.SnapshotInfo) -> str | None:
    """The name of the billing table a snapshot holds (`billing/<table>.parquet`), None when it holds none."""
    tables = sorted(rel for rel in info.files if rel.startswith(f"{fmt.BILLING_DIR}/") and rel.endswith(".parquet"))
    if "billing" not in info.families or not tables:
        return None
    if len(tables) > 1:
        raise fmt.SnapshotError(info.path, fmt.BILLING_DIR, f"holds {len(tables)} tables; a snapshot holds one")
    return Path(tables[0]).stem


def load_billing(info: fmt.SnapshotInfo, copy: Path) -> dict[str, str] | None:
    """The snapshot's billing table loaded into a read-only DuckDB file in the run's copy, which the gateway's
    `BillingDatabase` serves as it served the live dataset; None when the snapshot holds no billing table."""
    table = billing_table(info)
    if table is None:
        return None
    from orchestrator.finops.sql import import_table

    database = copy / fmt.BILLING_DIR / f"{table}.duckdb"
    import_table(info.path / fmt.BILLING_DIR / f"{table}.parquet", database, table)
    return {"database": str(database), "table": table}


def environment(info: fmt.SnapshotInfo, copy: Path, prometheus_url: str | None,
                billing: dict[str, str] | None = None) -> dict[str, Any]:
    """environment.json of a frozen environment: the topology and container prefix the live run published (so
    scope rules and names are the live ones), no endpoints, and the `frozen` section."""
    manifest = json.loads((copy / fmt.MANIFEST).read_text())
    topology = manifest.get("topology")
    if not isinstance(topology, dict) and (copy / fmt.TOPOLOGY).is_file():
        topology = json.loads((copy / fmt.TOPOLOGY).read_text()).get("declared")
    recorded = info.data.get("environment") or {}
    telemetry = copy / fmt.TELEMETRY_DIR
    return {
        "application": "snapshot",
        "recorded_application": recorded.get("application"),
        "endpoints": {},
        "topology": topology or {},
        "telemetry": str(telemetry) if telemetry.is_dir() else None,
        "control": {"container_prefix": recorded.get("container_prefix") or ""},
        **({"tool_families": recorded["tool_families"]} if isinstance(recorded.get("tool_families"), list) else {}),
        "frozen": {
            "snapshot_id": info.snapshot_id,
            "snapshot_path": str(info.path),
            "scenario": {"id": info.scenario_id, "version": info.spec_version},
            "frozen_now": info.frozen_now,
            "window": {"start": info.window_start, "end": info.frozen_now},
            "families": list(info.families),
            "dir": str(copy),
            "telemetry": str(telemetry) if telemetry.is_dir() else None,
            "prometheus": prometheus_url,
            "manifest": str(copy / fmt.MANIFEST),
            **({"billing": billing} if billing else {}),
        },
    }


def deploy(snapshot: Path, run_dir: Path, *, scenario: str | None = None) -> dict[str, Any]:
    """Verify `snapshot`, copy it into `run_dir`, start its frozen Prometheus, publish environment.json. On any
    failure nothing is left running. `scenario`: the id the run was created for (must match the snapshot's)."""
    run_dir = Path(run_dir).resolve()
    from orchestrator.corpus.layout import specs_dir  # a built corpus's instances: their specs are beside

    info = fmt.verify(Path(snapshot).resolve(), specs_dir=specs_dir(Path(snapshot)))
    if scenario is not None and scenario != info.scenario_id:
        raise fmt.SnapshotError(info.path, fmt.INDEX, f"a snapshot of scenario {info.scenario_id!r}, "
                                f"not of {scenario!r}")
    teardown(run_dir)
    copy = run_dir / COPY_DIR
    try:
        copy_served(info, copy)
        billing = load_billing(info, copy)
        url = None
        if "metrics" in info.families:
            prometheus = FrozenPrometheus(info.tsdb_dir, run_dir / PROMETHEUS_DIR).start()
            url = prometheus.url
            prometheus.process = None  # detached: it outlives this program; teardown stops it by its pid file
        env = environment(info, copy, url, billing)
        tmp = run_dir / f".{ENVIRONMENT}.tmp"
        tmp.write_text(json.dumps(env, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, run_dir / ENVIRONMENT)
    except BaseException:
        teardown(run_dir)
        raise
    return env


def teardown(run_dir: Path) -> bool:
    """Stop the run's frozen Prometheus (if any) and remove the copies and environment.json. True when a
    Prometheus process was stopped."""
    run_dir = Path(run_dir)
    stopped = kill_leftover(run_dir / PROMETHEUS_DIR)
    shutil.rmtree(run_dir / PROMETHEUS_DIR, ignore_errors=True)
    shutil.rmtree(run_dir / COPY_DIR, ignore_errors=True)
    (run_dir / ENVIRONMENT).unlink(missing_ok=True)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.snapshots.frozen_env",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["deploy", "teardown"])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--snapshot", type=Path, help="the snapshot directory (deploy)")
    parser.add_argument("--scenario", default=None,
                        help="the run's scenario id; deploy refuses another's snapshot (empty: not checked)")
    args = parser.parse_args(argv)
    if args.action == "deploy":
        if args.snapshot is None:
            parser.error("deploy needs --snapshot")
        try:
            env = deploy(args.snapshot, args.run_dir, scenario=args.scenario or None)
        except fmt.SnapshotError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        except Exception as exc:  # e.g. no prometheus binary: one clear line, nothing left running
            print(f"snapshot {args.snapshot}: {exc}", file=sys.stderr)
            return 1
        frozen = env["frozen"]
        json.dump({"snapshot_id": frozen["snapshot_id"], "scenario": frozen["scenario"]["id"],
                   "families": frozen["families"], "prometheus": frozen["prometheus"]}, sys.stdout)
        sys.stdout.write("\n")
    else:
        json.dump({"stopped": teardown(args.run_dir)}, sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
