"""What an export drops: each written record is read back and compared with the trace it came from.

A format that cannot hold everything a trace has (TRL stepwise has no ids and stops at the first wrong
step; most formats have no step scores or provenance) loses it on write. Rather than a hand-kept list
per format, :class:`ExportReport` measures the loss: ``decode(encode(trace))`` against ``trace``, field
by field, so a writer that drops something new is caught without anyone declaring it.

Fields are named as on :class:`~prmkit.trace.Trace`; "label details" are a label's labeler, model,
rollouts, args, cost and meta. What is not counted, because it is not data the user gave: an id that was itself made from the
input's file name and line (``sample.jsonl:3``, for formats that store none), ``source`` and the
"import" provenance entries naming the format a trace was read from, and label times.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._fields import Fields
from prmkit._result import Record, record_field
from prmkit.errors import PrmkitError
from prmkit.trace import StepLabel, Trace

__all__ = ["ExportReport", "LossyExportError", "trace_losses"]


class LossyExportError(PrmkitError):
    """A strict export met a trace the format cannot hold whole."""


def _position_id(trace: Trace) -> bool:
    """Whether ``trace.id`` was made from where it was read (``<file name>:<line>``), not read."""
    for p in trace.provenance:
        if p.stage == "import" and "path" in p.args and "line" in p.args:
            made = f"{Path(str(p.args['path'])).name}:{p.args['line']}"
            if trace.id == made or trace.id.startswith(made + "#"):
                return True
    return False


def _imported_as(trace: Trace) -> set[str]:
    return {p.name for p in trace.provenance if p.stage == "import"}


def _details(lab: StepLabel) -> tuple[Any, ...]:
    return (lab.labeler, lab.model, lab.rollouts, lab.args, lab.cost, lab.meta)


def trace_losses(original: Trace, written: Trace | None, *, read_back_id_is_made: bool = False
                 ) -> Counter[str]:
    """What ``original`` lost on its way to ``written`` (the trace read back from the written record),
    as field -> how many (steps, scores, meta keys, ... or 1 for a trace-level field).

    ``read_back_id_is_made``: the format stores no id (``written.id`` was made up on reading), so an
    id that ``original`` got the same way is no loss.

    >>> from prmkit import Problem, Step, StepLabel, Trace
    >>> t = Trace("pb-1", Problem("q"), [Step("a", labels=[StepLabel(1)], scores={"prm": 0.9}),
    ...                                  Step("b", labels=[StepLabel(-1)]), Step("c")], outcome="incorrect")
    >>> w = Trace("input", Problem("q"), [Step("a", labels=[StepLabel(1)]), Step("b", labels=[StepLabel(-1)])])
    >>> dict(trace_losses(t, w))
    {'id': 1, 'steps': 1, 'step scores': 1, 'outcome': 1}
    """
    out: Counter[str] = Counter()
    if written is None:
        out["traces"] += 1
        return out
    if original.id != written.id and not (_position_id(original) and read_back_id_is_made):
        out["id"] += 1
    if len(written.steps) < len(original.steps):
        out["steps"] += len(original.steps) - len(written.steps)
    for a, b in zip(original.steps, written.steps, strict=False):
        if a.text != b.text:
            out["step text"] += 1
        if a.kind != b.kind:
            out["step kind"] += 1
        la, lb = a.label(), b.label()
        if la is not None:
            if lb is None or (la.value, la.kind) != (lb.value, lb.kind):
                out["step labels"] += 1
            elif la.source != lb.source:
                out["label sources"] += 1
            elif _details(la) != _details(lb):
                out["label details"] += 1
        if len(a.labels) > max(len(b.labels), 1):
            out["earlier labels"] += len(a.labels) - max(len(b.labels), 1)
        out["step scores"] += sum(1 for k, v in a.scores.items() if b.scores.get(k) != v)
        out["step meta"] += sum(1 for k in a.meta if k not in b.meta)
    for a in original.steps[len(written.steps):]:
        out["step scores"] += len(a.scores)
    if original.final_answer is not None and written.final_answer != original.final_answer:
        out["final_answer"] += 1
    if original.outcome != "unknown" and written.outcome != original.outcome:
        out["outcome"] += 1
    if original.text is not None and written.text != original.text:
        out["text"] += 1
    if (original.source is not None and written.source != original.source
            and original.source not in _imported_as(original)):
        out["source"] += 1
    for name in ("answer", "solution", "id"):
        value = getattr(original.problem, name)
        if value is not None and getattr(written.problem, name) != value:
            out[f"problem.{name}"] += 1
    for k in original.problem.meta:
        if k not in written.problem.meta:
            out[f"problem.meta.{k}"] += 1
    for k in original.meta:
        if k not in written.meta:
            out[f"meta.{k}"] += 1
    kept = sum(1 for p in written.provenance if p.stage != "import")
    out["provenance"] += max(0, sum(1 for p in original.provenance if p.stage != "import") - kept)
    return +out  # drop the zero counts


@dataclass
class ExportReport(Record):
    """What writing traces in a format dropped: ``dropped`` maps a field to how many were lost
    (see :func:`trace_losses`), over ``lossy`` of the ``traces`` written. ``unreadable`` counts records
    the format wrote but cannot read back (``first_unreadable`` says why); they count as lossy."""

    kind: ClassVar[str] = "export"
    format: str = ""
    traces: int = 0
    lossy: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0
    first_unreadable: str | None = record_field(omit_none=True)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def lossless(self) -> bool:
        return not self.lossy

    def summary(self) -> str:
        """One line: what was dropped, per field, and in how many traces (or that nothing was)."""
        if self.lossless:
            return f"{self.format} kept everything the {self.traces} traces have"
        fields = ", ".join(f"{k} {n}" for k, n in self.dropped.most_common())
        return f"dropped (not held by {self.format}) in {self.lossy} of {self.traces} traces: {fields}"

    def lines(self) -> list[str]:
        """What a terminal shows of it: :meth:`summary`, and the records that cannot be read back."""
        out = [self.summary()]
        if self.unreadable:
            out.append(f"{self.unreadable} written records cannot be read back as {self.format} "
                       f"(first: {self.first_unreadable})")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The fields, ``dropped`` most common first (``first_unreadable`` only when one was)."""
        return {**super().to_dict(), "dropped": dict(self.dropped.most_common())}


