"""Math-Shepherd (Wang et al. 2023, arXiv:2312.08935): step-tagged solutions with Monte Carlo labels.

One record is ``{"input", "label", "task"}``. ``input`` is the question, a space, then the solution
written ``Step k: ...`` with every step ending in the tag ``" ки"`` (a space and the Cyrillic "ки");
``label`` is the same text with each tag replaced by ``" +"`` or ``" -"``. The labels come from
Monte Carlo *hard estimation* (a step is ``+`` when at least one sampled completion from it reaches
the gold answer), so they are imported as hard labels with source ``"mc_hard"``.

This module also holds :func:`parse_tagged`, the reader of "text with a tag after every step"
shared with the OpenRLHF PRM format, which uses the same tag as its placeholder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from prmkit._fields import Fields
from prmkit.data._answers import extract_answer_is
from prmkit.data._format import Format
from prmkit.errors import PrmkitError
from prmkit.trace import NEUTRAL_POLICIES, Problem, Step, StepLabel, Trace, binarize

__all__ = ["MathShepherdFormat", "TaggedText", "parse_tagged", "TAG"]

#: The step tag of Math-Shepherd's ``input``: a space and "ки" (U+043A U+0438).
TAG = " \u043a\u0438"
_MARKS = {" +": 1, " -": -1}
_STEP_MARKER = re.compile(r"Step \d+:\s*")
# "Step 1:" opens the solution: it must start the text or follow whitespace (not "xStep 1:"), and the
# last one before the first tag counts, so a question that itself says "Step 1:" stays whole.
_FIRST_MARKER = re.compile(r"(?:^|(?<=\s))Step 1:\s*")


@dataclass
class TaggedText:
    """Where things lie in a step-tagged text (all spans are ``(start, end)`` character offsets).

    ``problem``: the question; ``steps``: each step's text without its ``Step k:`` marker, tag and
    surrounding whitespace; ``tags``: each tag occurrence; ``tail``: what follows the last tag.
    ``marked``: whether the solution starts with a ``Step 1:`` marker.

    >>> t = parse_tagged("Q? Step 1: a ки\\nStep 2: b ки", " ки")
    >>> t.problem, t.steps, t.tags, t.marked
    ((0, 2), [(11, 12), (24, 25)], [(12, 15), (25, 28)], True)
    """

    problem: tuple[int, int]
    steps: list[tuple[int, int]]
    tags: list[tuple[int, int]]
    tail: str
    marked: bool


def _skip_ws(text: str, i: int, end: int) -> int:
    while i < end and text[i].isspace():
        i += 1
    return i


def _rstrip_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def parse_tagged(text: str, tag: str, *, require_marker: bool = False) -> TaggedText:
    """Cut a step-tagged text into problem, steps and tags; ``ValueError`` says why it cannot.

    Every occurrence of ``tag`` closes a step. The question ends where ``Step 1:`` starts; without
    that marker (and unless ``require_marker``), at the last newline before the first tag, and when
    there is none the problem is empty (the caller decides whether that is worth reporting). A
    ``Step k:`` marker at the start of a later step is not part of the step's text.
    """
    tags = []
    i = text.find(tag)
    while i != -1:
        tags.append((i, i + len(tag)))
        i = text.find(tag, i + len(tag))
    if not tags:
        raise ValueError(f"no step tag {tag.strip()!r} in the text")
    first_end = tags[0][0]
    openers = list(_FIRST_MARKER.finditer(text, 0, first_end))
    m = openers[-1] if openers else None
    if m:
        problem = (0, _rstrip_end(text, 0, m.start()))
        start = m.end()
    elif require_marker:
        raise ValueError("no 'Step 1:' before the first step tag, so the question cannot be told "
                         "from the solution")
    else:
        nl = text.rfind("\n", 0, _rstrip_end(text, 0, first_end))
        problem = (0, _rstrip_end(text, 0, nl)) if nl != -1 else (0, 0)
        start = _skip_ws(text, nl + 1, first_end)
    steps = []
    for k, (a, _) in enumerate(tags):
        if k:
            start = _skip_ws(text, tags[k - 1][1], a)
            mk = _STEP_MARKER.match(text, start, a)
            if mk:
                start = mk.end()
        steps.append((start, max(start, _rstrip_end(text, start, a))))
    return TaggedText(problem, steps, tags, text[tags[-1][1]:], bool(m))


class MathShepherdFormat(Format):
    """Math-Shepherd's ``{"input", "label", "task"}`` rows.

    Reading: the problem is the text before ``Step 1:``; steps are the step texts without the
    ``Step k:`` marker and the tag; each step gets a hard label +1 / -1 (source ``"mc_hard"``,
    labeler ``"math-shepherd"``). ``final_answer`` comes from ``The answer is: X`` in the last
    step (:func:`prmkit.data._answers.extract_answer_is`), and ``outcome`` from the last step's
    label: for the last step, hard estimation reduces to checking that answer against the gold
    one. ``task`` goes to ``trace.meta["math_shepherd"]``.

    Writing: when the problem and steps still match the text they were read from, ``input`` is
    that text verbatim and ``label`` puts the current labels at its tags; otherwise both are built
    as ``problem + " " + "\\n".join(f"Step {k}: {text} ки")``. Labels are turned into ``+`` / ``-``
    by :func:`prmkit.trace.binarize` with ``neutral`` and ``threshold``; a step without a verdict
    cannot be written and raises :class:`~prmkit.errors.PrmkitError`.

    Options: ``keep_extra`` keeps unknown record keys in ``trace.meta["math_shepherd"]["extra"]``
    (they are an error otherwise) and writes them back.

    >>> from prmkit._fields import Fields
    >>> rec = {"input": "1+1? Step 1: 1+1=2. The answer is: 2 ки",
    ...        "label": "1+1? Step 1: 1+1=2. The answer is: 2 +", "task": "GSM8K"}
    >>> [t] = MathShepherdFormat().decode(Fields(rec))
    >>> t.problem.text, [s.text for s in t.steps], t.final_answer, t.steps[0].labels[0].value
    ('1+1?', ['1+1=2. The answer is: 2'], '2', 1)
    >>> MathShepherdFormat().encode(t) == rec
    True
    """

    name = "math_shepherd"
    description = "Math-Shepherd rows: 'ки'-tagged steps, +/- Monte Carlo labels"

    _KEYS = ("input", "label", "task")

    def __init__(self, *, keep_extra: bool = False, neutral: str = "positive",
                 threshold: float = 0.5) -> None:
        if neutral not in NEUTRAL_POLICIES:
            raise PrmkitError(f"math_shepherd: neutral must be one of {NEUTRAL_POLICIES}, "
                              f"got {neutral!r}")
        super().__init__(keep_extra=keep_extra, neutral=neutral, threshold=threshold)
        self.keep_extra, self.neutral, self.threshold = keep_extra, neutral, threshold

    @classmethod
    def detect(cls, record: Any) -> bool:
        return (isinstance(record, dict) and set(record) <= set(cls._KEYS)
                and isinstance(record.get("input"), str) and isinstance(record.get("label"), str)
                and TAG in record["input"])

    # -- reading -------------------------------------------------------------------------------------
    def decode(self, f: Fields) -> list[Trace]:
        if not self.keep_extra:
            f.only(self._KEYS)
        text, label = f.str("input"), f.str("label")
        task = f.str("task", None)
        try:
            parsed = parse_tagged(text, TAG, require_marker=True)
        except ValueError as e:
            raise f.error("input", str(e)) from None
        values = _read_marks(f, text, label, parsed.tags)
        steps = []
        for (a, b), v in zip(parsed.steps, values, strict=True):
            steps.append(Step(text[a:b], span=(a, b), labels=[
                StepLabel(v, source="mc_hard", kind="hard", labeler="math-shepherd")]))
        final = extract_answer_is(steps[-1].text)
        meta: dict[str, Any] = {}
        if task is not None:
            meta["task"] = task
        if parsed.tail:
            meta["tail"] = parsed.tail
        if self.keep_extra and (extra := f.extra(self._KEYS)):
            meta["extra"] = extra
        outcome = "unknown" if final is None else ("correct" if values[-1] > 0 else "incorrect")
        return [Trace(id=self.default_id(f), problem=Problem(text[slice(*parsed.problem)]),
                      steps=steps, final_answer=final, outcome=outcome, source="math_shepherd",
                      text=text, meta={self.name: meta} if meta else {})]

    # -- writing -------------------------------------------------------------------------------------
    def encode(self, trace: Trace) -> dict[str, Any]:
        if not trace.steps:
            raise PrmkitError(f"trace {trace.id}: Math-Shepherd needs at least one step")
        marks = [self._mark(trace, i) for i in range(len(trace.steps))]
        meta = trace.meta.get(self.name, {})
        parsed = unchanged_tagged(trace, TAG, require_marker=True)
        if parsed is not None:
            text = trace.text or ""
            pieces, pos = [], 0
            for (a, b), mark in zip(parsed.tags, marks, strict=True):
                pieces += [text[pos:a], mark]
                pos = b
            pieces.append(text[pos:])
            record = {"input": text, "label": "".join(pieces)}
        else:
            tail = meta.get("tail", "")
            lines = [f"Step {k}: {s.text}" for k, s in enumerate(trace.steps, 1)]
            head = trace.problem.text + " " if trace.problem.text else ""
            labelled = (x + m for x, m in zip(lines, marks, strict=True))
            record = {"input": head + "\n".join(x + TAG for x in lines) + tail,
                      "label": head + "\n".join(labelled) + tail}
        if "task" in meta:
            record["task"] = meta["task"]
        record.update(meta.get("extra", {}))
        return record

    def _mark(self, trace: Trace, i: int) -> str:
        verdict = binarize(trace.steps[i].label(), neutral=self.neutral, threshold=self.threshold)
        if verdict is None:
            raise PrmkitError(f"trace {trace.id}: step {i} has no label (or a neutral one under "
                              f"neutral='ignore'); Math-Shepherd needs '+' or '-' on every step")
        return " +" if verdict else " -"


def _read_marks(f: Fields, text: str, label: str, tags: list[tuple[int, int]]) -> list[int]:
    """The +1/-1 of each tag, checking that ``label`` is ``text`` with only the tags replaced."""
    values, pos_t, pos_l = [], 0, 0
    for k, (a, b) in enumerate(tags):
        seg = text[pos_t:a]
        if not label.startswith(seg, pos_l):
            raise f.error("label", _mismatch(text, label, pos_t, pos_l, len(seg)))
        pos_l += len(seg)
        mark = label[pos_l:pos_l + 2]
        if mark not in _MARKS:
            raise f.error("label", f"expected ' +' or ' -' for step {k + 1} at character {pos_l}, "
                                   f"got {label[pos_l:pos_l + 3]!r}")
        values.append(_MARKS[mark])
        pos_t, pos_l = b, pos_l + 2
    if label[pos_l:] != text[pos_t:]:
        raise f.error("label", _mismatch(text, label, pos_t, pos_l, len(text) - pos_t))
    return values


def _mismatch(text: str, label: str, pos_t: int, pos_l: int, n: int) -> str:
    k = 0
    while k < n and pos_l + k < len(label) and label[pos_l + k] == text[pos_t + k]:
        k += 1
    return (f"differs from input at character {pos_l + k} of label "
            f"({label[pos_l + k:pos_l + k + 12]!r} where input has "
            f"{text[pos_t + k:pos_t + k + 12]!r}); only the step tags may differ")


def unchanged_tagged(trace: Trace, tag: str, *, require_marker: bool = False) -> TaggedText | None:
    """The parse of ``trace.text`` when it still describes the trace exactly, else None.

    "Exactly": the text parses with ``tag``, has as many steps as the trace, every step's span is
    where the parse puts it and holds the step's current text, and the problem text is unchanged.
    Writers use it to decide between reusing the original text and rebuilding from a template.
    """
    if trace.text is None:
        return None
    try:
        parsed = parse_tagged(trace.text, tag, require_marker=require_marker)
    except ValueError:
        return None
    text = trace.text
    if len(parsed.steps) != len(trace.steps) or text[slice(*parsed.problem)] != trace.problem.text:
        return None
    for (a, b), s in zip(parsed.steps, trace.steps, strict=True):
        if s.span != (a, b) or text[a:b] != s.text:
            return None
    return parsed
