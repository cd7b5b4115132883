"""GSM8K (Cobbe et al. 2021): grade-school word problems with worked reference solutions.

A record is ``{"question", "answer"}``; ``answer`` is the solution, one step per line, with
calculator annotations ``<<expr=result>>`` inline and a last line ``#### <final answer>``. The
Socratic variant prefixes each step with a model-written sub-question and ``" ** "``.
"""

from __future__ import annotations

import re
from typing import Any

from prmkit._fields import Fields
from prmkit.data._format import Format
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace

__all__ = ["GSM8KFormat", "parse_calculations"]

_CALC = re.compile(r"<<([^<>]*)>>")
_FINAL = "#### "
_SOCRATIC_SEP = " ** "


def parse_calculations(text: str) -> list[dict[str, Any]]:
    """The calculator annotations in ``text``: ``{"expr", "result", "span": [start, end]}`` each.

    ``span`` covers the whole ``<<...>>`` in ``text``; ``result`` is what follows the last ``=``
    (None when there is no ``=``).

    >>> parse_calculations("3+5=<<3+5=8>>8 apples")
    [{'expr': '3+5', 'result': '8', 'span': [4, 13]}]
    """
    out = []
    for m in _CALC.finditer(text):
        expr, eq, result = m.group(1).rpartition("=")
        out.append({"expr": expr if eq else result, "result": result if eq else None,
                    "span": [m.start(), m.end()]})
    return out


def _parse_answer(answer: str) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Spans of the step lines (blank lines skipped) and of the final answer; ValueError if none."""
    last_nl = answer.rfind("\n")
    last = answer[last_nl + 1:]
    if not last.startswith(_FINAL):
        raise ValueError(f"the last line must be '#### <answer>', got {last[:40]!r}")
    a = last_nl + 1 + len(_FINAL)
    b = len(answer)
    while a < b and answer[a].isspace():
        a += 1
    while b > a and answer[b - 1].isspace():
        b -= 1
    steps, pos = [], 0
    while last_nl != -1 and pos <= last_nl:
        end = answer.find("\n", pos)
        if answer[pos:end].strip():
            steps.append((pos, end))
        pos = end + 1
    return steps, (a, b)


class GSM8KFormat(Format):
    """GSM8K ``{"question", "answer"}`` rows (train, test and the Socratic files).

    Reading: each non-blank line of ``answer`` before the ``#### `` line is a step, its text kept
    verbatim (calculator annotations and Socratic sub-questions included) with its span in
    ``trace.text`` (the ``answer`` string). Each step's ``meta["calculations"]`` lists the parsed
    annotations (see :func:`parse_calculations`); in a Socratic record ``meta["sub_question"]`` is
    the text before ``" ** "``. ``socratic=None`` (default) treats a record as Socratic when every
    step has ``" ** "``; ``True`` requires it (an error otherwise), ``False`` never parses it. The
    ``####`` value is both ``problem.answer`` and ``final_answer``; ``outcome`` is ``"correct"``
    (these are reference solutions) and steps carry no labels. GSM8K has no ids: a trace's id is
    ``<file name>:<line>``.

    Writing: ``answer`` is the original text when every step still matches its span, else
    ``"\\n".join(step texts) + "\\n#### " + final_answer`` (``problem.answer`` when there is no
    final answer).

    >>> from prmkit._fields import Fields
    >>> [t] = GSM8KFormat().decode(Fields(
    ...     {"question": "3 and 5 more?", "answer": "3+5=<<3+5=8>>8\\n#### 8"}, path="a.jsonl", line=4))
    >>> t.id, t.steps[0].text, t.steps[0].meta["calculations"][0]["result"], t.final_answer
    ('a.jsonl:4', '3+5=<<3+5=8>>8', '8', '8')
    """

    name = "gsm8k"
    description = "GSM8K question/answer rows (reference solutions, '#### answer')"

    _KEYS = ("question", "answer")

    def __init__(self, *, keep_extra: bool = False, socratic: bool | None = None) -> None:
        super().__init__(keep_extra=keep_extra, socratic=socratic)
        self.keep_extra, self.socratic = keep_extra, socratic

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and isinstance(record.get("question"), str)
                and isinstance(record.get("answer"), str) and _FINAL.strip() in record["answer"])

    def decode(self, f: Fields) -> list[Trace]:
        if not self.keep_extra:
            f.only(self._KEYS)
        question, answer = f.str("question"), f.str("answer")
        try:
            spans, (fa, fb) = _parse_answer(answer)
        except ValueError as e:
            raise f.error("answer", str(e)) from None
        if not spans:
            raise f.error("answer", "no solution steps before the '####' line")
        final = answer[fa:fb]
        texts = [answer[a:b] for a, b in spans]
        socratic = self.socratic
        if socratic is None:
            socratic = all(_SOCRATIC_SEP in t for t in texts)
        elif socratic:
            for k, t in enumerate(texts):
                if _SOCRATIC_SEP not in t:
                    line = answer.count("\n", 0, spans[k][0]) + 1
                    raise f.error("answer", f"step {k} (line {line} of the answer) has no "
                                            "' ** ' sub-question, and socratic=True")
        steps = []
        for (a, b), text in zip(spans, texts, strict=True):
            meta: dict[str, Any] = {}
            if socratic:
                meta["sub_question"] = text.split(_SOCRATIC_SEP, 1)[0]
            calcs = parse_calculations(text)
            if calcs:
                meta["calculations"] = calcs
            steps.append(Step(text, span=(a, b), meta=meta))
        trace_meta = {}
        if self.keep_extra and (extra := f.extra(self._KEYS)):
            trace_meta[self.name] = {"extra": extra}
        return [Trace(id=self.default_id(f), problem=Problem(question, answer=final), steps=steps,
                      final_answer=final, outcome="correct", source="gsm8k", text=answer,
                      meta=trace_meta)]

    def encode(self, trace: Trace) -> dict[str, Any]:
        if not trace.steps:
            raise PrmkitError(f"trace {trace.id}: a GSM8K solution needs at least one step")
        final = trace.final_answer if trace.final_answer is not None else trace.problem.answer
        if final is None:
            raise PrmkitError(f"trace {trace.id}: GSM8K needs a final answer for its '####' line "
                              "(set final_answer or problem.answer)")
        answer = None
        if trace.text is not None:
            try:
                spans, fspan = _parse_answer(trace.text)
            except ValueError:
                spans = []
            if (spans == [s.span for s in trace.steps]
                    and all(trace.text[a:b] == s.text for (a, b), s in zip(spans, trace.steps, strict=True))
                    and trace.text[slice(*fspan)] == final):
                answer = trace.text
        if answer is None:
            answer = "\n".join(s.text for s in trace.steps) + "\n" + _FINAL + final
        record = {"question": trace.problem.text, "answer": answer}
        record.update(trace.meta.get(self.name, {}).get("extra", {}))
        return record
