"""verify-scenarios bookkeeping: grouping by environment, per-scenario summary, the table."""

from __future__ import annotations

import copy
from pathlib import Path

from orchestrator import paths
from orchestrator.harness.verify import Trial, check_wait, group_by_environment, render_table, summarize
from orchestrator.spec import Scenario, load_scenario


def shop(sid: str = "shop-cart-down", **env_args: object) -> Scenario:
    scn = load_scenario(paths.SPECS_DIR / "shop-cart-down" / "scenario.yaml")
    data = copy.deepcopy(scn.data)
    data["metadata"]["id"] = sid
    data["environment"]["args"] = dict(env_args)
    return Scenario(path=Path(scn.path), data=data)


def test_scenarios_share_an_environment_only_with_equal_application_and_args() -> None:
    a, b, c = shop("a"), shop("b"), shop("c", loadgen_rps=6)
    loop = load_scenario(paths.SPECS_DIR / "loopweb-web-down" / "scenario.yaml")
    groups = group_by_environment([a, loop, b, c])
    assert [[s.id for s in g] for g in groups] == [["a", "b"], ["loopweb-web-down"], ["c"]]


def test_check_wait_is_the_slowest_check_else_the_step_time() -> None:
    assert check_wait({"elapsed": 9.0, "stats": {"checks": {"x": {"ok": True, "waited_s": 3.2},
                                                              "y": {"ok": True, "waited_s": 7.46}}}}) == 7.5
    assert check_wait({"elapsed": 4.04, "stats": {}}) == 4.0
    assert check_wait({}) is None


def test_a_scenario_passes_only_when_every_repeat_passed() -> None:
    trials = [Trial("a", 1, "passed", time_to_alert=10, time_to_recover=20),
              Trial("a", 2, "passed", time_to_alert=14, time_to_recover=22),
              Trial("a", 3, "passed", time_to_alert=12, time_to_recover=30),
              Trial("b", 1, "passed", time_to_alert=5, time_to_recover=5),
              Trial("b", 2, "failed", "leftovers: container cart-1 is paused", 6, 9, ["container cart-1 is paused"])]
    rows = {r["scenario"]: r for r in summarize(trials, ["a", "b", "c"], 3)}
    assert rows["a"]["passed"] and rows["a"]["repeats_passed"] == 3
    assert rows["a"]["time_to_alert_median"] == 12 and rows["a"]["time_to_alert_range"] == [10, 14]
    assert rows["a"]["time_to_recover_median"] == 22
    assert not rows["b"]["passed"] and rows["b"]["failure"].startswith("leftovers:")
    assert rows["b"]["leftovers"] == ["container cart-1 is paused"]
    assert not rows["c"]["passed"] and rows["c"]["repeats_passed"] == 0  # never ran: not a pass
    table = render_table(list(rows.values()))
    assert "a  " in table and "pass 3/3" in table and "FAIL 1/3" in table and "FAIL 0/3" in table
    assert "b: leftover: container cart-1 is paused" in table
