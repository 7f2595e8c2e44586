"""Campaign planning, resumption and the campaign file (the live runs are in tests/e2e/test_campaign.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.catalog import find_scenario
from orchestrator.errors import OpsBenchError
from orchestrator.harness.campaign import (
    Campaign,
    Cell,
    Eta,
    TrialRecord,
    host_chunks,
    load_campaign_file,
    passed,
    plan,
)

LOOPWEB = ["loopweb-web-down", "loopweb-gateway-bad-upstream"]
SHOP = ["shop-cart-down", "shop-redis-down"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSBENCH_HOME", str(tmp_path))
    return tmp_path


def scenarios(ids: list[str]) -> dict[str, object]:
    return {i: find_scenario(i) for i in ids}


def test_plan_is_scenario_major() -> None:
    cells = plan([find_scenario(i) for i in LOOPWEB], ["a", "b"], 2)
    assert [c.key for c in cells[:4]] == ["loopweb-web-down|a|1", "loopweb-web-down|a|2", "loopweb-web-down|b|1",
                                          "loopweb-web-down|b|2"]
    assert len(cells) == 8


def test_scenarios_share_hosts_by_environment_and_split_whole() -> None:
    by_id = scenarios(LOOPWEB + SHOP)
    cells = plan(list(by_id.values()), ["a"], 3)  # type: ignore[arg-type]
    one = host_chunks(cells, by_id, 1)  # type: ignore[arg-type]
    assert sorted(sorted({c.scenario for c in chunk}) for chunk in one) == [sorted(LOOPWEB), sorted(SHOP)]
    two = host_chunks(cells, by_id, 2)  # type: ignore[arg-type]
    assert len(two) == 4 and all(len({c.scenario for c in chunk}) == 1 and len(chunk) == 3 for chunk in two)


def test_a_scenario_that_may_not_share_gets_a_host_per_trial() -> None:
    scn = find_scenario("shop-cart-down")
    scn.data["environment"]["reuse"] = False
    chunks = host_chunks(plan([scn], ["a"], 3), {scn.id: scn}, 1)  # type: ignore[dict-item]
    assert [len(c) for c in chunks] == [1, 1, 1]


def test_resume_skips_completed_and_invalid_but_redoes_the_rest(home: Path) -> None:
    camp = Campaign("c1")
    for trial, status in ((1, "completed"), (2, "error"), (3, "invalid"), (4, "interrupted")):
        camp.append(TrialRecord("s", "a", trial, f"r{trial}", status, None, 1.0))
    with camp.file.open("a") as fh:
        fh.write('{"scenario": "s", "agent": "a", "tr')  # a line cut short by a kill
    assert camp.finished() == {Cell("s", "a", 1).key, Cell("s", "a", 3).key}
    assert len(Campaign("c1").records()) == 4


def test_bad_campaign_names_and_files_are_clear_errors(home: Path, tmp_path: Path) -> None:
    with pytest.raises(OpsBenchError, match="campaign name"):
        Campaign("../x")
    cases = {
        "scenarios: []\n": "scenarios: a non-empty list",
        "scenarios: [a]\ntrials: 0\n": "trials: an integer from 1 to 100",
        "scenarios: [a]\nparallel: true\n": "parallel: an integer",
        "scenarios: [a]\nagents: ['']\n": "agents: a non-empty list",
        "scenarios: [a]\ntrails: 3\n": "unknown field\\(s\\) trails",
        "- a\n": "is a mapping",
    }
    for text, message in cases.items():
        f = tmp_path / "c.yaml"
        f.write_text(text)
        with pytest.raises(OpsBenchError, match=message) as err:
            load_campaign_file(f)
        assert str(f) in str(err.value)
    f = tmp_path / "nightly.yaml"
    f.write_text("scenarios: [loopweb-web-down]\ntrials: 3\n")
    conf = load_campaign_file(f)
    assert (conf["name"], conf["trials"], conf["parallel"]) == ("nightly", 3, 1) and len(conf["agents"]) == 1


def test_pass_follows_the_deciding_score() -> None:
    assert passed({"evaluations": {"diagnosis": {"fl_pass": 1.0}, "process": {"submitted": 1.0}}}) is True
    assert passed({"evaluations": {"mitigation": {"mitigation_pass": 0.0}}}) is False
    assert passed({"evaluations": {"process": {"submitted": 0.0}}}) is None
    assert passed({}) is None


def test_eta_divides_the_remaining_trials_among_the_environments() -> None:
    eta = Eta(total=5, parallel=2)
    eta.tick(60.0)
    assert eta.tick(120.0).endswith("about 2.2 min left")  # mean 90 s x 3 left / 2
