"""FinOps cost incidents end to end (`make scenario NAME=...`): the shop with its cost model, budgets and autoscaler
(environment shop_finops), a fault, CostOverBudget firing, the baseline FinOps agent acting through the gateway,
and diagnosis, mitigation and the E.4.2 proximity scored from the environment's state. Each run deploys and tears
down its own shop (about 3-5 minutes each on the 2-core development machine), so `make test` runs one scenario of
the class (the misconfigured autoscaler) and `make reliability` the other (the stale budget) as well."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import paths

from .conftest import run_json

pytestmark = pytest.mark.e2e


def run(home: Path, scenario: str) -> dict[str, Any]:
    # The agent imports this checkout's orchestrator (not whatever the venv has installed).
    rc, result = run_json(home, "run", scenario, timeout=900, PYTHONPATH=str(paths.PROJECT_ROOT))
    assert rc == 0, (result.get("reason"), result.get("phases"))
    assert result["status"] == "completed", result.get("reason")
    assert result["cleanup"] == "done" and result["recovered"] is True
    return result


def test_misconfigured_autoscaler_is_found_and_fixed(home: Path) -> None:
    result = run(home, "finops-cost-autoscaler-misconfigured")
    ev = result["evaluations"]
    assert ev["diagnosis"]["fl_pass"] == 1.0, ev["diagnosis"]
    assert (ev["mitigation"]["mitigation_pass"], ev["mitigation"]["state_ok"]) == (1.0, 1.0), ev["mitigation"]
    cost = ev["cost"]
    assert cost["status"] == "scored" and cost["observed_replicas"] == pytest.approx(2.0)
    # Back at 2 replicas billed at their requests: the cost proximities are (close to) optimal.
    assert cost["proximity_cpu_hourly_usd"] > 0.9 and cost["proximity_memory_hourly_usd"] > 0.9, cost


@pytest.mark.reliability
def test_stale_budget_is_updated_not_starved(home: Path) -> None:
    result = run(home, "finops-cost-stale-budget")
    ev = result["evaluations"]
    assert ev["diagnosis"]["fl_pass"] == 1.0, ev["diagnosis"]
    assert (ev["mitigation"]["mitigation_pass"], ev["mitigation"]["state_ok"]) == (1.0, 1.0), ev["mitigation"]
    assert ev["cost"]["status"] == "scored" and ev["cost"]["observed_replicas"] >= 3
