"""PRMBench (Song et al. 2025, arXiv:2501.03124): fine-grained step errors injected into PRM800K solutions.

A row (JSON Lines) is ``{"idx", "classification", "question", "original_question",
"modified_question", "original_process": [str], "modified_process": [str], "modified_steps": [int],
"error_steps": [int], "reason"}``, plus ``ground_truth`` and ``original_response`` in the
multi_solutions file. ``original_process`` is a PRM800K solution; GPT-4o rewrote some of its steps
(``modified_steps``) to inject one class of error (``classification``), giving ``modified_process``.

One trace per row, the item a PRM is evaluated on: ``modified_question`` + ``modified_process``.
``error_steps`` are **1-based** indices of the wrong steps: those steps get a -1 label, every other
step +1 (``source="synthetic"``, since the errors were injected by a model, ``labeler="prmbench"``).
The step texts are kept verbatim, including the "Step k." / "k." prefixes some rows carry.

Ids: ``idx`` names the underlying PRM800K question and repeats across the class files, so the trace
id is ``f"{classification}_{idx}"`` (the key the official evaluator uses) and ``idx`` is
``trace.problem.id``. ``ground_truth`` (multi_solutions) is ``trace.problem.answer``. Everything
else (``classification`` for per-class results, ``question``, ``original_question``,
``original_process``, ``modified_steps``, ``error_steps`` as written, ``reason``,
``original_response``, unknown fields with ``keep_extra=True`` under ``extra``) is in
``trace.meta["prmbench"]``.

**Out-of-range indices.** Some real rows name an error step beyond the end of ``modified_process``
(SOURCE.md counts 100 over the full 25-file release; 78 rows of the 16 files in shared/data). The
``out_of_range`` option decides:

- ``"report"`` (default): keep the trace, label the steps in range, record one issue per bad index
  in the :class:`~prmkit.data.ImportReport` (located at ``error_steps[k]``) and list the bad values
  in ``trace.meta["prmbench"]["out_of_range"]``, so an evaluation can exclude the trace;
- ``"skip"``: drop the row, counted in ``report.skipped`` with the same located error (whether or
  not ``skip_invalid`` is set);
- ``"error"``: raise a :class:`~prmkit.errors.FormatError` at ``error_steps[k]`` (which
  ``read(..., skip_invalid=True)`` skips and counts like any malformed record).

**Export.** The wrong steps come from the trace's labels (a step whose latest label is negative; a
neutral 0 is not an error; every step needs a label). When they are the in-range members of the
stored ``error_steps``, that list is written back verbatim (its order, and its out-of-range values);
when the labels were edited, the new sorted indices are written, followed by any out-of-range values.

**Duplicate keys.** Two rows with the same ``classification`` and ``idx`` (the released
``prm_test_p12_multi_solutions.jsonl`` has 5) are one key twice: every copy is read, and each
repeat is recorded as an issue at its ``idx`` naming the line of the first, so ``prmkit data
validate`` flags it. The evaluation keeps the first copy, as the official loader does, and counts
the rest (:func:`prmkit.eval.evaluate_prmbench`).

The official loader also evaluates the untouched ``original_process`` as an error-free sample;
:func:`prmbench_original` builds that trace.

>>> from prmkit._fields import Fields
>>> rec = {"original_question": "1+1?", "modified_question": "1+1?",
...        "original_process": ["1+1=2.", "So 2."], "modified_process": ["1+1=3.", "So 3."],
...        "modified_steps": [1, 2], "error_steps": [1, 2], "reason": "wrong sum",
...        "idx": "prm_test_p1_7", "question": "1+1?", "classification": "counterfactual"}
>>> [t] = PRMBenchFormat().decode(Fields(rec))
>>> t.id, [lab.value for lab in t.labels()], t.first_error()
('counterfactual_prm_test_p1_7', [-1, -1], 0)
>>> PRMBenchFormat().encode(t) == rec
True
>>> o = prmbench_original(t)
>>> o.id, [s.text for s in o.steps], o.first_error()
('correct_prm_test_p1_7', ['1+1=2.', 'So 2.'], -1)
"""

