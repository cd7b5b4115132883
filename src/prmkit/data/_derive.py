"""Labelled traces without a policy: reference solutions as they are, and made wrong on purpose.

Every step of a reference solution (GSM8K's worked answers, the ``arith`` environment's solutions,
MATH solutions whose steps state computed results) is right, so a trace that changes one of them has
its first wrong step known by construction: steps before it +1, it -1, the steps after it unlabelled
(they are neither right nor wrong as a continuation). Labels are ``StepLabel(v, source="synthetic",
labeler="derived")``; ``trace.meta["derived"]`` says what was changed and a ``derive`` provenance
entry records the call. ``final_answer`` is read from the text and ``outcome`` compared with the
reference answer, as ``prmkit generate`` does.

Two derivations:

- :func:`derive_traces` without ``error_types`` (what the demo's transfer probe uses, pinned by the
  golden test): one *arithmetic slip* per corrupted trace; the later steps keep their text, and the
  answer line carries the changed number only when the slipped step computed the final answer;
- :func:`inject_errors` / :func:`derive_file` / ``prmkit data derive`` (and :func:`derive_traces`
  with ``error_types``): errors of the types in :data:`ERROR_TYPES`, the later steps continuing from
  the wrong value, each label's ``args`` and ``trace.meta["derived"]["error_type"]`` naming its type.

>>> from prmkit.trace import Problem
>>> p = Problem("Ann has 5 apples and buys 3. How many?", answer="8", id="p",
...             solution="She buys 3: 5 + 3 = 8.\\nThe answer is 8.")
>>> bad = derive_traces([p], corrupt_fraction=1.0)[0]
>>> [s.text for s in bad.steps], [lab and lab.value for lab in bad.labels()], bad.outcome
(['She buys 3: 5 + 3 = 9.', 'The answer is 9.'], [-1, None], 'incorrect')
>>> op = next(inject_errors([p], error_types=["wrong_operation"], correct_fraction=0.0))
>>> [s.text for s in op.steps], op.meta["derived"]["error_type"], op.final_answer
(['She buys 3: 5 * 3 = 15.', 'The answer is 15.'], 'wrong_operation', '15')
"""

from __future__ import annotations

import itertools
import os
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import check_inputs, durable_file
from prmkit._result import Record
from prmkit.data._format import ImportReport, read
from prmkit.data._inject import ERROR_TYPES, candidates, equations
from prmkit.data._reference import _decimal, _make_trace, _nearby, _Reference, _reference
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Trace, TraceWriter

__all__ = ["ERROR_TYPES", "DeriveReport", "derive_file", "derive_traces", "gsm8k_derived_traces",
           "inject_errors"]


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
    return _make_trace(ref, steps, labels, kind="corrupted", label_args={"seed": seed}, args=args, derived={
        "step": k, "original": res.text, "changed": changed, "expr": res.expr,
        "span": [res.start, res.start + len(changed)], "answer_changed": answer_changed})


def _check_types(error_types: Iterable[str] | None) -> tuple[str, ...]:
    types = tuple(dict.fromkeys(ERROR_TYPES if error_types is None else error_types))
    unknown = [t for t in types if t not in ERROR_TYPES]
    if unknown or not types:
        raise PrmkitError(f"unknown error type(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
                          f"known: {', '.join(ERROR_TYPES)}")
    return types


def _typed(ref: _Reference, types: Sequence[str], count: int, seed: int, args: dict[str, Any],
           fallbacks: Counter | None = None, plausible_only: bool = False) -> list[Trace]:
    """Up to ``count`` different wrong traces of ``ref``. Slot ``i`` gets the type ``types[(o + i) %
    len(types)]`` for a per-problem offset ``o`` (so a file gets an even mix), or when that one does
    not apply another drawn among those that do; the draws depend only on the seed, the problem and
    the slot. ``plausible_only``: only errors whose final answer is plausible (a problem whose answer
    is not a plain number keeps every error: nothing to compare)."""
    cache: dict[str, list] = {}
    used: set[tuple[str, ...]] = set()
    offset = random.Random(f"inject:{seed}:{ref.base_id}").randrange(len(types))
    out = []
    def options(t: str) -> list:
        if t not in cache:
            cache[t] = [c for c in candidates(ref, t) if not plausible_only or c.plausible is not False]
        return [c for c in cache[t] if c.key not in used]

    for i in range(count):
        rng = random.Random(f"inject:{seed}:{ref.base_id}:{i}")
        t = types[(offset + i) % len(types)]
        if not options(t):
            # Another type, drawn evenly among those that apply (not the next in turn, which would
            # make the types after a rarely applicable one common).
            rest = [u for u in types if u != t and options(u)]
            if not rest:
                break
            if fallbacks is not None:
                fallbacks[t] += 1
            t = rng.choice(rest)
        pick = rng.choice(options(t))
        used.add(pick.key)
        w = pick.wrong
        labels: list[int | None] = [1] * w + [-1] + [None] * (len(pick.steps) - w - 1)
        derived = {"error_type": t, "step": w, **pick.detail,
                   "answer_changed": pick.steps[-1] != ref.steps[-1], "plausible": pick.plausible}
        out.append(_make_trace(ref, pick.steps, labels, kind="corrupted", trace_id=f"{ref.base_id}:derived:{i}:{t}",
                               label_args={"seed": seed, "error_type": t}, args={**args, "error_type": t},
                               derived=derived, wrong_meta={"verdict": t, "reason": pick.detail["edit"]}))
    return out


