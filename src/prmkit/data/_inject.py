"""Error injection: a wrong trace of a named error type made from a reference solution, its first wrong
step known by construction.

A reference step such as ``36-8=28`` is read as an equation (operands, operators, result) when its
written left side evaluates to its result; every number the steps write is a token. An error edits
one step; later steps then continue consistently from the wrong value (each token that carried a
changed value is rewritten and each equation using it recomputed), as errors propagate in real
samples, so the answer line states what the text derived. Where a later step writes a changed value
that the problem also states (a result of 4 and "4 pieces"), which one it means cannot be told, and
that error is not made. Only ``right_answer_wrong_step`` leaves the later steps as they were.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from itertools import permutations
from typing import Any

from prmkit.data._answers import answers_equal, extract_answer
from prmkit.data._reference import _nearby_all, _Reference

#: The error types :func:`~prmkit.data.inject_errors` can make, and what each does to a reference:
#:
#: - ``arithmetic_slip``: a step's result is off by 1–3 units of its last digit;
#: - ``wrong_operation``: one operator of a step's equation is swapped (+ ↔ −, × ↔ ÷, + → ×, × → +)
#:   and the result computed for the swapped operation;
#: - ``wrong_operand``: one operand is replaced by another quantity of the problem (for GSM8K-style
#:   references, or an earlier result), the result computed with it;
#: - ``dropped_step``: a step is left out; the first later step that used its result uses the value
#:   it updated instead (the un-updated value), and is the first wrong step;
#: - ``duplicated_step``: a step is applied a second time to its own result (the copy is wrong);
#: - ``invented_quantity``: an operand is replaced by a number neither in the problem nor derived;
#: - ``unit_scale_slip``: a step's result is multiplied or divided by 10 or 100;
#: - ``unsupported_answer``: every step right, the answer line states a number the steps never
#:   derived (a near miss of the answer, or another number of the problem);
#: - ``right_answer_wrong_step``: one step (not the last) gets a slip, a wrong operation, a wrong
#:   operand or a scale slip that the later steps ignore, so the final answer is right;
#: - ``misread_rate``: a multiplicative relation the problem states is applied the wrong way round
#:   (multiplied by where it divides, divided by where it multiplies): a rate written next to "per",
#:   "each", "every", "an hour", "a day", ... ("$12 an hour"), a multiple ("four times as large",
#:   "twice", "half", "a third"), or a time or dozen conversion (60, 24, 7, 12, 52, 365) when the
#:   problem names its units; only an operand that follows its operator is inverted ("12/60" ->
#:   "12*60", "48/2" with "half" -> "48*2"), the result recomputed and carried on;
#: - ``premature_answer``: the solution stops after a step before the last one and its answer line
#:   states that step's result; the answer line is the first wrong step.
ERROR_TYPES = ("arithmetic_slip", "wrong_operation", "wrong_operand", "dropped_step", "duplicated_step",
               "invented_quantity", "unit_scale_slip", "unsupported_answer", "right_answer_wrong_step",
               "misread_rate", "premature_answer")

#: A wrong final answer is *plausible* (:func:`plausible`) when it is within this factor of the right
#: one (both taken as at least 1 in size): 7 passes for 12, 36 does not.
PLAUSIBLE_FACTOR = 3

# A number token as steps write it, unsigned: in "24-5" the minus is an operator.
_UNUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+"
_UNUM_RE = re.compile(rf"(?<![\w.,])(?:{_UNUM})")
_OPERATOR_RE = re.compile(r"[-+*/×x÷·−]")
_TERM = rf"\s*\(*\s*\$?\s*(?:{_UNUM})\s*\)*\s*"
_EXPR_RE = re.compile(rf"{_TERM}(?:[-+*/×x÷·−]{_TERM})+")
_EXPR_CHARS = set("0123456789.,+-*/×x÷·−()$ \t")
_TO_PY = str.maketrans({"×": "*", "x": "*", "·": "*", "÷": "/", "−": "-", "$": None, ",": None})
# Numbers problems write as words; an invented quantity must not be one of them (nor may the symbolic
# checker, which reads them, know it).
_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
          "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
          "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "thousand": 1000, "twice": 2,
          "double": 2, "triple": 3, "half": 2, "third": 3, "quarter": 4, "dozen": 12, "pair": 2}
_WORD_RE = re.compile(r"\b(" + "|".join(_WORDS) + r")s?\b", re.IGNORECASE)
# Constants a step may use without the problem stating them (the symbolic checker's defaults).
_CONSTANTS = {Fraction(0), Fraction(1), Fraction(2), Fraction(100)}
_FNS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
# Swaps that wrong_operation makes, by the operation's family (+, -, *, /).
_SWAPS = {"+": ("-", "*"), "-": ("+",), "*": ("+", "/"), "/": ("*",)}
_FAMILY = {"+": "+", "-": "-", "−": "-", "*": "*", "×": "*", "x": "*", "·": "*", "/": "/", "÷": "/"}
_SCALES = ((Fraction(10), "x10"), (Fraction(100), "x100"), (Fraction(1, 10), "/10"), (Fraction(1, 100), "/100"))
# What misread_rate reads as a relation in a problem's text: a multiple in words ("twice", "half",
# "four times"), and a number followed (within two words) by a rate word: "$12 an hour", "3 apples
# each", "20 pages every day", "5 times". Percentages are left out: inverting "/100" gives a number
# no solver would believe (x10,000), which teaches nothing.
_PER = (r"(?:second|minute|hour|day|week|month|year|piece|pound|ounce|kilogram|gallon|liter|litre|mile|"
        r"meter|metre|foot|inch|dozen|box|bag|pack|person|page|cup|serving|night|trip|visit|game|class)")
_RATE_RE = re.compile(rf"(?<![\w.,])\$?({_UNUM})(?:\s+[A-Za-z'-]+){{0,2}}?\s+"
                      rf"(?:per|each|every|apiece|times|an?\s+{_PER})\b", re.IGNORECASE)
_MULTIPLES = {"twice": 2, "double": 2, "doubles": 2, "doubled": 2, "triple": 3, "triples": 3, "tripled": 3,
              "half": 2, "third": 3, "quarter": 4}
_MULTIPLE_RE = re.compile(r"\b(" + "|".join(_MULTIPLES) + r"|(?:" + "|".join(w for w in _WORDS if w not in _MULTIPLES)
                          + r")\s+times)\b", re.IGNORECASE)
# Conversions a solution brings in itself, used when the problem names one of their units.
_CONVERSIONS = {60: r"\b(?:minutes?|seconds?|hours?)\b", 24: r"\b(?:hours?|days?)\b", 7: r"\b(?:days?|weeks?)\b",
                12: r"\b(?:months?|years?|dozens?|inch(?:es)?|foot|feet)\b", 52: r"\b(?:weeks?|years?)\b",
                365: r"\b(?:days?|years?)\b"}


def _value(text: str) -> Fraction:
    return Fraction(text.replace(",", "").replace("$", ""))


def _evaluate(expr: str) -> Fraction | None:
    """Exact value of an arithmetic expression as steps write it, or None."""
    try:
        tree = ast.parse(expr.translate(_TO_PY).strip(), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _BIN[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError("not arithmetic")

    try:
        return ev(tree)
    except (ValueError, ZeroDivisionError):
        return None


def _format_like(value: Fraction, written: str) -> str:
    """``value`` written the way ``written`` is: thousands separators, a bare leading point; a whole
    number without decimals, else the fewest decimals (at most 2) that hold it, rounded beyond."""
    if value.denominator == 1:
        n = int(value)
        return f"{n:,}" if "," in written else str(n)
    places = next((p for p in (1, 2) if (value * 10 ** p).denominator == 1), 2)
    d = (Decimal(value.numerator) / Decimal(value.denominator)).quantize(Decimal(1).scaleb(-places),
                                                                         rounding=ROUND_HALF_UP)
    out = format(d, f"{',' if ',' in written else ''}.{places}f")
    if written.startswith(".") and abs(d) < 1:
        out = out.replace("0.", ".", 1)
    return out


@dataclass
class _Tok:
    """A number written in a step: an operand of an equation, an equation's result, or stated."""

    start: int
    end: int
    text: str
    value: Fraction
    role: str                   # "operand" | "result" | "stated"
    eq: int | None = None       # its equation (operands and results)
    pos: int = 0                # operand position

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end


