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
    # Found live: a `remove` cut by its step timeout, then teardown done. `opsbench cleanup` retries the removal
    # (its saved state) but must not check recovery of an environment that no longer exists.
    (["deploy", "inject", "remove", "teardown"], ["deploy", "inject", "teardown"], ["remove"]),
    (["deploy", "inject", "remove", "recovery", "teardown"], ["deploy", "inject", "remove", "recovery",
                                                             "teardown"], []),
])
def test_owed_undo_steps(started: list[str], done: list[str], expected: list[str]) -> None:
    assert owed(started, done) == expected


def test_kept_environment_owes_no_teardown() -> None:
    assert owed(["deploy", "inject"], ["deploy", "inject"], keep=True) == ["remove", "recovery"]
