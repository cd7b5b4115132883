"""Which errors do real policy samples make, and which does error injection make? Side by side.

    python benchmarks/error_mix.py runs/corpus/arith-train.jsonl
    python benchmarks/error_mix.py runs/corpus/arith-train.jsonl --per-problem 3 --seed 1

The real side: traces sampled from a policy with symbolic step labels (what ``prmkit generate --env
arith`` writes; a file still being written is read as far as it goes). Each trace with a wrong step is
classified by its *first* wrong step: the checker's verdict there, refined by what the step computes
against the problem's known operations (:func:`classify`). The injected side: ``prmkit.data.inject_errors``
on the same problems (their reference solutions), every error type, labelled by the same checker and
classified the same way; the third column is the type each injected trace was made as, so the last
column says how often the classifier recovers it (a check on the classifier, not on the samples).

Two tables: the checker's verdicts at the first wrong step, and the error types. The command that
reproduces the run is printed last.
"""

from __future__ import annotations

import argparse
import copy
import re
import shlex
import sys
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.data import ERROR_TYPES, ImportReport, inject_errors, read
from prmkit.envs import SymbolicChecker
from prmkit.trace import Problem, Trace
from prmkit.trace_queries import states_answer

SOURCE = "symbolic"
OTHER = "other"
_OP_RE = re.compile(r"(?<=[\d)])\s*([-+*/×x÷·−])\s*(?=[\d(])")
_FAMILY = {"+": "+", "-": "-", "−": "-", "*": "*", "×": "*", "x": "*", "·": "*", "/": "/", "÷": "/"}
_SCALES = {Fraction(10), Fraction(100), Fraction(1, 10), Fraction(1, 100)}


def _binary(comp: Any) -> tuple[Fraction, str, Fraction] | None:
    """``(a, op, b)`` of a computation with exactly one operator, else None."""
    ops = _OP_RE.findall(comp.expr)
    if len(ops) != 1 or len(comp.operands) != 2:
        return None
    return comp.operands[0], _FAMILY[ops[0]], comp.operands[1]


def _replay(checker: SymbolicChecker, steps: list[str], meta: dict[str, Any]) -> tuple[Fraction, list, list, list]:
    """Before the first wrong step: the value the trace holds now, the problem's operations it has
    applied and those it has not, and every value it derived."""
    remaining = [(o["op"], Fraction(o["operand"])) for o in meta["ops"]]
    applied, derived = [], []
    now = Fraction(meta["start"])
    for text in steps:
        for c in checker.computations(text):
            parts = _binary(c)
            if parts and (parts[1], parts[2]) in remaining:
                remaining.remove((parts[1], parts[2]))
                applied.append((parts[1], parts[2]))
            derived.append(c.claimed)
            now = c.claimed
    return now, applied, remaining, derived


