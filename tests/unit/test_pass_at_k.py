"""pass@k (Chen et al., 2021) against its closed form, and mean ± standard error."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from orchestrator.evaluation import mean_pass_at_k, mean_stderr, pass_at_k


def closed_form(n: int, c: int, k: int) -> float:
    """1 - C(n - c, k) / C(n, k), exactly (math.comb is 0 when n - c < k)."""
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (1, 0, 1, 0.0),  # c = 0 -> 0
        (10, 0, 1, 0.0),
        (10, 0, 10, 0.0),
        (1, 1, 1, 1.0),  # c = n -> 1
        (10, 10, 1, 1.0),
        (10, 10, 7, 1.0),
        (10, 3, 1, 0.3),  # k = 1 -> c / n
        (7, 2, 1, 2 / 7),
        (100, 37, 1, 0.37),
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3, 2) / C(5, 2)
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7, 5) / C(10, 5)
        (10, 5, 6, 1.0),  # n - c < k: every 6-subset holds a correct sample
        (20, 1, 10, 0.5),  # 1 - C(19, 10) / C(20, 10) = 10 / 20
        (200, 13, 50, closed_form(200, 13, 50)),
    ],
)
def test_pass_at_k_table(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert pass_at_k(n, c, k) == pytest.approx(closed_form(n, c, k), rel=1e-12, abs=1e-15)


def test_pass_at_k_matches_the_closed_form_exhaustively() -> None:
    for n in range(1, 16):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(closed_form(n, c, k), rel=1e-12, abs=1e-15), (n, c, k)


def test_pass_at_k_is_stable_for_large_n() -> None:
    # The binomials here have thousands of digits; the product form needs none of them.
    n, c, k = 10_000, 17, 100
    value = pass_at_k(n, c, k)
    assert 0.0 < value < 1.0
    assert value == pytest.approx(closed_form(n, c, k), rel=1e-10)
    assert pass_at_k(10**6, 1, 1) == pytest.approx(1e-6)


def test_pass_at_k_grows_with_k_and_c() -> None:
    n = 12
    for c in range(n + 1):
        values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
        assert values == sorted(values)
    assert [pass_at_k(n, c, 3) for c in range(n + 1)] == sorted(pass_at_k(n, c, 3) for c in range(n + 1))


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (5, 2, 6, r"k must be in \[1, n=5\]"),  # k > n
        (5, 2, 0, r"k must be in \[1, n=5\]"),
        (5, 6, 1, r"c \(correct samples\) must be in \[0, n=5\]"),
        (5, -1, 1, r"c \(correct samples\) must be in \[0, n=5\]"),
        (0, 0, 1, r"n \(samples\) must be >= 1"),
        (5.0, 2, 1, "n must be an integer"),
        (5, 2.5, 1, "c must be an integer"),
        (5, 2, True, "k must be an integer"),
        ("5", 2, 1, "n must be an integer"),
    ],
)
def test_pass_at_k_rejects_bad_inputs(n: object, c: object, k: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)  # type: ignore[arg-type]


def test_mean_pass_at_k_averages_over_scenarios() -> None:
    assert mean_pass_at_k([(10, 3), (10, 0), (5, 5)], k=1) == pytest.approx((0.3 + 0 + 1) / 3)
    with pytest.raises(ValueError, match="no scenarios"):
        mean_pass_at_k([], k=1)


def test_mean_stderr() -> None:
    # values 1, 2, 3, 4: mean 2.5, sample variance 5/3, stderr sqrt(5/3 / 4) = 0.645497
    mean, se = mean_stderr([1, 2, 3, 4])
    assert (mean, se) == (2.5, pytest.approx(math.sqrt(5 / 12)))
    assert mean_stderr(iter([0.25, 0.25, 0.25])) == (0.25, 0.0)
    single_mean, single_se = mean_stderr([0.7])
    assert single_mean == 0.7 and math.isnan(single_se)
    with pytest.raises(ValueError, match="no values"):
        mean_stderr([])
