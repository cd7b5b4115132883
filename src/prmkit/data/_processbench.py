"""ProcessBench (Zheng et al. 2024, arXiv:2412.06559): find the earliest wrong step of a solution.

Each file is one JSON array; an element is ``{"id", "generator", "problem", "steps": [str],
"final_answer_correct": bool, "label": int}`` where ``label`` is the 0-based index of the earliest
wrong step, or -1 when no step is wrong (human-annotated).

One trace per element, id = the element's ``id``. Labels (``source="human"``,
``labeler="processbench"``): every step before ``label`` is +1, the labelled step is -1, and the
steps after it get **no label** (ProcessBench does not annotate them); with ``label == -1`` every step
is +1. So ``trace.first_error()`` gives ``label`` back. ``outcome`` is "correct" / "incorrect" from
``final_answer_correct``. ``generator`` (the policy that wrote the solution) is kept in
``trace.meta["processbench"]["generator"]`` so an evaluation can break results down by it.

On export ``label`` is computed from the trace's labels (``trace.first_error()``, the latest label of
each step), so an edited label shows; a trace whose first error is unknown (an unlabelled step before
any wrong one) or whose outcome is "unknown" cannot be written.

>>> from prmkit._fields import Fields
>>> rec = {"id": "gsm8k-9", "generator": "Qwen2-7B-Instruct", "problem": "2+3*4?",
...        "steps": ["3*4=12", "2+12=15", "So 15."], "final_answer_correct": False, "label": 1}
>>> [t] = ProcessBenchFormat().decode(Fields(rec))
>>> [None if lab is None else lab.value for lab in t.labels()], t.first_error(), t.outcome
([1, -1, None], 1, 'incorrect')
>>> ProcessBenchFormat().encode(t) == rec
True
"""

from __future__ import annotations

from typing import Any

from prmkit._fields import Fields
from prmkit.data._format import Format
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace

__all__ = ["ProcessBenchFormat"]

_NAME = "processbench"
_KEYS = ("id", "generator", "problem", "steps", "final_answer_correct", "label")


class ProcessBenchFormat(Format):
    """ProcessBench splits (one JSON array per file). ``keep_extra=True`` keeps unknown fields in
    ``trace.meta["processbench"]["extra"]`` (and writes them back) instead of refusing them."""

    name = _NAME
    container = "array"
    description = "ProcessBench (Qwen/ProcessBench gsm8k/math/olympiadbench/omnimath JSON arrays)"

    def __init__(self, *, keep_extra: bool = False) -> None:
        super().__init__(keep_extra=keep_extra)
        self.keep_extra = keep_extra

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and "generator" in record
                and "final_answer_correct" in record and isinstance(record.get("steps"), list)
                and isinstance(record.get("label"), int))

    def decode(self, f: Fields) -> list[Trace]:
        if self.keep_extra:
            extra = f.extra(_KEYS)
        else:
            f.only(_KEYS)
            extra = {}
        texts = f.typed_list("steps", str)
        if not texts:
            raise f.error("steps", "empty: a solution has at least one step")
        label = f.get("label", int)
        if not -1 <= label < len(texts):
            raise f.error("label", f"{label} is not a step index of the {len(texts)} steps "
                                   f"(expected -1 or 0..{len(texts) - 1})")
        correct = f.get("final_answer_correct", bool)
        steps = []
        for i, text in enumerate(texts):
            if label == -1 or i < label:
                labels = [StepLabel(1, source="human", labeler=_NAME)]
            elif i == label:
                labels = [StepLabel(-1, source="human", labeler=_NAME)]
            else:
                labels = []
            steps.append(Step(text, labels=labels))
        meta: dict[str, Any] = {"generator": f.str("generator")}
        if extra:
            meta["extra"] = extra
        return [Trace(id=f.str("id"), problem=Problem(f.str("problem")), steps=steps,
                      outcome="correct" if correct else "incorrect", source=_NAME,
                      meta={_NAME: meta})]

    def encode(self, trace: Trace) -> dict[str, Any]:
        if not trace.steps:
            raise PrmkitError(f"trace {trace.id}: no steps; a ProcessBench solution has at least one")
        label = trace.first_error()
        if label is None:
            gap = next(i for i, lab in enumerate(trace.labels()) if lab is None)
            raise PrmkitError(f"trace {trace.id}: step {gap} has no label and no earlier step is "
                              f"wrong, so ProcessBench's label (the first wrong step) is unknown")
        if trace.outcome == "unknown":
            raise PrmkitError(f"trace {trace.id}: outcome is unknown; ProcessBench needs "
                              f"final_answer_correct (set trace.outcome)")
        m = trace.meta.get(_NAME) or {}
        generator = m["generator"] if "generator" in m else trace.source
        if generator is None:
            raise PrmkitError(f"trace {trace.id}: no generator (meta['processbench']['generator'] "
                              f"or trace.source) to write")
        rec = {"id": trace.id, "generator": generator, "problem": trace.problem.text,
               "steps": [s.text for s in trace.steps],
               "final_answer_correct": trace.outcome == "correct", "label": label}
        rec.update(m.get("extra", {}))
        return rec
