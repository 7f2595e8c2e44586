"""A trial on a kept environment overlaps the steps that do not depend on each other (issue 23): `finish` (collect,
evaluate, revoke) beside remove, then recovery beside the leftover check; sequential when an evaluator reads the
live world. Every playbook is a fake that records when it ran (the live trials run in the e2e campaign tests)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import lifecycle, paths
from orchestrator.agent import AgentResult
from orchestrator.catalog import find_scenario
from orchestrator.lifecycle import Run
from orchestrator.runner import StepResult
from orchestrator.trials import WORLD_EVALUATORS, agent_trial, restores_early, trial_on

pytestmark = pytest.mark.usefixtures("home")  # a private OPSBENCH_HOME (conftest)
STEP_S = 0.3


class TimedPlaybooks:
    """Stands in for runner.run_playbook: each step takes STEP_S (finish: three plays of STEP_S) and succeeds unless
    named in `fail`; records when each ran, from any thread."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.fail = list(fail)
        self.spans: list[tuple[str, float, float]] = []
        self._lock = threading.Lock()

    def __call__(self, step: str, playbook: str, extravars: dict[str, Any], private_data_dir: Path,
                 on_event: Any = None, **_: Any) -> StepResult:
        start = time.monotonic()
        stats: dict[str, Any] = {}
        if "opsbench_checks" in extravars:
            stats["checks"] = {c["name"]: {"ok": True} for c in extravars["opsbench_checks"]}
        if step == "pristine":
            stats["leftovers"] = []
        for _play in range(3 if step == "finish" else 1):
            if on_event:
                on_event({"event": "playbook_on_play_start", "event_data": {}})
            time.sleep(STEP_S)
        with self._lock:
            self.spans.append((step, start, time.monotonic()))
        if step in self.fail:
            self.fail.remove(step)  # fails once: a retry succeeds
            return StepResult(step, "failed", 2, STEP_S, failures=[f"{step} broke"])
        return StepResult(step, "successful", 0, STEP_S, stats)

    def span(self, step: str, nth: int = 0) -> tuple[float, float]:
        found = [(s, e) for name, s, e in self.spans if name == step]
        return found[nth]

    def overlap(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.span(a), self.span(b)
        return a0 < b1 and b0 < a1

    @property
    def steps(self) -> list[str]:
        return [name for name, _, _ in sorted(self.spans, key=lambda s: s[1])]


@pytest.fixture
def playbooks(monkeypatch: pytest.MonkeyPatch) -> TimedPlaybooks:
    fake = TimedPlaybooks()
    monkeypatch.setattr(lifecycle, "run_playbook", fake)
    monkeypatch.setattr(lifecycle, "run_command_agent",
                        lambda *a, **k: AgentResult("exited", 0, 0.01, isolation={"sandbox": "test"}))
    return fake


def trial(scenario: str = "shop-cart-down") -> Run:
    scn = find_scenario(scenario)
    host = Run.create(scn, agent="true", keep=True)
    return trial_on(host, scn, "true")


def test_finish_runs_beside_remove_and_recovery_beside_the_leftover_check(playbooks: TimedPlaybooks) -> None:
    run = trial()
    assert restores_early(run)
    summary = agent_trial(run, healthy=True)
    assert summary["status"] == "completed" and summary["cleanup"] == "done", summary
    assert summary["recovered"] is True and summary["leftovers"] == []
    assert playbooks.overlap("finish", "remove") and playbooks.overlap("recovery", "pristine")
    # recovery and the leftover check look at the environment only after the faults are gone
    assert playbooks.span("recovery")[0] >= playbooks.span("remove")[1]
    assert playbooks.span("pristine")[0] >= playbooks.span("remove")[1]
    assert playbooks.steps[:3] == ["inject", "manifestation", "handover"]
    assert sorted(run.state["done"]) == sorted(["inject", "manifestation", "handover", "agent", "collect",
                                                "evaluate", "revoke", "remove", "recovery", "pristine"])
    # the record keeps its three finish steps and no pid of a step that ended
    res = run.state["results"]
    assert res["collect"]["ended_at"] == res["evaluate"]["started_at"] and "finish" not in res
    assert "step_pids" not in run.state


def test_an_evaluator_that_reads_the_world_keeps_the_faults_in_until_it_ran(playbooks: TimedPlaybooks) -> None:
    run = trial("shop-cart-down-mitigate")
    assert {e["role"] for e in run.state["vars"]["evaluators"]} & WORLD_EVALUATORS and not restores_early(run)
    summary = agent_trial(run, healthy=True)
    assert summary["status"] == "completed", summary
    assert playbooks.steps == ["inject", "manifestation", "handover", "collect", "evaluate", "revoke", "remove",
                               "recovery", "pristine"]


def test_a_failed_removal_beside_finish_is_retried_by_cleanup_before_recovery(monkeypatch: pytest.MonkeyPatch,
                                                                            playbooks: TimedPlaybooks) -> None:
    playbooks.fail.append("remove")
    run = trial()
    summary = agent_trial(run, healthy=True)
    assert summary["cleanup"] == "done" and summary["recovered"] is True, summary
    first, retry = playbooks.span("remove"), playbooks.span("remove", 1)
    assert playbooks.span("recovery")[0] >= retry[1] > first[1]
    assert playbooks.span("pristine")[0] >= retry[1] and summary["leftovers"] == []


def test_a_failed_finish_leaves_revoke_owed_and_cleanup_runs_it(playbooks: TimedPlaybooks) -> None:
    playbooks.fail.append("finish")
    run = trial()
    summary = agent_trial(run, healthy=True)
    assert summary["status"] == "error", summary
    assert summary["cleanup"] == "done" and "revoke" in run.state["done"] and "remove" in run.state["done"]
    assert playbooks.steps.count("revoke") == 1 and playbooks.span("revoke")[0] >= playbooks.span("finish")[1]


def test_every_evaluator_that_reads_the_world_is_listed() -> None:
    """WORLD_EVALUATORS is what lets a trial remove its faults early: an evaluator role that queries Prometheus or
    a cluster must be in it (else it would score a world whose faults are already gone)."""
    world = re.compile(r"prometheus|kubernetes|kubeconfig|kubectl|podman|/api/v1/", re.IGNORECASE)
    reads: set[str] = set()
    for role in sorted((paths.PROJECT_ROOT / "roles").glob("evaluate_*")):
        text = "".join(f.read_text() for sub in ("tasks", "library", "defaults")
                       for f in sorted((role / sub).glob("*")) if f.is_file())
        # A role's module that scores with orchestrator.evaluation.<x> reads what that module reads.
        for module in re.findall(r"from orchestrator\.evaluation\.(\w+) import", text):
            text += (paths.PROJECT_ROOT / "orchestrator" / "evaluation" / f"{module}.py").read_text()
        if world.search(text):
            reads.add(role.name)
    assert reads == set(WORLD_EVALUATORS)
