"""Helpers for the replay tests: a snapshot recorded by the real recorder from the gateway tests' fake live run.

`record_fake_run` captures the run of gateway_fixtures (fake Alertmanager, FakeControl, its telemetry) with a TSDB
built by promtool, exactly as roles/snapshot_record would capture a live shop at handover, so the replay tests can
compare the frozen gateway's answers with the live gateway's.
"""

from __future__ import annotations

import json
from pathlib import Path

from gateway_fixtures import ALERTS, NOW, TOKEN, FakeObservability, fake_control, make_run_dir
from snapshot_fixtures import build_tsdb

from orchestrator.snapshots import capture
from orchestrator.snapshots import format as fmt


def live_run(root: Path, obs: FakeObservability) -> Path:
    """The gateway tests' live run directory with the manifest agent_access would have written at handover."""
    run_dir = make_run_dir(root, obs.url)
    environment = json.loads((run_dir / "environment.json").read_text())
    (run_dir / "agent").mkdir()
    manifest = {"manifest_version": "opsbench/manifest/v1", "run": "r1",
                "tasks": [{"id": "diagnose", "kind": "diagnose", "goal": "Find the root cause."}],
                # What the handover read from the fake Alertmanager (handover.yml keeps these three keys).
                "alerts": [{k: a[k] for k in ("labels", "annotations", "startsAt")} for a in ALERTS],
                "budget": {"wallClockSeconds": 300}, "deadline": 1_700_000_500,
                "observability": {"metrics": True, "logs": True, "traces": True},
                "tools": {"url": "http://127.0.0.1:9", "mcp_url": "http://127.0.0.1:9/mcp"},
                "token_file": str(run_dir / "secrets" / "agent_token"), "endpoints": {"gateway": "http://127.0.0.1:1"},
                "topology": environment["topology"], "output": {"path": str(run_dir / "agent" / "output.json")}}
    (run_dir / "agent" / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def record_fake_run(root: Path, obs: FakeObservability) -> tuple[Path, fmt.SnapshotInfo]:
    """(live run dir, snapshot info): the fake live run and its snapshot at NOW (shop-cart-down, version 1)."""
    run_dir = live_run(root / "live", obs)
    tsdb = build_tsdb(root / "raw-tsdb", now=NOW)
    info = capture.capture(run_dir, root / "snap", scenario_id="shop-cart-down", spec_version=1, raw_tsdb=tsdb,
                           frozen_now=NOW, control=fake_control())
    return run_dir, info


def synthetic_snapshot(root: Path) -> Path:
    """A snapshot recorded from the fake live run under `root` (its fake observability closed after)."""
    obs = FakeObservability()
    try:
        return record_fake_run(root, obs)[1].path
    finally:
        obs.close()


def token_for(run_dir: Path) -> None:
    """Issue the agent token handover would (the gateway answers only with one)."""
    (run_dir / "secrets").mkdir(mode=0o700, exist_ok=True)
    (run_dir / "secrets" / "agent_token").write_text(TOKEN)
