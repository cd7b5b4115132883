"""The one interface every verifier offers search, selection and RL: ``score(traces)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from prmkit.trace import Trace

__all__ = ["StepScorer"]


@runtime_checkable
class StepScorer(Protocol):
    """A batched verifier of traces. :class:`~prmkit.models.RewardModel` satisfies it, and so does
    :class:`~prmkit.scoring.PrefixCachingScorer`.

    ``kind`` is ``"prm"`` or ``"orm"``; ``name`` says which model produced the scores (provenance).
    ``score`` returns, per trace, P(correct) of every step (PRM; ``None`` for steps cut by
    ``max_length``) or a one-element list with P(trace correct) (ORM).
    """

    kind: str
    name: str

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]: ...
