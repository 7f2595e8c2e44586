"""roles/env_snapshot through the real playbooks: deploy serves a verified snapshot (frozen Prometheus running, its
pid file in the run dir, environment.json with the frozen section), pristine finds nothing, teardown stops
Prometheus and removes the copies; an unusable snapshot fails deploy with one error naming the file, leaving
nothing running."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from gateway_fixtures import NOW

from orchestrator.runner import run_playbook
from orchestrator.snapshots.frozen_prometheus import PID_FILE


def _step(step: str, playbook: str, run_dir: Path, snapshot: Path, n: int) -> Any:
    env = {"name": "environment", "role": "env_snapshot",
           "vars": {"env_snapshot_path": str(snapshot), "env_snapshot_scenario": "shop-cart-down"}}
    extravars = {"opsbench_run_id": run_dir.name, "opsbench_run_dir": str(run_dir), "opsbench_port_base": 40000,
                 "opsbench_environment": env}
    return run_playbook(step, playbook, extravars, run_dir / "steps" / f"{n:02d}-{step}", job_timeout=300,
                        idle_timeout=200)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def test_deploy_pristine_teardown(snapshot: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    deployed = _step("deploy", "deploy.yml", run_dir, snapshot, 1)
    assert deployed.ok, deployed.failures
    env = json.loads((run_dir / "environment.json").read_text())
    assert env["frozen"]["frozen_now"] == NOW and env["endpoints"] == {}
    assert deployed.stats["environment"]["application"] == "snapshot"
    assert deployed.stats["environment"]["prometheus"] == env["frozen"]["prometheus"]
    pid = int((run_dir / "prometheus" / PID_FILE).read_text())
    assert _alive(pid)  # detached: it outlives the playbook

    pristine = _step("pristine", "pristine.yml", run_dir, snapshot, 2)
    assert pristine.ok and pristine.stats["leftovers"] == []
    # Where a step's time went (`opsbench bench` reports it): start-up, the tasks and the exit add up to the step.
    assert set(pristine.timing) == {"startup", "work", "exit"} and pristine.timing["startup"] > 0
    assert abs(sum(pristine.timing.values()) - pristine.elapsed) < 0.05, (pristine.timing, pristine.elapsed)

    torn = _step("teardown", "teardown.yml", run_dir, snapshot, 3)
    assert torn.ok, torn.failures
    assert not _alive(pid)
    assert sorted(p.name for p in run_dir.iterdir()) == ["steps"]


def test_a_tampered_snapshot_fails_deploy_naming_the_file(snapshot: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(snapshot, bad)
    alerts = bad / "alerts.json"
    alerts.write_text(alerts.read_text().replace("payment", "paymenT"))
    run_dir = tmp_path / "run"
    result = _step("deploy", "deploy.yml", run_dir, bad, 1)
    assert not result.ok
    message = "; ".join(result.failures)
    assert f"snapshot {bad}: alerts.json: checksum mismatch" in message
    assert not (run_dir / "prometheus").exists() and not (run_dir / "environment.json").exists()
