r"""MATH (Hendrycks et al. 2021) and its 500-problem test subset MATH-500, as reference solutions.

Two record shapes occur:

- MATH-500 (openai/prm800k ``math_splits``, HuggingFaceH4/MATH-500): ``{"problem", "solution",
  "answer", "subject", "level": 1-5, "unique_id": "test/<subject>/<n>.json"}``;
- the original Hendrycks files: ``{"problem", "level": "Level 5", "type", "solution"}``.

The solution is free text (LaTeX, sometimes Asymptote code), so steps are cut by a step splitter
(:mod:`prmkit.data._split`) and keep their spans into it.
"""

from __future__ import annotations

from typing import Any

from prmkit._fields import Fields
from prmkit.data._answers import extract_boxed
from prmkit.data._format import Format
from prmkit.data._split import Splitter, get_splitter
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Trace

__all__ = ["MATHFormat"]

#: What joins step texts when a solution has to be rebuilt: a blank line is a step boundary for
#: every built-in splitter, so the rebuilt text splits back into the same steps.
JOIN = "\n\n"


def _text_unchanged(trace: Trace) -> bool:
    """Whether ``trace.text`` still holds exactly the trace's steps: each step's span holds its
    text, spans are in order, and only whitespace lies outside them (a deleted step would not)."""
    text = trace.text
    if text is None or not trace.steps:
        return False
    pos = 0
    for s in trace.steps:
        if s.span is None:
            return False
        a, b = s.span
        if a < pos or b > len(text) or text[a:b] != s.text or text[pos:a].strip():
            return False
        pos = b
    return not text[pos:].strip()


class MATHFormat(Format):
    r"""MATH / MATH-500 problems with their reference solutions, one trace each.

    Reading: ``trace.text`` is the solution, cut into steps by ``splitter`` (default
    ``"sentence"``; any name of :func:`prmkit.data._split.get_splitter`, or a
    :class:`~prmkit.data._split.Splitter`). The default was chosen on MATH-500: 349 of its 500
    solutions are one paragraph, so ``"blank_line"`` would make most traces a single step, and
    ``"newline"`` cuts display math and Asymptote code line by line (about 960 fragments such as
    ``&= ...``); ``"sentence"`` gives a median of 3 steps, leaves 87 single-step solutions (the
    one-sentence ones) and never cuts inside math. ``final_answer`` is the last ``\boxed{}`` of the
    solution (an import issue is recorded when there is none); ``problem.answer`` is the record's
    ``answer``, or the boxed answer for the Hendrycks shape, which has none. ``id`` and
    ``problem.id`` are ``unique_id`` (``<file name>:<line>`` when absent). ``outcome`` is
    ``"correct"`` and steps carry no labels: these are reference solutions. ``subject``, ``level``
    (int or ``"Level N"``, as given) and ``type`` go to ``trace.meta["math"]``.

    Writing: the solution is the original text when the steps still match it (see the module's
    ``_text_unchanged``), else the step texts joined by a blank line. ``answer`` is written from
    ``problem.answer`` unless the record had none, ``unique_id`` from ``problem.id``.

    ``keep_extra`` keeps unknown keys in ``trace.meta["math"]["extra"]`` (an error otherwise).

    >>> from prmkit._fields import Fields
    >>> rec = {"problem": "$1+1$?", "solution": "We add. So $1+1=\\boxed{2}$.", "answer": "2",
    ...        "subject": "Prealgebra", "level": 1, "unique_id": "test/prealgebra/1.json"}
    >>> [t] = MATHFormat().decode(Fields(rec))
    >>> t.id, [s.text for s in t.steps], t.final_answer, t.meta["math"]["level"]
    ('test/prealgebra/1.json', ['We add.', 'So $1+1=\\boxed{2}$.'], '2', 1)
    >>> MATHFormat().encode(t) == rec
    True
    """

    name = "math"
    description = "MATH / MATH-500 problems with reference solutions (split into steps)"

    _KEYS = ("problem", "solution", "answer", "subject", "level", "unique_id", "type")
    _META_KEYS = ("subject", "level", "type")

    def __init__(self, *, splitter: str | Splitter = "sentence", keep_extra: bool = False) -> None:
        self.splitter = get_splitter(splitter) if isinstance(splitter, str) else splitter
        super().__init__(splitter=self.splitter.name, keep_extra=keep_extra,
                         **({"splitter_options": self.splitter.options}
                            if getattr(self.splitter, "options", None) else {}))
        self.keep_extra = keep_extra

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and isinstance(record.get("problem"), str)
                and isinstance(record.get("solution"), str) and "steps" not in record
                and ("level" in record or "unique_id" in record))

    def decode(self, f: Fields) -> list[Trace]:
        if not self.keep_extra:
            f.only(self._KEYS)
        problem, solution = f.str("problem"), f.str("solution")
        answer = f.str("answer", None)
        unique_id = f.str("unique_id", None)
        meta: dict[str, Any] = {}
        for key, types in (("subject", str), ("level", (int, str)), ("type", str)):
            value = f.get(key, types, None)
            if value is not None:
                meta[key] = value
        steps = self.splitter.split(solution)
        if not steps:
            raise f.error("solution", "no steps: the solution is blank")
        boxed = extract_boxed(solution)
        if boxed is None:
            self.issue(f, "solution", "no \\boxed{} answer in the solution; final_answer is None")
        if answer is None:
            # The Hendrycks files carry no answer field: the boxed one is the reference.
            meta["boxed_answer"] = True
        if self.keep_extra and (extra := f.extra(self._KEYS)):
            meta["extra"] = extra
        return [Trace(id=unique_id if unique_id is not None else self.default_id(f),
                      problem=Problem(problem, answer=answer if answer is not None else boxed,
                                      id=unique_id),
                      steps=steps, final_answer=boxed, outcome="correct", source="math",
                      text=solution, meta={self.name: meta})]

    def encode(self, trace: Trace) -> dict[str, Any]:
        if not trace.steps:
            raise PrmkitError(f"trace {trace.id}: a MATH solution needs at least one step")
        meta = trace.meta.get(self.name, {})
        solution = trace.text if _text_unchanged(trace) else JOIN.join(s.text for s in trace.steps)
        record: dict[str, Any] = {"problem": trace.problem.text, "solution": solution}
        if not meta.get("boxed_answer") and trace.problem.answer is not None:
            record["answer"] = trace.problem.answer
        for key in self._META_KEYS:
            if key in meta:
                record[key] = meta[key]
        if trace.problem.id is not None:
            record["unique_id"] = trace.problem.id
        record.update(meta.get("extra", {}))
        return record
