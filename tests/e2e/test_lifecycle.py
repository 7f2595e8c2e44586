"""End-to-end runs of real scenarios: real Ansible, real nginx and Python processes on loopback.

What is about the live environment stays here (faults removed and the environment torn down after a timeout,
Ctrl-C, SIGKILL or a failed deploy; an over-budget agent's process group stopped). How an agent's own failures are
scored (a wrong diagnosis, a crash, a command that cannot start) is proved on a frozen incident instead, in
tests/unit/test_replay_agents.py: seconds a trial rather than a deployment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths

from .conftest import (
    OPSBENCH,
    assert_no_leftovers,
    cli_env,
    port_open,
    run_cli,
    run_json,
    run_state,
    scenario_copy,
    wait_for,
)
from .probing import assert_refused_everything, prober

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("scenario", "probing"), [("loopweb-gateway-bad-upstream", False),
                                                     ("loopweb-web-down", True)])
def test_probe_agent_solves_scenario_and_environment_returns_to_baseline(home: Path, scenario: str,
                                                                          probing: bool) -> None:
    """With `probing`, the baseline agent runs after the probing agent (issue 19), which must be refused every way
    out of its containment on loopweb: its processes' logs and configuration, the host's loopback, the host."""
    if probing:
        with prober(home, then="orchestrator.agents.probe") as (agent, env):
            rc, result = run_json(home, "run", scenario, "--agent", agent, **env)
    else:
        rc, result = run_json(home, "run", scenario)
    assert rc == 0, (result.get("reason"), result.get("phases"))
    if probing:
        assert_refused_everything(Path(result["run_dir"]), result, {
            "read log web", "write log web", "read log gateway", "read control gateway_conf",
            "write control gateway_conf", "read control supervisor_conf", "write control supervisor_conf"})
    assert result["status"] == "completed"
    assert result["agent"]["status"] == "exited"
    diag = result["evaluations"]["diagnosis"]
    assert diag["status"] == "scored" and diag["fl_pass"] == 1.0, diag
    assert result["cleanup"] == "done" and result["recovered"] is True
    assert set(result["phases"]) == {"deploy", "baseline", "inject", "manifestation", "handover", "agent",
                                     "collect", "evaluate", "revoke", "remove", "recovery", "teardown"}
    assert_no_leftovers(Path(result["run_dir"]))

    # The run is indexed and shown with its full phase timeline.
    shown = json.loads(run_cli(home, "show", result["run_id"], "--json").stdout)
    assert [p["phase"] for p in shown["phases"]][:2] == ["deploy", "baseline"]
    assert all(p["ended"] >= p["started"] for p in shown["phases"])
    listed = json.loads(run_cli(home, "runs", "--json").stdout)
    assert [r["id"] for r in listed] == [result["run_id"]]


def test_agent_over_budget_is_stopped_and_scored_no_submission(home: Path, tmp_path: Path) -> None:
    def short_budget(spec: dict[str, Any]) -> None:
        spec["budget"]["wallClockSeconds"] = 2

    spec_dir = scenario_copy(tmp_path, "loopweb-web-down", short_budget)
    # Writes a (late) answer, then keeps running past the budget.
    agent = f"{sys.executable} -m orchestrator.agents.probe; sleep 61"
    rc, result = run_json(home, "run", str(spec_dir), "--agent", agent)
    assert rc == 0
    assert result["agent"]["status"] == "timeout"
    assert result["agent"]["elapsed"] < 10
    assert result["evaluations"]["diagnosis"]["status"] == "no_submission"
    run_dir = Path(result["run_dir"])
    assert (run_dir / "agent" / "output.late.json").is_file()
    assert_no_leftovers(run_dir)
    # The agent's whole process group was stopped, not just the shell.
    assert subprocess.run(["pgrep", "-f", "sleep 61"], check=False, capture_output=True).stdout == b""


def test_step_timeout_still_removes_fault_and_tears_down(home: Path, tmp_path: Path) -> None:
    def slow_check(spec: dict[str, Any]) -> None:
        # The manifestation check waits for a status that never comes, and its step may
        # run for 1 s only: the step times out mid-way.
        spec["checks"]["manifestation"] = [{"name": "never", "role": "check_http", "timeout": 60,
                                            "args": {"endpoint": "gateway", "expect_status": 418}}]
        spec["timeouts"] = {"manifestation": {"job": 4}}

    spec_dir = scenario_copy(tmp_path, "loopweb-web-down", slow_check)
    rc, result = run_json(home, "run", str(spec_dir))
    assert rc == 4
    assert result["status"] == "timeout" and "manifestation" in result["reason"]
    assert "agent" not in result["phases"]
    assert result["phases"]["remove"]["status"] == "successful"
    assert result["cleanup"] == "done" and result["recovered"] is True
    assert_no_leftovers(Path(result["run_dir"]))


def test_fault_that_does_not_manifest_makes_the_run_invalid(home: Path, tmp_path: Path) -> None:
    def wrong_expectation(spec: dict[str, Any]) -> None:
        spec["checks"]["manifestation"] = [{"name": "teapot", "role": "check_http", "timeout": 3,
                                            "args": {"endpoint": "gateway", "expect_status": 418}}]

    spec_dir = scenario_copy(tmp_path, "loopweb-web-down", wrong_expectation)
    rc, result = run_json(home, "run", str(spec_dir))
    assert rc == 3
    assert result["status"] == "invalid"
    assert "scenario defect" in result["reason"] and "teapot" in result["reason"]
    assert result["agent"] == {}  # the agent never saw it
    assert result["cleanup"] == "done" and result["recovered"] is True
    assert_no_leftovers(Path(result["run_dir"]))


def test_failing_deploy_reports_the_cause_and_leaves_nothing(home: Path, tmp_path: Path) -> None:
    def bad_binary(spec: dict[str, Any]) -> None:
        spec["environment"]["args"] = {"nginx_binary": "/nonexistent/nginx"}

    spec_dir = scenario_copy(tmp_path, "loopweb-web-down", bad_binary)
    rc, result = run_json(home, "run", str(spec_dir))
    assert rc == 4
    assert result["status"] == "error" and "deploy" in result["reason"]
    assert "/nonexistent/nginx" in result["reason"]
    assert "inject" not in result["phases"]
    assert result["phases"]["teardown"]["status"] == "successful"
    assert_no_leftovers(Path(result["run_dir"]))


def _start_run_and_wait_for_agent(home: Path, agent: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([*OPSBENCH, "run", "loopweb-web-down", "--agent", agent, "--json"],
                            env=cli_env(home), cwd=paths.PROJECT_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    runs = home / "runs"

    def agent_running() -> bool:
        dirs = list(runs.glob("*/run.json")) if runs.exists() else []
        return bool(dirs) and "agent_pid" in run_state(dirs[0].parent)

    wait_for(agent_running, 120, "the agent to start")
    return proc, next(runs.glob("*/run.json")).parent


def test_ctrl_c_during_agent_removes_fault_and_tears_down(home: Path) -> None:
    proc, run_dir = _start_run_and_wait_for_agent(home, "sleep 120")
    base = run_state(run_dir)["common"]["opsbench_port_base"]
    assert port_open(base)  # the environment is up while the agent works
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    result = json.loads(out)
    assert result["status"] == "interrupted"
    assert result["agent"]["status"] == "interrupted"
    assert result["cleanup"] == "done"
    assert "interrupted" in err
    assert_no_leftovers(run_dir)


def test_cleanup_after_sigkill_of_the_orchestrator(home: Path) -> None:
    proc, run_dir = _start_run_and_wait_for_agent(home, "sleep 300")
    state = run_state(run_dir)
    base, agent_pid = state["common"]["opsbench_port_base"], state["agent_pid"]
    proc.kill()
    proc.wait(timeout=10)
    # The orchestrator is gone; the environment, the fault and the agent are still there.
    assert port_open(base) and not port_open(base + 1)
    assert subprocess.run(["kill", "-0", str(agent_pid)], check=False).returncode == 0

    listed = json.loads(run_cli(home, "runs", "--json").stdout)
    assert listed[0]["status"] == "running"
    cleaned = run_cli(home, "cleanup", "--json")
    assert cleaned.returncode == 0, cleaned.stderr
    report = json.loads(cleaned.stdout)
    assert report[0]["run_id"] == run_dir.name
    assert report[0]["steps"] == ["revoke", "remove", "recovery", "teardown"]
    assert report[0]["cleanup"] == "done"
    assert subprocess.run(["kill", "-0", str(agent_pid)], check=False).returncode != 0, "agent left running"
    assert_no_leftovers(run_dir)
    shown = json.loads(run_cli(home, "show", run_dir.name, "--json").stdout)
    assert shown["status"] == "interrupted"
    # Nothing left to do: a second cleanup is a no-op.
    again = json.loads(run_cli(home, "cleanup", "--json").stdout)
    assert again == []


def test_no_secret_reaches_artifacts_or_logs(home: Path, tmp_path: Path) -> None:
    planted = "sk-planted-secret-0123456789abcdef"
    agent = tmp_path / "token_agent.py"
    # The agent keeps the token it was given in its own workspace so the test can look for it.
    agent.write_text(
        "import json, os, pathlib\n"
        "m = json.load(open(os.environ['OPSBENCH_MANIFEST']))\n"
        "pathlib.Path('token.txt').write_text(open(m['token_file']).read())\n"
        "json.dump({'entities': []}, open(m['output']['path'], 'w'))\n"
    )
    proc = run_cli(home, "run", "loopweb-web-down", "--agent", f"python3 {agent}", "--json",
                   OPENAI_API_KEY=planted, AWS_SECRET_ACCESS_KEY=planted)
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(json.loads(proc.stdout)["run_dir"])
    token = (run_dir / "agent" / "workspace" / "token.txt").read_text().strip()
    assert len(token) == 40
    scanned = 0
    for file in [*run_dir.rglob("*"), home / "opsbench.db"]:
        if not file.is_file() or "workspace" in file.parts:
            continue
        data = file.read_bytes()
        scanned += 1
        assert planted.encode() not in data, f"environment secret leaked into {file}"
        assert token.encode() not in data, f"agent token leaked into {file}"
    assert scanned > 20  # runner artifacts (command, job_events, stdout) were among them
    command = json.loads(next(run_dir.glob("steps/*-deploy/artifacts/deploy/command")).read_text())
    assert "OPENAI_API_KEY" not in command["env"] and "ANSIBLE_CONFIG" in command["env"]


def test_keep_leaves_environment_up_until_cleanup_teardown(home: Path) -> None:
    rc, result = run_json(home, "run", "loopweb-gateway-bad-upstream", "--keep")
    assert rc == 0 and result["cleanup"] == "done"
    run_dir = Path(result["run_dir"])
    base = run_state(run_dir)["common"]["opsbench_port_base"]
    assert "teardown" not in result["phases"]
    # Kept at baseline: the fault is gone and the gateway serves again.
    assert port_open(base) and port_open(base + 1)
    assert json.loads(run_cli(home, "cleanup", "--json").stdout) == []  # nothing owed without --teardown
    cleaned = run_cli(home, "cleanup", "--teardown", "--json")
    assert cleaned.returncode == 0, cleaned.stderr
    assert json.loads(cleaned.stdout)[0]["steps"] == ["teardown"]
    assert_no_leftovers(run_dir)
