"""Outcome contracts (orchestrator/cuj/contract.py): bad contracts named by field, and the judgement of a capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cuj_fixtures import write_capture

from orchestrator.cuj.capture import load_capture
from orchestrator.cuj.contract import Contract, Failing, judge, main
from orchestrator.cuj.errors import CujError


@pytest.mark.parametrize(("data", "message"), [
    ({"expect": "maybe"}, "expect: 'maybe'"),
    ({"expect": "fail"}, "failing: an 'expect: fail' contract names at least one"),
    ({"expect": "fail", "failing": [{"step": "x"}]}, "failing[0]: needs a journey"),
    ({"expect": "fail", "failing": [{"journey": "checkout"}], "evidence": ["smell"]}, "evidence: unknown families"),
    ({"expect": "pass", "failing": [{"journey": "checkout"}]}, "only an 'expect: fail' contract"),
])
def test_bad_contracts_name_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        Contract.from_dict(data)


def test_an_unknown_journey_lists_the_known_ones() -> None:
    with pytest.raises(CujError, match="checkout"):
        Contract.from_dict({"expect": "fail", "failing": [{"journey": "login"}]})


def test_failing_journeys_are_always_run() -> None:
    contract = Contract.from_dict({"expect": "fail", "journeys": ["browse"],
                                   "failing": [{"journey": "checkout", "step": "add-to-cart"}]})
    assert contract.journeys == ("browse", "checkout")
    assert contract.failing == (Failing("checkout", "add-to-cart"),)


def test_a_healthy_contract_needs_every_journey_passed(tmp_path: Path) -> None:
    passing = load_capture(write_capture(tmp_path / "a", 1.0, failed_step=None))
    assert judge(passing, Contract()).ok
    failing = load_capture(write_capture(tmp_path / "b", 1.0))
    verdict = judge(failing, Contract())
    assert not verdict.ok and verdict.detail.startswith("journey checkout failed at step add-to-cart")


def test_a_symptom_contract_checks_the_step_and_the_evidence(tmp_path: Path) -> None:
    capture = load_capture(write_capture(tmp_path / "c", 1.0))
    at = {"expect": "fail", "failing": [{"journey": "checkout", "step": "add-to-cart"}]}
    assert judge(capture, Contract.from_dict({**at, "evidence": ["network", "console", "spans", "screenshot",
                                                                 "dom", "storage"]})).ok
    wrong_step = judge(capture, Contract.from_dict({"expect": "fail",
                                                    "failing": [{"journey": "checkout", "step": "open-cart"}]}))
    assert not wrong_step.ok and "not at step open-cart" in wrong_step.detail
    # Take the console error away: the console no longer carries the symptom.
    console = capture.root / "checkout" / "console.json"
    console.write_text(json.dumps([e for e in json.loads(console.read_text()) if e["type"] != "error"]))
    quiet = judge(load_capture(capture.root), Contract.from_dict({**at, "evidence": ["console", "network"]}))
    assert not quiet.ok and "the console evidence does not show it" in quiet.detail
    passed = judge(load_capture(write_capture(tmp_path / "d", 1.0, failed_step=None)), Contract.from_dict(at))
    assert not passed.ok and "passed (expected it to fail at step add-to-cart)" in passed.detail


def test_the_cli_refuses_a_bad_contract_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--base-url", "http://127.0.0.1:1", "--root", str(tmp_path), "--label", "x",
                 "--contract", json.dumps({"expect": "fail"})])
    assert code == 2 and "check_cuj: failing:" in capsys.readouterr().err
    assert not any(tmp_path.iterdir()), "nothing was run or written"
