"""Labelled traces without a policy: reference solutions, as they are and with one result corrupted.

A second labelled data source costs nothing offline when it is derived from reference solutions
(GSM8K's worked answers, the ``arith`` environment's solutions): every reference step is right, and
changing the result one step states makes that step wrong while leaving everything before it right.
Domain-transfer and process-collapse probes (:mod:`prmkit.eval._probes`) need exactly such data.

For each problem with a step-by-step reference solution, :func:`derive_traces` makes

- a **correct** trace: the reference steps (GSM8K calculator annotations ``<<expr=result>>``
  removed), ending with the line ``The answer is N.`` as ``prmkit generate`` asks a policy to write;
  every step labelled +1, outcome ``correct``;
- a **corrupted** trace: one step that states a computed result (the last number after an ``=``,
  or the visible result of its last calculator annotation) gets a nearby different number (the
  same number of decimals, off by 1 to 3 units of its last digit, not negative where the true
  value is not). Steps before it are labelled +1, it is labelled -1, and the steps after it are
  unlabelled: their text still uses the true value, so they are neither right nor wrong as a
  continuation. The answer line follows the text: it repeats the changed number when the
  corrupted step is the last reasoning step and its true result is the final answer (a wrong final
  answer); otherwise the final answer is still right — a "right answer, wrong step" trace.

``final_answer`` is read from the trace text with :func:`~prmkit.data.extract_answer` and
``outcome`` compared with the reference answer, as ``prmkit generate`` does
(:func:`~prmkit.generate.completion_to_trace`), so :func:`~prmkit.traces.is_correct`
works on them. Labels are ``StepLabel(v, source="synthetic", labeler="derived", args={"seed": ...})``;
``trace.meta["derived"]`` says what was changed, and a ``derive`` provenance entry records the call.

>>> from prmkit.trace import Problem
>>> p = Problem("Ann has 5 apples and buys 3. How many?", answer="8", id="p",
...             solution="She buys 3: 5 + 3 = 8.\\nThe answer is 8.")
>>> bad = derive_traces([p], corrupt_fraction=1.0)[0]
>>> [s.text for s in bad.steps], [lab and lab.value for lab in bad.labels()], bad.outcome
(['She buys 3: 5 + 3 = 9.', 'The answer is 9.'], [-1, None], 'incorrect')
"""

from __future__ import annotations

import copy
import os
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from prmkit.data import answers_equal, extract_answer, parse_calculations
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace
from prmkit.traces import states_answer

__all__ = ["derive_traces", "gsm8k_derived_traces", "arith_derived_traces", "strip_calculations"]

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
    value = _decimal(written)
    if value is None:  # cannot happen: only text matched by _NUM reaches here
        raise PrmkitError(f"not a number: {written!r}")
    places = len(written.split(".", 1)[1]) if "." in written else 0
    unit = Decimal(1).scaleb(-places)
    offsets = [k for k in (-3, -2, -1, 1, 2, 3) if value < 0 or value + k * unit >= 0]
    new = value + rng.choice(offsets) * unit
    out = format(new, f"{',' if ',' in written else ''}.{places}f")
    if written.lstrip("-").startswith(".") and abs(new) < 1:
        out = out.replace("0.", ".", 1)
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


def _make_trace(ref: _Reference, steps: list[str], labels: list[int | None], *, kind: str, seed: int,
                args: dict[str, Any], derived: dict[str, Any]) -> Trace:
    text = "\n".join(steps)
    out, at = [], 0
    for s, v in zip(steps, labels, strict=True):
        labs = [] if v is None else [StepLabel(v, source="synthetic", labeler="derived",
                                               args={"seed": seed})]
        out.append(Step(s, span=(at, at + len(s)), labels=labs))
        at += len(s) + 1
    answer = extract_answer(text)
    if ref.problem.answer is None:
        outcome = "unknown"
    else:
        right = answer is not None and answers_equal(answer, ref.problem.answer)
        outcome = "correct" if right else "incorrect"
    trace = Trace(id=f"{ref.base_id}:derived:{kind}", problem=copy.deepcopy(ref.problem), steps=out,
                  final_answer=answer, outcome=outcome, source=f"derived:{ref.origin}", text=text,
                  meta={"derived": {"kind": kind, "from": ref.base_id, **derived}})
    trace.add_provenance("derive", "derived", {**args, "kind": kind})
    return trace


