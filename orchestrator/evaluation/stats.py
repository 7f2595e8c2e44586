"""Aggregate statistics for benchmark results: pass@k (Chen et al., 2021) and mean ± standard error.

ITBench reports pass@1 for diagnosis and mitigation (App. C.6.3) and the standard error of every
metric (Table 4, note 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"pass_at_k: {name} must be an integer, got {value!r}")
    return value


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k from ``n`` samples of which ``c`` are correct (Chen et al., 2021):

        pass@k = 1 - C(n - c, k) / C(n, k)

    computed in the numerically stable product form ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)``
    (no large binomials; the equivalent ``prod_{i < k} (1 - c / (n - i))`` when k < c).
    Requires integers with ``0 <= c <= n`` and ``1 <= k <= n``; anything else raises
    ``ValueError``. ``c = 0`` gives 0, ``c = n`` gives 1, ``k = 1`` gives ``c / n``.
    """
    n, c, k = _check_int("n", n), _check_int("c", c), _check_int("k", k)
    if n < 1:
        raise ValueError(f"pass_at_k: n (samples) must be >= 1, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: c (correct samples) must be in [0, n={n}], got c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: k must be in [1, n={n}], got k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    # C(n - c, k) / C(n, k) = prod_{i = n - c + 1}^{n} (1 - k / i)   (c factors, Chen et al.'s form)
    #                       = prod_{i = 0}^{k - 1} (1 - c / (n - i))  (k factors); use the shorter.
    # Every factor lies in [0, 1], so neither form overflows or cancels catastrophically.
    product = 1.0
    if c <= k:
        for i in range(n - c + 1, n + 1):
            product *= 1.0 - k / i
    else:
        for i in range(k):
            product *= 1.0 - c / (n - i)
    return 1.0 - product


def mean_pass_at_k(samples: Iterable[tuple[int, int]], k: int) -> float:
    """pass@k averaged over scenarios (the expectation in App. C.6.3); ``samples`` holds one
    ``(n, c)`` pair per scenario. Raises ``ValueError`` when it is empty."""
    values = [pass_at_k(n, c, k) for n, c in samples]
    if not values:
        raise ValueError("mean_pass_at_k: no scenarios")
    return math.fsum(values) / len(values)


def mean_stderr(values: Iterable[float]) -> tuple[float, float]:
    """(mean, standard error of the mean) of ``values``: ``s / sqrt(n)`` with ``s`` the sample
    standard deviation (n - 1 in the denominator). The standard error of a single value is
    undefined and returned as NaN; no values raise ``ValueError``."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_stderr: no values")
    n = len(xs)
    mean = math.fsum(xs) / n
    if n == 1:
        return mean, math.nan
    variance = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(variance / n)