@dataclass
class _Eq:
    lhs: tuple[int, int]
    operands: list[_Tok]
    operators: list[tuple[int, int, str]]
    result: _Tok


@dataclass
class _Line:
    text: str
    tokens: list[_Tok]          # in text order
    eqs: list[_Eq]
    results: list[_Tok]
    answer: bool = False


def _lhs(text: str, end: int) -> tuple[int, int] | None:
    """The arithmetic expression written right before the ``=`` that ends at ``end`` (a result's
    start), as the longest tail of the text before it that is one."""
    i = end
    while i > 0 and text[i - 1] in " \t$":
        i -= 1
    if i == 0 or text[i - 1] != "=":
        return None
    stop = i - 1
    start = stop
    while start > 0 and text[start - 1] in _EXPR_CHARS:
        start -= 1
    for a in range(start, stop):
        if (text[a].isdigit() or text[a] in "(.$") and (a == 0 or not (text[a - 1].isalnum() or text[a - 1] in ".,")) \
                and _EXPR_RE.fullmatch(text, a, stop):
            b = stop
            while b > a and text[b - 1].isspace():
                b -= 1
            return a, b
    return None


def _matches(actual: Fraction, written: str) -> bool:
    claimed = _value(written)
    if actual == claimed:
        return True
    decimals = len(written.split(".", 1)[1]) if "." in written else 0
    return decimals > 0 and abs(actual - claimed) <= Fraction(1, 2 * 10 ** decimals)


