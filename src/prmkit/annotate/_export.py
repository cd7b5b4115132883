"""Labels out of the database: prmkit traces with human :class:`~prmkit.trace.StepLabel`, or the
PRM800K and TRL stepwise formats through prmkit's own exporters (:func:`prmkit.data.write`).

Each stored trace that at least one annotator finished becomes one trace. Every step carries one
``StepLabel(value, source="human", labeler=<annotator>, cost={"seconds": ...}, time=...)`` per
annotator who rated it, oldest first; steps after an annotator's first wrong step may have none (the
"stop at the first wrong step" mode of PRM800K's phase 2). The trace's other labels are dropped unless
``keep_labels`` (so that training reads the human ones), its scores are kept; notes, flags and seconds
per annotator go in ``meta["annotate"]``, and the provenance entry (stage ``annotate``) names the database,
the annotators and the database's agreement and cost (``agreement``, ``double_labelled_steps``,
``seconds_per_label``, ``labels_per_hour``). PRM800K and TRL stepwise hold one label per step: a
double-labelled step is written with its latest label (the prmkit format keeps them all).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from prmkit._durable import check_inputs
from prmkit._result import Record
from prmkit.annotate._store import Store
from prmkit.annotate._summary import summarize
from prmkit.errors import PrmkitError
from prmkit.trace import StepLabel, Trace

__all__ = ["EXPORT_FORMATS", "ExportResult", "labelled_traces", "export_labels"]

#: ``--format`` -> the prmkit format name it writes.
EXPORT_FORMATS = {"prmkit": "prmkit", "prm800k": "prm800k", "trl": "trl_stepwise"}


@dataclass
class ExportResult(Record):
    """What :func:`export_labels` wrote: traces, step labels, and the traces left out (not finished)."""

    kind = "annotate_export"
    path: str = ""
    format: str = "prmkit"
    traces: int = 0
    labels: int = 0
    unfinished: int = 0
    extra: dict = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"wrote {self.traces} traces with {self.labels} human step labels to {self.path} ({self.format})"
                + (f"; left out {self.unfinished} traces no annotator finished" if self.unfinished else "")]


def labelled_traces(store: Store, *, keep_labels: bool = False,
                    include_unfinished: bool = False) -> tuple[list[Trace], int]:
    """The stored traces with their human labels (see the module docs), and how many were left out
    because no annotator finished them (``include_unfinished`` keeps those with any rating)."""
    ratings: dict[int, list] = {}
    for r in store.ratings():
        ratings.setdefault(r.item_id, []).append(r)
    assignments: dict[int, list] = {}
    for a in store.assignments():
        assignments.setdefault(a.item_id, []).append(a)
    summary = summarize(store)
    # the database's agreement and cost, on every trace, so that a card made from the traces can say them
    whole = {k: v for k, v in (("agreement", summary.agreement),
                               ("double_labelled_steps", summary.double_labelled_steps),
                               ("seconds_per_label", summary.seconds_per_label),
                               ("labels_per_hour", summary.labels_per_hour)) if v is not None}
    out, unfinished = [], 0
    for item in store.items():
        held = assignments.get(item.id, [])
        done = {a.annotator for a in held if a.done is not None}
        rated = ratings.get(item.id, [])
        if not done and not (include_unfinished and rated):
            unfinished += bool(rated)
            continue
        trace = item.trace
        for step in trace.steps:
            if not keep_labels:
                step.labels = []
        for r in sorted(rated, key=lambda r: (r.time, r.annotator)):
            if r.annotator in done or include_unfinished:
                trace.steps[r.step].labels.append(StepLabel(
                    r.value, source="human", kind="hard", labeler=r.annotator, cost={"seconds": r.seconds},
                    time=r.time))
        trace.meta["annotate"] = {a.annotator: {k: v for k, v in (("seconds", a.seconds), ("note", a.note),
                                                                  ("flag", a.flag), ("done", a.done))
                                                if v is not None}
                                  for a in held if a.annotator in done or include_unfinished}
        trace.add_provenance("annotate", "annotate", {"db": os.path.basename(store.path),
                                                      "annotators": sorted(trace.meta["annotate"]), **whole})
        out.append(trace)
    return out, unfinished


def export_labels(db: str | os.PathLike, out: str | os.PathLike, *, format: str = "prmkit",
                  keep_labels: bool = False, include_unfinished: bool = False) -> ExportResult:
    """Write the labelled traces of the database ``db`` to ``out`` (``format``: prmkit, prm800k, trl),
    through a temporary file renamed when complete."""
    from prmkit.data import write

    if format not in EXPORT_FORMATS:
        raise PrmkitError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
    if not os.path.exists(db):
        raise PrmkitError(f"{db}: no such labeling database")
    check_inputs(out, [db])
    traces, unfinished = labelled_traces(Store(db), keep_labels=keep_labels,
                                         include_unfinished=include_unfinished)
    n = write(traces, out, EXPORT_FORMATS[format])
    labels = sum(1 for t in traces for s in t.steps for lab in s.labels if lab.source == "human")
    return ExportResult(path=os.fspath(out), format=format, traces=n, labels=labels, unfinished=unfinished)
