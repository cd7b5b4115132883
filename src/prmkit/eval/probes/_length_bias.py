"""**Length bias** (:func:`length_bias_probe`): the trace score against the number of steps, within
each outcome too (long traces are more often wrong, so length and correctness are confounded)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prmkit.eval._doc import ReportDoc
from prmkit.eval._stats import pearson, slope, spearman
from prmkit.eval.probes._base import ProbeContext
from prmkit.eval.probes._common import _TOL, _fmt
from prmkit.scoring import get_aggregator, trace_score
from prmkit.trace import Trace
from prmkit.trace_queries import is_correct, stored_scores

__all__ = ["LengthBiasResult", "length_bias_probe", "LengthBiasProbe"]


@dataclass
class LengthBiasResult:
    """The result of :func:`length_bias_probe`. ``by_length``: ``{"steps", "n", "mean_score"}`` per
    step count; ``within_outcome``: ``{"correct": {"n", "spearman"}, "incorrect": {...}}``."""

    aggregate: str
    n: int
    pearson: float | None
    spearman: float | None
    slope: float | None
    by_length: list[dict[str, Any]]
    within_outcome: dict[str, dict[str, Any]]
    failed: bool | None
    criterion: str
    key: str = "prm"

    def to_dict(self) -> dict[str, Any]:
        return {"aggregate": self.aggregate, "n": self.n, "pearson": self.pearson,
                "spearman": self.spearman, "slope": self.slope,
                "by_length": [dict(r) for r in self.by_length],
                "within_outcome": {k: dict(v) for k, v in self.within_outcome.items()},
                "failed": self.failed, "measured": self.failed is not None, "criterion": self.criterion,
                "key": self.key}


def length_bias_probe(traces: Iterable[Trace], key: str = "prm", *, aggregate: str = "min",
                      min_n: int = 10, max_abs_spearman: float = 0.3,
                      max_same_length: float = 0.8) -> LengthBiasResult:
    """The trace score (``aggregate`` of the stored step scores under ``key``, or an ORM's trace
    score) against the number of steps: Pearson's r, Spearman's rho (average ranks for ties), the
    least-squares slope (score per step), the mean score per step count, and Spearman's rho within
    right-answer and within wrong-answer traces (:func:`~prmkit.trace_queries.is_correct`).

    ``failed``: within either outcome, with at least ``min_n`` (10) traces, ``|rho| >=
    max_abs_spearman`` (0.3). Within an outcome, because over all traces a good PRM also scores long
    traces lower: they are more often wrong. Traces without a score are left out.

    An outcome group is measured only when its lengths vary: at least ``min_n`` traces, and no one
    length held by more than ``max_same_length`` (80%) of them (240 traces of 4 steps among 256 make
    a correlation of the other 16, not of length). With no group measured the probe cannot measure:
    ``failed`` is None and ``criterion`` says why, group by group.

    >>> from prmkit.trace import Problem, Step
    >>> ts = [Trace(id=str(n), problem=Problem("q"), steps=[Step("s", scores={"prm": 1 - n / 4})] * n)
    ...       for n in (1, 2, 3)]
    >>> r = length_bias_probe(ts)  # three traces: numbers, but too few to judge
    >>> r.spearman, r.slope, r.failed
    (-1.0, -0.25, None)
    """
    agg = get_aggregator(aggregate)
    rows: list[tuple[int, float, bool | None]] = []
    for t in traces:
        score = trace_score(stored_scores(t, key), agg)
        if score is not None:
            rows.append((len(t.steps), float(score), is_correct(t)))
    xs = [float(n) for n, _, _ in rows]
    ys = [s for _, s, _ in rows]
    by: dict[int, list[float]] = {}
    for n, s, _ in rows:
        by.setdefault(n, []).append(s)
    by_length = [{"steps": n, "n": len(v), "mean_score": sum(v) / len(v)} for n, v in sorted(by.items())]
    within: dict[str, dict[str, Any]] = {}
    why_not: list[str] = []
    judged: dict[str, dict[str, Any]] = {}
    for name, want in (("correct", True), ("incorrect", False)):
        sub = [(float(n), s) for n, s, ok in rows if ok is want]
        within[name] = {"n": len(sub), "spearman": spearman([a for a, _ in sub], [b for _, b in sub])}
        common = max(Counter(n for n, _ in sub).values(), default=0)
        if len(sub) < min_n:
            why_not.append(f"{name}: {len(sub)} traces")
        elif common > max_same_length * len(sub) + _TOL or within[name]["spearman"] is None:
            why_not.append(f"{name}: {common} of {len(sub)} traces have the same length")
        else:
            judged[name] = within[name]
    rule = (f"fails when, within right-answer or within wrong-answer traces ({min_n} or more, at most "
            f"{max_same_length:.0%} of one length), the Spearman correlation of the '{aggregate}' score "
            f"with the number of steps is {max_abs_spearman} or more in size")
    failed: bool | None = any(abs(v["spearman"]) >= max_abs_spearman - _TOL for v in judged.values())
    if not judged:
        failed = None
        criterion = (f"cannot measure: no outcome group has {min_n} traces of varied length "
                     f"({'; '.join(why_not)}); " + rule)
    else:
        criterion = rule + "; " + ", ".join(f"{k} {_fmt(v['spearman'])} (n={v['n']})"
                                            for k, v in judged.items())
    return LengthBiasResult(aggregate=getattr(agg, "spec", aggregate), n=len(rows),
                            pearson=pearson(xs, ys), spearman=spearman(xs, ys), slope=slope(xs, ys),
                            by_length=by_length, within_outcome=within, failed=failed,
                            criterion=criterion, key=key)


class LengthBiasProbe:
    """:func:`length_bias_probe` on ``ctx.traces`` with ``ctx.key`` and ``ctx.aggregate``."""

    name = "length_bias"
    title = "length bias: does the score follow the number of steps?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        return length_bias_probe(ctx.traces, key=ctx.key, aggregate=ctx.aggregate).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"Spearman {ReportDoc.f3(result.get('spearman'))}"

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        doc.para(f"Aggregate {result.get('aggregate') or '—'} over {doc.count(result.get('n'))} traces: "
                 f"Pearson {doc.f3(result.get('pearson'))}, Spearman {doc.f3(result.get('spearman'))}, "
                 f"slope {doc.num(result.get('slope'))} per step.")
        within = {k: v for k, v in (result.get("within_outcome") or {}).items() if isinstance(v, Mapping)}
        doc.table(["Within outcome", "Traces", "Spearman"],
                  [[k, doc.count(v.get("n")), doc.f3(v.get("spearman"))] for k, v in within.items()])
        doc.table(["Steps", "Traces", "Mean score"],
                  [[doc.count(r.get("steps")), doc.count(r.get("n")), doc.f3(r.get("mean_score"))]
                   for r in result.get("by_length") or [] if isinstance(r, Mapping)])
        if "length_bias" in figures:
            doc.figure("length_bias", "Mean trace score per number of steps")
        return ["aggregate", "n", "pearson", "spearman", "slope", "by_length", "within_outcome"]

    def figures(self, result: Mapping[str, Any]) -> dict[str, bytes | None]:
        from prmkit.eval._plots import plot_length_bias

        return {"length_bias": plot_length_bias(result)}
