"""ITBench Eq. 6 and our level cut-offs (Easy < 2.0 <= Medium < 2.7 <= Hard)."""

from __future__ import annotations

import pytest

from orchestrator.complexity import complexity_level, complexity_value


@pytest.mark.parametrize(
    ("propagation", "steps", "technologies", "value", "level"),
    [
        (1, 1, 1, 1.0, "Easy"),
        (1, 2, 1, 1.26, "Easy"),  # loopweb-gateway-bad-upstream
        (2, 1, 2, 1.59, "Easy"),  # loopweb-web-down
        (1, 7, 1, 1.91, "Easy"),
        (2, 2, 2, 2.0, "Medium"),  # lower boundary of Medium
        (2, 2, 3, 2.29, "Medium"),
        (3, 3, 2, 2.62, "Medium"),
        (4, 5, 1, 2.71, "Hard"),
        (3, 3, 3, 3.0, "Hard"),
        (5, 4, 5, 4.64, "Hard"),
    ],
)
def test_value_and_level(propagation, steps, technologies, value, level):
    got = complexity_value(propagation, steps, technologies)
    assert got == value
    assert complexity_level(got) == level


def test_value_is_symmetric_in_its_factors():
    assert complexity_value(1, 3, 6) == complexity_value(6, 1, 3) == complexity_value(3, 6, 1)


@pytest.mark.parametrize(
    ("value", "level"),
    [(1.0, "Easy"), (1.99, "Easy"), (2.0, "Medium"), (2.01, "Medium"), (2.69, "Medium"),
     (2.7, "Hard"), (2.71, "Hard"), (10.0, "Hard")],
)
def test_level_boundaries(value, level):
    assert complexity_level(value) == level