def _line(text: str, results: list[Any], answer: bool) -> _Line:
    res_toks = [_Tok(r.start, r.end, r.text, _value(r.text), "result") for r in results]
    eqs: list[_Eq] = []
    for r in res_toks:
        span = _lhs(text, r.start)
        if span is None:
            continue
        a, b = span
        actual = _evaluate(text[a:b])
        if actual is None or not _matches(actual, r.text):
            continue
        ops = [_Tok(a + m.start(), a + m.end(), m.group(), _value(m.group()), "operand", len(eqs), i)
               for i, m in enumerate(_UNUM_RE.finditer(text[a:b]))]
        # Operators between the numbers (a minus before the first number is a sign, not one).
        operators = [(a + m.start(), a + m.end(), m.group()) for m in _OPERATOR_RE.finditer(text[a:b])
                     if ops and a + m.start() > ops[0].start
                     and not any(o.start <= a + m.start() < o.end for o in ops)]
        r.eq = len(eqs)
        eqs.append(_Eq(span, ops, operators, r))
    covered = [t.span for t in res_toks] + [o.span for e in eqs for o in e.operands]
    stated = [_Tok(m.start(), m.end(), m.group(), _value(m.group()), "stated")
              for m in _UNUM_RE.finditer(text) if not any(a <= m.start() < b for a, b in covered)]
    tokens = sorted(res_toks + [o for e in eqs for o in e.operands] + stated, key=lambda t: t.start)
    return _Line(text, tokens, eqs, res_toks, answer)


def _render(text: str, rep: dict[tuple[int, int], str], lo: int = 0, hi: int | None = None) -> str:
    hi = len(text) if hi is None else hi
    out, at = [], lo
    for (a, b), new in sorted(rep.items()):
        if a < lo or b > hi:
            continue
        out += [text[at:a], new]
        at = b
    return "".join(out) + text[at:hi]


def arith_path_values(meta: dict[str, Any]) -> list[Fraction]:
    """Every intermediate value of an ``arith`` problem (``problem.meta["arith"]``) along any order of
    its operations that still reaches the true answer (adding 5 then 7 or 7 then 5 are both valid
    paths): what the symbolic checker accepts in strict mode, and what an injected wrong value must
    avoid."""
    ops = [(o["op"], Fraction(o["operand"])) for o in meta["ops"]]
    target = Fraction(meta["values"][-1]) if meta["values"] else Fraction(meta["start"])
    values = {Fraction(v) for v in meta["values"]}
    for order in set(permutations(ops)) if len(ops) <= 6 else ():  # at most 720 orders
        x, seen = Fraction(meta["start"]), []
        for op, b in order:
            x = _FNS[op](x, b)
            seen.append(x)
        if x == target:
            values.update(seen)
    return sorted(values)


