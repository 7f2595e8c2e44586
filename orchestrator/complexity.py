"""Scenario complexity, ITBench Eq. 6: the geometric mean of the three difficulty factors."""

from __future__ import annotations

import math

# ITBench gives the formula but no cut-offs; these are ours, documented in docs/scenario-spec.md.
EASY_BELOW = 2.0
MEDIUM_BELOW = 2.7


def complexity_value(propagation_length: int, resolution_steps: int, technologies: int) -> float:
    """Cube root of propagation length x resolution steps x number of technologies."""
    return round(math.cbrt(propagation_length * resolution_steps * technologies), 2)


def complexity_level(value: float) -> str:
    if value < EASY_BELOW:
        return "Easy"
    if value < MEDIUM_BELOW:
        return "Medium"
    return "Hard"
