"""**Length bias** (:func:`length_bias_probe`): the trace score against the number of steps, within
each outcome too (long traces are more often wrong, so length and correctness are confounded)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prmkit._result import Record, record_field
from prmkit.eval._doc import ReportDoc
from prmkit.eval._stats import pearson, slope, spearman
from prmkit.eval.probes._base import ProbeContext
from prmkit.eval.probes._common import _TOL, _fmt
from prmkit.scoring import get_aggregator, trace_score
from prmkit.trace import Trace
from prmkit.trace_queries import is_correct, stored_scores

__all__ = ["LengthBiasResult", "LengthRow", "OutcomeCorrelation", "length_bias_probe", "LengthBiasProbe"]


@dataclass
class LengthRow(Record):
    """The traces of one step count: how many, and their mean score."""

    steps: int | None = None
    n: int | None = None
    mean_score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class OutcomeCorrelation(Record):
    """Spearman's rho of score and step count within one outcome, over ``n`` traces."""

    n: int | None = None
    spearman: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class LengthBiasResult(Record):
    """The result of :func:`length_bias_probe` (a :class:`~prmkit._result.Record`: its ``to_dict`` is
    the probe's part of the report, ``from_dict`` reads it back). ``by_length``: a :class:`LengthRow`
    per step count; ``within_outcome``: ``correct`` / ``incorrect`` -> :class:`OutcomeCorrelation`;
    ``measured``: False when no outcome group could show the bias (``failed`` None)."""

    aggregate: str | None = None
    n: int | None = None
    pearson: float | None = None
    spearman: float | None = None
    slope: float | None = None
    by_length: list[LengthRow] = record_field(records=LengthRow, factory=list)
    within_outcome: dict[str, OutcomeCorrelation] = record_field(by_name=OutcomeCorrelation, factory=dict)
    failed: bool | None = None
    measured: bool | None = None
    criterion: str | None = None
    key: str | None = "prm"
    extra: dict[str, Any] = field(default_factory=dict)


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
    by_length = [LengthRow(n, len(v), sum(v) / len(v)) for n, v in sorted(by.items())]
    within: dict[str, OutcomeCorrelation] = {}
    why_not: list[str] = []
    judged: dict[str, OutcomeCorrelation] = {}
    for name, want in (("correct", True), ("incorrect", False)):
        sub = [(float(n), s) for n, s, ok in rows if ok is want]
        within[name] = OutcomeCorrelation(len(sub), spearman([a for a, _ in sub], [b for _, b in sub]))
        common = max(Counter(n for n, _ in sub).values(), default=0)
        if len(sub) < min_n:
            why_not.append(f"{name}: {len(sub)} traces")
        elif common > max_same_length * len(sub) + _TOL or within[name].spearman is None:
            why_not.append(f"{name}: {common} of {len(sub)} traces have the same length")
        else:
            judged[name] = within[name]
    rule = (f"fails when, within right-answer or within wrong-answer traces ({min_n} or more, at most "
            f"{max_same_length:.0%} of one length), the Spearman correlation of the '{aggregate}' score "
            f"with the number of steps is {max_abs_spearman} or more in size")
    failed: bool | None = any(abs(v.spearman) >= max_abs_spearman - _TOL for v in judged.values())  # type: ignore[arg-type]
    if not judged:
        failed = None
        criterion = (f"cannot measure: no outcome group has {min_n} traces of varied length "
                     f"({'; '.join(why_not)}); " + rule)
    else:
        criterion = rule + "; " + ", ".join(f"{k} {_fmt(v.spearman)} (n={v.n})" for k, v in judged.items())
    return LengthBiasResult(aggregate=getattr(agg, "spec", aggregate), n=len(rows),
                            pearson=pearson(xs, ys), spearman=spearman(xs, ys), slope=slope(xs, ys),
                            by_length=by_length, within_outcome=within, failed=failed,
                            measured=failed is not None, criterion=criterion, key=key)


class LengthBiasProbe:
    """:func:`length_bias_probe` on ``ctx.traces`` with ``ctx.key`` and ``ctx.aggregate``."""

    name = "length_bias"
    title = "length bias: does the score follow the number of steps?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        return length_bias_probe(ctx.traces, key=ctx.key, aggregate=ctx.aggregate).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"Spearman {ReportDoc.f3(LengthBiasResult.from_dict(result).spearman)}"

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        r = LengthBiasResult.from_dict(result, where="probes.length_bias")  # the report hands it as JSON
        doc.para(f"Aggregate {r.aggregate or '—'} over {doc.count(r.n)} traces: "
                 f"Pearson {doc.f3(r.pearson)}, Spearman {doc.f3(r.spearman)}, "
                 f"slope {doc.num(r.slope)} per step.")
        within = {k: v for k, v in (r.within_outcome or {}).items() if isinstance(v, OutcomeCorrelation)}
        doc.table(["Within outcome", "Traces", "Spearman"],
                  [[k, doc.count(v.n), doc.f3(v.spearman)] for k, v in within.items()])
        doc.table(["Steps", "Traces", "Mean score"],
                  [[doc.count(row.steps), doc.count(row.n), doc.f3(row.mean_score)]
                   for row in r.by_length or [] if isinstance(row, LengthRow)])
        if "length_bias" in figures:
            doc.figure("length_bias", "Mean trace score per number of steps")
        return ["aggregate", "n", "pearson", "spearman", "slope", "by_length", "within_outcome"]

    def figures(self, result: Mapping[str, Any]) -> dict[str, bytes | None]:
        from prmkit.eval._plots import plot_length_bias

        return {"length_bias": plot_length_bias(result)}
