"""Write a scorer's results into the traces: step scores and one aggregated trace score."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prmkit.scoring._aggregate import Aggregator, get_aggregator
from prmkit.scoring._protocol import StepScorer
from prmkit.trace import Trace

__all__ = ["score_traces"]


def score_traces(scorer: StepScorer, traces: Sequence[Trace], key: str | None = None, *,
                 aggregate: str | Aggregator | Callable[[Sequence[float | None]], float | None] = "min",
                 ) -> list[Trace]:
    """Score ``traces`` and store the results on them, as :meth:`RewardModel.score_traces` does, plus
    the aggregated trace score:

    - PRM: ``step.scores[key]`` for every scored step (steps cut by ``max_length`` get none) and
      ``trace.meta["scores"][f"{key}:{aggregate}"]`` (``"prm:min"``; absent when no step was scored);
    - ORM: ``trace.meta["scores"][key]``.

    ``key`` defaults to the scorer's ``kind``. A ``score`` provenance entry names the scorer and the
    aggregator. Returns ``traces``.

    >>> from prmkit.trace import Problem, Step
    >>> class Fixed:
    ...     kind, name = "prm", "fixed"
    ...     def score(self, traces):
    ...         return [[0.9, 0.2, None] for _ in traces]
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b"), Step("c")])
    >>> _ = score_traces(Fixed(), [t], aggregate="mean")
    >>> [s.scores for s in t.steps], t.meta["scores"]
    ([{'prm': 0.9}, {'prm': 0.2}, {}], {'prm:mean': 0.55})
    """
    key = key or scorer.kind
    agg = get_aggregator(aggregate)
    agg_name = agg.spec if isinstance(agg, Aggregator) else (aggregate if isinstance(aggregate, str)
                                                              else getattr(agg, "__name__", "custom"))
    describe = getattr(scorer, "describe", None)
    info: dict[str, Any] = describe() if callable(describe) else {"model": scorer.name, "kind": scorer.kind}
    for t, s in zip(traces, scorer.score(traces), strict=True):
        scores = t.meta.setdefault("scores", {})
        if scorer.kind == "prm":
            for step, v in zip(t.steps, s, strict=True):
                if v is not None:
                    step.scores[key] = v
            value = agg(s)
            if value is not None:
                scores[f"{key}:{agg_name}"] = value
        elif s and s[0] is not None:
            scores[key] = s[0]
        if not scores:
            del t.meta["scores"]
        t.add_provenance("score", key, {**info, "aggregate": agg_name if scorer.kind == "prm" else None})
    return list(traces)
