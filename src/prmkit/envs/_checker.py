"""Symbolic step checking: read the computations a freely written step claims and verify them.

A step such as ``"3 x 5 = 15 apples"``, ``"16 - 3 - 4 = 9"``, ``"Janet sells 16 - 3 - 4 = <<16-3-4=9>>9
eggs"`` or ``"so he has 8 left"`` claims equations and numbers. :class:`SymbolicChecker` extracts them
and gives the step one verdict:

- ``arithmetic_error``: an equation whose two sides differ (or a GSM8K ``<<expr=result>>`` annotation
  that is wrong);
- ``unknown_quantity``: an operand, or a number the step states as a fact, that is neither in the
  problem nor derived by an earlier step (nor a harmless constant such as 1 or 100);
- ``wrong_value`` (only when the true intermediate values are known, as in the ``arith`` environment,
  and ``strict_path=True``): a correct computation whose result is not a quantity of the problem;
- ``unsupported_answer`` (in :meth:`SymbolicChecker.check_steps`): a final "The answer is N" line whose
  N is not the value the steps before it derived last;
- ``wrong_answer`` (only when the problem's true answer is known, as in the ``arith`` environment, and
  ``strict_path=True``): a final-answer line after valid steps only, which follows from them but is not
  the problem's answer — a solution that stopped before its last operation. Without this verdict such a
  trace has no wrong step at all, and a PRM trained on it learns that stopping early is safe. (After an
  earlier wrong step, an answer line that follows from the steps keeps its own verdict: the first error
  is already found, and the hand-labelled fixture judges such lines as consistent continuations.)
- ``correct``: every claim checks out;
- ``no_claim``: the step claims no number (a plan, a restatement) — nothing to check.

Verdicts become step labels with :meth:`SymbolicChecker.label` (source ``symbolic``): ``correct`` and
``no_claim`` → +1, every error → -1. Numbers are compared exactly as fractions, so ``0.1 + 0.2 = 0.3``
holds; a claimed result may be rounded to the precision it is written with (``10 / 3 = 3.33``).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from prmkit.data import arith_path_values
from prmkit.provenance import LabelProvenance
from prmkit.trace import StepLabel, Trace

__all__ = ["SymbolicChecker", "StepCheck", "Computation", "VERDICTS", "numbers_in_text",
           "parse_number"]

VERDICTS = ("correct", "arithmetic_error", "unknown_quantity", "wrong_value", "unsupported_answer",
            "wrong_answer", "no_claim")
_ANSWER_RE = re.compile(r"answer is:?\s*\$?\\?(?:boxed\{)?\s*(-?\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)

_NUM = r"(?<![\w.])\$?-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,]\d)|(?<![\w.])\$?-?\d+(?:\.\d+)?"
_NUM_RE = re.compile(_NUM)
_OPS = r"[-+*/×x÷·−]"
# An arithmetic expression: numbers joined by operators, with optional parentheses and units
# ("3 x 5 = 15 apples" — units after the result are ignored).
# A unit word may follow a number inside an expression ("16 coins - 14 = 2"); "x" is multiplication.
_UNIT = r"(?:\s+(?!x\b)[A-Za-z]+)?"
_TERM = rf"\(*\s*(?:{_NUM}){_UNIT}\s*\)*"
_EXPR = rf"{_TERM}(?:\s*{_OPS}\s*{_TERM})+"
_EQ_RE = re.compile(rf"(?P<lhs>{_EXPR})\s*=\s*(?P<rhs>\$?\s*-?\d[\d,]*(?:\.\d+)?)")
# GSM8K calculator annotations: <<48/2=24>>
# A bare "N = M" claim without an operator ("He gives away 1: 9 = 2."): true only if N equals M.
_BARE_EQ_RE = re.compile(rf"(?<![\d.)])(?<![-+*/×x÷·−]\s)(?P<lhs>{_NUM})\s*=\s*(?P<rhs>{_NUM})")
_CALC_RE = re.compile(r"<<(?P<lhs>[^<>=]+)=(?P<rhs>[^<>]*)>>")

_WORD_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "thousand": 1000,
    "twice": 2, "double": 2, "doubles": 2, "triple": 3, "triples": 3, "half": 2, "halves": 2,
    "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "dozen": 12, "pair": 2, "pairs": 2,
}
_WORD_RE = re.compile(r"\b(" + "|".join(_WORD_NUMBERS) + r")\b", re.IGNORECASE)
#: Numbers any step may use without the problem stating them (unit changes, halves, percent).
DEFAULT_CONSTANTS = frozenset({Fraction(0), Fraction(1), Fraction(2), Fraction(100)})

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv}


def parse_number(s: str) -> Fraction:
    """``"$1,200.50"`` -> ``Fraction(240100, 200)``; exact, no float rounding."""
    return Fraction(s.replace("$", "").replace(",", "").replace("−", "-").strip())


def numbers_in_text(text: str, *, words: bool = True) -> list[Fraction]:
    """Every number written in ``text`` (digits, with thousands commas and decimals; number words
    such as "three", "twice", "half", "dozen" when ``words``)."""
    out = [parse_number(m.group()) for m in _NUM_RE.finditer(text)]
    if words:
        out += [Fraction(_WORD_NUMBERS[m.group(1).lower()]) for m in _WORD_RE.finditer(text)]
    return out


def _evaluate(expr: str) -> Fraction | None:
    """Exact value of an arithmetic expression, or None when it is not one (or divides by zero)."""
    norm = (expr.replace("×", "*").replace("÷", "/").replace("·", "*").replace("−", "-")
            .replace("$", ""))
    norm = re.sub(r"(?<=\d)\s+(?!x\b)[A-Za-z]+", " ", norm)  # drop unit words after numbers
    norm = re.sub(r"(?<=[\d)\s])x(?=[\s\d(])", "*", norm)
    norm = re.sub(r"(?<=\d),(?=\d{3})", "", norm)
    try:
        tree = ast.parse(norm.strip(), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
                node.value, bool):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _BIN[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError("not arithmetic")

    try:
        return ev(tree)
    except (ValueError, ZeroDivisionError, TypeError):
        return None


def _matches(actual: Fraction, claimed: Fraction, written: str) -> bool:
    if actual == claimed:
        return True
    # Accept a result rounded to the decimals it is written with (10 / 3 = 3.33); an integer
    # claim is exact (10 / 3 = 3 is an error, not a rounding).
    decimals = len(written.split(".", 1)[1]) if "." in written else 0
    return decimals > 0 and abs(actual - claimed) <= Fraction(1, 2 * 10 ** decimals)


@dataclass
class Computation:
    """One claimed equation: ``expr = claimed``; ``actual`` is the true value of ``expr``."""

    expr: str
    claimed: Fraction
    actual: Fraction | None
    span: tuple[int, int]
    operands: list[Fraction]
    written: str = ""
    annotation: bool = False

    @property
    def ok(self) -> bool:
        return self.actual is not None and _matches(self.actual, self.claimed, self.written)


@dataclass
class StepCheck:
    """The verdict on one step, with what it was based on."""

    verdict: str
    computations: list[Computation] = field(default_factory=list)
    stated: list[Fraction] = field(default_factory=list)
    unknown: list[Fraction] = field(default_factory=list)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict in ("correct", "no_claim")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason,
                "computations": [{"expr": c.expr, "claimed": str(c.claimed),
                                  "actual": None if c.actual is None else str(c.actual),
                                  "ok": c.ok} for c in self.computations],
                "unknown": [str(u) for u in self.unknown]}


def _fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


class SymbolicChecker:
    """Check steps against the quantities of a problem.

    ``given``: the numbers of the problem (for the ``arith`` environment its exact list; otherwise
    :func:`numbers_in_text` of the problem text). ``values``: the true intermediate values when known.
    ``strict_path``: flag correct computations whose result is off the true path (needs ``values``).

    >>> c = SymbolicChecker(given=[16, 3, 4, 2])
    >>> [s.verdict for s in c.check_steps(["16 - 3 - 4 = 9 eggs", "9 x 2 = 19", "so she has 7 left"])]
    ['correct', 'arithmetic_error', 'unknown_quantity']
    """

    name = "symbolic"

    def __init__(self, given: Iterable[Any], *, values: Sequence[Any] | None = None,
                 strict_path: bool = False, constants: Iterable[Any] = DEFAULT_CONSTANTS,
                 answer: Any = None) -> None:
        self.given = {Fraction(str(g)) if not isinstance(g, Fraction) else g for g in given}
        self.values = [Fraction(str(v)) for v in values] if values is not None else None
        self.strict_path = strict_path and self.values is not None
        #: The problem's true answer (``arith``): with ``strict_path``, a final-answer line stating
        #: anything else is ``wrong_answer``.
        self.answer = Fraction(str(answer)) if answer is not None else None
        self.constants = {Fraction(str(c)) if not isinstance(c, Fraction) else c for c in constants}

    @classmethod
    def for_problem(cls, problem: Any, **kwargs: Any) -> SymbolicChecker:
        """A checker for a :class:`~prmkit.trace.Problem`: exact quantities for ``arith`` problems,
        the numbers of the text otherwise."""
        meta = (problem.meta or {}).get("arith")
        if meta:
            # The list of given numbers is exact here: no step may use a 1 or a 2 the story lacks.
            kwargs.setdefault("constants", ())
            final = meta["values"][-1] if meta.get("values") else meta.get("start")
            kwargs.setdefault("answer", final)
            return cls(meta["given"], values=path_values(meta), **kwargs)
        return cls(numbers_in_text(problem.text), **kwargs)

    # -- checking ------------------------------------------------------------------------------------
    def computations(self, text: str) -> list[Computation]:
        """The equations ``text`` claims, GSM8K calculator annotations included."""
        out: list[Computation] = []
        covered: list[tuple[int, int]] = []
        for m in _CALC_RE.finditer(text):
            lhs, rhs = m.group("lhs"), m.group("rhs")
            try:
                claimed = parse_number(rhs)
            except (ValueError, ZeroDivisionError):
                continue
            out.append(Computation(lhs, claimed, _evaluate(lhs), m.span(),
                                   numbers_in_text(lhs, words=False), rhs.strip(), annotation=True))
            covered.append(m.span())
        # Annotations are checked above; the plain text around them is checked once (the
        # annotation removed), so "16 - 3 - 4 = <<16-3-4=9>>9" yields the equation a single time.
        plain = _CALC_RE.sub(lambda m: " " * (m.end() - m.start()), text)
        for m in _EQ_RE.finditer(plain):
            lhs, rhs = m.group("lhs"), m.group("rhs")
            # "5 - 3 = 2" inside a date or a list "1-2" would need context; digits-only operands
            # joined by an operator are the common case and what we read.
            try:
                claimed = parse_number(rhs)
            except (ValueError, ZeroDivisionError):
                continue
            actual = _evaluate(lhs)
            if actual is None:
                continue
            out.append(Computation(lhs.strip(), claimed, actual, m.span(),
                                   numbers_in_text(lhs, words=False), rhs.strip()))
            covered.append(m.span())
        for m in _BARE_EQ_RE.finditer(plain):
            if any(a <= m.start() < b for a, b in covered):
                continue
            lhs, rhs = m.group("lhs"), m.group("rhs")
            out.append(Computation(lhs.strip(), parse_number(rhs), parse_number(lhs), m.span(),
                                   [parse_number(lhs)], rhs.strip()))
        out.sort(key=lambda c: c.span)
        return out

    def check_steps(self, steps: Sequence[str]) -> list[StepCheck]:
        """Check the steps of one trace in order (each may use what earlier steps derived).

        A final-answer line ("The answer is N") must give the value the steps before it derived
        last; otherwise it is ``unsupported_answer``. After valid steps only, it must also be the
        problem's answer where that is known (``strict_path``); otherwise it is ``wrong_answer``.
        """
        known = set(self.given) | set(self.constants)
        checks: list[StepCheck] = []
        last: Fraction | None = None
        for text in steps:
            chk = self._check(text, known)
            m = _ANSWER_RE.search(text)
            if m and chk.verdict in ("correct", "no_claim") and not chk.computations:
                claimed = parse_number(m.group(1))
                if last is None or claimed != last:
                    chk.verdict = "unsupported_answer"
                    chk.reason = (f"answers {_fmt(claimed)} but "
                                  + ("nothing was derived before" if last is None
                                     else f"the steps derived {_fmt(last)}"))
                elif (self.strict_path and self.answer is not None and claimed != self.answer
                      and all(c.ok for c in checks)):
                    chk.verdict = "wrong_answer"
                    chk.reason = (f"answers {_fmt(claimed)}, which the steps derived, but the problem's "
                                  f"answer is {_fmt(self.answer)} (a step is missing or wrong)")
            if chk.computations:
                last = chk.computations[-1].claimed
            elif chk.stated and not m:
                last = chk.stated[-1]
            checks.append(chk)
        return checks

    def check_step(self, text: str, derived: Iterable[Any] = ()) -> StepCheck:
        """Check one step given the quantities earlier steps derived."""
        known = set(self.given) | set(self.constants) | {Fraction(str(d)) for d in derived}
        return self._check(text, known)

    def _check(self, text: str, known: set[Fraction]) -> StepCheck:
        comps = self.computations(text)
        equation_spans = [c.span for c in comps]
        # Numbers stated outside any equation ("so he has 8 left", "The answer is 8").
        plain = _CALC_RE.sub(lambda m: " " * (m.end() - m.start()), text)
        stated = []
        for m in _NUM_RE.finditer(plain):
            if any(a <= m.start() < b for a, b in equation_spans):
                continue
            if _is_label_number(plain, m.start(), m.end()):
                continue
            stated.append(parse_number(m.group()))
        check = StepCheck("correct", comps, stated)
        wrong = [c for c in comps if not c.ok]
        unknown: list[Fraction] = []
        local = set(known)
        for c in comps:
            unknown += [x for x in c.operands if x not in local and abs(x) not in local]
            local.add(c.claimed)
        unknown += [x for x in stated if x not in local]
        check.unknown = list(dict.fromkeys(unknown))
        if wrong:
            c = wrong[0]
            check.verdict = "arithmetic_error"
            check.reason = (f"{c.expr} = {_fmt(c.claimed)} is wrong: it is "
                            f"{_fmt(c.actual) if c.actual is not None else 'not computable'}")
        elif check.unknown:
            check.verdict = "unknown_quantity"
            check.reason = ("uses " + ", ".join(_fmt(u) for u in check.unknown)
                            + ": neither in the problem nor derived earlier")
        elif self.strict_path and comps:
            off = [c for c in comps if c.claimed not in set(self.values or ())
                   and c.claimed not in self.given]
            if off:
                check.verdict = "wrong_value"
                check.reason = f"{off[0].expr} = {_fmt(off[0].claimed)} is not a quantity of the problem"
        elif not comps and not stated:
            check.verdict = "no_claim"
        known |= {c.claimed for c in comps}
        known |= set(stated)
        return check

    # -- labels --------------------------------------------------------------------------------------
    def label(self, trace: Trace, *, source: str = "symbolic") -> list[StepCheck]:
        """Check ``trace``'s steps and append a hard :class:`StepLabel` to each (+1 ok, -1 not),
        with the verdict and reason in the label's meta. Returns the checks."""
        checks = self.check_steps([s.text for s in trace.steps])
        args = {"strict_path": self.strict_path}
        for step, chk in zip(trace.steps, checks, strict=True):
            step.labels.append(StepLabel(1 if chk.ok else -1, source=source, labeler=self.name,
                                         args=args, meta={"verdict": chk.verdict,
                                                          "reason": chk.reason}))
        # A labeler without policy channels: its settings sit at the top level of the entry.
        trace.add_provenance(LabelProvenance(self.name, extra=args))
        return checks


#: Every valid intermediate value of an arith problem (kept under its old name here).
path_values = arith_path_values


def _is_label_number(text: str, start: int, end: int) -> bool:
    """A number that names a step ("Step 2:", "2.") rather than a quantity."""
    before = text[max(0, start - 6):start].lower()
    after = text[end:end + 1]
    if before.rstrip().endswith("step"):
        return True
    # A list number at the start of a line: "2. He buys ..." / "2) ..."
    line_start = text.rfind("\n", 0, start) + 1
    return text[line_start:start].strip() == "" and after in (".", ")") and (
        end + 1 >= len(text) or text[end + 1] in " \t")
