"""Mitigation scored for real: the shop's cart is stopped, an agent starts it (or does not), and
evaluate_mitigation decides from the environment's state; evaluate_process reads the gateway's
trajectory. The agent acts through the run's tool gateway (REST), as every agent must.

Both agents run as one campaign on one shop (deployed once, reused for the second trial, as users run agents
against a scenario); each trial is still scored on its own gateway log and the environment's state."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_json, unfinished_trials

pytestmark = pytest.mark.e2e
SCENARIO = "shop-cart-down-mitigate"
AGENT = Path(__file__).parent / "agents" / "oracle_restart.py"


def agent_command(*args: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))} " + " ".join(args)


FIXER = agent_command("cart", "cart-1")
BYSTANDER = agent_command("cart", "cart-1", "--no-fix")  # reports the right cause, leaves the fault in place


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The campaign's trial per agent: its record (scores) and its run state."""
    home = tmp_path_factory.mktemp("mitigation") / "home"
    home.mkdir()
    # The bystander's evaluator waits its full 90 s for alerts that never clear: room for that.
    rc, result = run_json(home, "campaign", SCENARIO, "--agent", FIXER, "--agent", BYSTANDER, "--name", "mitigate",
                          timeout=1200)
    assert rc == 0 and result["unfinished"] == 0, f"{unfinished_trials(home, 'mitigate')} | {result}"
    records = [json.loads(line)
               for line in (home / "campaigns" / "mitigate" / "trials.jsonl").read_text().splitlines()]
    assert len({r["host"] for r in records}) == 1, records  # one shop for both agents
    out = {}
    for rec in records:
        state = json.loads((home / "runs" / rec["host"] / "trials" / rec["run_id"] / "run.json").read_text())
        out[rec["agent"]] = {"scores": rec["scores"], "state": state}
    return out


def assert_back_at_baseline(state: dict[str, Any]) -> None:
    assert state["status"] == "completed", state.get("reason")
    assert state["cleanup"] == "done" and state["results"]["recovery"]["status"] == "successful"
    assert state["leftovers"] == []


def test_restarting_the_stopped_service_mitigates_with_an_mttr(trials: dict[str, dict[str, Any]]) -> None:
    trial = trials[FIXER]
    mitigation = trial["scores"]["mitigation"]
    assert mitigation["status"] == "scored", mitigation
    assert (mitigation["mitigation_pass"], mitigation["alerts_cleared"], mitigation["state_ok"]) == (1.0, 1.0, 1.0)
    assert mitigation["actions"] == 1
    assert mitigation["mttr"] is not None and 0 < mitigation["mttr"] < 150
    process = trial["scores"]["process"]  # from the gateway's log: get_alerts, restart
    assert (process["calls"], process["submitted"], process["trajectory"]) == (2, 1.0, "recorded")
    assert process["invalid_actions"] == 0
    assert (process["input_tokens"], process["output_tokens"]) == (1000, 50)  # the total, not total + records
    assert_back_at_baseline(trial["state"])


def test_leaving_the_fault_in_place_fails_on_state_not_on_the_report(trials: dict[str, dict[str, Any]]) -> None:
    trial = trials[BYSTANDER]
    mitigation = trial["scores"]["mitigation"]
    assert mitigation["status"] == "scored" and mitigation["mitigation_pass"] == 0.0
    assert mitigation["alerts_cleared"] == 0.0 and mitigation["mttr"] is None
    assert "ServiceDown" in mitigation["detail"]
    # Its own trajectory: the fixer's restart is not counted here.
    assert trial["scores"]["process"]["calls"] == 1 and trial["scores"]["process"]["trajectory"] == "recorded"
    assert_back_at_baseline(trial["state"])
