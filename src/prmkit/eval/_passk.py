"""pass@k with the unbiased estimator of Chen et al. (2021), per problem then averaged."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from prmkit.generate import pass_at_k
from prmkit.trace import Trace

__all__ = ["pass_at_k", "pass_at_k_traces"]


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
