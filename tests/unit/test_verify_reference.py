"""verify-scenarios on a scenario with a reference solution (`Run.trial`): after manifestation the untouched
incident is evaluated and must fail, the reference roles run (`solve`), the evaluation must pass; then removal,
recovery and the leftover check as always. The playbooks are fakes that answer with chosen scores (the live proof is
tests/e2e/test_devops_scenarios.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import lifecycle
from orchestrator.catalog import find_scenario
from orchestrator.lifecycle import Run
from orchestrator.runner import StepResult
from orchestrator.trials import verify_trial

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)


class ScoredPlaybooks:
    """Every step succeeds; the two evaluations answer `untouched` and `reference` as their workspace_pass."""

    def __init__(self, untouched: int | None, reference: int | None, fail: str = "") -> None:
        self.scores = {"evaluate_untouched": untouched, "evaluate_reference": reference}
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, step: str, playbook: str, extravars: dict[str, Any], private_data_dir: Path,
                 **_: Any) -> StepResult:
        self.calls.append((step, extravars))
        stats: dict[str, Any] = {}
        if "opsbench_checks" in extravars:
            stats["checks"] = {c["name"]: {"ok": True} for c in extravars["opsbench_checks"]}
        if step == "pristine":
            stats["leftovers"] = []
        if step in self.scores and self.scores[step] is not None:
            stats["evaluations"] = {"workspace": {"status": "scored", "workspace_pass": self.scores[step]}}
        if step == self.fail:
            return StepResult(step, "failed", 2, 0.01, failures=[f"{step} broke"])
        return StepResult(step, "successful", 0, 0.01, stats)

    @property
    def steps(self) -> list[str]:
        return [s for s, _ in self.calls]


def verify(monkeypatch: pytest.MonkeyPatch, fake: ScoredPlaybooks,
           scenario: str = "devops-build-goroot") -> tuple[dict[str, Any], Run]:
    monkeypatch.setattr(lifecycle, "run_playbook", fake)
    scn = find_scenario(scenario)
    run = Run.create(scn, agent=None, keep=False, purpose="verify")
    return verify_trial(run, scn), run


def test_untouched_fails_and_reference_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ScoredPlaybooks(untouched=0, reference=1)
    result, run = verify(monkeypatch, fake)
    assert result["outcome"] == "passed", result["reason"]
    assert fake.steps[:7] == ["baseline", "inject", "manifestation", "evaluate_untouched", "solve",
                              "evaluate_reference", "remove"]
    assert sorted(fake.steps[7:]) == ["pristine", "recovery"]  # side by side after the removal
    solve = dict(fake.calls)["solve"]
    assert [r["role"] for r in solve["opsbench_reference"]] == ["solve_workspace_edit"]
    assert solve["opsbench_reference"][0]["vars"]["solve_workspace_edit_project"] == "ratelimit"
    evaluators = dict(fake.calls)["evaluate_untouched"]["opsbench_evaluators"]
    assert [e["role"] for e in evaluators] == ["evaluate_workspace"]  # no process metrics without an agent
    assert {"evaluate_untouched", "solve", "evaluate_reference"} <= set(result["results"])
    assert not (run.run_dir / "artifacts").exists()  # an earlier trial's answer is never scored again


@pytest.mark.parametrize(("untouched", "reference", "why"), [
    (1, 1, "an agent that does nothing would pass"),
    (None, 1, "no deciding score"),
    (0, 0, "the reference solution does not pass"),
    (0, None, "the reference solution does not pass"),
])
def test_a_scenario_that_cannot_tell_fails_verification(monkeypatch: pytest.MonkeyPatch, untouched: int | None,
                                                        reference: int | None, why: str) -> None:
    fake = ScoredPlaybooks(untouched, reference)
    result, _ = verify(monkeypatch, fake)
    assert result["outcome"] == "failed" and why in result["reason"], result
    assert "remove" in fake.steps and "pristine" in fake.steps  # the faults still go


def test_a_failed_solve_is_an_error_and_the_faults_still_go(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ScoredPlaybooks(0, 1, fail="solve")
    result, _ = verify(monkeypatch, fake)
    assert result["outcome"] == "error" and "solve" in result["reason"], result
    assert "evaluate_reference" not in fake.steps and "remove" in fake.steps


def test_a_scenario_without_reference_is_verified_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ScoredPlaybooks(None, None)
    result, _ = verify(monkeypatch, fake, "shop-cart-down")
    assert result["outcome"] == "passed", result["reason"]
    assert not {"evaluate_untouched", "solve", "evaluate_reference"} & set(fake.steps)
