"""Mitigation scoring: state (alerts cleared and held, accepted state checks), MTTR, and the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.evaluation.mitigation import run_state_checks, score_mitigation
from orchestrator.evaluation.outputs import load_output, schema_errors

TIMELINE = {"manifestation": {"started_at": 1000.0, "ended_at": 1020.0}}
CLEARED = {"ok": True, "quiet_since_epoch": 1065.5}
GT: dict[str, Any] = {"mitigations": [
    {"description": "restart cart", "checks": [{"name": "cart-up", "query": "up{service='cart'} == 1"}]},
    {"description": "fail over", "checks": [{"name": "replica-up", "query": "replica_up == 1"},
                                            {"name": "no-errors", "query": "errors > 0", "expect": "empty"}]},
    {"description": "no checks given"},
]}


@pytest.fixture
def report(tmp_path: Path) -> Path:
    file = tmp_path / "out.json"
    file.write_text(json.dumps({"schema": "opsbench/mitigation/v1", "plan": "restart cart",
                                "actions": [{"action": "restart", "target": "cart"}]}))
    return file


def fake_prometheus(answers: dict[str, list[Any]]) -> Any:
    def query(q: str) -> list[Any]:
        if q not in answers:
            raise RuntimeError("bad query")
        return answers[q]
    return query


def test_state_checks_pass_when_any_accepted_mitigation_holds() -> None:
    state = run_state_checks(fake_prometheus({"up{service='cart'} == 1": [], "replica_up == 1": [{"v": 1}],
                                              "errors > 0": []}), GT, timeout=0)
    assert [m["ok"] for m in state] == [False, True]  # the mitigation without checks is not listed
    assert state[1]["checks"] == [{"name": "replica-up", "ok": True, "detail": "1 series"},
                                  {"name": "no-errors", "ok": True, "detail": "0 series"}]


def test_a_query_error_is_a_failed_check_not_a_crash() -> None:
    state = run_state_checks(fake_prometheus({}), GT, timeout=0)
    assert not any(m["ok"] for m in state) and "query failed" in state[0]["checks"][0]["detail"]


def test_healthy_state_passes_with_mttr_from_incident_confirmation(report: Path) -> None:
    state = [{"ok": True, "checks": [{"name": "cart-up", "ok": True}]}]
    s = score_mitigation(report, CLEARED, state, TIMELINE)
    assert (s["status"], s["mitigation_pass"], s["alerts_cleared"], s["state_ok"]) == ("scored", 1.0, 1.0, 1.0)
    assert s["mttr"] == 45.5 and s["actions"] == 1


def test_alerts_not_cleared_fails_and_says_why(report: Path) -> None:
    s = score_mitigation(report, {"ok": False, "detail": "alerts active (last seen: ServiceDown)"}, [], TIMELINE)
    assert s["mitigation_pass"] == 0.0 and s["mttr"] is None and "ServiceDown" in s["detail"]


def test_cleared_alerts_with_failed_state_checks_fail(report: Path) -> None:
    state = [{"ok": False, "checks": [{"name": "cart-up", "ok": False}]}]
    s = score_mitigation(report, CLEARED, state, TIMELINE)
    assert s["mitigation_pass"] == 0.0 and s["state_ok"] == 0.0 and "cart-up" in s["detail"]


def test_no_state_checks_means_alerts_decide(report: Path) -> None:
    assert score_mitigation(report, CLEARED, [], TIMELINE)["state_ok"] is None
    assert score_mitigation(report, CLEARED, [], TIMELINE)["mitigation_pass"] == 1.0


def test_missing_or_malformed_report_fails_whatever_the_state(tmp_path: Path) -> None:
    assert score_mitigation(tmp_path / "none.json", CLEARED, [], TIMELINE)["status"] == "no_submission"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"actions": [{"action": "restart"}]}))
    s = score_mitigation(bad, CLEARED, [], TIMELINE)
    assert (s["status"], s["mitigation_pass"]) == ("malformed", 0.0) and "actions/0" in s["reason"]


@pytest.mark.parametrize(("kind", "good", "bad"), [
    ("assess", {"artifacts": [{"kind": "rego", "content": "package x"}], "posture": {"compliant": False}},
     {"artifacts": [{"kind": "docx", "content": "x"}]}),
    ("analyze", {"anomalies": [{"entity": "svc-a", "amount": 12.5}]}, {"notes": "nothing"}),
    ("mitigate", {"actions": [], "plan": "wait"}, {"plan": "wait"}),
    ("fix", {"summary": "pinned the plugin version", "changed_files": ["stockkeeper/pom.xml"]}, {"changed_files": []}),
    ("write-tests", {"test_files": ["invoicer/tests/test_terms.py"]}, {"test_files": []}),
])
def test_every_task_kind_has_a_schema(tmp_path: Path, kind: str, good: dict[str, Any], bad: dict[str, Any]) -> None:
    assert schema_errors(good, kind) == []
    assert schema_errors(bad, kind)
    file = tmp_path / "o.json"
    file.write_text(json.dumps(bad))
    assert load_output(file, kind).status == "malformed"