@dataclass
class _Plan:
    """A reference read for injection."""

    ref: _Reference
    lines: list[_Line]
    chain: bool                     # arith: only an equation's first operand carries an earlier result
    problem_numbers: list[Fraction]  # the quantities the problem writes in digits (or arith's given)
    forbidden: set[Fraction]        # what a wrong step's value must not be: the problem's quantities
    known: set[Fraction]            # what an invented quantity must not be
    integral: bool                  # every value must be a whole number, not negative
    rates: dict[Fraction, str] = field(default_factory=dict)  # misread_rate's relations: value -> the words

    @property
    def last_reasoning(self) -> int:
        return len(self.lines) - (2 if self.ref.answer_line else 1)

    def substitutable(self, tok: _Tok, line: _Line) -> bool:
        if tok.role == "result":
            return False
        return line.answer or not self.chain or (tok.role == "operand" and tok.pos == 0)

    def sane(self, new: Fraction, old: Fraction) -> bool:
        if self.integral:
            return new.denominator == 1 and new >= 0
        return new >= 0 or old < 0


def _plan(ref: _Reference) -> _Plan:
    lines = [_line(text, res, ref.answer_line and i == len(ref.steps) - 1)
             for i, (text, res) in enumerate(zip(ref.steps, ref.results, strict=True))]
    meta = (ref.problem.meta or {}).get("arith")
    derived = {t.value for ln in lines for t in ln.results}
    if meta:
        problem_numbers = sorted({Fraction(g) for g in meta["given"]} | {Fraction(d) for d in meta["distractors"]})
        reasoning = lines[:-1] if ref.answer_line else lines
        prev, chain = Fraction(meta["start"]), True
        for ln in reasoning:
            if len(ln.eqs) != 1 or ln.eqs[0].operands[0].value != prev:
                chain = False
                break
            prev = ln.eqs[0].result.value
        forbidden = set(problem_numbers) | derived | set(arith_path_values(meta))
        return _Plan(ref, lines, chain, problem_numbers, forbidden, forbidden, chain, _rates(ref.problem.text))
    text = ref.problem.text
    problem_numbers = sorted({_value(m.group()) for m in _UNUM_RE.finditer(text)})
    words = {Fraction(_WORDS[m.group(1).lower()]) for m in _WORD_RE.finditer(text)}
    forbidden = set(problem_numbers) | derived
    # Where the problem and its solution hold only whole numbers, so do the wrong traces: "4.75
    # pencils" would tell a wrong trace from a right one without reading its steps.
    whole = all(v.denominator == 1 and v >= 0 for v in forbidden)
    return _Plan(ref, lines, False, problem_numbers, forbidden, forbidden | words | _CONSTANTS, whole,
                 _rates(text))


def _rates(text: str) -> dict[Fraction, str]:
    """The multiplicative relations ``text`` (a problem) states, by value: what misread_rate inverts."""
    out: dict[Fraction, str] = {}
    for m in _MULTIPLE_RE.finditer(text):
        word = m.group(1).lower()
        value = _MULTIPLES.get(word) or _WORDS[word.split()[0]]
        out.setdefault(Fraction(value), m.group(1))
    for m in _RATE_RE.finditer(text):
        out.setdefault(_value(m.group(1)), m.group(0).strip())
    for factor, units in _CONVERSIONS.items():
        unit = re.search(units, text, re.IGNORECASE)
        if unit:
            out.setdefault(Fraction(factor), f"{factor} for {unit.group().lower()}")
    return out


@dataclass
class _Injected:
    """One wrong trace's steps, its first wrong step, and what was done."""

    steps: list[str]
    wrong: int
    detail: dict[str, Any] = field(default_factory=dict)
    right_answer: bool = False
    plausible: bool | None = None   # set by candidates(): see plausible()

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(self.steps)


Edits = dict[int, dict[tuple[int, int], str]]


