"""The statistics every evaluation shares: AUROC, rank correlations, bootstrap resampling and
percentile intervals. Written once here, so that two reports cannot compute one number two ways.

Intervals are percentile intervals (2.5th / 97.5th percentiles of the replicates, numpy's linear
interpolation) that always contain their estimate: see :func:`percentile_interval`. Pure Python and
numpy only (SciPy is not a dependency of prmkit).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from prmkit.errors import MissingDependencyError

__all__ = ["auroc", "average_ranks", "pearson", "spearman", "slope", "percentile_interval",
           "bootstrap_summary", "stratified_resamples", "nested_resamples", "wilson_interval"]

T = TypeVar("T")


def _np():
    try:
        import numpy
    except ImportError:
        raise MissingDependencyError("numpy", None, "bootstrap intervals") from None
    return numpy


# -- ranking ---------------------------------------------------------------------------------------------

def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the probability that a random positive outscores a random negative
    (ties count half), by the Mann-Whitney rank sum in O(n log n). None when one class is absent.

    >>> auroc([0.9, 0.8, 0.3, 0.1], [True, False, True, False])
    0.75
    >>> auroc([0.5, 0.5], [True, False]), auroc([0.2], [True])
    (0.5, None)
    """
    pairs = sorted(zip(scores, positives, strict=True), key=lambda p: p[0])
    n_pos = sum(1 for _, p in pairs if p)
    n_neg = len(pairs) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    # Mann-Whitney U with average ranks for ties.
    rank_sum = 0.0
    i = 0
    while i < len(pairs):
        j = i
        while j + 1 < len(pairs) and pairs[j + 1][0] == pairs[i][0]:
            j += 1
        avg_rank = (i + j) / 2 + 1
        rank_sum += avg_rank * sum(1 for k in range(i, j + 1) if pairs[k][1])
        i = j + 1
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank (as Spearman's rho needs).

    >>> average_ranks([0.3, 0.1, 0.3, 0.2])
    [3.5, 1.0, 3.5, 2.0]
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None for fewer than two points or a constant variable.

    >>> pearson([1, 2, 3], [2, 4, 7]) > 0.99, pearson([1, 1], [2, 3])
    (True, None)
    """
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks; None as for :func:`pearson`.

    >>> spearman([1, 2, 3], [1, 8, 27]), spearman([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """
    return pearson(average_ranks(x), average_ranks(y)) if len(x) >= 2 else None


def slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """The least-squares slope of y on x; None when x is constant or has fewer than two points.

    >>> slope([1, 2, 3], [0.75, 0.5, 0.25])
    -0.25
    """
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    if sxx == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx


# -- intervals -------------------------------------------------------------------------------------------

def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n`` (95% with the default ``z``), within
    [0, 1]; (0, 1) when ``n`` is 0. It holds ``k / n``, and unlike the normal approximation it stays
    inside [0, 1] and is not empty at 0 or ``n`` successes.

    >>> [round(x, 3) for x in wilson_interval(2, 4)]
    [0.15, 0.85]
    >>> wilson_interval(0, 0)
    (0.0, 1.0)
    """
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def percentile_interval(replicates: Any, estimate: Any = None, *, level: float = 95) -> tuple[Any, Any]:
    """``(lo, hi)``: the ``(100 - level) / 2`` and ``100 - (100 - level) / 2`` percentiles of the
    bootstrap ``replicates`` along axis 0 (numpy's linear interpolation), widened where needed to
    hold ``estimate`` (default: the replicates' mean); arrays for 2-D replicates, numpy floats for 1-D.

    Why widened: a percentile interval can miss its estimate. When more than 2.5% of the replicates
    share the extreme value (few problems, a method that almost never fails) both percentiles are that
    value while rare failures pull the mean below it; the mean of identical replicates can differ from
    their value in the last bit; and a point estimate on the whole sample (an AUROC) can lie outside
    the percentiles of a skewed bootstrap distribution. The reported interval then reaches the
    estimate instead of excluding it.

    >>> r = [1.0] * 98 + [0.5, 0.0]
    >>> [float(x) for x in percentile_interval(r)], [float(x) for x in percentile_interval(r, 0.9)]
    ([0.985, 1.0], [0.9, 1.0])
    """
    np = _np()
    r = np.asarray(replicates, dtype=float)
    tail = (100 - level) / 2
    lo, hi = np.percentile(r, [tail, 100 - tail], axis=0)
    est = r.mean(axis=0) if estimate is None else estimate
    return np.minimum(lo, est), np.maximum(hi, est)


def bootstrap_summary(replicates: Any, *, level: float = 95) -> tuple[Any, Any, Any]:
    """``(mean, lo, hi)`` over axis 0 of ``replicates``: the mean is the estimate and
    :func:`percentile_interval` holds it.

    >>> [float(x) for x in bootstrap_summary([1.0] * 98 + [0.5, 0.0])]
    [0.985, 0.985, 1.0]
    """
    np = _np()
    r = np.asarray(replicates, dtype=float)
    mean = r.mean(axis=0)
    lo, hi = percentile_interval(r, mean, level=level)
    return mean, lo, hi


# -- resampling ------------------------------------------------------------------------------------------

def stratified_resamples(groups: Sequence[Sequence[T]], n: int, seed: int = 0
                         ) -> list[tuple[list[T], ...]]:
    """``n`` bootstrap replicates of ``groups`` resampled apart (each group with replacement, to its own
    size: positives and negatives, so every replicate has both). Statistics computed on the same
    replicates are paired, so their difference gets an interval too. Empty when a group is empty.

    Drawn with :class:`random.Random` (``seed``), replicate by replicate, group by group.

    >>> stratified_resamples([[1, 2, 3], ["a", "b"]], 2, seed=1)
    [([1, 3, 1], ['b', 'a']), ([2, 2, 2], ['b', 'a'])]
    """
    if any(not g for g in groups):
        return []
    rng = random.Random(seed)
    return [tuple([rng.choice(g) for _ in g] for g in groups) for _ in range(n)]


def nested_resamples(sizes: Sequence[int], n: int, seed: int = 0, *, chunk: int | None = None
                     ) -> Iterator[tuple[int, Any, Any]]:
    """A nested bootstrap over units with members (problems with candidates), in chunks of replicates:
    each replicate draws ``len(sizes)`` units with replacement and, for each drawn unit, one random
    order of its ``sizes[unit]`` members. Yields ``(start, units, order)``: ``units`` the
    (chunk x units) drawn unit indices of replicates ``start ..``, ``order`` (chunk x units x
    ``max(sizes)``) member indices, each unit's members first in random order, then its padding.
    The first N of an order are a uniform draw of N members without replacement, nested across N.

    >>> [(s, u.tolist(), o.shape) for s, u, o in nested_resamples([2, 1], 3, seed=0, chunk=2)]
    [(0, [[1, 1], [1, 0]], (2, 2, 2)), (2, [[0, 0]], (1, 2, 2))]
    """
    np = _np()
    sizes = np.asarray(sizes)
    n_units, width = len(sizes), int(sizes.max())
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n_units, size=(n, n_units))
    cols = np.arange(width)
    step = n if chunk is None else max(1, chunk)
    for start in range(0, n, step):
        units = drawn[start:start + step]
        keys = rng.random((units.shape[0], n_units, width))
        keys[cols[None, None, :] >= sizes[units][..., None]] = np.inf   # padding sorts last
        yield start, units, np.argsort(keys, axis=-1)


# -- agreement between raters (issue 50: double-labelled human step labels) ---------------------------

__all__ += ["cohen_kappa", "fleiss_kappa"]


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa of two raters who labelled the same items: ``(p_o - p_e) / (1 - p_e)``, the
    observed agreement ``p_o`` against the agreement ``p_e`` expected from each rater's own label
    frequencies. None for no items, or when chance agreement is certain (``p_e == 1``: both raters gave
    one and the same label to everything, so kappa is undefined).

    >>> cohen_kappa([1, 1, -1, -1], [1, -1, -1, -1])   # p_o = 3/4, p_e = 1/2
    0.5
    >>> cohen_kappa([1, 1], [1, 1]) is None
    True
    """
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    p_e = sum((list(a).count(c) / n) * (list(b).count(c) / n) for c in set(a) | set(b))
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of items each rated by the same number of raters ``n >= 2``: ``counts[i][j]`` is
    how many raters put item ``i`` in category ``j``. ``(P - P_e) / (1 - P_e)`` with ``P`` the mean
    per-item agreement ``(sum_j c_ij^2 - n) / (n (n - 1))`` and ``P_e = sum_j p_j^2`` over the
    category shares ``p_j``. None for no items or when ``P_e == 1`` (one category only).

    >>> fleiss_kappa([[2, 0], [0, 2], [1, 1], [0, 2]])   # P = 3/4, p = (3/8, 5/8), P_e = 17/32
    0.4666666666666667
    """
    rows = [list(r) for r in counts]
    if not rows:
        return None
    n = sum(rows[0])
    width = len(rows[0])
    if n < 2 or any(sum(r) != n or len(r) != width or min(r) < 0 for r in rows):
        raise ValueError("fleiss_kappa: every item needs the same number (>= 2) of ratings over the same "
                         "categories")
    total = n * len(rows)
    p_bar = sum((sum(c * c for c in r) - n) / (n * (n - 1)) for r in rows) / len(rows)
    p_e = sum((sum(r[j] for r in rows) / total) ** 2 for j in range(width))
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1.0 - p_e)
