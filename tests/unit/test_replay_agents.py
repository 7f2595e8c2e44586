"""An agent's failures are scored on a frozen incident as they are live: a wrong diagnosis scores zero, an agent
that crashes and one that cannot start are no submission with their exit code and reason, and each trial still
ends cleanly (its token revoked, the frozen environment stopped).

Replays of the committed sample snapshot of shop-cart-down (real Ansible, a real frozen Prometheus; seconds a
trial): the subject here is what becomes of an agent's outcome, not the live world, so these tests do not pay for
a deployment. tests/e2e/test_lifecycle.py keeps, live, what is about the environment (faults removed after a
timeout, Ctrl-C or SIGKILL, an agent's process group stopped at its budget)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths, store
from orchestrator.harness.replay import ReplayRecord, replay

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("home")]

SAMPLE = next((paths.PROJECT_ROOT / "tests" / "data" / "snapshots").glob("shop-cart-down-*.tar.gz"))



def replay_once(agent: str) -> tuple[ReplayRecord, dict[str, Any]]:
    """One trial of `agent` on the sample; its record and the trial's run state, after checking it ended cleanly."""
    [record] = replay([SAMPLE], agent=agent)
    rows = {r["id"]: r for r in store.list_runs()}
    trial_dir, host_dir = Path(rows[record.run_id]["run_dir"]), Path(rows[record.host]["run_dir"])
    state = json.loads((trial_dir / "run.json").read_text())
    assert record.status == "completed" and state["cleanup"] == "done", (record, state.get("cleanup_problems"))
    assert not (trial_dir / "secrets" / "agent_token").exists(), "agent token not revoked"
    assert rows[record.host]["status"] == "hosted" and not (host_dir / "prometheus").exists()
    return record, state


def test_a_wrong_diagnosis_scores_zero(tmp_path: Path) -> None:
    agent = tmp_path / "wrong_agent.py"
    agent.write_text(
        "import json, os\n"
        "m = json.load(open(os.environ['OPSBENCH_MANIFEST']))\n"
        "json.dump({'entities': [{'id': 'checkout', 'root_cause': True}]}, open(m['output']['path'], 'w'))\n"
    )
    record, _ = replay_once(f"{sys.executable} {agent}")
    diagnosis = record.scores["diagnosis"]
    assert diagnosis["status"] == "scored" and diagnosis["fl_pass"] == 0.0 and diagnosis["predicted"] == ["checkout"]
    assert record.passed is False


def test_a_crashed_agent_is_no_submission() -> None:
    record, state = replay_once("echo boom >&2; exit 3")
    agent = state["results"]["agent"]
    assert (agent["status"], agent["exit_code"]) == ("crashed", 3) and "boom" in agent["detail"], agent
    assert record.scores["diagnosis"]["status"] == "no_submission" and record.passed is False  # counted as a fail


def test_an_agent_that_cannot_start_gets_a_clear_reason() -> None:
    record, state = replay_once("/nonexistent/agent --go")
    agent = state["results"]["agent"]
    assert agent["exit_code"] == 127 and "command not found" in agent["detail"], agent
    assert record.scores["diagnosis"]["status"] == "no_submission"