def _propagate(plan: _Plan, edits: Edits, changed: dict[Fraction, Fraction], start: int, after: int = 0,
               skip: int | None = None) -> bool:
    """Carry ``changed`` values (old -> new) through the lines from ``start`` (its tokens from offset
    ``after``): tokens that carried an old value are rewritten, equations using them recomputed
    (their results join ``changed``). False when a value comes out insane (negative, fractional in
    ``arith``)."""
    for j in range(start, len(plan.lines)):
        if j == skip:
            continue
        line = plan.lines[j]
        rep = edits.setdefault(j, {})
        for tok in line.tokens:
            if j == start and tok.start < after:
                continue
            if tok.role == "result":
                if tok.span in rep:
                    continue
                eq = line.eqs[tok.eq] if tok.eq is not None else None
                touched = eq is not None and (any(o.span in rep for o in eq.operands)
                                              or any((a, b) in rep for a, b, _ in eq.operators))
                new = _evaluate(_render(line.text, rep, *eq.lhs)) if touched and eq is not None else None
                if new is None:
                    # Untouched (or not recomputable): a later token of this value means this one.
                    changed.pop(tok.value, None)
                    continue
                written = _format_like(new, tok.text)
                val = _value(written)
                if not plan.sane(val, tok.value):
                    return False
                if val == tok.value:
                    changed.pop(tok.value, None)
                else:
                    changed[tok.value] = val
                    rep[tok.span] = written
            elif tok.value in changed and tok.span not in rep and plan.substitutable(tok, line):
                if not plan.chain and j > start and not line.answer and tok.value in plan.problem_numbers:
                    # The problem states this number too: whether this token is the changed result or
                    # the problem's quantity cannot be told (read by hand: "4 pieces" rewritten as a
                    # slipped 4 -> 5), so the error is not made rather than continued on a guess.
                    return False
                rep[tok.span] = _format_like(changed[tok.value], tok.text)
    return True


def _steps(plan: _Plan, edits: Edits, skip: int | None = None) -> list[str]:
    return [_render(ln.text, edits.get(j, {})) for j, ln in enumerate(plan.lines) if j != skip]


@dataclass
class _Mutation:
    """One edit of one step: the step's replacements, its result's old and new value, a description."""

    rep: dict[tuple[int, int], str]
    result: _Tok
    new: Fraction
    kind: str
    edit: str


def _with_result(plan: _Plan, line: _Line, eq: _Eq, rep: dict[tuple[int, int], str], kind: str,
                 what: str) -> _Mutation | None:
    """``rep`` on ``eq``'s left side, its result recomputed; None when nothing changes or it is insane
    or a quantity of the problem."""
    new = _evaluate(_render(line.text, rep, *eq.lhs))
    if new is None:
        return None
    written = _format_like(new, eq.result.text)
    val = _value(written)
    if val == eq.result.value or val in plan.forbidden or not plan.sane(val, eq.result.value):
        return None
    rep = {**rep, eq.result.span: written}
    a, b = eq.lhs
    before = f"{line.text[a:b]} = {eq.result.text}"
    return _Mutation(rep, eq.result, val, kind, f"{what}: {before} -> {_render(line.text, rep, a, b)} = {written}")


def _slips(plan: _Plan, line: _Line) -> list[_Mutation]:
    if not line.results:
        return []
    r = line.results[-1]  # the step's own result: its last computation
    out = []
    for cand in _nearby_all(r.text):
        val = _value(cand)
        if val not in plan.forbidden and plan.sane(val, r.value):
            out.append(_Mutation({r.span: cand}, r, val, "arithmetic_slip", f"result {r.text} -> {cand}"))
    return out


def _scales(plan: _Plan, line: _Line) -> list[_Mutation]:
    if not line.results:
        return []
    r = line.results[-1]
    out = []
    for f, name in _SCALES:
        written = _format_like(r.value * f, r.text)
        val = _value(written)
        if val == r.value * f and val != r.value and val not in plan.forbidden and plan.sane(val, r.value):
            out.append(_Mutation({r.span: written}, r, val, "unit_scale_slip", f"result {r.text} {name} -> {written}"))
    return out