def _correct(ref: _Reference, seed: int, args: dict[str, Any]) -> Trace:
    return _make_trace(ref, list(ref.steps), [1] * len(ref.steps), kind="correct", label_args={"seed": seed},
                       args=args, derived={})


# A restating step a reshaped correct trace may carry: an equation the solution computed, said again.
_RESTATE = ("So {eq}.", "That is, {eq}.", "Check: {eq}.")


def _reshaped(ref: _Reference, delta: int, rng: random.Random, seed: int, args: dict[str, Any]) -> Trace:
    """The correct trace of ``ref`` with ``delta`` steps more (a reasoning step's equation said again
    after it: "So 36-8 = 28.") or fewer (two adjacent reasoning steps written as one line), as far as
    the reference allows. Every step is still right; what changes is the step count, which would
    otherwise tell a dropped step, a premature answer or a duplicated step from a right trace."""
    steps = list(ref.steps)
    answer = steps.pop() if ref.answer_line else None
    merged = restated = 0
    eq_of = dict(equations(ref))
    origin = list(range(len(steps)))  # the reference step each line ends with
    while delta < 0 and len(steps) > 1:
        i = rng.randrange(len(steps) - 1)
        # the second step said by its equation alone, as a terse solver writes it (a dropped step or
        # a premature answer makes a wrong trace shorter in characters too, not only in steps)
        second = f"So {eq_of[origin[i + 1]]}." if origin[i + 1] in eq_of else steps[i + 1].lstrip()
        steps[i:i + 2] = [f"{steps[i].rstrip()} {second}"]
        origin[i:i + 2] = [origin[i + 1]]
        delta, merged = delta + 1, merged + 1
    if delta > 0:
        eqs = [(k, e) for k, e in equations(ref) if k < len(steps)]
        chosen = sorted(rng.sample(eqs, min(delta, len(eqs))), reverse=True)
        for k, e in chosen:  # from the last, so earlier positions hold
            steps.insert(k + 1, rng.choice(_RESTATE).format(eq=e))
        restated = len(chosen)
    if answer is not None:
        steps.append(answer)
    return _make_trace(ref, steps, [1] * len(steps), kind="correct", label_args={"seed": seed}, args=args,
                       derived={"reshaped": {"merged": merged, "restated": restated}})


def derive_traces(items: Iterable[Problem | Trace], *, seed: int = 0, corrupt_fraction: float = 0.5,
                  pairs: bool = False, counts: dict[str, int] | None = None,
                  error_types: Sequence[str] | None = None) -> list[Trace]:
    """Correct and corrupted traces from reference solutions (see the module docs).

    ``items``: :class:`~prmkit.trace.Problem` objects with a ``solution`` (one step per line, a last
    ``#### N`` line allowed) or reference :class:`~prmkit.trace.Trace` objects (what
    ``prmkit.data.read(path, "gsm8k")`` yields). Each problem gives its corrupted trace with
    probability ``corrupt_fraction``, else its correct one; with ``pairs`` it gives both. A problem
    with no step stating a computed result gives its correct trace only. The draws for a problem
    depend only on ``seed`` and the problem's id, so the same problem gets the same traces whatever
    else is in ``items``.

    ``error_types``: None (the default) makes the original corruption, an arithmetic slip whose later
    steps keep their text; names from :data:`ERROR_TYPES` make one error of those types instead (as
    :func:`inject_errors`: the later steps continue from the wrong value).

    ``counts``, when given, is filled with ``items``, ``no_solution`` (Problems without a solution,
    skipped), ``correct``, ``corrupted`` and ``uncorruptible`` (a corruption was due but no error
    applies to the solution).
    """
    if not 0.0 <= corrupt_fraction <= 1.0:
        raise PrmkitError(f"corrupt_fraction must lie in [0, 1], got {corrupt_fraction}")
    types = None if error_types is None else _check_types(error_types)
    tally = {"items": 0, "no_solution": 0, "correct": 0, "corrupted": 0, "uncorruptible": 0}
    args: dict[str, Any] = {"seed": seed, "corrupt_fraction": corrupt_fraction, "pairs": pairs}
    if types is not None:
        args["error_types"] = list(types)
    out: list[Trace] = []
    for index, item in enumerate(items):
        tally["items"] += 1
        ref = _reference(item, index)
        if ref is None:
            tally["no_solution"] += 1
            continue
        rng = random.Random(f"derive:{seed}:{ref.base_id}")
        corrupt = pairs or rng.random() < corrupt_fraction
        bad: Trace | None = None
        if corrupt and types is None:
            bad = _corrupted(ref, rng, seed, args)
        elif corrupt:
            bad = next(iter(_typed(ref, types, 1, seed, args)), None)
        if corrupt and bad is None:
            tally["uncorruptible"] += 1
        if pairs or bad is None:
            out.append(_correct(ref, seed, args))
            tally["correct"] += 1
        if bad is not None:
            out.append(bad)
            tally["corrupted"] += 1
    if counts is not None:
        counts.update(tally)
    return out


