"""Active learning: which trace a person should label next.

A strategy is a function ``(traces, *, key, seed, aggregate, against) -> priorities``, one number per
trace, higher first (ties keep the file's order); each is registered by name in :data:`STRATEGIES`
(plugins: entry-point group ``prmkit.queue_strategies``). :func:`build_queue` orders traces by one,
keeps at most ``per_problem_cap`` traces of each problem, and marks a fraction (``overlap``) of them
for a second annotator, so that agreement can be measured.

- ``random``: a seeded shuffle (the baseline every other strategy has to beat);
- ``uncertainty``: the trace whose most uncertain step has a PRM score nearest 0.5 first;
- ``convincing_wrong``: wrong final answers first, those the PRM rates highest (its ``aggregate`` of
  the step scores) at the front, as in Lightman et al. (2023), "Let's Verify Step by Step", where
  labelling these made each label worth about 2.6x more; the others follow in file order;
- ``disagreement``: the trace where the PRM's score and another label of the same step (Monte Carlo,
  judge, symbolic: ``against`` names the source, default any label that is not human) differ most.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.trace import Trace, binarize
from prmkit.trace_queries import is_correct, problem_key, score_keys, stored_scores

__all__ = ["STRATEGIES", "QueueEntry", "build_queue", "score_key", "random_order", "uncertainty",
           "convincing_wrong", "disagreement"]

STRATEGIES = Registry("queue strategy", {
    "random": "prmkit.annotate._strategies:random_order",
    "uncertainty": "prmkit.annotate._strategies:uncertainty",
    "convincing_wrong": "prmkit.annotate._strategies:convincing_wrong",
    "disagreement": "prmkit.annotate._strategies:disagreement",
}, group="prmkit.queue_strategies")

#: Strategies that read the PRM's step scores (``random`` needs none).
_SCORED = ("uncertainty", "convincing_wrong", "disagreement")


def score_key(traces: Sequence[Trace], key: str | None) -> str:
    """The PRM whose step scores a strategy reads: ``key``, or the one scorer found on the traces."""
    keys = [k for k in score_keys(traces) if any(k in s.scores for t in traces for s in t.steps)]
    if key is not None:
        if key not in keys:
            raise PrmkitError(f"no step scores from {key!r} on the traces (found: {', '.join(keys) or 'none'}); "
                              "score them first: prmkit score --model PRM IN OUT")
        return key
    if len(keys) != 1:
        raise PrmkitError("the traces have no step scores; score them first: prmkit score --model PRM IN OUT"
                          if not keys else f"the traces have step scores from {', '.join(keys)}: name one "
                          "with --score-key")
    return keys[0]


def random_order(traces: Sequence[Trace], *, seed: int = 0, **_: object) -> list[float]:
    """A seeded shuffle: each trace's priority is a draw of ``random.Random(seed)``."""
    rng = random.Random(seed)
    return [rng.random() for _ in traces]


def uncertainty(traces: Sequence[Trace], *, key: str, **_: object) -> list[float]:
    """Minus the distance to 0.5 of the trace's most uncertain step (a trace without a scored step
    gets -1, last)."""
    out = []
    for t in traces:
        scores = [s for s in stored_scores(t, key) if s is not None]
        out.append(-min(abs(s - 0.5) for s in scores) if scores else -1.0)
    return out


def convincing_wrong(traces: Sequence[Trace], *, key: str, aggregate: str = "min", **_: object) -> list[float]:
    """``1 + score`` for a trace with a wrong final answer (its PRM ``aggregate`` score in [0, 1]),
    0 for the rest (right, or no reference to tell): convincing wrong answers first."""
    from prmkit.scoring import get_aggregator

    agg = get_aggregator(aggregate)
    out = []
    for t in traces:
        score = agg([s for s in stored_scores(t, key) if s is not None]) if is_correct(t) is False else None
        out.append(0.0 if score is None else 1.0 + float(score))
    return out


def disagreement(traces: Sequence[Trace], *, key: str, against: str | None = None, **_: object) -> list[float]:
    """The largest ``|PRM score - other label|`` over a trace's steps, the other label a soft value as
    it is or a hard one binarized (0 okay counts as right); -1 (last) for a trace with no step that
    has both."""
    out = []
    for t in traces:
        gaps = []
        for s in t.steps:
            p = s.scores.get(key)
            lab = (s.label(against) if against is not None
                   else next((x for x in reversed(s.labels) if x.source != "human"), None))
            verdict = None if lab is None else (lab.value if lab.kind == "soft" else binarize(lab))
            if p is not None and verdict is not None:
                gaps.append(abs(p - float(verdict)))
        out.append(max(gaps) if gaps else -1.0)
    return out


@dataclass(frozen=True)
class QueueEntry:
    """A place in the queue: ``index`` into the traces, ``copies`` annotators wanted, the priority."""

    index: int
    copies: int
    priority: float


def build_queue(traces: Sequence[Trace], strategy: str = "random", *, per_problem_cap: int | None = None,
                overlap: float = 0.0, limit: int | None = None, seed: int = 0, key: str | None = None,
                aggregate: str = "min", against: str | None = None) -> list[QueueEntry]:
    """The queue over ``traces``: ordered by ``strategy`` (higher priority first, ties in file order),
    at most ``per_problem_cap`` traces per problem, the first ``limit``, and ``round(overlap * n)`` of
    them (drawn with ``seed``) wanted from two annotators.

    >>> from prmkit.trace import Problem, Step
    >>> ts = [Trace(f"t{i}", Problem("q"), [Step("s", scores={"prm": p})]) for i, p in enumerate([0.9, 0.55, 0.3])]
    >>> [e.index for e in build_queue(ts, "uncertainty")]
    [1, 2, 0]
    >>> [e.index for e in build_queue(ts, "uncertainty", per_problem_cap=1)]
    [1]
    """
    if per_problem_cap is not None and per_problem_cap < 1:
        raise PrmkitError(f"--per-problem-cap must be >= 1, got {per_problem_cap}")
    if not 0.0 <= overlap <= 1.0:
        raise PrmkitError(f"--overlap is a fraction in [0, 1], got {overlap}")
    if limit is not None and limit < 1:
        raise PrmkitError(f"--limit must be >= 1, got {limit}")
    fn = STRATEGIES.load(strategy)
    if strategy in _SCORED or key is not None:
        key = score_key(traces, key)
    priorities = list(fn(traces, key=key, seed=seed, aggregate=aggregate, against=against))
    if len(priorities) != len(traces):
        raise PrmkitError(f"queue strategy {strategy!r} gave {len(priorities)} priorities for {len(traces)} traces")
    order = sorted(range(len(traces)), key=lambda i: -priorities[i])  # stable: ties in file order
    taken: dict[str, int] = {}
    chosen = []
    for i in order:
        p = problem_key(traces[i].problem)
        if per_problem_cap is not None and taken.get(p, 0) >= per_problem_cap:
            continue
        taken[p] = taken.get(p, 0) + 1
        chosen.append(i)
        if limit is not None and len(chosen) >= limit:
            break
    double = set(random.Random(seed + 1).sample(range(len(chosen)), round(overlap * len(chosen))))
    return [QueueEntry(i, 2 if n in double else 1, float(priorities[i])) for n, i in enumerate(chosen)]
