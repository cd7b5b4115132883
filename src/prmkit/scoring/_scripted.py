"""``scripted``: a deterministic mock verifier for tests and examples — a real scorer.

Scores come from

- a dict keyed by step text (a PRM scores each step by its text; an ORM scores a trace by its last
  step's text); a text not in it gets ``default``;
- a list of per-trace score lists, served in turn (cycling), like ``ScriptedPolicy``'s completions;
- a callable ``fn(trace) -> list[float | None]``.

Every call is recorded in ``calls`` (the traces' step texts), so tests can check what was scored.
``delay`` (seconds per trace, default 0) stands in for a slow model, so a fault test can kill
``prmkit score --scorer scripted -s delay=0.05`` while it writes; it changes no score.

>>> from prmkit.trace import Problem, Step, Trace
>>> s = ScriptedScorer({"1 + 1 = 2": 0.9, "The answer is 2.": 0.8})
>>> t = Trace(id="t", problem=Problem("1 + 1?"), steps=[Step("1 + 1 = 2"), Step("The answer is 2.")])
>>> s.score([t])
[[0.9, 0.8]]
>>> ScriptedScorer({"The answer is 2.": 0.7}, kind="orm").score([t])
[[0.7]]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.trace import Trace

__all__ = ["ScriptedScorer"]

ScoreList = list[float | None]


def _check_score(value: Any, what: str) -> float | None:
    """``value`` as a score (None, or a number in [0, 1]); anything else is one line naming ``what``."""
    import math

    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and 0.0 <= value <= 1.0
    if not ok:
        raise PrmkitError(f"scripted scorer: {what} must be a score in [0, 1] (or null), got {value!r}")
    return float(value)


class ScriptedScorer:
    """Replays scripted scores (see the module docs). ``kind`` is ``"prm"`` or ``"orm"``; ``delay``:
    seconds of sleep per trace scored (a slow model, for fault tests)."""

    def __init__(self, scores: Mapping[str, float | None] | Sequence[Sequence[float | None]]
                 | Callable[[Trace], Sequence[float | None]], *, kind: str = "prm",
                 name: str = "scripted", default: float | None = None, delay: float = 0.0) -> None:
        if kind not in ("prm", "orm"):
            raise PrmkitError(f"kind must be 'prm' or 'orm', got {kind!r}")
        if not callable(scores) and not isinstance(scores, Mapping) and not scores:
            raise PrmkitError("scripted scorer needs at least one score list")
        if isinstance(scores, Mapping):
            for text, v in scores.items():
                _check_score(v, f"the score of {text!r}")
        self.scores = scores
        self.kind = kind
        self.name = name
        self.default = _check_score(default, "default")
        self.delay = float(delay)
        self.served = 0
        #: The step texts of every trace scored, one list per ``score`` call.
        self.calls: list[list[list[str]]] = []

    def _one(self, trace: Trace) -> ScoreList:
        i = self.served
        self.served += 1
        if callable(self.scores):
            return list(self.scores(trace))
        if isinstance(self.scores, Mapping):
            texts = [s.text for s in trace.steps]
            if self.kind == "orm":
                texts = texts[-1:]
            return [self.scores.get(t, self.default) for t in texts]
        return list(self.scores[i % len(self.scores)])

    def score(self, traces: Sequence[Trace]) -> list[ScoreList]:
        """Per trace: one score per step (PRM) or a one-element list (ORM)."""
        self.calls.append([[s.text for s in t.steps] for t in traces])
        out = []
        for t in traces:
            if self.delay > 0:
                time.sleep(self.delay)
            s = self._one(t)
            if self.kind == "orm" and len(s) != 1:
                raise PrmkitError(f"scripted ORM: trace {t.id!r} got {len(s)} scores, not one")
            out.append(s)
        return out

    def describe(self) -> dict[str, Any]:
        """The scorer's settings, for provenance."""
        return {"backend": "scripted", "name": self.name, "kind": self.kind}
