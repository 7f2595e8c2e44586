"""Which undo steps a run still owes (what `opsbench cleanup` runs)."""

from __future__ import annotations

import pytest

from orchestrator.lifecycle import Run


def owed(started: list[str], done: list[str], keep: bool = False) -> list[str]:
    return Run({"run_dir": "/nonexistent", "started": started, "done": done, "keep": keep}).pending_cleanup()


@pytest.mark.parametrize(("started", "done", "expected"), [
    (["deploy"], [], ["teardown"]),
    (["deploy", "baseline", "inject"], ["deploy", "baseline"], ["remove", "recovery", "teardown"]),
    (["deploy", "inject", "handover"], ["deploy", "inject", "handover"], ["revoke", "remove", "recovery", "teardown"]),
    # Found live: a `remove` cut by its step timeout, then teardown done. The faults went with the environment
    # (teardown also forgets their saved state): neither the removal nor a recovery check is owed any more.
    (["deploy", "inject", "remove", "teardown"], ["deploy", "inject", "teardown"], []),
    # ... but a token and gateway outlive the environment: revoke is still owed.
    (["deploy", "inject", "handover", "revoke", "remove", "teardown"], ["deploy", "inject", "handover", "teardown"],
     ["revoke"]),
    (["deploy", "inject", "remove", "recovery", "teardown"], ["deploy", "inject", "remove", "recovery",
                                                             "teardown"], []),
])
def test_owed_undo_steps(started: list[str], done: list[str], expected: list[str]) -> None:
    assert owed(started, done) == expected


def test_kept_environment_owes_no_teardown() -> None:
    assert owed(["deploy", "inject"], ["deploy", "inject"], keep=True) == ["remove", "recovery"]


def test_a_timed_out_undo_step_is_retried_before_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `remove` cut by its limit is retried at once (while the environment still exists), before teardown; the
    retry is recorded, and a retry that succeeds leaves nothing owed."""
    from orchestrator import lifecycle
    from orchestrator.runner import StepResult

    run = Run({"id": "r1", "run_dir": "/nonexistent", "scenario_id": "s", "status": "completed",
               "started": ["deploy", "inject"], "done": ["deploy", "inject"], "keep": False, "results": {}})
    calls: list[str] = []
    outcomes = {"remove": ["timeout", "successful"], "recovery": ["successful"], "teardown": ["successful"]}

    def fake_step(step: str, index: int, total: int, cleanup: bool = False) -> StepResult:
        assert cleanup
        calls.append(step)
        status = outcomes[step].pop(0)
        run.state["started"].append(step)
        run.state["results"][step] = {"status": status}
        if status == "successful":
            run.state["done"].append(step)
        return StepResult(step, status, 0, 0.1)

    monkeypatch.setattr(run, "step", fake_step)
    monkeypatch.setattr(run, "save", lambda: None)
    monkeypatch.setattr(lifecycle.store, "update_run", lambda *a, **k: None)
    run.cleanup()
    assert calls == ["remove", "remove", "recovery", "teardown"]
    assert run.state["cleanup"] == "done" and run.state["cleanup_problems"] == []
    assert run.summary()["cleanup_retried"] == ["remove: timed out; retried with the default limits: successful"]
    assert run.pending_cleanup() == []
