"""Helpers for the snapshot tests: a TSDB built by promtool from OpenMetrics text, and a minimal snapshot."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.snapshots import format as fmt

FROZEN_NOW = 1_700_000_100.0
"""The frozen "now" of the test TSDBs (Unix seconds, 2023): old on purpose, so retention would matter."""


def need_promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: `apt-get install prometheus` (roles/bootstrap_host installs it)")
    return found


def build_tsdb(dest: Path, now: float = FROZEN_NOW, minutes: int = 30) -> Path:
    """A TSDB with a cart request counter (+2/s), a loadgen counter (+1/s) and a machinery metric, one sample
    every 15 s for `minutes` minutes ending at `now`, and cart's `up` going to 0 for the last 2 minutes."""
    requests, up, machinery = [], [], []
    start = int(now) - minutes * 60
    for t in range(start + 15, int(now) + 1, 15):
        elapsed = t - start
        requests.append(f'http_requests_total{{service="cart",instance_id="cart-1"}} {elapsed * 2} {t}')
        requests.append(f'http_requests_total{{service="loadgen",instance_id="loadgen-1"}} {elapsed} {t}')
        up.append(f'up{{service="cart",instance_id="cart-1"}} {0 if now - t < 120 else 1} {t}')
        machinery.append(f'prometheus_tsdb_head_series{{job="prometheus"}} 42 {t}')
    lines = ["# TYPE http_requests counter", *requests, "# TYPE up gauge", *up,
             "# TYPE prometheus_tsdb_head_series gauge", *machinery, "# EOF"]
    source = dest.parent / f"{dest.name}.om"
    source.write_text("\n".join(lines) + "\n")
    subprocess.run([need_promtool(), "tsdb", "create-blocks-from", "openmetrics", str(source), str(dest)],
                   check=True, capture_output=True)
    return dest


def make_snapshot(root: Path, scenario: str = "shop-cart-down", version: int = 1) -> fmt.SnapshotInfo:
    """A small valid snapshot (no TSDB): a manifest, alerts and one log file."""
    root.mkdir(parents=True)
    (root / fmt.MANIFEST).write_text(json.dumps({"tasks": [{"id": "diagnose"}]}))
    (root / fmt.ALERTS).write_text(json.dumps([{"alertname": "ServiceDown"}]))
    (root / "telemetry" / "logs").mkdir(parents=True)
    (root / "telemetry" / "logs" / "cart-1.jsonl").write_text('{"timeUnixNano": 1, "body": "x"}\n')
    return fmt.write_index(root, scenario_id=scenario, spec_version=version, frozen_now=FROZEN_NOW,
                           window_start=FROZEN_NOW - 600, families=["alerts", "logs"])
