"""``binary``: the first error by binary search over the step index (OmegaPRM, Luo et al., 2024).

A prefix is *good* when at least one of ``k`` rollouts from it reaches the reference answer. Goodness
is monotone in truth: if prefix ``p`` can reach the answer, so can every shorter prefix (the steps in
between followed by that rollout are one way), so the first error is the step that ends the shortest
bad prefix, and a binary search finds it with rollouts at about ``log2(n)`` prefixes instead of all
``n - 1``. A trace whose own final answer is right has no bad prefix: every step is +1 and no rollout
is made (OmegaPRM, too, searches only incorrect solutions).

The search keeps ``lo`` (every prefix shorter than ``lo`` is good) and ``hi`` (prefix ``hi`` is bad),
starting from ``lo = 1, hi = n``; each round rolls out ``mid = (lo + hi) // 2`` and moves one end past
``mid``, so ``hi - lo`` shrinks by at least one every round and the search ends after at most
``ceil(log2(n))`` rounds — whatever the rollouts say, even when the estimates are not monotone (a
finite ``k`` can miss a good prefix). ``max_rollouts`` bounds the rollouts per trace hard: a round
that would exceed it is not started, and the search stops with what it knows.

Labels (source ``binary_search``): steps before the first error +1, the first error -1, and the
steps after it unlabelled (``after_error="unlabelled"``, the default: nothing was measured there) or
-1 (``after_error="negative"``, Math-Shepherd's convention that a step after an error cannot lead to
the answer either). When ``max_rollouts`` stops the search early, the steps known good are +1 and the
rest unlabelled, and the trace's labeling summary says in which steps the first error lies.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.labelers._base import RolloutLabeler, setup_rollouts
from prmkit.labelers._plan import Need, Plan, PlanResult, Rollout, first_error_values, terminal_success
from prmkit.trace import StepLabel, Trace

__all__ = ["BinarySearchLabeler", "AFTER_ERROR", "max_search_rounds"]

#: What the steps after the first error get: no label, or -1.
AFTER_ERROR: tuple[str, ...] = ("unlabelled", "negative")


def max_search_rounds(n: int) -> int:
    """Most prefixes a search over a wrong trace of ``n`` steps rolls out: ``ceil(log2(n))``
    (plus one when the trace's own answer cannot be read and prefix ``n`` must be rolled out).

    >>> [max_search_rounds(n) for n in (1, 2, 3, 4, 5, 8, 9)]
    [0, 1, 2, 2, 3, 3, 4]
    """
    return math.ceil(math.log2(n)) if n > 1 else 0


class BinarySearchLabeler(RolloutLabeler):
    """First-error labels by binary search with ``k`` rollouts per visited prefix and at most
    ``max_rollouts`` rollouts per trace (see the module docstring). Other arguments as
    :class:`~prmkit.labelers.MCLabeler`.
    """

    name = "binary"
    sources = ("binary_search",)

    def __init__(self, policy: Any, *, k: int = 8, max_rollouts: int = 64,
                 after_error: str = "unlabelled", max_new_tokens: int = 128,
                 temperature: float = 0.7, top_p: float = 1.0, seed: int | None = 0,
                 shots: int | None = None, workers: int | None = None,
                 ray_address: str | None = None, answer_method: str = "auto") -> None:
        super().__init__()
        if after_error not in AFTER_ERROR:
            raise PrmkitError(f"after_error must be one of {AFTER_ERROR}, got {after_error!r}")
        if not isinstance(max_rollouts, int) or max_rollouts < 0:
            raise PrmkitError(f"max_rollouts must be an integer >= 0, got {max_rollouts!r}")
        self.k = k
        self.max_rollouts = max_rollouts
        self.after_error = after_error
        setup_rollouts(self, policy, k=k, max_new_tokens=max_new_tokens, temperature=temperature,
                       top_p=top_p, seed=seed, shots=shots, workers=workers,
                       ray_address=ray_address, answer_method=answer_method,
                       max_rollouts=max_rollouts, after_error=after_error)

    def plan(self, trace: Trace) -> Plan:
        n, k = len(trace.steps), self.k
        spent: list[Rollout] = []          # every rollout this trace used
        visited: list[list[int]] = []      # [prefix, successes], in search order

        def good(p: int, rs: list[Rollout]) -> bool:
            spent.extend(rs)
            hits = sum(bool(r.reached) for r in rs)
            visited.append([p, hits])
            return hits > 0

        # Invariant: every prefix shorter than lo is good; prefix hi is bad.
        lo, hi = 1, n
        whole = terminal_success(trace, method=self.answer_method)
        stopped = False
        if whole is None:  # no answer to read: roll the whole trace out like any prefix
            if k > self.max_rollouts:
                stopped = True
            else:
                [rs] = yield [Need("rollout", n, tuple(range(k)))]
                whole = good(n, rs)
        if whole:
            lo = n + 1
        rounds = 0
        while not stopped and lo < hi:
            if len(spent) + k > self.max_rollouts:
                stopped = True
                break
            mid = (lo + hi) // 2
            [rs] = yield [Need("rollout", mid, tuple(range(k)))]
            if good(mid, rs):
                lo = mid + 1
            else:
                hi = mid
            rounds += 1
            if rounds > n:  # unreachable: hi - lo shrinks every round
                raise PrmkitError(f"binary search on trace {trace.id} did not terminate")

        notes: dict[str, Any] = {"k": k, "visited": visited}
        counts: Counter[str] = Counter()
        if stopped:
            first = None
            meta: dict[str, Any] = {"first_error_within": [lo - 1, hi - 1]}
            counts["budget_exhausted"] += 1
        else:
            first = -1 if lo > n else hi - 1
            meta = {"first_error": first}
        notes.update(meta)
        labels: list[list[StepLabel]] = [[] for _ in range(n)]
        for i, value in enumerate(first_error_values(n, first, known_good=lo - 1, after_error=self.after_error)):
            if value is not None:
                labels[i].append(self.make_label(value, "binary_search", rollouts=spent, meta=meta))
        return PlanResult(labels, counts=counts, notes=notes)