def gsm8k_derived_traces(path: str | os.PathLike, limit: int | None = None, seed: int = 0, *,
                         corrupt_fraction: float = 0.5, pairs: bool = False,
                         counts: dict[str, int] | None = None,
                         error_types: Sequence[str] | None = None) -> list[Trace]:
    """:func:`derive_traces` over the first ``limit`` records (all when None) of a GSM8K file
    (``{"question", "answer"}`` rows, the Socratic files too)."""

    def records() -> Iterable[Trace]:
        for i, t in enumerate(read(path, "gsm8k")):
            if limit is not None and i >= limit:
                return
            yield t

    return derive_traces(records(), seed=seed, corrupt_fraction=corrupt_fraction, pairs=pairs,
                         counts=counts, error_types=error_types)


@dataclass
class DeriveReport(Record):
    """What :func:`inject_errors` / :func:`derive_file` made: ``items`` read, ``problems`` that gave
    traces, ``traces`` written (``correct`` of them correct, the rest by error type in ``by_type``),
    problems ``skipped`` by reason, ``fallbacks`` (slots whose type did not apply to the problem, by
    that type; another type was made) and ``short`` (wrong traces asked for that a problem could not
    give: it allows fewer different errors)."""

    kind: ClassVar[str] = "derive"
    items: int = 0
    problems: int = 0
    traces: int = 0
    correct: int = 0
    by_type: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    fallbacks: Counter = field(default_factory=Counter)
    short: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        skipped = sum(self.skipped.values())
        why = "; ".join(f"{n}× {r}" for r, n in self.skipped.most_common())
        return (f"{self.traces} traces ({self.correct} correct, {self.traces - self.correct} wrong) from "
                f"{self.problems} of {self.items} problems; {skipped} skipped" + (f" ({why})" if why else ""))

    def lines(self) -> list[str]:
        """What a terminal shows: :meth:`summary`, the wrong traces by error type, the types that did
        not apply, and the wrong traces fewer than asked."""
        out = [self.summary(),
               "by error type: " + ", ".join(f"{t} {n}" for t, n in sorted(self.by_type.items()))]
        if self.fallbacks:
            out.append("did not apply (another type made instead): "
                       + ", ".join(f"{t} {n}" for t, n in self.fallbacks.most_common()))
        if self.short:
            out.append(f"{self.short} wrong traces fewer than asked: some problems allow fewer different errors")
        return out


def _usable(item: Problem | Trace, index: int) -> tuple[_Reference | None, str | None, str | None]:
    """``(reference, problem key, reason it is not usable)``. A record whose problem has a solution
    gives that solution; a trace without one is its own reference only when nothing says it is wrong."""
    if isinstance(item, Trace) and item.problem.solution and item.problem.solution.strip():
        p = item.problem
        item = Problem(p.text, answer=p.answer, solution=p.solution, id=p.id or item.id, meta=dict(p.meta))
    if isinstance(item, Trace) and (item.outcome == "incorrect" or any(
            lab is not None and lab.positive is False for lab in item.labels())):
        return None, None, "not a correct reference (a wrong step or answer)"
    ref = _reference(item, index)
    if ref is None:
        return None, None, "no reference solution"
    key = ref.base_id if isinstance(item, Trace) else (item.id or item.text)
    return ref, key, None


