"""pass@k with the unbiased estimator of Chen et al. (2021), per problem then averaged."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from math import comb

from prmkit.trace import Trace

__all__ = ["pass_at_k", "pass_at_k_traces"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn without replacement from ``n`` samples,
    ``c`` of them correct, is correct.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), pass_at_k(4, 0, 2), round(pass_at_k(4, 2, 2), 4)
    (0.25, 1.0, 0.0, 0.8333)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at_k_traces(traces: Iterable[Trace], ks: Iterable[int]) -> dict[int, float]:
    """Mean pass@k over problems (traces grouped by problem id); ``k`` larger than a problem's sample
    count is skipped for that problem."""
    per: dict[str, list[bool]] = defaultdict(list)
    for t in traces:
        per[t.problem.id or t.problem.text].append(t.outcome == "correct")
    out = {}
    for k in ks:
        vals = [pass_at_k(len(v), sum(v), k) for v in per.values() if len(v) >= k]
        if vals:
            out[k] = sum(vals) / len(vals)
    return out