def _operations(plan: _Plan, line: _Line) -> list[_Mutation]:
    out = []
    for eq in line.eqs:
        for a, b, op in eq.operators:
            for alt in _SWAPS[_FAMILY[op]]:
                char = {"*": "×", "/": "÷"}.get(alt, alt) if op in "×÷" else alt
                m = _with_result(plan, line, eq, {(a, b): char}, "wrong_operation", f"{op} -> {char}")
                if m:
                    out.append(m)
    return out


def _operand_slots(plan: _Plan, eq: _Eq) -> list[_Tok]:
    # In arith the first operand is the running value; the second is the quantity the story gives.
    return eq.operands[1:] if plan.chain else eq.operands


def _operands(plan: _Plan, lines: list[_Line], k: int) -> list[_Mutation]:
    earlier = [] if plan.chain else sorted({t.value for ln in lines[:k] for t in ln.results})
    pool = list(dict.fromkeys([*plan.problem_numbers, *earlier]))
    out = []
    for eq in lines[k].eqs:
        for tok in _operand_slots(plan, eq):
            for cand in pool:
                if cand != tok.value:
                    m = _with_result(plan, lines[k], eq, {tok.span: _format_like(cand, tok.text)}, "wrong_operand",
                                     f"operand {tok.text} -> {_format_like(cand, tok.text)}")
                    if m:
                        out.append(m)
    return out


def _inventions(plan: _Plan, line: _Line) -> list[_Mutation]:
    out = []
    for eq in line.eqs:
        for tok in _operand_slots(plan, eq):
            for d in (1, -1, 2, -2, 3, -3, 4, -4, 5, -5):
                cand = tok.value + d
                if cand <= 0 or cand in plan.known or cand in {t.value for t in line.tokens}:
                    continue
                text = _format_like(cand, tok.text)
                m = _with_result(plan, line, eq, {tok.span: text}, "invented_quantity", f"operand {tok.text} -> {text}")
                if m:
                    out.append(m)
    return out


def _misreads(plan: _Plan, line: _Line) -> list[_Mutation]:
    out = []
    for eq in line.eqs:
        if len(eq.operators) != len(eq.operands) - 1:
            continue
        for tok in _operand_slots(plan, eq):
            what = plan.rates.get(tok.value)
            if what is None or tok.pos == 0:
                continue
            a, b, op = eq.operators[tok.pos - 1]  # the operator right before the rate: x*r, x/r
            family = _FAMILY[op]
            if family not in "*/":
                continue
            alt = "/" if family == "*" else "*"
            char = {"*": "×", "/": "÷"}[alt] if op in "×÷" else alt
            m = _with_result(plan, line, eq, {(a, b): char}, "misread_rate",
                             f"{what!r} inverted: {op}{tok.text} -> {char}{tok.text}")
            if m:
                out.append(m)
    return out


def _mutations(plan: _Plan, k: int, kind: str) -> list[_Mutation]:
    line = plan.lines[k]
    if kind == "arithmetic_slip":
        return _slips(plan, line)
    if kind == "unit_scale_slip":
        return _scales(plan, line)
    if kind == "wrong_operation":
        return _operations(plan, line)
    if kind == "wrong_operand":
        return _operands(plan, plan.lines, k)
    if kind == "invented_quantity":
        return _inventions(plan, line)
    if kind == "misread_rate":
        return _misreads(plan, line)
    raise ValueError(kind)


def _propagated(plan: _Plan, kind: str) -> list[_Injected]:
    out = []
    for k in range(plan.last_reasoning + 1):
        for m in _mutations(plan, k, kind):
            edits: Edits = {k: dict(m.rep)}
            if not _propagate(plan, edits, {m.result.value: m.new}, k, after=m.result.end):
                continue
            steps = _steps(plan, edits)
            out.append(_Injected(steps, k, {"edit": m.edit, "original": plan.lines[k].text}))
    return out