def classify(trace: Trace, source: str = SOURCE) -> tuple[str, str] | None:
    """``(verdict, error type)`` of the first step labelled wrong by ``source``, or None when no step
    is. The type is one of :data:`prmkit.data.ERROR_TYPES` or ``"other"``:

    - a wrong step in a trace whose final answer is right: ``right_answer_wrong_step``;
    - the answer line (no computation in it): ``unsupported_answer``;
    - ``arithmetic_error``: ``unit_scale_slip`` when the claimed result is the true one times or over
      10 or 100, else ``arithmetic_slip``;
    - ``unknown_quantity``: ``wrong_operand`` when every unknown number is a distractor of the
      problem (the checker knows only the story's numbers), ``other`` when one is a true value the
      trace never wrote (a skipped computation, right in substance), else ``invented_quantity``;
    - ``wrong_value`` (a right computation off the true path), against the operations the trace has
      applied so far: on the value it holds, an operation of the problem not next in line
      (``dropped_step``), one already applied (``duplicated_step``), the next operation with another
      quantity of the problem or of the trace (``wrong_operand``), a remaining operand with another
      operation (``wrong_operation``); the next operation on an older value in place of the current
      one (``wrong_operand``); anything else (say a step after every operation is done) ``other``.
      Some steps fit two readings (adding a later operand early is a dropped step or a wrong
      operand); the first rule in this order wins.
    """
    k = trace.first_error(source)
    if k is None or k < 0:
        return None
    lab = trace.steps[k].label(source)
    verdict = (lab.meta or {}).get("verdict", "unknown") if lab else "unknown"
    if trace.outcome == "correct":
        return verdict, "right_answer_wrong_step"
    text = trace.steps[k].text
    checker = SymbolicChecker.for_problem(trace.problem, strict_path=True)
    comps = checker.computations(text)
    if states_answer(text) and not comps:
        return verdict, "unsupported_answer"
    meta = (trace.problem.meta or {}).get("arith")
    if verdict == "arithmetic_error":
        bad = next((c for c in comps if not c.ok), None)
        if bad is not None and bad.actual and bad.claimed / bad.actual in _SCALES:
            return verdict, "unit_scale_slip"
        return verdict, "arithmetic_slip"
    if verdict == "unsupported_answer":
        return verdict, "unsupported_answer"
    if not meta:
        return verdict, {"unknown_quantity": "invented_quantity"}.get(verdict, OTHER)
    steps = [s.text for s in trace.steps]
    now, applied, remaining, derived = _replay(checker, steps[:k], meta)
    distractors = {Fraction(d) for d in meta["distractors"]}
    given = {Fraction(g) for g in meta["given"]} | distractors
    if verdict == "unknown_quantity":
        unknown = checker.check_steps(steps)[k].unknown
        if unknown and all(u in distractors for u in unknown):
            return verdict, "wrong_operand"
        if any(u in set(checker.values or ()) for u in unknown):
            return verdict, OTHER
        return verdict, "invented_quantity"
    if verdict != "wrong_value":
        return verdict, OTHER
    off = [c for c in comps if c.claimed not in set(checker.values or ()) and c.claimed not in checker.given]
    parts = _binary(off[0]) if off else None
    if parts is None:
        return verdict, OTHER
    a, op, b = parts
    nxt = remaining[0] if remaining else None
    if a == now:
        if (op, b) in remaining[1:]:
            return verdict, "dropped_step"
        if (op, b) in applied:
            return verdict, "duplicated_step"
        # The next operation with another number ("finds 5 more" where the story says 6) before a
        # remaining number with another operation: the first keeps what the step says it does.
        if nxt is not None and op == nxt[0] and (b in given or b in derived):
            return verdict, "wrong_operand"
        if any(b == rb and op != rop for rop, rb in remaining):
            return verdict, "wrong_operation"
        return verdict, OTHER
    if (a in given or a in derived) and nxt is not None and (op, b) == nxt:
        return verdict, "wrong_operand"
    return verdict, OTHER


def _slip_sizes(traces: Iterable[Trace]) -> str:
    sizes = Counter()
    for t in traces:
        k = t.first_error(SOURCE)
        bad = next((c for c in SymbolicChecker.for_problem(t.problem).computations(t.steps[k].text) if not c.ok), None)
        if bad is None or bad.actual is None:
            continue
        d = abs(bad.claimed - bad.actual)
        sizes["1-3" if d <= 3 else "4-10" if d <= 10 else ">10"] += 1
    n = sum(sizes.values())
    return ", ".join(f"{b} {sizes[b]} ({sizes[b] / max(n, 1):.0%})" for b in ("1-3", "4-10", ">10"))


def _symbolic_copy(t: Trace) -> Trace:
    """``t`` with its labels replaced by the symbolic checker's (as ``prmkit generate`` labels)."""
    t = copy.deepcopy(t)
    for s in t.steps:
        s.labels = []
    SymbolicChecker.for_problem(t.problem, strict_path=True).label(t)
    return t


def _problems(traces: Iterable[Trace]) -> list[Problem]:
    seen, out = set(), []
    for t in traces:
        key = t.problem.id or t.problem.text
        if key not in seen and t.problem.solution:
            seen.add(key)
            out.append(t.problem)
    return out


