"""Group-relative advantages and the clipped policy objective of :func:`prmkit.rl.rl_train`.

Everything here is a pure function of numbers (lists, or torch tensors for the loss), so each rule can
be checked against a hand computation:

- :func:`group_advantages`: one scalar reward per completion of a group (the ``G`` completions of one
  prompt) to one advantage per completion. ``grpo``: ``(r - mean) / std`` (DeepSeekMath's GRPO; the
  population std, ``scale=False`` leaves it out as Dr. GRPO does); ``rloo``: ``r - mean of the
  others`` (REINFORCE leave-one-out), never scaled.
- :func:`dense_advantages`: DeepSeekMath's process supervision (section 4.1.3). Every step of every
  completion of the group has a reward; they are normalised together, over all steps of the group
  (``(r - mean) / std``), and a token's advantage is the sum of the normalised rewards of the steps
  that end at or after it: its own step and every later one. Tokens after the last step's end get 0.
- :func:`clipped_token_loss`: PPO's clipped surrogate per token, ``-min(ρA, clip(ρ, 1-ε, 1+ε)A)`` with
  ``ρ = exp(logp - old_logp)``, plus ``β`` times the k3 estimate of KL(policy || reference),
  ``exp(ref - logp) - (ref - logp) - 1`` (Schulman's unbiased, non-negative estimator, as GRPO uses);
  averaged over each completion's tokens, then over completions (GRPO's sequence mean).

>>> [round(a, 3) for a in group_advantages([1.0, 0.0])]
[1.0, -1.0]
>>> group_advantages([1.0, 0.0, 0.0], baseline="rloo")
[1.0, -0.5, -0.5]
>>> [round(a, 3) for a in dense_advantages([[1.0, 0.0], [0.0, 0.0]], [[1, 3], [1, 3]], [4, 4])[0]]
[1.154, 1.154, -0.577, -0.577]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prmkit.errors import PrmkitError

__all__ = ["BASELINES", "group_advantages", "dense_advantages", "clipped_token_loss"]

#: Baselines of :func:`group_advantages`.
BASELINES = ("grpo", "rloo")

#: Added to the std before dividing (a group whose rewards are all equal gets advantage 0, not NaN).
EPS = 1e-4


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def group_advantages(rewards: Sequence[float], baseline: str = "grpo", *, scale: bool = True) -> list[float]:
    """One advantage per completion of one group from its scalar rewards (module docs). A group of one
    has nothing to compare with: advantage 0."""
    if baseline not in BASELINES:
        raise PrmkitError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    rs = [float(r) for r in rewards]
    n = len(rs)
    if n < 2:
        return [0.0] * n
    if baseline == "rloo":
        total = sum(rs)
        return [r - (total - r) / (n - 1) for r in rs]
    m, s = _mean_std(rs)
    if not scale:
        return [r - m for r in rs]
    # A group whose rewards are all equal carries no signal: exactly 0 (not a rounding residue / EPS).
    return [0.0 if s == 0 else (r - m) / (s + EPS) for r in rs]


def dense_advantages(step_rewards: Sequence[Sequence[float]], step_ends: Sequence[Sequence[int]],
                     lengths: Sequence[int], *, scale: bool = True) -> list[list[float]]:
    """Per-token advantages of one group by DeepSeekMath's process-supervision rule (module docs).

    ``step_rewards[g][i]``: completion ``g``'s reward for step ``i``; ``step_ends[g][i]``: the index of
    the token that ends that step (in completion ``g``'s ``lengths[g]`` tokens). Steps are normalised
    over the whole group; a group with fewer than two steps in all has nothing to compare: zeros.
    """
    if not len(step_rewards) == len(step_ends) == len(lengths):
        raise PrmkitError("dense_advantages: one list of step rewards, step ends and a length per completion")
    flat = [float(r) for rs in step_rewards for r in rs]
    out = [[0.0] * n for n in lengths]
    if len(flat) < 2:
        return out
    m, s = _mean_std(flat)
    for g, (rs, ends, n) in enumerate(zip(step_rewards, step_ends, lengths, strict=True)):
        if len(rs) != len(ends):
            raise PrmkitError(f"dense_advantages: completion {g} has {len(rs)} step rewards for {len(ends)} step ends")
        norm = [0.0 if s == 0 else ((r - m) / (s + EPS) if scale else r - m) for r in rs]
        for r, end in zip(norm, ends, strict=True):
            if not 0 <= end < n:
                raise PrmkitError(f"dense_advantages: step end {end} outside completion {g}'s {n} tokens")
            # the step's normalised reward counts for every token up to its end (its step and earlier ones)
            for t in range(end + 1):
                out[g][t] += r
    return out


def clipped_token_loss(logp: Any, old_logp: Any, advantages: Any, mask: Any, *, clip_eps: float = 0.2,
                       ref_logp: Any = None, kl_coef: float = 0.0) -> tuple[Any, dict[str, float]]:
    """The GRPO loss of a batch of completions (module docs): tensors of shape ``(completions,
    tokens)``; ``mask`` is 1 on a completion's tokens and 0 on padding. Returns ``(loss, stats)`` with
    stats ``kl`` (mean k3 estimate, 0 without a reference) and ``clip_frac`` (share of tokens whose
    ratio was clipped where it mattered)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    kl = torch.zeros_like(logp)
    if ref_logp is not None:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
        if kl_coef:
            per_token = per_token + kl_coef * kl
    mask = mask.to(logp.dtype)
    counts = mask.sum(dim=1).clamp(min=1.0)
    loss = ((per_token * mask).sum(dim=1) / counts).mean()
    with torch.no_grad():
        total = mask.sum().clamp(min=1.0)
        stats = {"kl": float((kl * mask).sum() / total),
                 "clip_frac": float(((unclipped > clipped).to(logp.dtype) * mask).sum() / total)}
    return loss, stats
