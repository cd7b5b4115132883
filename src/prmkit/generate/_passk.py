"""pass@k with the unbiased estimator of Chen et al. (2021): the sampling stage reports it for what it
sampled, and :func:`prmkit.eval.pass_at_k_traces` for any traces."""

from __future__ import annotations

from math import comb

__all__ = ["pass_at_k"]


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