def _dropped(plan: _Plan) -> list[_Injected]:
    out = []
    for k in range(plan.last_reasoning):  # a later reasoning step must use the dropped result
        line = plan.lines[k]
        if len(line.results) != 1 or len(line.eqs) != 1:
            continue
        eq = line.eqs[0]
        # The value the dropped step updated: in arith its first operand (the running value); in a
        # free-form reference any of its operands (a step's inputs are what a skipping solver has).
        for stale in eq.operands[:1] if plan.chain else eq.operands:
            if stale.value == eq.result.value:
                continue
            edits: Edits = {}
            if not _propagate(plan, edits, {eq.result.value: stale.value}, k + 1, skip=k):
                continue
            wrong = next((j for j in range(k + 1, len(plan.lines)) if edits.get(j)), None)
            if wrong is None or wrong > plan.last_reasoning:
                continue
            res = [t for t in plan.lines[wrong].results if t.span in edits[wrong]]
            if not res or _value(edits[wrong][res[0].span]) in plan.forbidden:
                continue
            out.append(_Injected(_steps(plan, edits, skip=k), wrong - 1, {
                "edit": f"reference step {k} dropped ({line.text!r}); reference step {wrong} uses "
                        f"{stale.text} in place of its result {eq.result.text}",
                "original": plan.lines[wrong].text, "dropped": k}))
    return out


def _duplicated(plan: _Plan) -> list[_Injected]:
    out = []
    for k in range(plan.last_reasoning + 1):
        line = plan.lines[k]
        if len(line.eqs) != 1 or line.results[-1] is not line.eqs[0].result:
            continue
        eq = line.eqs[0]
        first, r = eq.operands[0], eq.result
        if first.value == r.value:
            continue
        m = _with_result(plan, line, eq, {first.span: _format_like(r.value, first.text)}, "duplicated_step",
                         "applied again")
        if m is None:
            continue
        rep = dict(m.rep)
        for t in line.tokens:  # the copy restates its own result after the equation
            if t.start >= r.end and t.value == r.value and t.role == "stated":
                rep[t.span] = _format_like(m.new, t.text)
        edits: Edits = {}
        if not _propagate(plan, edits, {r.value: m.new}, k + 1):
            continue
        steps = _steps(plan, edits)
        steps.insert(k + 1, _render(line.text, rep))
        out.append(_Injected(steps, k + 1, {"edit": f"step {k} {m.edit}", "original": None, "duplicated": k}))
    return out


def _unsupported(plan: _Plan) -> list[_Injected]:
    tok = _answer_token(plan)
    if tok is None:
        return []  # the answer line's last number is not the answer (a non-numeric MATH answer)
    line = plan.lines[-1]
    derived = {t.value for ln in plan.lines for t in ln.results} | {tok.value}
    cands = [_value(c) for c in _nearby_all(tok.text)] + list(plan.problem_numbers)
    out = []
    for cand in dict.fromkeys(cands):
        if cand in derived or not plan.sane(cand, tok.value):
            continue
        text = _format_like(cand, tok.text)
        steps = _steps(plan, {len(plan.lines) - 1: {tok.span: text}})
        out.append(_Injected(steps, len(plan.lines) - 1, {"edit": f"answer {tok.text} -> {text}",
                                                          "original": line.text}))
    return out


def _answer_token(plan: _Plan) -> _Tok | None:
    """The answer line's number that is the final answer, or None (no answer line, a non-numeric answer)."""
    if not plan.ref.answer_line or not plan.lines[-1].tokens:
        return None
    tok = plan.lines[-1].tokens[-1]
    final = plan.ref.final
    if final is None or _UNUM_RE.fullmatch(final.replace("$", "").strip()) is None or \
            _value(final.replace("$", "").strip()) != tok.value:
        return None
    return tok


def _premature(plan: _Plan) -> list[_Injected]:
    tok = _answer_token(plan)
    if tok is None:
        return []
    answer = plan.lines[-1]
    out = []
    for k in range(plan.last_reasoning):  # stops before the last reasoning step
        if not plan.lines[k].results:
            continue
        r = plan.lines[k].results[-1]
        text = _format_like(r.value, tok.text)
        if _value(text) != r.value or r.value == tok.value:
            continue
        steps = [ln.text for ln in plan.lines[:k + 1]] + [_render(answer.text, {tok.span: text})]
        out.append(_Injected(steps, k + 1, {"edit": f"stops after step {k}, its result {r.text} stated as the answer",
                                            "original": plan.lines[k + 1].text, "stopped": k}))
    return out


