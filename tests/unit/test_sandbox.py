"""The command agent sandbox (orchestrator/sandbox.py): what it hides, what it keeps, and how it fails.

These run the real sandbox (unshare: user, mount and pid namespaces); the isolation audit
(test_isolation_audit.py) tries the forbidden reads through it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator import agent, paths, sandbox


@pytest.fixture
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("OPSBENCH_HOME", str(home))
    monkeypatch.delenv("OPSBENCH_AGENT_SANDBOX", raising=False)
    (home / "runs" / "r1" / "secrets").mkdir(parents=True)
    (home / "runs" / "r1" / "secrets" / "agent_token").write_text("tok")
    (home / "runs" / "r1" / "secrets" / "db_password").write_text("pw")
    d = home / "runs" / "r1" / "agent"
    (d / "workspace").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"token_file": str(home / "runs/r1/secrets/agent_token")}))
    return d


def run(agent_dir: Path, command: str, budget: int = 30) -> agent.AgentResult:
    return agent.run_agent(command, agent_dir, {}, budget, lambda: False, lambda pid: None)


def test_plan_hides_the_project_and_state_and_keeps_what_an_agent_needs(agent_dir: Path) -> None:
    plan = sandbox.plan(agent_dir)
    assert paths.PROJECT_ROOT in plan.hide and paths.state_dir() in plan.hide
    kept = dict(plan.keep)
    assert kept[paths.PROJECT_ROOT / "orchestrator"] == "ro" and kept[agent_dir.resolve()] == "rw"
    assert kept[agent_dir.parent / "secrets" / "agent_token"] == "ro"  # named by the manifest
    assert agent_dir.parent / "secrets" / "db_password" not in kept


def test_an_agent_sees_its_workspace_manifest_and_token_and_nothing_else_of_the_run(agent_dir: Path) -> None:
    secrets = agent_dir.parent / "secrets"
    result = run(agent_dir, f"cat ../manifest.json > seen.txt; cat {secrets}/agent_token >> seen.txt; "
                            f"cat {secrets}/db_password >> seen.txt; echo out > {agent_dir}/output.json; "
                            f"echo x > {secrets}/agent_token")
    assert result.status == "crashed" and result.isolation.startswith("namespaces"), result
    seen = (agent_dir / "workspace" / "seen.txt").read_text()
    assert "token_file" in seen and "tok" in seen and "pw" not in seen
    assert (agent_dir / "output.json").read_text() == "out\n"  # its own directory is writable
    assert (secrets / "agent_token").read_text() == "tok"  # the token is read-only
    assert "Read-only file system" in (agent_dir / "stderr.log").read_text()


def test_processes_the_agent_leaves_behind_die_with_it(agent_dir: Path) -> None:
    """Even a daemon in its own session: the pid namespace ends when the agent does."""
    result = run(agent_dir, "setsid sleep 300 > /dev/null 2>&1 & echo started")
    assert result.status == "exited", result
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True, check=False).stdout.split()
    mine = [p for p in left if Path(f"/proc/{p}/cwd").exists()
            and os.readlink(f"/proc/{p}/cwd").startswith(str(agent_dir))]
    assert mine == [], "a process of the agent outlived it"


def test_an_agent_over_budget_is_stopped_with_everything_it_started(agent_dir: Path) -> None:
    start = time.monotonic()
    result = run(agent_dir, "setsid sleep 300 & sleep 300", budget=1)
    assert result.status == "timeout", result
    assert time.monotonic() - start < 60  # generous: only guards against waiting out the sleeps


def test_off_runs_the_agent_without_a_sandbox_and_says_so(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "off")
    result = run(agent_dir, f"cat {paths.SPECS_DIR}/loopweb-web-down/ground_truth.yaml > seen.txt")
    assert result.status == "exited" and result.isolation == "none: OPSBENCH_AGENT_SANDBOX=off"
    assert "rootCause" in (agent_dir / "workspace" / "seen.txt").read_text()


def test_require_refuses_to_run_an_agent_unsandboxed(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "require")
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "user namespaces are not allowed here (test)")
    result = run(agent_dir, "touch ran")
    assert result.status == "not_started" and "user namespaces are not allowed here" in result.detail
    assert "OPSBENCH_AGENT_SANDBOX=require" in result.detail and not (agent_dir / "workspace" / "ran").exists()
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "auto")  # auto: runs, and the record says it was not sandboxed
    result = run(agent_dir, "touch ran")
    assert result.status == "exited" and result.isolation.startswith("none: user namespaces")


def test_a_bad_mode_is_named(agent_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSBENCH_AGENT_SANDBOX", "maybe")
    result = run(agent_dir, "true")
    assert result.status == "not_started" and "OPSBENCH_AGENT_SANDBOX='maybe'" in result.detail


def test_a_sandbox_that_cannot_be_set_up_is_ours_not_the_agents(agent_dir: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    broken = sandbox.plan(agent_dir)
    broken.mask.append(Path("/nonexistent/key"))  # the mount fails
    monkeypatch.setattr(sandbox, "plan", lambda *a, **k: broken)
    result = run(agent_dir, "touch ran")
    assert result.status == "not_started" and "sandbox could not be set up" in result.detail, result
    assert not (agent_dir / "workspace" / "ran").exists()


def test_a_scenario_outside_the_project_is_masked(agent_dir: Path, tmp_path: Path) -> None:
    """`opsbench run path/to/scenario_dir`: the lifecycle passes the spec and ground truth as secret files."""
    spec_dir = tmp_path / "my-scenario"
    spec_dir.mkdir()
    (spec_dir / "scenario.yaml").write_text("id: mine\n")
    (spec_dir / "ground_truth.yaml").write_text("rootCause: web\n")
    result = agent.run_agent(f"cat {spec_dir}/scenario.yaml {spec_dir}/ground_truth.yaml > seen.txt", agent_dir, {},
                             30, lambda: False, lambda pid: None,
                             secret_files=[spec_dir / "scenario.yaml", spec_dir / "ground_truth.yaml"])
    assert result.status == "exited", result
    assert (agent_dir / "workspace" / "seen.txt").read_text() == ""


def test_the_program_the_command_runs_is_visible_and_nothing_else_it_names(agent_dir: Path) -> None:
    """`python3 /project/tests/e2e/agents/x.py`: the operator chose to run that file, so the agent sees it
    (read-only); files the command merely mentions stay hidden, and a spec file is never unmasked."""
    script = paths.PROJECT_ROOT / "tests" / "e2e" / "agents" / "ciso_bad.py"
    truth = paths.SPECS_DIR / "loopweb-web-down" / "ground_truth.yaml"
    assert sandbox.program_path(f"python3 -u {script} hang") == str(script)
    assert sandbox.program_path(f"cat {truth}") is None and sandbox.program_path("python3 -m mod") is None
    plan = sandbox.plan(agent_dir, {}, [truth], f"python3 {script} --spec={truth} hang")
    assert (script, "ro") in plan.keep and all(k != truth for k, _ in plan.keep)
    assert all(k != truth for k, _ in sandbox.plan(agent_dir, {}, [truth], f"python3 {truth}").keep)
    reader = agent_dir.parent / "reader.sh"
    reader.write_text(f"head -c 100 {script} > seen.txt; cat {truth} {paths.PROJECT_ROOT}/README.md >> seen.txt\n")
    result = run(agent_dir, f"sh {reader}")  # the script itself is under the hidden state dir: shown as the program
    seen = (agent_dir / "workspace" / "seen.txt").read_text()
    assert result.status == "crashed" and seen == "", (result, seen)  # `script` is not the program here
    assert "rootCause" not in seen and "# OpsBench" not in seen


def test_a_missing_file_says_what_the_sandbox_hides(agent_dir: Path) -> None:
    result = run(agent_dir, f"cat {paths.PROJECT_ROOT}/pyproject.toml")
    assert result.status == "crashed" and "OPSBENCH_AGENT_VISIBLE" in result.detail, result.detail