def _table(title: str, rows: list[str], cols: list[tuple[str, Counter]], extra: dict[str, dict[str, str]] | None = None
           ) -> str:
    totals = [sum(c.values()) for _, c in cols]
    head = f"{title:<26}" + "".join(f"{name:>22}" for name, _ in cols) + "".join(f"{e:>22}" for e in extra or {})
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = "".join(f"{c[r]:>12d} {c[r] / max(n, 1):>8.1%} " for (_, c), n in zip(cols, totals, strict=True))
        cells += "".join(f"{v.get(r, ''):>22}" for v in (extra or {}).values())
        lines.append(f"{r:<26}{cells}")
    lines.append(f"{'total':<26}" + "".join(f"{n:>12d} {'':>9}" for n in totals))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("samples", help="prmkit JSONL of policy samples with symbolic labels (prmkit generate --env arith)")
    ap.add_argument("--per-problem", type=int, default=1, help="injected wrong traces per problem")
    ap.add_argument("--seed", type=int, default=0, help="injection seed")
    ap.add_argument("--examples", type=int, default=0, help="print this many real first errors per type")
    args = ap.parse_args(argv)

    report = ImportReport()
    real = list(read(args.samples, "prmkit", skip_invalid=True, report=report))  # a torn last line is skipped
    problems = _problems(real)
    real_cls = [(t, classify(t)) for t in real]
    real_err = [(t, c) for t, c in real_cls if c is not None]
    injected = list(inject_errors(problems, per_problem=args.per_problem, correct_fraction=0.0, seed=args.seed))
    inj_cls = [(t, classify(t)) for t in map(_symbolic_copy, injected)]  # the made type stays in meta

    print(f"real samples: {args.samples}: {len(real)} traces of {len(problems)} problems"
          + (f" ({len(report.skipped)} unreadable lines skipped)" if report.skipped else "")
          + f"; {len(real_err)} with a wrong step ({len(real_err) / max(len(real), 1):.1%}), "
          f"{sum(t.outcome == 'correct' for t, _ in real_err)} of them with a right answer")
    missed = sum(c is None for _, c in inj_cls)
    print(f"injected: {len(injected)} wrong traces ({args.per_problem} per problem, seed {args.seed}, all "
          f"{len(ERROR_TYPES)} types); the checker finds no wrong step in {missed}")
    print()

    verdicts = ["arithmetic_error", "unknown_quantity", "wrong_value", "unsupported_answer"]
    real_v = Counter(c[0] for _, c in real_err)
    inj_v = Counter(c[0] for _, c in inj_cls if c is not None)
    verdicts += sorted((set(real_v) | set(inj_v)) - set(verdicts))
    print(_table("checker verdict", verdicts, [("real", real_v), ("injected", inj_v)]))
    print()

    made = Counter(t.meta["derived"]["error_type"] for t in injected)
    real_t = Counter(c[1] for _, c in real_err)
    inj_t = Counter(c[1] for _, c in inj_cls if c is not None)
    same = Counter(t.meta["derived"]["error_type"] for t, c in inj_cls
                   if c is not None and c[1] == t.meta["derived"]["error_type"])
    recovered = {et: f"{same[et]}/{made[et]} {same[et] / made[et]:.0%}" if made[et] else "-" for et in ERROR_TYPES}
    print(_table("error type", [*ERROR_TYPES, OTHER],
                 [("real (classified)", real_t), ("injected (made)", made), ("injected (classified)", inj_t)],
                 {"classified as made": recovered}))
    print()
    print("size of the arithmetic slips (|claimed - true| at the first wrong equation; injection makes 1-3 "
          "units of the last digit): real " + _slip_sizes(t for t, c in real_err if c[1] == "arithmetic_slip")
          + "; injected " + _slip_sizes(t for t, c in inj_cls if c is not None and c[1] == "arithmetic_slip"))
    if args.examples:
        for et in [*ERROR_TYPES, OTHER]:
            shown = [t for t, c in real_err if c[1] == et][: args.examples]
            for t in shown:
                k = t.first_error(SOURCE)
                print(f"\n[{et}] {t.id} step {k}: {t.steps[k].text!r}  ({t.steps[k].label(SOURCE).meta.get('reason')})")
    print()
    print("reproduce: python benchmarks/error_mix.py " + shlex.join(sys.argv[1:] if argv is None else argv))
    _record.record("error_mix", {"real": dict(real_t), "injected_made": dict(made), "injected_classified": dict(inj_t)},
                   None, goal="injected error types match the policy's own first errors")


if __name__ == "__main__":
    main()
