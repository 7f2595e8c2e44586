"""Helpers for end-to-end tests: real `opsbench` processes running real Ansible."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import paths

OPSBENCH = [sys.executable, "-m", "orchestrator.cli"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A private OPSBENCH_HOME per test: its own runs dir and SQLite index."""
    h = tmp_path / "home"
    h.mkdir()
    return h


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "OPSBENCH_HOME": str(home), **extra}


def run_cli(home: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OPSBENCH, *args], env=cli_env(home, **env), capture_output=True, text=True,
                          timeout=timeout, cwd=paths.PROJECT_ROOT, check=False)


def run_json(home: Path, *args: str, timeout: float = 300, **env: str) -> tuple[int, dict[str, Any]]:
    proc = run_cli(home, *args, "--json", timeout=timeout, **env)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON from opsbench {args}: rc={proc.returncode}\n"
                             f"stdout={proc.stdout}\nstderr={proc.stderr}") from None


def unfinished_trials(home: Path, campaign: str) -> str:
    """Why a campaign's trials did not finish, one line each: its status and reason, then each step's status from
    its run.json (so a failure's summary line names the step, not only the count)."""
    lines = []
    path = home / "campaigns" / campaign / "trials.jsonl"
    for rec in (json.loads(line) for line in (path.read_text().splitlines() if path.exists() else [])):
        if rec["status"] in ("completed", "invalid"):
            continue
        state_file = home / "runs" / rec["host"] / "trials" / rec["run_id"] / "run.json"
        steps = {}
        if rec["run_id"] and state_file.exists():
            results = json.loads(state_file.read_text()).get("results", {})
            steps = {k: f"{v.get('status')} {v.get('elapsed')}s" for k, v in results.items()}
        lines.append(f"{rec['scenario']} / {rec['agent'][-40:]}: {rec['status']}: {rec['reason'][:300]} "
                     f"steps={steps}")
    return "; ".join(lines) or "no trial record says why"


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run_state(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return data


def assert_no_leftovers(run_dir: Path) -> None:
    """Environment gone: no process mentions the run dir, its ports are closed, env files removed."""
    state = run_state(run_dir)
    base = state["common"]["opsbench_port_base"]
    procs = subprocess.run(["pgrep", "-af", str(run_dir)], capture_output=True, text=True, check=False)
    assert procs.stdout.strip() == "", f"processes left behind: {procs.stdout}"
    assert not port_open(base) and not port_open(base + 1), f"ports {base}/{base + 1} still open"
    assert not port_open(base + 9), f"the tool gateway's port {base + 9} is still open"
    assert not (run_dir / "env").exists(), "environment files left behind"
    assert not (run_dir / "secrets" / "agent_token").exists(), "agent token not revoked"
    leftover_state = list((run_dir / "state" / "faults").glob("*")) if (run_dir / "state" / "faults").exists() else []
    assert leftover_state == [], f"fault state not removed: {leftover_state}"


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def scenario_copy(tmp_path: Path, name: str, mutate: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of a real scenario dir with a changed spec (same id, so it stays registered)."""
    target = tmp_path / "specs" / name
    shutil.copytree(paths.SPECS_DIR / name, target)
    spec_file = target / "scenario.yaml"
    data = yaml.safe_load(spec_file.read_text())
    mutate(data)
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


# -- the AWX contract (test_awx_contract*.py): one export and one harness per module -------------------------------

@pytest.fixture(scope="module")
def awx_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """OPSBENCH_HOME of the module's AWX-contract runs: the jobs' state dir and the results index `record` fills."""
    h = tmp_path_factory.mktemp("awx-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPSBENCH_HOME", str(h))
        yield h


@pytest.fixture(scope="module")
def awx_contract(awx_home: Path) -> Any:
    """`opsbench awx export --host local:<the tests' scenarios>`, loaded into the contract harness."""
    from .awx_checks import HOST, SCENARIOS
    from .awx_contract import Contract, Export

    out = awx_home / "opsbench_awx.yml"
    proc = run_cli(awx_home, "awx", "export", "-o", str(out), "--host", f"{HOST}:{','.join(SCENARIOS)}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Contract(Export.load(out), awx_home / "awx")