def _corrupted(ref: _Reference, rng: random.Random, seed: int, args: dict[str, Any]) -> Trace | None:
    candidates = [i for i, r in enumerate(ref.results) if r]
    if not candidates:
        return None
    k = rng.choice(candidates)
    res = ref.results[k][-1]  # the step's own result: its last computation
    changed = _nearby(res.text, rng)
    steps = list(ref.steps)
    steps[k] = steps[k][:res.start] + changed + steps[k][res.end:]
    last_reasoning = len(steps) - 2 if ref.answer_line else len(steps) - 1
    final_value = _decimal(ref.final) if ref.final is not None else None
    answer_changed = (ref.answer_line and k == last_reasoning and final_value is not None
                      and _decimal(res.text) == final_value)
    if answer_changed:
        # The answer line repeats the step's result, so it carries the changed number.
        steps[-1] = f"The answer is {changed.replace(',', '')}."
    labels: list[int | None] = [1] * k + [-1] + [None] * (len(steps) - k - 1)
    return _make_trace(ref, steps, labels, kind="corrupted", seed=seed, args=args, derived={
        "step": k, "original": res.text, "changed": changed, "expr": res.expr,
        "span": [res.start, res.start + len(changed)], "answer_changed": answer_changed})


def derive_traces(items: Iterable[Problem | Trace], *, seed: int = 0, corrupt_fraction: float = 0.5,
                  pairs: bool = False, counts: dict[str, int] | None = None) -> list[Trace]:
    """Correct and corrupted traces from reference solutions (see the module docs).

    ``items``: :class:`~prmkit.trace.Problem` objects with a ``solution`` (one step per line, a last
    ``#### N`` line allowed) or reference :class:`~prmkit.trace.Trace` objects (what
    ``prmkit.data.read(path, "gsm8k")`` yields). Each problem gives its corrupted trace with
    probability ``corrupt_fraction``, else its correct one; with ``pairs`` it gives both. A problem
    with no step stating a computed result gives its correct trace only. The draws for a problem
    depend only on ``seed`` and the problem's id, so the same problem gets the same traces whatever
    else is in ``items``.

    ``counts``, when given, is filled with ``items``, ``no_solution`` (Problems without a solution,
    skipped), ``correct``, ``corrupted`` and ``uncorruptible`` (a corruption was due but the
    solution states no computed result).
    """
    if not 0.0 <= corrupt_fraction <= 1.0:
        raise PrmkitError(f"corrupt_fraction must lie in [0, 1], got {corrupt_fraction}")
    tally = {"items": 0, "no_solution": 0, "correct": 0, "corrupted": 0, "uncorruptible": 0}
    args = {"seed": seed, "corrupt_fraction": corrupt_fraction, "pairs": pairs}
    out: list[Trace] = []
    for index, item in enumerate(items):
        tally["items"] += 1
        ref = _reference(item, index)
        if ref is None:
            tally["no_solution"] += 1
            continue
        rng = random.Random(f"derive:{seed}:{ref.base_id}")
        corrupt = pairs or rng.random() < corrupt_fraction
        bad = _corrupted(ref, rng, seed, args) if corrupt else None
        if corrupt and bad is None:
            tally["uncorruptible"] += 1
        if pairs or bad is None:
            out.append(_make_trace(ref, list(ref.steps), [1] * len(ref.steps), kind="correct", seed=seed,
                                   args=args, derived={}))
            tally["correct"] += 1
        if bad is not None:
            out.append(bad)
            tally["corrupted"] += 1
    if counts is not None:
        counts.update(tally)
    return out


def gsm8k_derived_traces(path: str | os.PathLike, limit: int | None = None, seed: int = 0, *,
                         corrupt_fraction: float = 0.5, pairs: bool = False,
                         counts: dict[str, int] | None = None) -> list[Trace]:
    """:func:`derive_traces` over the first ``limit`` records (all when None) of a GSM8K file
    (``{"question", "answer"}`` rows, the Socratic files too)."""
    from prmkit.data import read

    def records() -> Iterable[Trace]:
        for i, t in enumerate(read(path, "gsm8k")):
            if limit is not None and i >= limit:
                return
            yield t

    return derive_traces(records(), seed=seed, corrupt_fraction=corrupt_fraction, pairs=pairs,
                         counts=counts)


def arith_derived_traces(config: Any = None, n: int = 100, seed: int = 0, *,
                         corrupt_fraction: float = 0.5, pairs: bool = False,
                         counts: dict[str, int] | None = None) -> list[Trace]:
    """:func:`derive_traces` over problems ``0 .. n-1`` of the built-in ``arith`` environment
    (``config``: an :class:`~prmkit.envs.ArithConfig`, default settings when None; its ``seed``
    picks the problems, ``seed`` here the corruptions).

    >>> from prmkit.envs import ArithConfig
    >>> ts = arith_derived_traces(ArithConfig(steps=2), 4, pairs=True)
    >>> [t.meta["derived"]["kind"] for t in ts[:2]], {t.outcome for t in ts[::2]}
    (['correct', 'corrupted'], {'correct'})
    """
    from prmkit.envs import ArithEnv

    return derive_traces(ArithEnv(config).problems(n), seed=seed, corrupt_fraction=corrupt_fraction,
                         pairs=pairs, counts=counts)