from __future__ import annotations

import copy
from typing import Any

from prmkit._fields import Fields
from prmkit.data._format import Format
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace

__all__ = ["PRMBenchFormat", "prmbench_original", "OUT_OF_RANGE_POLICIES"]

#: What :class:`PRMBenchFormat` does with an ``error_steps`` index beyond the last step.
OUT_OF_RANGE_POLICIES: tuple[str, ...] = ("report", "skip", "error")

_NAME = "prmbench"
_NULL = type(None)
_KEYS = ("original_question", "modified_question", "original_process", "modified_process",
         "modified_steps", "error_steps", "reason", "idx", "question", "classification")
_MULTI_KEYS = ("ground_truth", "original_response")


def _label(value: int) -> StepLabel:
    return StepLabel(value, source="synthetic", labeler=_NAME)


class PRMBenchFormat(Format):
    """PRMBench rows (JSON Lines, one file per error class).

    Options: ``out_of_range`` ("report", "skip" or "error"; see the module docstring) and
    ``keep_extra`` (keep unknown fields in ``trace.meta["prmbench"]["extra"]`` and write them back,
    instead of refusing them).
    """

    name = _NAME
    description = "PRMBench (hitsmy/PRMBench_Preview; 1-based error_steps)"

    def __init__(self, *, out_of_range: str = "report", keep_extra: bool = False) -> None:
        if out_of_range not in OUT_OF_RANGE_POLICIES:
            raise PrmkitError(f"prmbench: out_of_range must be one of "
                              f"{', '.join(OUT_OF_RANGE_POLICIES)}, got {out_of_range!r}")
        super().__init__(out_of_range=out_of_range, keep_extra=keep_extra)
        self.out_of_range = out_of_range
        self.keep_extra = keep_extra
        self._first_line: dict[str, int | None] = {}  # trace id -> line of its first row (duplicates)

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and "modified_process" in record
                and "error_steps" in record)

    def decode(self, f: Fields) -> list[Trace]:
        if self.keep_extra:
            extra = f.extra(_KEYS + _MULTI_KEYS)
        else:
            f.only(_KEYS + _MULTI_KEYS)
            extra = {}
        texts = f.typed_list("modified_process", str)
        if not texts:
            raise f.error("modified_process", "empty: a solution has at least one step")
        error_steps = f.typed_list("error_steps", int)
        meta: dict[str, Any] = {
            "classification": f.str("classification"),
            "question": f.str("question"),
            "original_question": f.str("original_question"),
            "original_process": list(f.typed_list("original_process", str)),
            "modified_steps": list(f.typed_list("modified_steps", int)),
            "error_steps": list(error_steps),
            "reason": f.str("reason"),
        }
        question, idx = f.str("modified_question"), f.str("idx")
        answer = f.str("ground_truth", None, nullable=True)
        if answer is None and "ground_truth" in f.obj:
            meta["ground_truth"] = None  # present but null: written back as null
        if "original_response" in f.obj:
            meta["original_response"] = f.str("original_response", nullable=True)

        bad = [(k, v) for k, v in enumerate(error_steps) if not 1 <= v <= len(texts)]
        if bad:
            errors = [f.error(f"error_steps[{k}]",
                              f"step {v} is not one of the {len(texts)} steps of modified_process "
                              f"(error_steps are 1-based)") for k, v in bad]
            if self.out_of_range == "error":
                raise errors[0]
            if self.out_of_range == "skip":
                self.report.skipped.append(errors[0])
                return []
            self.report.issues.extend(errors)
            meta["out_of_range"] = [v for _, v in bad]
        if extra:
            meta["extra"] = extra

        key = f"{meta['classification']}_{idx}"
        if key in self._first_line:
            first = self._first_line[key]
            self.report.issues.append(f.error("idx", f"duplicate key {key} (first at line {first}); "
                                                     "an evaluation keeps the first copy"))
        else:
            self._first_line[key] = f.line
        wrong = {v - 1 for v in error_steps if 1 <= v <= len(texts)}
        steps = [Step(text, labels=[_label(-1 if i in wrong else 1)]) for i, text in enumerate(texts)]
        return [Trace(id=key,
                      problem=Problem(question, answer=answer, id=idx), steps=steps,
                      source=_NAME, meta={_NAME: meta})]

    def encode(self, trace: Trace) -> dict[str, Any]:
        m = trace.meta.get(_NAME) or {}
        wrong = []
        for i, step in enumerate(trace.steps):
            lab = step.label()
            if lab is None:
                raise PrmkitError(f"trace {trace.id}: step {i} has no label; PRMBench needs a "
                                  f"verdict for every step")
            if lab.positive is False:
                wrong.append(i + 1)
        n = len(trace.steps)
        stored = m.get("error_steps")
        if stored is not None and {v for v in stored if 1 <= v <= n} == set(wrong):
            error_steps = list(stored)
        else:
            error_steps = wrong + [v for v in stored or [] if not 1 <= v <= n]

        texts = [s.text for s in trace.steps]
        rec: dict[str, Any] = {
            "original_question": m.get("original_question", trace.problem.text),
            "modified_question": trace.problem.text,
            "original_process": list(m.get("original_process", texts)),
            "modified_process": texts,
            "modified_steps": list(m.get("modified_steps", [])),
            "error_steps": error_steps,
            "reason": m.get("reason", ""),
        }
        if trace.problem.answer is not None:
            rec["ground_truth"] = trace.problem.answer
        elif "ground_truth" in m:
            rec["ground_truth"] = m["ground_truth"]
        classification = m.get("classification", "unknown")
        rec["idx"] = trace.problem.id if trace.problem.id is not None else trace.id
        rec["question"] = m.get("question", trace.problem.text)
        rec["classification"] = classification
        if "original_response" in m:
            rec["original_response"] = m["original_response"]
        rec.update(m.get("extra", {}))
        return rec


