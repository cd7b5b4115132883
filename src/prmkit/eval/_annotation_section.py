"""The report's human-labels section (``annotation``: what ``prmkit annotate summary --results FILE``
writes from a labeling database): progress, agreement and cost of the human step labels.

Agreement is Fleiss' kappa over the steps two annotators rated (``prmkit annotate queue --overlap``
asks for them), with the raw agreement beside it and Cohen's kappa per pair of annotators; cost is the
time the labeling page measured, from showing a step to its rating: seconds per step label and labels
per hour of that time, and the time spent on whole traces (reading the problem included). The fields
are what a labeling database's summary holds: :class:`prmkit.annotate.AnnotationSummary` is this
section with the longer lines a terminal shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from prmkit._result import Record, record_field, register_result
from prmkit.eval._doc import _DASH, ReportDoc, _bad, _f3, _int, _pct

__all__ = ["AnnotationSection", "AnnotatorRow", "AnnotatorPair", "render_annotation"]


@dataclass
class AnnotatorRow(Record):
    """One annotator's work: traces finished, step labels, seconds on steps and on traces, flags."""

    kind: ClassVar[str] = "annotator"
    name: str = ""
    traces_done: int = 0
    labels: int = 0
    step_seconds: float = 0.0
    trace_seconds: float = 0.0
    flagged: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AnnotatorPair(Record):
    """Cohen's kappa of two annotators over the steps both rated (None: undefined)."""

    kind: ClassVar[str] = "pair_agreement"
    a: str = ""
    b: str = ""
    steps: int = 0
    kappa: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@register_result
@dataclass
class AnnotationSection(Record):
    """Section ``annotation``: progress, agreement (kappa) and cost of a labeling database.

    >>> s = AnnotationSection.from_dict({"labels": 120, "seconds_per_label": 4.0, "labels_per_hour": 900.0})
    >>> s.labels, s.labels_per_hour, s.agreement is None
    (120, 900.0, True)
    """

    kind: ClassVar[str] = "annotation"
    db: str | None = record_field(omit_none=True)
    label_source: str = "human"
    items: int = 0
    queued: int = 0
    traces_done: int = 0
    labels: int = 0
    flagged: int = 0
    double_labelled_steps: int = 0
    agreement: float | None = None
    raw_agreement: float | None = None
    seconds_per_label: float | None = None
    labels_per_hour: float | None = None
    trace_hours: float = 0.0
    annotators: list[AnnotatorRow] = record_field(records=AnnotatorRow, factory=list)
    pairs: list[AnnotatorPair] = record_field(records=AnnotatorPair, factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"{self.labels} {self.label_source} step labels on {self.traces_done} traces; Fleiss' kappa "
                f"{_f3(self.agreement)} over {self.double_labelled_steps} double-labelled steps; "
                f"{_seconds(self.seconds_per_label)} s per step label, {_per_hour(self.labels_per_hour)} labels per hour"]


def _seconds(x: Any) -> str:
    return _DASH if _bad(x) else f"{x:.1f}"


def _per_hour(x: Any) -> str:
    return _DASH if _bad(x) else f"{x:.0f}"


def render_annotation(doc: ReportDoc, section: AnnotationSection, figs: set[str]) -> None:
    """The section: what the database holds, agreement and cost, then one row per annotator and per
    pair of annotators."""
    where = f" (labeling database {section.db})" if section.db else ""
    doc.para(f"{_int(section.items)} traces stored{where}, {_int(section.queued)} queued, "
             f"{_int(section.traces_done)} finished by an annotator; {_int(section.labels)} "
             f"{section.label_source} step labels from {len(section.annotators)} annotators; "
             f"{_int(section.flagged)} traces flagged as unclear or a bad problem.")
    doc.table(["Measure", "Value"], [
        ["Fleiss' kappa (steps rated by two annotators)",
         f"{_f3(section.agreement)} over {_int(section.double_labelled_steps)} steps"],
        ["Raw agreement on those steps", _pct(section.raw_agreement)],
        ["Seconds per step label", _seconds(section.seconds_per_label)],
        ["Step labels per hour", _per_hour(section.labels_per_hour)],
        ["Minutes on whole traces", _seconds(None if _bad(section.trace_hours) else section.trace_hours * 60)],
    ])
    doc.para(("em", "Time is what the labeling page measured, from showing a step to its rating (one "
                    "rating is capped at an hour); kappa is — when no step was rated twice or the raters "
                    "used one value only."), cls="note")
    if section.annotators:
        doc.table(["Annotator", "Traces finished", "Step labels", "Seconds on steps", "Seconds per label",
                   "Flagged"],
                  [[("b", a.name), _int(a.traces_done), _int(a.labels), _seconds(a.step_seconds),
                    _seconds(a.step_seconds / a.labels if a.labels else None), _int(a.flagged)]
                   for a in section.annotators if isinstance(a, AnnotatorRow)])
    if section.pairs:
        doc.table(["Annotators", "Steps both rated", "Cohen's kappa"],
                  [[f"{p.a} / {p.b}", _int(p.steps), _f3(p.kappa)] for p in section.pairs
                   if isinstance(p, AnnotatorPair)])
