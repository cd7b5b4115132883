"""``prm``: a step scorer as a monitor — a step scoring below ``threshold`` is flagged.

Any :class:`~prmkit.scoring.StepScorer` serves: a PRM trained by ``prmkit train prm`` on the ``agent``
environment's step labels (``prm:runs/agent-prm``), the ``scripted`` scorer in tests, or an ORM (its
one trace score judges the last step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prmkit.monitor._base import Flag
from prmkit.trace import Trace

__all__ = ["PRMMonitor"]


class PRMMonitor:
    """Flags each step whose score is below ``threshold``. Give a ready ``scorer``, or ``model`` (a
    checkpoint folder) / ``scorer`` (a registered scorer name) with its ``scorer_args``."""

    def __init__(self, model: str | None = None, *, scorer: Any = "model", threshold: float = 0.5,
                 batch_size: int = 8, name: str = "prm", **scorer_args: Any) -> None:
        if isinstance(scorer, str):
            from prmkit.scoring import load_scorer

            scorer = load_scorer(scorer, model, scorer_args, batch_size=batch_size)
        self.scorer = scorer
        self.threshold = float(threshold)
        self.name = name

    def describe(self) -> dict[str, Any]:
        return {"monitor": "prm", "scorer": getattr(self.scorer, "name", type(self.scorer).__name__),
                "kind": getattr(self.scorer, "kind", "prm"), "threshold": self.threshold}

    def flags(self, traces: Sequence[Trace]) -> list[list[Flag]]:
        nonempty = [t for t in traces if t.steps]
        scores = iter(self.scorer.score(nonempty) if nonempty else [])
        out: list[list[Flag]] = []
        for t in traces:
            if not t.steps:
                out.append([])
                continue
            s = next(scores)
            if getattr(self.scorer, "kind", "prm") == "orm":
                s = [None] * (len(t.steps) - 1) + list(s[:1])
            out.append([Flag(i, self.name, f"step score {v:.3f} < {self.threshold:g}", float(v))
                        for i, v in enumerate(s) if v is not None and v < self.threshold])
        return out