def _ignored(plan: _Plan) -> list[_Injected]:
    out = []
    for k in range(plan.last_reasoning):  # not the last step: a later step ignores the error
        for kind in ("arithmetic_slip", "wrong_operation", "wrong_operand", "unit_scale_slip"):
            for m in _mutations(plan, k, kind):
                out.append(_Injected(_steps(plan, {k: m.rep}), k, {"edit": m.edit, "mutation": kind,
                                                                   "original": plan.lines[k].text},
                                     right_answer=True))
    return out


_BUILDERS: dict[str, Callable[[_Plan], list[_Injected]]] = {
    "arithmetic_slip": lambda p: _propagated(p, "arithmetic_slip"),
    "wrong_operation": lambda p: _propagated(p, "wrong_operation"),
    "wrong_operand": lambda p: _propagated(p, "wrong_operand"),
    "dropped_step": _dropped,
    "duplicated_step": _duplicated,
    "invented_quantity": lambda p: _propagated(p, "invented_quantity"),
    "unit_scale_slip": lambda p: _propagated(p, "unit_scale_slip"),
    "unsupported_answer": _unsupported,
    "right_answer_wrong_step": _ignored,
    "misread_rate": lambda p: _propagated(p, "misread_rate"),
    "premature_answer": _premature,
}


def equations(ref: _Reference) -> list[tuple[int, str]]:
    """``(step index, "36-8 = 28")``: each reasoning step's last equation as the step writes it."""
    plan = _plan(ref)
    out = []
    for k in range(plan.last_reasoning + 1):
        line = plan.lines[k]
        if line.eqs:
            eq = line.eqs[-1]
            out.append((k, f"{line.text[eq.lhs[0]:eq.lhs[1]]} = {eq.result.text}"))
    return out


def _same_answer(got: str, answer: str) -> bool:
    """``answers_equal``, with plain numbers compared directly (it parses LaTeX: slow in bulk)."""
    a, b = got.replace("$", "").strip(), answer.replace("$", "").strip()
    if _UNUM_RE.fullmatch(a.lstrip("-")) and _UNUM_RE.fullmatch(b.lstrip("-")):
        return _value(a) == _value(b)
    return answers_equal(got, answer)


def _number(text: str | None) -> Fraction | None:
    t = (text or "").replace("$", "").strip()
    return _value(t.lstrip("-")) * (-1 if t.startswith("-") else 1) if _UNUM_RE.fullmatch(t.lstrip("-")) else None


def plausible(got: str | None, answer: str | None) -> bool | None:
    """Whether ``got``, a final answer, could pass for ``answer`` by its look alone: a plain number as
    it is, whole where it is whole, not negative where it is not, and within a factor
    :data:`PLAUSIBLE_FACTOR` of it (sizes below 1 counted as 1). None when ``answer`` is not a plain
    number (a MATH expression): nothing to compare.

    >>> plausible("11", "7"), plausible("70", "7"), plausible("7.5", "7"), plausible("-2", "7")
    (True, False, False, False)
    """
    right = _number(answer)
    if right is None:
        return None
    wrong = _number(got)
    if wrong is None or (right.denominator == 1 and wrong.denominator != 1) or (right >= 0 > wrong):
        return False
    ratio = max(abs(wrong), Fraction(1)) / max(abs(right), Fraction(1))
    return Fraction(1, PLAUSIBLE_FACTOR) <= ratio <= PLAUSIBLE_FACTOR


def candidates(ref: _Reference, error_type: str) -> list[_Injected]:
    """Every wrong trace of ``error_type`` that ``ref`` allows, in a fixed order; a right final answer
    for ``right_answer_wrong_step`` only, a wrong one for every other type (when the answer is known).
    Each says whether its final answer is :func:`plausible`."""
    plan = _plan(ref)
    answer = ref.problem.answer
    out = []
    for c in _BUILDERS[error_type](plan):
        got = extract_answer("\n".join(c.steps))
        if answer is not None:
            if (got is not None and _same_answer(got, answer)) != c.right_answer:
                continue
        c.plausible = plausible(got, answer)
        out.append(c)
    return out
