"""Step-level metrics of a PRM's scores against step labels: discrimination and calibration.

A step counts when it has both a score (``step.scores[key]``, read as P(step correct)) and a label
that binarises to right / wrong (:func:`prmkit.trace.binarize`). Over those steps:

- ``auroc``: how well scores rank correct steps above wrong ones (:func:`~prmkit.eval.auroc`,
  correct steps as the positives);
- at ``threshold`` (a step is *predicted wrong* when its score is below it): ``f1_error``, the F1 of
  finding wrong steps (wrong steps are the positive class, as in ProcessBench), ``f1_correct``, the F1
  of the correct steps, and ``accuracy``;
- calibration: ``ece``, the expected calibration error over ``bins`` equal-width bins of [0, 1]
  (the standard definition, Guo et al. 2017: the count-weighted mean over non-empty bins of
  \\|mean score - fraction correct\\|), the Brier score ``mean((score - correct)^2)``, and the
  reliability bins themselves.

A number that is undefined is None: AUROC with one class only, an F1 whose class is neither present
nor predicted, everything on no steps; calibration (``ece``, ``brier``, ``bins = []``) when a score
lies outside [0, 1], since such scores are not probabilities.

>>> m = step_metrics([0.9, 0.8, 0.3, 0.6], [True, True, False, False], bins=2)
>>> m.auroc, round(m.f1_error, 4), m.accuracy, round(m.brier, 6)
(1.0, 0.6667, 0.75, 0.125)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.eval._metrics import f1_score
from prmkit.eval._results import ScorerSteps
from prmkit.eval._stats import auroc
from prmkit.trace import Trace, binarize

__all__ = ["ReliabilityBin", "StepMetrics", "collect_steps", "step_metrics", "step_metrics_for"]


@dataclass
class ReliabilityBin:
    """One equal-width bin of the reliability diagram: scores in ``[lo, hi)`` (the last bin includes
    1.0). ``mean_score`` and ``frac_correct`` are None when the bin is empty."""

    lo: float
    hi: float
    count: int = 0
    mean_score: float | None = None
    frac_correct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "count": self.count, "mean_score": self.mean_score,
                "frac_correct": self.frac_correct}


@dataclass
class StepMetrics:
    """Step-level discrimination and calibration of one scorer (see the module docstring).

    ``positives``: correct steps; ``negatives``: wrong steps. ``error_precision`` /
    ``error_recall``: of the steps predicted wrong, the share that is wrong / of the wrong steps, the
    share predicted wrong (the two halves of ``f1_error``).
    """

    n: int
    positives: int
    negatives: int
    threshold: float
    auroc: float | None = None
    f1_error: float | None = None
    f1_correct: float | None = None
    accuracy: float | None = None
    error_precision: float | None = None
    error_recall: float | None = None
    ece: float | None = None
    brier: float | None = None
    bins: list[ReliabilityBin] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data in the report's ``step_metrics`` shape."""
        return {"n": self.n, "positives": self.positives, "negatives": self.negatives,
                "auroc": self.auroc, "threshold": self.threshold, "f1_error": self.f1_error,
                "f1_correct": self.f1_correct, "accuracy": self.accuracy,
                "error_precision": self.error_precision, "error_recall": self.error_recall,
                "ece": self.ece, "brier": self.brier, "bins": [b.to_dict() for b in self.bins]}

    def section_entry(self) -> ScorerSteps:
        """This scorer's entry of the report's ``step_metrics`` section."""
        return ScorerSteps.from_dict(self.to_dict())

    def lines(self) -> list[str]:
        """One line for a terminal (:meth:`summary`)."""
        return [self.summary()]

    def summary(self) -> str:
        """One line for a log."""
        def f(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3f}"

        return (f"{self.n} steps ({self.negatives} wrong): AUROC {f(self.auroc)}, "
                f"F1(error) {f(self.f1_error)} at {self.threshold:g}, ECE {f(self.ece)}, "
                f"Brier {f(self.brier)}")


