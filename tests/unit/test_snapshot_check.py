"""`opsbench snapshot record --check` without podman: the comparison of a live trial with its replay (what must
agree, what may differ), and the record command's live trial + check around fake playbooks and a fake replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_snapshot_record import FakePlaybooks

from orchestrator import lifecycle, run_vars
from orchestrator.cli import main
from orchestrator.harness import record_check as chk
from orchestrator.harness import replay as replay_module
from orchestrator.harness.replay import ReplayRecord
from orchestrator.runner import StepResult

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)

LIVE_SCORES = {"diagnosis": {"fl_pass": 1.0, "ntam_fl": 0.8, "status": "scored", "reason": "text"},
               "process": {"calls": 7, "time_to_process": 12.5, "elapsed_s": 3.0, "started_at": 1.0}}



def test_diagnosis_ignores_order_and_wording() -> None:
    a = {"incident": True, "explanation": "x", "entities": [{"id": "cart-1", "root_cause": True},
                                                          {"id": "frontend", "root_cause": False}],
         "propagations": [{"source": "cart-1", "target": "frontend", "condition": "c"}]}
    b = {"incident": True, "explanation": "y", "entities": list(reversed(a["entities"])),
         "propagations": [{"source": "cart-1", "target": "frontend", "condition": "other"}]}
    assert chk.diagnosis(a) == chk.diagnosis(b)
    assert chk.diagnosis(a)["root_causes"] == ["cart-1"]
    assert chk.diagnosis(None) == {"submitted": False}
    c = {**a, "entities": [{"id": "frontend", "root_cause": True}]}
    assert chk.diagnosis(a) != chk.diagnosis(c)


def test_scores_leave_out_times_and_text_but_keep_every_score() -> None:
    assert chk.scores(LIVE_SCORES) == {"diagnosis": {"fl_pass": 1.0, "ntam_fl": 0.8, "status": "scored"},
                                       "process": {"calls": 7}}


def test_differences_name_the_field_and_both_values() -> None:
    live = {"diagnosis": chk.diagnosis(None), "scores": chk.scores(LIVE_SCORES)}
    other = json.loads(json.dumps(LIVE_SCORES))
    other["process"]["time_to_process"] = 99.0  # a time: may differ
    assert chk.differences(live, {"diagnosis": chk.diagnosis(None), "scores": chk.scores(other)}) == []
    other["diagnosis"]["fl_pass"] = 0.0
    other["process"]["calls"] = 9
    assert chk.differences(live, {"diagnosis": chk.diagnosis(None), "scores": chk.scores(other)}) == [
        "scores.diagnosis.fl_pass: live 1.0, replay 0.0", "scores.process.calls: live 7, replay 9"]


class ScoringPlaybooks(FakePlaybooks):
    """FakePlaybooks whose handover makes the agent's directory and whose evaluate step reports LIVE_SCORES."""

    def __call__(self, step: str, playbook: str, extravars: dict[str, Any], private_data_dir: Path,
                 **kw: Any) -> StepResult:
        if step == "handover":
            (Path(extravars["opsbench_run_dir"]) / "agent" / "workspace").mkdir(parents=True, exist_ok=True)
        result = super().__call__(step, playbook, extravars, private_data_dir, **kw)
        if step == "evaluate" and result.ok:
            result.stats = {"evaluations": json.loads(json.dumps(LIVE_SCORES))}
        return result


@pytest.mark.parametrize(("replay_fl_pass", "exit_code", "verdict"), [(1.0, 0, "1/1 replay(s) match"),
                                                                     (0.0, 1, "0/1 replay(s) match")])
def test_record_check_runs_the_agent_live_before_the_snapshot_then_compares_a_replay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replay_fl_pass: float, exit_code: int,
        verdict: str) -> None:
    playbooks = ScoringPlaybooks()
    monkeypatch.setattr(lifecycle, "run_playbook", playbooks)
    monkeypatch.setattr(run_vars, "default_agent", lambda scn: "true")  # the baseline agent, made instant
    replayed: list[Path] = []

    def fake_replay(paths: list[Path], agent: str | None, trials: int, **kw: Any) -> list[ReplayRecord]:
        replayed.extend(paths)
        assert agent is None and trials == 1 and kw["purpose"] == "record"
        scores = json.loads(json.dumps(LIVE_SCORES))
        scores["diagnosis"]["fl_pass"] = replay_fl_pass
        scores["process"]["time_to_process"] = 1.0
        return [ReplayRecord(paths[0].name, "shop-cart-down", "baseline", 1, "", "completed", True, 1.0,
                             scores=scores)]

    monkeypatch.setattr(replay_module, "replay", fake_replay)
    res = CliRunner().invoke(main, ["snapshot", "record", "shop-cart-down", "--check", "--out",
                                    str(tmp_path / "c"), "--quiet"])
    assert res.exit_code == exit_code, res.output
    # The agent runs between handover and the snapshot (not a playbook), collect and evaluate after it.
    assert playbooks.steps[playbooks.steps.index("handover"):] == [
        "handover", "snapshot", "collect", "evaluate", "revoke", "remove", "recovery", "pristine", "teardown"]
    assert [p.parent for p in replayed] == [tmp_path / "c"]
    assert verdict in res.output
    if exit_code:
        assert "scores.diagnosis.fl_pass: live 1.0, replay 0.0" in res.output


def test_record_without_check_runs_no_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    playbooks = ScoringPlaybooks()
    monkeypatch.setattr(lifecycle, "run_playbook", playbooks)
    res = CliRunner().invoke(main, ["snapshot", "record", "shop-cart-down", "--out", str(tmp_path / "c"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "collect" not in playbooks.steps and "evaluate" not in playbooks.steps
    assert "replay(s) match" not in res.output


def test_an_alert_that_began_after_the_frozen_now_is_not_part_of_the_snapshot() -> None:
    from orchestrator.snapshots.capture import started_after

    now = 1_795_628_204.956  # 2026-11-25T17:36:44.956Z, the handover of a live shop-catalog-slow-responses recording
    assert started_after({"startsAt": "2026-11-25T17:36:54.983Z"}, now)  # it fired during the live agent's run
    assert not started_after({"startsAt": "2026-11-25T17:36:16.983Z"}, now)
    assert not started_after({"startsAt": "not a time"}, now)  # kept: never drop what cannot be placed
