"""**Process collapse** (:func:`collapse_probe`): a PRM trained on outcome-derived labels can turn
into an outcome scorer in disguise: it flags the invalid steps of wrong-answer traces, but not those of
traces that reach the right answer through an invalid step."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prmkit._result import Record, record_field
from prmkit.eval._doc import ReportDoc
from prmkit.eval._stats import auroc
from prmkit.eval.probes._base import ProbeContext
from prmkit.eval.probes._common import _TOL, _fmt, _step_auroc, _step_pairs
from prmkit.scoring import trace_score
from prmkit.trace import Trace
from prmkit.trace_queries import is_correct, stored_scores

__all__ = ["OutcomeGroup", "CollapseResult", "collapse_probe", "CollapseProbe"]


@dataclass
class OutcomeGroup(Record):
    """Step statistics of the traces with one final-answer outcome: ``traces`` (with at least one
    labelled, scored step), ``invalid_steps`` / ``valid_steps`` (labelled and scored), the step AUROC
    (valid = positive) and ``flag_rate``, the fraction of invalid steps scored below the threshold."""

    traces: int | None = None
    invalid_steps: int | None = None
    valid_steps: int | None = None
    auroc: float | None = None
    flag_rate: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CollapseResult(Record):
    """The result of :func:`collapse_probe` (a :class:`~prmkit._result.Record`: its ``to_dict`` is the
    probe's part of the report, ``from_dict`` reads it back); ``measured`` is False when a group has
    too few steps to judge (``failed`` None)."""

    right_answer: OutcomeGroup | None = record_field(record=OutcomeGroup)
    wrong_answer: OutcomeGroup | None = record_field(record=OutcomeGroup)
    gap: float | None = None
    outcome_auroc: float | None = None
    step_auroc: float | None = None
    failed: bool | None = None
    measured: bool | None = None
    criterion: str | None = None
    key: str | None = "prm"
    threshold: float | None = 0.5
    extra: dict[str, Any] = field(default_factory=dict)


def _group(rows: list[list[tuple[float, bool]]], threshold: float) -> OutcomeGroup:
    pairs = [p for r in rows for p in r]
    invalid = [s for s, v in pairs if not v]
    return OutcomeGroup(traces=sum(1 for r in rows if r), invalid_steps=len(invalid),
                        valid_steps=len(pairs) - len(invalid), auroc=_step_auroc(pairs),
                        flag_rate=sum(s < threshold for s in invalid) / len(invalid) if invalid else None)


def collapse_probe(traces: Iterable[Trace], key: str = "prm", *, label_source: str | None = None,
                   threshold: float = 0.5, neutral: str = "positive", min_steps: int = 5,
                   chance: float = 0.6, min_gap: float = 0.1) -> CollapseResult:
    """Does the PRM judge steps, or only outcomes? From traces that carry step scores (``key``) and
    step labels (``label_source``, latest label when None; neutral labels by ``neutral``):

    - per final-answer outcome (``right_answer``: :func:`~prmkit.trace_queries.is_correct` is True;
      ``wrong_answer``: False; traces with neither are left out): the step AUROC and the fraction of
      invalid steps scored below ``threshold``;
    - ``gap``: wrong-answer AUROC minus right-answer AUROC;
    - ``outcome_auroc``: the trace's lowest step score as a predictor of a right final answer;
    - ``step_auroc``: all labelled, scored steps together.

    ``failed``: the right-answer AUROC is below ``chance`` (0.6) while the wrong-answer AUROC is at
    least ``min_gap`` (0.1) higher: invalid steps are caught only when the answer is wrong too, the
    mark of a PRM that learnt outcomes. Judged only when each group has at least ``min_steps``
    invalid and ``min_steps`` valid steps (fewer make the AUROC noise); otherwise it cannot measure:
    ``failed`` is None and ``criterion`` says why.

    >>> from prmkit.trace import Problem, Step, StepLabel
    >>> def tr(i, outcome, rows):
    ...     return Trace(id=str(i), problem=Problem("q"), outcome=outcome, steps=[
    ...         Step(f"s{k}", labels=[StepLabel(v)], scores={"prm": p}) for k, (v, p) in enumerate(rows)])
    >>> r = collapse_probe([tr(0, "correct", [(1, 0.9), (-1, 0.8)]),
    ...                     tr(1, "incorrect", [(1, 0.9), (-1, 0.2)])], min_steps=1)
    >>> r.right_answer.auroc, r.wrong_answer.auroc, r.gap, r.failed
    (1.0, 1.0, 0.0, False)
    """
    right: list[list[tuple[float, bool]]] = []
    wrong: list[list[tuple[float, bool]]] = []
    mins: list[float] = []
    outcomes: list[bool] = []
    for t in traces:
        ok = is_correct(t)
        if ok is None:
            continue
        (right if ok else wrong).append(_step_pairs(t, key, label_source, neutral))
        lowest = trace_score(stored_scores(t, key), "min")
        if lowest is not None:
            mins.append(lowest)
            outcomes.append(ok)
    r, w = _group(right, threshold), _group(wrong, threshold)
    gap = w.auroc - r.auroc if w.auroc is not None and r.auroc is not None else None
    step_auroc = _step_auroc([p for rows in (right, wrong) for row in rows for p in row])
    rule = (f"fails when the step AUROC of right-answer traces is below {chance} while that of "
            f"wrong-answer traces is at least {min_gap} higher (invalid steps caught only when the "
            "answer is wrong too)")
    short = [name for name, g in (("right-answer", r), ("wrong-answer", w))
             if g.invalid_steps < min_steps or g.valid_steps < min_steps or g.auroc is None]
    failed: bool | None
    if short:
        failed = None
        criterion = (f"cannot measure: {' and '.join(short)} traces have fewer than {min_steps} invalid "
                     f"or valid labelled, scored steps; " + rule)
    else:
        failed = r.auroc is not None and gap is not None and r.auroc < chance and gap >= min_gap - _TOL
        criterion = rule + f"; right {_fmt(r.auroc)}, wrong {_fmt(w.auroc)}"
    return CollapseResult(right_answer=r, wrong_answer=w, gap=gap,
                          outcome_auroc=auroc(mins, outcomes) if mins else None, step_auroc=step_auroc,
                          failed=failed, measured=failed is not None, criterion=criterion, key=key,
                          threshold=threshold)


class CollapseProbe:
    """:func:`collapse_probe` on ``ctx.traces`` with ``ctx.key`` and ``ctx.label_source``."""

    name = "collapse"
    title = "process collapse: are invalid steps caught when the answer is right?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        return collapse_probe(ctx.traces, key=ctx.key, label_source=ctx.label_source).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"gap {ReportDoc.f3(CollapseResult.from_dict(result).gap)}"

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        r = CollapseResult.from_dict(result, where="probes.collapse")  # the report hands it as JSON
        doc.table(["Answer", "Traces", "Invalid steps", "Valid steps", "AUROC", "Flag rate"],
                  [[sub, doc.count(g.traces), doc.count(g.invalid_steps), doc.count(g.valid_steps),
                    doc.f3(g.auroc), doc.pct(g.flag_rate)]
                   for sub, g in (("right_answer", r.right_answer), ("wrong_answer", r.wrong_answer))
                   if isinstance(g, OutcomeGroup)])
        doc.para(f"Gap {doc.f3(r.gap)}; outcome AUROC {doc.f3(r.outcome_auroc)}; "
                 f"step AUROC {doc.f3(r.step_auroc)}.")
        return ["right_answer", "wrong_answer", "gap", "outcome_auroc", "step_auroc"]