class LossCheck:
    """Reads each record a :class:`~prmkit.data.Format` writes back with the same format and counts the
    loss. (``fmt`` is typed loosely: this module sits below the format module, which uses it.)"""

    def __init__(self, fmt: Any, report: ExportReport, *, strict: bool = False) -> None:
        import inspect

        self.fmt, self.report, self.strict = fmt, report, strict
        report.format = report.format or fmt.name
        options = dict(fmt.options)
        # What a writer puts back from meta[...]["extra"] is read back only with keep_extra.
        if "keep_extra" in inspect.signature(type(fmt).__init__).parameters:
            options["keep_extra"] = True
        self.reader = type(fmt)(**options)
        self.made_id = fmt.default_id(Fields({}))

    def __call__(self, traces: list[Trace], record: Any) -> None:
        try:
            back = self.reader.decode(Fields(record))
        except Exception as e:  # noqa: BLE001 - any failure to read back is reported, not raised
            back = []
            self.report.unreadable += 1
            if self.report.first_unreadable is None:
                self.report.first_unreadable = f"{type(e).__name__}: {e}"
        for i, t in enumerate(traces):
            w = back[i] if i < len(back) else None
            made = w is not None and (w.id == self.made_id or w.id.startswith(self.made_id + "#"))
            lost = trace_losses(t, w, read_back_id_is_made=made)
            self.report.traces += 1
            if lost:
                self.report.lossy += 1
                self.report.dropped.update(lost)
                if self.strict:
                    what = ", ".join(f"{k} {n}" for k, n in lost.most_common())
                    raise LossyExportError(
                        f"trace {t.id}: {self.fmt.name} cannot hold everything it has (it would drop "
                        f"{what}); a strict export refuses to lose anything: write prmkit JSONL or "
                        f"Parquet, which keep everything, or convert without --strict to drop it and "
                        f"list what was dropped")
