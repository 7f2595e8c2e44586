"""What the AWX-contract tests share: launching an exported workflow on the podman host `local` and proving the
environment is back at baseline after it (tests/e2e/test_awx_contract*.py; fixtures in conftest.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from orchestrator import paths
from orchestrator.awx import STEPS

from .awx_contract import Contract, WorkflowJob
from .conftest import port_open

SCENARIOS = ("loopweb-web-down", "shop-cart-down")
"""What the tests export for the host: one workflow each."""
HOST = "local"
ALL_NODES = [n for n, _, _ in STEPS]


def launch(contract: Contract, home: Path, scenario: str, **launch_vars: Any) -> WorkflowJob:
    """Launch the scenario's workflow; its runs under `home`/awx-runs (a launch variable, as a user would set it)."""
    return contract.launch(f"opsbench {scenario} @ {HOST}", {"opsbench_awx_run_root": str(home / "awx-runs"),
                                                            **launch_vars})


def assert_back_at_baseline(home: Path, wf: WorkflowJob, run_root: str = "awx-runs") -> None:
    """Nothing of the run is left: no process or container, its port block closed, no env, token or fault state."""
    run_dir = home / run_root / f"awx-{wf.id}"
    base = int(wf.extra_vars["opsbench_port_base"])
    procs = subprocess.run(["pgrep", "-af", str(run_dir)], capture_output=True, text=True, check=False)
    assert procs.stdout.strip() == "", f"processes left behind: {procs.stdout}"
    assert not [p for p in range(base, base + 10) if port_open(p)], f"ports of block {base} still open"
    conf = paths.containers_conf_dir()
    containers = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=^ob-awx-{wf.id}-"],
                                capture_output=True, text=True, check=True,
                                env={**os.environ, "CONTAINERS_CONF": str(conf / "containers.conf"),
                                     "CONTAINERS_STORAGE_CONF": str(conf / "storage.conf")})
    assert containers.stdout.strip() == "", f"containers left behind: {containers.stdout}"
    assert not (run_dir / "env").exists() and not (run_dir / "secrets" / "agent_token").exists()
    faults = run_dir / "state" / "faults"
    assert not faults.exists() or list(faults.iterdir()) == [], "fault state not removed"