def inject_errors(items: Iterable[Problem | Trace], *, error_types: Sequence[str] | None = None,
                  per_problem: int = 1, correct_fraction: float = 0.5, seed: int = 0,
                  hard_negatives: bool = False, report: DeriveReport | None = None) -> Iterator[Trace]:
    """Wrong traces of the types in ``error_types`` (default: all of :data:`ERROR_TYPES`) from
    reference solutions, ``per_problem`` different ones per problem (types in turn, so a file gets an
    even mix), and each problem's correct trace with probability ``correct_fraction``.

    ``items``: Problems with a ``solution`` (``arith`` problems, or any with one step per line) or
    Traces (what ``prmkit.data.read`` yields for GSM8K and MATH files; a trace whose problem has a
    solution gives that solution, so a file of policy samples gives each problem once). A problem
    without a usable reference, or to which none of the types applies, is skipped and counted in
    ``report`` with its reason. Each trace depends only on the problem, its slot and ``seed``.

    Every wrong trace's ``meta["derived"]["plausible"]`` says whether its final answer could pass for
    the right one by its look (:func:`~prmkit.data.plausible`; None when the answer is not a plain
    number). ``hard_negatives``: make only such errors (a problem that allows none is skipped), and
    give each correct trace the step count of one of its problem's wrong traces, drawn at random, by
    writing two of its steps as one line or saying an equation again (``meta["derived"]["reshaped"]``),
    so that neither the answer nor the shape of a trace gives its label away (``benchmarks/derive_cues.py``
    measures what is left).
    """
    types = _check_types(error_types)
    if per_problem < 1:
        raise PrmkitError(f"per_problem must be at least 1, got {per_problem}")
    if not 0.0 <= correct_fraction <= 1.0:
        raise PrmkitError(f"correct_fraction must lie in [0, 1], got {correct_fraction}")
    report = report if report is not None else DeriveReport()
    args: dict[str, Any] = {"seed": seed, "error_types": list(types), "per_problem": per_problem,
                            "correct_fraction": correct_fraction}
    if hard_negatives:  # only when on, so that the traces made without it stay as they were
        args["hard_negatives"] = True
    seen: set[str] = set()
    for index, item in enumerate(items):
        report.items += 1
        ref, key, why = _usable(item, index)
        if ref is None or key is None:
            report.skipped[why or "no reference solution"] += 1
            continue
        if key in seen:
            report.skipped["problem already derived"] += 1
            continue
        seen.add(key)
        wrong = _typed(ref, types, per_problem, seed, args, report.fallbacks, plausible_only=hard_negatives)
        if not wrong:
            report.skipped["no plausible error applies" if hard_negatives else "no error type applies"] += 1
            continue
        report.problems += 1
        report.short += per_problem - len(wrong)
        if random.Random(f"inject:{seed}:{ref.base_id}:correct").random() < correct_fraction:
            report.traces += 1
            report.correct += 1
            if hard_negatives:
                rng = random.Random(f"inject:{seed}:{ref.base_id}:shape")
                delta = len(rng.choice(wrong).steps) - len(ref.steps)
                yield _reshaped(ref, delta, rng, seed, args)
            else:
                yield _correct(ref, seed, args)
        for t in wrong:
            report.traces += 1
            report.by_type[t.meta["derived"]["error_type"]] += 1
            yield t


def derive_file(inp: str | os.PathLike | Iterable[Problem | Trace], out: str | os.PathLike, *,
                error_types: Sequence[str] | None = None, per_problem: int = 1, correct_fraction: float = 0.5,
                seed: int = 0, hard_negatives: bool = False, fmt: str | None = None,
                limit: int | None = None) -> DeriveReport:
    """:func:`inject_errors` from a file of problems with reference solutions (any format ``prmkit.data``
    reads, ``fmt`` detected when None; or an iterable of Problems / Traces, as
    ``prmkit.generate.load_problems`` gives) into the prmkit JSONL file ``out``; ``limit``: only the
    first N records of the input (a small corpus, or a quick check). Written to a temporary
    file beside ``out`` and renamed when complete; records that cannot be read
    are skipped and counted, like problems without a usable reference.

    >>> # derive_file("gsm8k/test.jsonl", "derived.jsonl", per_problem=2, seed=0).summary()
    """
    out = Path(out)
    imported = ImportReport()
    if isinstance(inp, (str, os.PathLike)):
        path = Path(inp)
        if not path.exists():
            raise PrmkitError(f"{path}: no such file")
        check_inputs(out, [path])
        items: Iterable[Problem | Trace] = read(path, fmt, skip_invalid=True, report=imported)
    else:
        items = inp
    if limit is not None:
        if limit < 1:
            raise PrmkitError(f"limit must be >= 1, got {limit}")
        items = itertools.islice(items, limit)
    report = DeriveReport()
    src = inp if isinstance(inp, (str, os.PathLike)) else None
    with durable_file(out, inputs=[src]) as partial, TraceWriter(partial) as w:
        for t in inject_errors(items, error_types=error_types, per_problem=per_problem,
                               correct_fraction=correct_fraction, seed=seed, hard_negatives=hard_negatives,
                               report=report):
            w.write(t)
    for reason, n in imported.skip_reasons().items():
        report.items += n
        report.skipped[f"unreadable record: {reason}"] += n
    return report
