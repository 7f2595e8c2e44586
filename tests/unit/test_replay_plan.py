"""How `opsbench replay --parallel K` splits a snapshot's trials over frozen environments."""

from __future__ import annotations

from orchestrator.harness.replay import trial_chunks


def test_trials_are_split_over_at_most_k_environments_in_order() -> None:
    assert trial_chunks(10, 3) == [[1, 2, 3, 4], [5, 6, 7], [8, 9, 10]]
    assert trial_chunks(2, 8) == [[1], [2]]  # never an environment without a trial
    assert trial_chunks(5, 1) == [[1, 2, 3, 4, 5]]
    assert sorted(n for chunk in trial_chunks(7, 4) for n in chunk) == list(range(1, 8))