def collect_steps(traces: Iterable[Trace], key: str = "prm", label_source: str | None = None,
                  neutral: str = "positive") -> tuple[list[float], list[bool]]:
    """Every step with both a score ``step.scores[key]`` and a binarised label: ``(scores, correct)``.

    The label is the step's latest (from ``label_source`` when given), binarised with ``neutral``
    deciding hard 0 labels (``"ignore"`` leaves those steps out).

    >>> from prmkit.trace import Problem, Step, StepLabel
    >>> steps = [Step("a", labels=[StepLabel(1)], scores={"prm": 0.9}),
    ...          Step("b", labels=[StepLabel(-1)]),                      # not scored
    ...          Step("c", scores={"prm": 0.2})]                         # not labelled
    >>> collect_steps([Trace(id="t", problem=Problem("q"), steps=steps)])
    ([0.9], [True])
    """
    scores: list[float] = []
    correct: list[bool] = []
    for t in traces:
        for step in t.steps:
            s = step.scores.get(key)
            if s is None:
                continue
            verdict = binarize(step.label(label_source), neutral=neutral)
            if verdict is None:
                continue
            scores.append(float(s))
            correct.append(verdict)
    return scores, correct


def step_metrics(scores: Sequence[float], correct: Sequence[bool], threshold: float = 0.5,
                 bins: int = 10) -> StepMetrics:
    """Discrimination and calibration of step ``scores`` (P(step correct)) against ``correct``.

    A step is predicted wrong when its score is below ``threshold``. ``bins`` equal-width bins over
    [0, 1] give the reliability diagram and the ECE (see the module docstring).

    >>> m = step_metrics([0.9, 0.2], [True, False], bins=2)
    >>> m.f1_error, m.f1_correct, round(m.ece, 6), [b.count for b in m.bins]
    (1.0, 1.0, 0.15, [1, 1])
    """
    if len(scores) != len(correct):
        raise PrmkitError(f"{len(scores)} scores for {len(correct)} labels: they must pair up")
    if not isinstance(bins, int) or bins < 1:
        raise PrmkitError(f"bins must be a positive integer, got {bins!r}")
    xs = [float(s) for s in scores]
    ys = [bool(c) for c in correct]
    if any(math.isnan(x) for x in xs):
        raise PrmkitError("a step score is NaN: drop or fix unscored steps before computing metrics")
    n = len(xs)
    pos = sum(ys)
    out = StepMetrics(n=n, positives=pos, negatives=n - pos, threshold=float(threshold))
    edges = [k / bins for k in range(bins + 1)]
    out.bins = [ReliabilityBin(edges[k], edges[k + 1]) for k in range(bins)]
    if n == 0:
        return out

    out.auroc = auroc(xs, ys)
    pred_ok = [x >= threshold for x in xs]
    tp_err = sum(not y and not p for y, p in zip(ys, pred_ok, strict=True))
    fp_err = sum(y and not p for y, p in zip(ys, pred_ok, strict=True))     # correct step flagged as wrong
    fn_err = sum(not y and p for y, p in zip(ys, pred_ok, strict=True))     # wrong step let through
    tp_ok = sum(y and p for y, p in zip(ys, pred_ok, strict=True))
    out.f1_error = f1_score(tp_err, fp_err, fn_err)
    # For the correct class the roles of the two error kinds swap.
    out.f1_correct = f1_score(tp_ok, fn_err, fp_err)
    out.accuracy = (tp_err + tp_ok) / n
    out.error_precision = tp_err / (tp_err + fp_err) if tp_err + fp_err else None
    out.error_recall = tp_err / (tp_err + fn_err) if tp_err + fn_err else None

    if any(not 0.0 <= x <= 1.0 for x in xs):
        out.bins = []   # not probabilities: calibration has no meaning
        return out
    out.brier = sum((x - y) ** 2 for x, y in zip(xs, ys, strict=True)) / n
    sums = [[0, 0.0, 0] for _ in range(bins)]    # count, score sum, correct count
    for x, y in zip(xs, ys, strict=True):
        k = min(int(x * bins), bins - 1)          # 1.0 falls in the last bin
        sums[k][0] += 1
        sums[k][1] += x
        sums[k][2] += y
    ece = 0.0
    for b, (count, ssum, csum) in zip(out.bins, sums, strict=True):
        if count:
            b.count = count
            b.mean_score = ssum / count
            b.frac_correct = csum / count
            ece += count / n * abs(b.mean_score - b.frac_correct)
    out.ece = ece
    return out


def step_metrics_for(traces: Iterable[Trace], key: str = "prm", label_source: str | None = None,
                     threshold: float = 0.5, bins: int = 10, neutral: str = "positive") -> StepMetrics:
    """:func:`step_metrics` on the steps :func:`collect_steps` finds in ``traces``."""
    scores, correct = collect_steps(traces, key=key, label_source=label_source, neutral=neutral)
    return step_metrics(scores, correct, threshold=threshold, bins=bins)
