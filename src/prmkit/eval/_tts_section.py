"""The report's test-time-compute section (``tts``, what ``prmkit tts`` writes; typed as
:class:`~prmkit.search.TtsResult`): accuracy against compute, one curve per method, verifier and
aggregator, each point a budget N with its 95% Wilson interval over the problems.

Compute is what the cell measured per problem: tokens generated (the policy's cost, the x axis of the
figure) and tokens scored (the verifier's), so methods whose budgets N spend differently still line up
on what they cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prmkit.eval._doc import _DASH, ReportDoc, _ci, _int
from prmkit.eval._stats import wilson_interval
from prmkit.search import TtsCell, TtsResult

__all__ = ["TtsPoint", "TtsCurve", "tts_curves", "render_tts"]


@dataclass
class TtsPoint:
    """One budget of a curve: accuracy ``right / judged`` with its Wilson interval, and the tokens
    generated and scored per problem."""

    n: int
    right: int
    judged: int
    generated: float | None
    scored: float | None
    acc: float | None = None
    lo: float | None = None
    hi: float | None = None


@dataclass
class TtsCurve:
    """A method with one verifier and aggregator (``majority``: neither) over the budgets."""

    method: str
    verifier: str | None
    aggregate: str | None
    points: list[TtsPoint] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.method if self.verifier is None else f"{self.method} · {self.verifier} ({self.aggregate})"


def tts_curves(section: TtsResult) -> list[TtsCurve]:
    """The section's cells as curves, in the order the cells come, points by increasing N."""
    curves: dict[tuple, TtsCurve] = {}
    for c in section.cells or []:
        if not isinstance(c, TtsCell) or c.method is None or c.n is None:
            continue
        key = (c.method, c.verifier, c.aggregate)
        curve = curves.setdefault(key, TtsCurve(*key))
        right, judged = int(c.right or 0), int(c.judged or 0)
        p = TtsPoint(c.n, right, judged, c.per_problem("generated_tokens"), c.per_problem("scored_tokens"))
        if judged:
            p.acc = right / judged
            p.lo, p.hi = wilson_interval(right, judged)
        curve.points.append(p)
    for curve in curves.values():
        curve.points.sort(key=lambda p: p.n)
    return list(curves.values())


def _tokens(x: float | None) -> str:
    return _DASH if x is None else f"{x:.0f}"


def render_tts(doc: ReportDoc, section: TtsResult, figs: set[str]) -> None:
    """The section: what ran, the figure, then one table row per cell."""
    bits = [f"recipe {section.recipe}" if section.recipe else None,
            f"{_int(section.problems)} problems" if section.problems is not None else None,
            f"policy {section.policy}" if section.policy else None,
            "budgets N = " + ", ".join(str(n) for n in section.budgets or []) if section.budgets else None]
    doc.para("; ".join(b for b in bits if b) + ". Accuracy with its 95% Wilson interval over the "
             "problems; tokens are per problem, as the cell spent them (best-of-N, weighted best-of-N "
             "and majority share their samples: a smaller N is the first N of the largest).")
    if section.verifiers:
        doc.bullets([[("b", label), f": {spec}"] for label, spec in section.verifiers.items()])
    if "tts" in figs:
        doc.figure("tts", "Accuracy against tokens generated per problem (log2 axis), one panel per "
                   "verifier; each point a budget N, with its 95% Wilson interval")
    rows = []
    for curve in tts_curves(section):
        for p in curve.points:
            rows.append([("b", curve.method), curve.verifier or _DASH, curve.aggregate or _DASH, str(p.n),
                         _ci(p.acc, p.lo, p.hi), f"{p.right}/{p.judged}",
                         _tokens(p.generated), _tokens(p.scored)])
    doc.table(["Method", "Verifier", "Aggregate", "N", "Accuracy [95% Wilson]", "Right / judged",
               "Generated tokens / problem", "Scored tokens / problem"], rows)
