"""Reference solutions as step lists: GSM8K annotations stripped, the computed results each step states,
and the trace a derivation builds from (possibly changed) reference steps."""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from prmkit.data._answers import answers_equal, extract_answer, states_answer
from prmkit.data._gsm8k import parse_calculations
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace

# A number as solutions write it: 1,234.5 / 1234 / .25 / -3 (a trailing full stop is not a decimal point).
_NUM = r"-?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
_NUM_RE = re.compile(_NUM)
# A result stated after an equals sign, currency sign allowed: "5 + 3 = 8", "4 * 3 = $12".
_EQ_RE = re.compile(r"=\s*\$?\s*(" + _NUM + ")")
_CALC_RE = re.compile(r"<<[^<>]*>>")
_GSM8K_FINAL = "#### "


def strip_calculations(text: str) -> str:
    """``text`` without GSM8K calculator annotations.

    >>> strip_calculations("48/2 = <<48/2=24>>24 clips")
    '48/2 = 24 clips'
    """
    return _CALC_RE.sub("", text)


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


@dataclass
class _Result:
    """A computed result stated in a (cleaned) step: where it is, as written, and its expression."""

    start: int
    end: int
    text: str
    expr: str | None


def _clean_step(raw: str) -> tuple[str, list[_Result]]:
    """The step without annotations and the computed results it states, in order.

    With annotations, a result is the number written right after ``<<expr=result>>`` when it has the
    annotation's value (annotations like ``<<3/4=3/4>>`` whose result is not a number are not used);
    without them, the number after each ``=``.
    """
    calcs = parse_calculations(raw)
    if not calcs:
        return raw, [_Result(m.start(1), m.end(1), m.group(1), None) for m in _EQ_RE.finditer(raw)]
    cleaned, pos, results = "", 0, []
    for c in calcs:
        a, b = c["span"]
        cleaned += raw[pos:a]
        pos = b
        m = _NUM_RE.match(raw, b)
        want = _decimal(c["result"]) if c["result"] is not None else None
        if m and want is not None and _decimal(m.group()) == want:
            # raw[b:] is appended next, so the number starts where `cleaned` now ends.
            results.append(_Result(len(cleaned), len(cleaned) + len(m.group()), m.group(), c["expr"]))
    return cleaned + raw[pos:], results


def _nearby(written: str, rng: random.Random) -> str:
    """A different number near ``written``: off by 1–3 units of its last decimal place, written the
    same way (decimals, thousands separators, a bare leading point), not negative unless it was."""
    return rng.choice(_nearby_all(written))


def _nearby_all(written: str) -> list[str]:
    """Every number :func:`_nearby` may return for ``written``, in its order of choice."""
    value = _decimal(written)
    if value is None:  # cannot happen: only text matched by _NUM reaches here
        raise PrmkitError(f"not a number: {written!r}")
    places = len(written.split(".", 1)[1]) if "." in written else 0
    unit = Decimal(1).scaleb(-places)
    out = []
    for k in (-3, -2, -1, 1, 2, 3):
        if value < 0 or value + k * unit >= 0:
            new = value + k * unit
            text = format(new, f"{',' if ',' in written else ''}.{places}f")
            if written.lstrip("-").startswith(".") and abs(new) < 1:
                text = text.replace("0.", ".", 1)
            out.append(text)
    return out


@dataclass
class _Reference:
    problem: Problem
    base_id: str
    origin: str
    steps: list[str]          # cleaned step texts, the answer line last when there is one
    results: list[list[_Result]]
    answer_line: bool         # whether the last step states the final answer
    final: str | None


def _reference(item: Problem | Trace, index: int) -> _Reference | None:
    if isinstance(item, Trace):
        problem, raw = copy.deepcopy(item.problem), [s.text for s in item.steps]
        final = item.final_answer if item.final_answer is not None else item.problem.answer
        base_id, origin = item.id, item.source or "reference"
    elif isinstance(item, Problem):
        if not item.solution or not item.solution.strip():
            return None
        problem = copy.deepcopy(item)
        raw = [line for line in item.solution.split("\n") if line.strip()]
        final = item.answer
        if raw and raw[-1].startswith(_GSM8K_FINAL):
            final = raw.pop()[len(_GSM8K_FINAL):].strip()
        base_id = item.id or f"problem-{index}"
        origin = (item.meta.get("arith") or {}).get("env") or "reference"
    else:
        raise PrmkitError(f"derive_traces takes Problems and Traces, got {type(item).__name__}")
    if not raw:
        return None
    cleaned = [_clean_step(r) for r in raw]
    steps = [t for t, _ in cleaned]
    results = [r for _, r in cleaned]
    answer_line = states_answer(steps[-1])
    if answer_line:
        results[-1] = []  # the answer line restates a result; it computes none
    elif final is not None:
        steps.append(f"The answer is {final}.")
        results.append([])
        answer_line = True
    return _Reference(problem, base_id, origin, steps, results, answer_line, final)


def _make_trace(ref: _Reference, steps: list[str], labels: list[int | None], *, kind: str,
                label_args: dict[str, Any], args: dict[str, Any], derived: dict[str, Any],
                trace_id: str | None = None, wrong_meta: dict[str, Any] | None = None) -> Trace:
    """The trace of ``steps`` (spans into their newline-joined text), hard ``synthetic`` labels
    ``labels`` (None: unlabelled), the answer read from the text and the outcome checked as
    ``prmkit generate`` does, and a ``derive`` provenance entry. ``wrong_meta`` goes on the -1 label."""
    text = "\n".join(steps)
    out, at = [], 0
    for s, v in zip(steps, labels, strict=True):
        labs = [] if v is None else [StepLabel(v, source="synthetic", labeler="derived", args=dict(label_args),
                                               meta=dict(wrong_meta or {}) if v == -1 else {})]
        out.append(Step(s, span=(at, at + len(s)), labels=labs))
        at += len(s) + 1
    answer = extract_answer(text)
    if ref.problem.answer is None:
        outcome = "unknown"
    else:
        right = answer is not None and answers_equal(answer, ref.problem.answer)
        outcome = "correct" if right else "incorrect"
    trace = Trace(id=trace_id or f"{ref.base_id}:derived:{kind}", problem=copy.deepcopy(ref.problem),
                  steps=out, final_answer=answer, outcome=outcome, source=f"derived:{ref.origin}",
                  text=text, meta={"derived": {"kind": kind, "from": ref.base_id, **derived}})
    trace.add_provenance("derive", "derived", {**args, "kind": kind})
    return trace
