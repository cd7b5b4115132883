"""Scores already stored on traces, served as a scorer: recombine or check them without a model.

A scored file holds each step's scores under a key (``step.scores["prm"]``). :class:`StoredScorer`
hands them back through the :class:`~prmkit.scoring.StepScorer` interface, so whatever takes a
scorer can take them: a calculator check of a PRM's scores after the fact
(``CalculatorScorer(StoredScorer("prm"))``), or the product of two verifiers' step scores
(``StoredScorer("prm", "likelihood")``), evaluated with the same best-of-N as a model — and the model
is run once, not once per combination.

>>> from prmkit.trace import Problem, Step, Trace
>>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a", scores={"prm": 0.5, "lm": 0.5}),
...                                                Step("b", scores={"prm": 0.8})])
>>> StoredScorer("prm").score([t])
[[0.5, 0.8]]
>>> StoredScorer("prm", "lm").score([t])  # a step one key left unscored keeps the other's score
[[0.25, 0.8]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from prmkit.errors import PrmkitError
from prmkit.trace import Trace

__all__ = ["StoredScorer"]


class StoredScorer:
    """A PRM whose step scores are the product of the scores stored under ``keys`` (see the module
    docs). A step that no key scored gets None, as a step a model cut off. ``missing="error"``
    refuses a trace where no step carries any of the keys (scores asked of an unscored file);
    ``missing="none"`` gives such a trace all None."""

    kind = "prm"

    def __init__(self, *keys: str, missing: str = "error") -> None:
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise PrmkitError(f"StoredScorer needs at least one score key, got {keys!r}")
        if missing not in ("error", "none"):
            raise PrmkitError(f"missing must be 'error' or 'none', got {missing!r}")
        self.keys = tuple(keys)
        self.missing = missing
        self.name = "×".join(self.keys)

    def _row(self, trace: Trace) -> list[float | None]:
        row: list[float | None] = []
        for step in trace.steps:
            vals = [step.scores[k] for k in self.keys if step.scores.get(k) is not None]
            row.append(float(math.prod(vals)) if vals else None)
        if self.missing == "error" and trace.steps and all(v is None for v in row):
            raise PrmkitError(f"trace {trace.id}: no step has scores under {' or '.join(map(repr, self.keys))}"
                              f" (score the file first)")
        return row

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        """Per trace: one score per step."""
        return [self._row(t) for t in traces]
