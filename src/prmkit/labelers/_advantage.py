"""``advantage``: process advantage labels (Setlur et al., 2024, "Rewarding Progress").

A step is worth the progress it makes under a *prover* policy: its advantage
``A(step i) = Q(prefix i+1) - Q(prefix i)``, where ``Q(prefix p)`` is the chance that the prover,
continuing from the first ``p`` steps, reaches the reference answer, estimated as the success rate of
``k`` rollouts (``Q`` of the whole trace is its own answer's correctness, with no rollouts). The
value lies in [-1, 1]: positive when the step made the answer more reachable, negative when it made it
less reachable.

Labels are soft, source ``advantage``, with ``Q`` before and after the step in the label's meta. To
train a classifier on them, binarize at 0 — a step is wrong when it lowered the prover's success
(``prmkit.trace.binarize(label, threshold=0.0)`` counts ``A >= 0`` as right; use a small positive
threshold to demand progress). Setlur et al. use the advantage itself as a dense reward.

The prover is whatever policy you pass (the paper argues for a prover somewhat different from the
policy being trained, e.g. a best-of-K of it). A trace of ``n`` steps costs ``k * n`` rollouts,
prefixes ``0 .. n-1``; the ``k * (n - 1)`` of prefixes ``1 .. n-1`` are the ones ``mc`` makes, so with
the same policy, seed and store the two share them.
"""

from __future__ import annotations

from typing import Any

from prmkit.labelers._base import RolloutLabeler, setup_rollouts
from prmkit.labelers._plan import Need, Plan, PlanResult, terminal_success
from prmkit.trace import StepLabel, Trace

__all__ = ["AdvantageLabeler"]


class AdvantageLabeler(RolloutLabeler):
    """``Q(prefix + step) - Q(prefix)`` under the prover ``policy``, ``Q`` by ``k`` rollouts.
    Arguments as :class:`~prmkit.labelers.MCLabeler`."""

    name = "advantage"
    sources = ("advantage",)

    def __init__(self, policy: Any, *, k: int = 8, max_new_tokens: int = 128,
                 temperature: float = 0.7, top_p: float = 1.0, seed: int | None = 0,
                 shots: int | None = None, workers: int | None = None,
                 ray_address: str | None = None, answer_method: str = "auto") -> None:
        super().__init__()
        self.k = k
        setup_rollouts(self, policy, k=k, max_new_tokens=max_new_tokens, temperature=temperature,
                       top_p=top_p, seed=seed, shots=shots, workers=workers,
                       ray_address=ray_address, answer_method=answer_method)

    def plan(self, trace: Trace) -> Plan:
        n = len(trace.steps)
        term = terminal_success(trace, method=self.answer_method)
        prefixes = list(range(0, n)) + ([n] if term is None else [])
        results = yield [Need("rollout", p, tuple(range(self.k))) for p in prefixes]
        by_prefix = dict(zip(prefixes, results, strict=True))
        q = [sum(bool(r.reached) for r in by_prefix[p]) / len(by_prefix[p]) for p in range(n)]
        q.append(float(term) if term is not None else
                 sum(bool(r.reached) for r in by_prefix[n]) / len(by_prefix[n]))
        labels: list[list[StepLabel]] = []
        for i in range(n):
            rs = by_prefix[i] + by_prefix.get(i + 1, [])
            labels.append([self.make_label(
                round(q[i + 1] - q[i], 12), "advantage", kind="soft", rollouts=rs,
                meta={"prefix": i, "q_prefix": q[i], "q_step": q[i + 1]})])
        return PlanResult(labels, notes={"k": self.k, "q": q})
