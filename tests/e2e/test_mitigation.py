"""Mitigation scored for real: the shop's cart is stopped, an agent starts it (or does not), and
evaluate_mitigation decides from the environment's state; evaluate_process reads the gateway's
trajectory. The agent acts through the run's tool gateway (REST), as every agent must."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from .conftest import run_json

pytestmark = pytest.mark.e2e
SCENARIO = "shop-cart-down-mitigate"
AGENT = Path(__file__).parent / "agents" / "oracle_restart.py"


def agent_command(*args: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))} " + " ".join(args)


def test_restarting_the_stopped_service_mitigates_with_an_mttr(home: Path) -> None:
    rc, result = run_json(home, "run", SCENARIO, "--agent", agent_command("cart", "cart-1"), timeout=600)
    assert rc == 0, (result.get("reason"), result.get("phases"))
    mitigation = result["evaluations"]["mitigation"]
    assert mitigation["status"] == "scored", mitigation
    assert (mitigation["mitigation_pass"], mitigation["alerts_cleared"], mitigation["state_ok"]) == (1.0, 1.0, 1.0)
    assert mitigation["actions"] == 1
    assert mitigation["mttr"] is not None and 0 < mitigation["mttr"] < 150
    process = result["evaluations"]["process"]  # from the gateway's log: get_alerts, restart
    assert (process["calls"], process["submitted"], process["trajectory"]) == (2, 1.0, "recorded")
    assert process["invalid_actions"] == 0
    assert (process["input_tokens"], process["output_tokens"]) == (1000, 50)  # the total, not total + records
    assert result["cleanup"] == "done" and result["recovered"] is True


def test_leaving_the_fault_in_place_fails_on_state_not_on_the_report(home: Path) -> None:
    # The evaluator waits its full 90 s for alerts that never clear: give the run room for that.
    rc, result = run_json(home, "run", SCENARIO, "--agent", agent_command("cart", "cart-1", "--no-fix"), timeout=600)
    assert rc == 0, (result.get("reason"), result.get("phases"))
    mitigation = result["evaluations"]["mitigation"]
    assert mitigation["status"] == "scored" and mitigation["mitigation_pass"] == 0.0
    assert mitigation["alerts_cleared"] == 0.0 and mitigation["mttr"] is None
    assert "ServiceDown" in mitigation["detail"]
    assert result["cleanup"] == "done" and result["recovered"] is True