def prmbench_original(trace: Trace) -> Trace:
    """The error-free original solution of a PRMBench trace, as its own trace.

    ``original_question`` + ``original_process``, every step labelled +1 (``source="synthetic"``,
    ``labeler="prmbench"``), id ``f"correct_{idx}"`` and ``meta["prmbench"]["classification"] ==
    "correct"``, as the official loader builds its correct samples. The traces of the different
    error classes of one question give the same original (same id): keep one, e.g.
    ``{o.id: o for o in map(prmbench_original, traces)}.values()``.
    """
    m = trace.meta.get(_NAME)
    if not isinstance(m, dict) or "original_process" not in m or "original_question" not in m:
        raise PrmkitError(f"trace {trace.id}: not a PRMBench trace (no meta['prmbench'] with "
                          f"original_question and original_process)")
    if not m["original_process"]:
        raise PrmkitError(f"trace {trace.id}: original_process is empty")
    idx = trace.problem.id if trace.problem.id is not None else trace.id
    out = Trace(id=f"correct_{idx}",
                problem=Problem(m["original_question"], answer=trace.problem.answer,
                                id=trace.problem.id),
                steps=[Step(text, labels=[_label(1)]) for text in m["original_process"]],
                source=trace.source,
                meta={_NAME: {"classification": "correct", "original_of": trace.id,
                              "question": m.get("question", m["original_question"]),
                              "original_question": m["original_question"],
                              "original_process": list(m["original_process"])}},
                provenance=copy.deepcopy(trace.provenance))
    out.add_provenance("derive", "prmbench_original", {"parent": trace.id})
    return out
