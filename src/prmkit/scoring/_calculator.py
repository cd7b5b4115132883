"""A calculator for written arithmetic: the step check a tool does better than a 135M model.

Most first errors of the embedded default's policy are arithmetic slips (``17 * 3 = 54``), and the
shipped PRM checks results poorly (the ``result_check`` probe: 74% of changed results caught). A
calculator catches every such slip that is written as an equation, with no model and no reference
answer: it reads each ``EXPRESSION = NUMBER`` in a step's text (numbers, ``+ - * / x × ÷``,
parentheses; ``$``, thousands commas and decimals allowed), evaluates the expression exactly, and
calls the equation wrong when the written number differs from the value beyond the precision it is
written to (``10 / 3 = 3.33`` is right, ``10 / 3 = 3.4`` is not). It checks only what is written:
a right computation on a wrong quantity (a distractor used, an operation skipped) passes, and a step
without an equation is no evidence either way.

- :func:`check_arithmetic`: the equations read in a text, each with its value and verdict.
- :func:`step_flagged`: whether the calculator flags a step (one of its equations is wrong).
- :class:`CalculatorScorer`: a step scorer. Alone (``--scorer calculator``) a step scores 1.0, or
  ``flagged`` (0.0) when one of its equations is wrong; around another scorer (``base``; on the
  command line ``--model DIR -s check=calculator``) the base's step scores are kept and only the
  flagged steps are set to ``flagged`` — a PRM whose arithmetic is checked by a tool.
- :func:`add_calculator_scores`: a PRM's stored step scores checked by the calculator after the fact,
  and the calculator's own, stored on the traces under their keys.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from prmkit.errors import PrmkitError
from prmkit.scoring._protocol import StepScorer
from prmkit.scoring._stored import StoredScorer
from prmkit.trace import Trace

if TYPE_CHECKING:
    from prmkit.scoring._traces import AggregateSpec

__all__ = ["Equation", "check_arithmetic", "step_flagged", "CalculatorScorer", "add_calculator_scores"]

#: The calculator's tokens; a number may carry thousands commas and a decimal part (``1,204.50``).
_TOKEN = re.compile(r"(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)|(?P<op>[-+*/×÷])|(?P<x>x)|(?P<lp>\()"
                    r"|(?P<rp>\))|(?P<eq>=)|(?P<sp>[ \t$]+)|(?P<other>.)", re.S)
_LATEX_OPERATOR = re.compile(r"\\(?:times|cdot|div)\s*$")
#: What may touch a side of an equation without a space (else the side is a piece of something larger:
#: ``x^2 + 64``, ``= 2\\mathbf{i}``, ``= 5x``), and what may never come next to it.
_GLUED_BEFORE = frozenset(":;,([=\n\r\t\"'")
_GLUED_AFTER = frozenset(".,;:!?)]\n\r\t\"'")
_NEVER_BEFORE = frozenset("^_{\\")
_NEVER_AFTER = frozenset("%^_")
#: The most tokens (numbers, operators, brackets) a side may have to be read.
_MAX_TOKENS = 200
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


@dataclass(frozen=True)
class Equation:
    """One equation read in a text: ``expression = written``, the exact ``value`` of the expression,
    and whether ``written`` is it (to the precision ``written`` is given in)."""

    expression: str
    written: str
    value: Fraction
    ok: bool


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return Fraction(str(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    raise ValueError("not plain arithmetic")


def _parse(expression: str) -> Fraction | None:
    text = expression.replace("$", "").replace(",", "").replace("×", "*").replace("÷", "/")
    text = re.sub(r"(?<=[\d)])\s*x\s*(?=[\d(])", "*", text).strip()
    try:
        return _evaluate(ast.parse(text, mode="eval").body)
    except (ValueError, SyntaxError, ZeroDivisionError, RecursionError):  # unbalanced, 1/0, too deep
        return None


def _agrees(value: Fraction, written: str) -> bool:
    number = Fraction(written.replace(",", ""))
    decimals = len(written.split(".")[1]) if "." in written else 0
    if value.denominator == 1 or decimals == 0:
        return number == value
    scaled = value * 10 ** decimals  # the value rounded (half away from 0) or cut to the digits written
    near = {math.floor(abs(scaled) + Fraction(1, 2)), math.floor(abs(scaled))}
    return abs(number) * 10 ** decimals in near and (number < 0) == (value < 0)


#: Text that ends right before an expression and makes it part of a larger one (``2x + 4 + 1``,
#: ``3 \\times 4 + 2``): the calculator would read only a piece of it.
_CONTINUES_BEFORE = re.compile(r"(?:[-+*/×÷^(·]|\\(?:times|cdot|div))\s*$")
#: Text right after the written number that makes it part of an expression or not a plain number
#: (``= 27/5``, ``= $130,000 * 2.5 = ...``, ``= 20%``, ``= 5x``).
_CONTINUES_AFTER = re.compile(r"^(?:\s*%|\s*[-+*/×÷^]\s*[\d($\\]|\s*x\s*[\d($]|\s*\\(?:times|cdot|div)|[a-zA-Z])")


def _tokens(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` tokens; an ``x`` between two numbers (or brackets) is a times sign, else a
    letter."""
    toks = [(m.lastgroup or "other", m.group()) for m in _TOKEN.finditer(text)]
    solid = [i for i, (k, _) in enumerate(toks) if k != "sp"]
    for n, i in enumerate(solid):
        if toks[i][0] == "x":
            prev = toks[solid[n - 1]][0] if n > 0 else None
            nxt = toks[solid[n + 1]][0] if n + 1 < len(solid) else None
            glued = (i > 0 and toks[i - 1][0] == "other") or (i + 1 < len(toks) and toks[i + 1][0] == "other")
            toks[i] = ("op" if prev in ("num", "rp") and nxt in ("num", "lp") and not glued else "other", "x")
    return toks


_EXPRESSION = ("num", "op", "lp", "rp", "sp")


def _side(toks: list[tuple[str, str]], indices: range) -> list[int]:
    """The indices of the expression tokens met walking along ``indices`` away from an ``=``, sorted."""
    taken = []
    for i in indices:
        if toks[i][0] not in _EXPRESSION:
            break
        taken.append(i)
    return sorted(taken)


def _text(toks: list[tuple[str, str]], taken: list[int]) -> str:
    return "".join(toks[i][1] for i in taken).strip()


def check_arithmetic(text: str) -> list[Equation]:
    """The equations in ``text`` that the calculator can read, in order, each with its verdict.

    Read: a left side of at least two numbers joined by operators, ``=``, and a number or another
    such expression (``= 27/5 = 5.4`` is two equations). Not read (no verdict): a side that is part of
    a larger expression (``2x + 4 + 1 = 7``, ``3 \\times 4 + 2 = 14``), a result followed by ``%`` or a
    letter (``= 5x``), brackets that do not balance.

    >>> [(e.expression, e.written, e.ok) for e in check_arithmetic("17 * 3 = 54, then 54 - 18 = 36.")]
    [('17 * 3', '54', False), ('54 - 18', '36', True)]
    >>> [e.ok for e in check_arithmetic("$1,200 x 3 = $3,600 and 10 / 3 = 3.33 but 10 / 3 = 3.4")]
    [True, True, False]
    >>> [(e.expression, e.written, e.ok) for e in check_arithmetic("9 × (3/5) = 27/5 = 5.4")]
    [('9 × (3/5)', '27/5', True), ('27/5', '5.4', True)]
    >>> check_arithmetic("He has 17 apples. 2x + 4 + 1 = 7. The answer is 51.")
    []
    """
    toks = _tokens(text)
    out = []
    for i, (kind, _) in enumerate(toks):
        if kind != "eq":
            continue
        lside, rside = _side(toks, range(i - 1, -1, -1)), _side(toks, range(i + 1, len(toks)))
        lkinds = [toks[k][0] for k in lside if toks[k][0] != "sp"]
        rkinds = [toks[k][0] for k in rside if toks[k][0] != "sp"]
        if len(lkinds) > _MAX_TOKENS or len(rkinds) > _MAX_TOKENS:
            continue  # longer than any computation a step writes out: not read
        if not lkinds or lkinds[0] not in ("num", "lp") or "op" not in lkinds or lkinds.count("num") < 2:
            continue  # not an expression, or the tail of a larger one (``2x + 4``: starts with ``+``)
        if not rkinds or rkinds[0] not in ("num", "lp") or rkinds[-1] == "op":
            continue
        start, end = lside[0], rside[-1] + 1
        before = "".join(t for _, t in toks[max(0, start - 12):start])
        prev = toks[start - 1][1] if start > 0 else "\n"
        after = toks[end][1] if end < len(toks) else "\n"
        if (_LATEX_OPERATOR.search(before) or prev in _NEVER_BEFORE
                or (toks[start][0] != "sp" and prev not in _GLUED_BEFORE)  # ``10^8 - 1``, ``2(1)``
                or after in _NEVER_AFTER or (toks[end - 1][0] != "sp" and after not in _GLUED_AFTER)):
            continue  # part of a larger expression (exponents, variables, LaTeX) or not a plain number
        left = _text(toks, lside)
        right = next(toks[k][1] for k in rside if toks[k][0] == "num") if rkinds == ["num"] else _text(toks, rside)
        value, rhs = _parse(left), _parse(right)
        if value is None or rhs is None:
            continue
        ok = _agrees(value, right) if rkinds == ["num"] else value == rhs
        out.append(Equation(left, right, value, ok))
    return out


def _any_wrong(equations: Sequence[Equation]) -> bool:
    return any(not e.ok for e in equations)


def step_flagged(text: str) -> bool:
    """Whether the calculator flags a step's ``text``: one of the equations it reads there
    (:func:`check_arithmetic`) is wrong. A step without an equation it reads is not flagged.

    >>> step_flagged("17 * 3 = 54."), step_flagged("17 * 3 = 51."), step_flagged("The answer is 51.")
    (True, False, False)
    """
    return _any_wrong(check_arithmetic(text))


class CalculatorScorer:
    """Step scores from a calculator (see the module docs): alone, 1.0 per step or ``flagged`` where a
    written equation is wrong; around ``base`` (a PRM), the base's scores with the flagged steps set to
    ``flagged``. ``checks`` counts steps read and flagged; ``stats`` is the base's (the prefix cache's
    token counts, which ``prmkit serve``'s ``/metrics`` reads), None alone.

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("2 + 3 = 5."), Step("5 * 4 = 21."), Step("Done.")])
    >>> CalculatorScorer().score([t])
    [[1.0, 0.0, 1.0]]
    """

    kind = "prm"

    def __init__(self, base: StepScorer | None = None, *, flagged: float = 0.0) -> None:
        if base is not None and base.kind != "prm":
            raise PrmkitError(f"the calculator checks steps: {base.name} is an {base.kind.upper()}, not a PRM")
        if not 0.0 <= float(flagged) <= 1.0:
            raise PrmkitError(f"flagged must be a score in [0, 1], got {flagged!r}")
        self.base = base
        self.flagged = float(flagged)
        self.name = "calculator" if base is None else f"{base.name}+calculator"
        self.checks = {"steps": 0, "with_equations": 0, "flagged": 0}

    @property
    def stats(self) -> object:
        return getattr(self.base, "stats", None)

    def _wrong(self, trace: Trace) -> list[bool]:
        wrong = []
        for step in trace.steps:
            eqs = check_arithmetic(step.text)
            wrong.append(_any_wrong(eqs))
            self.checks["steps"] += 1
            self.checks["with_equations"] += bool(eqs)
            self.checks["flagged"] += wrong[-1]
        return wrong

    def _checked(self, row: Sequence[float | None], trace: Trace) -> list[float | None]:
        return [self.flagged if w else s for s, w in zip(row, self._wrong(trace), strict=True)]

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        """Per trace: one score per step."""
        traces = list(traces)
        base = self.base.score(traces) if self.base is not None else [[1.0] * len(t.steps) for t in traces]
        return [self._checked(row, t) for row, t in zip(base, traces, strict=True)]

    def score_each(self, traces: Sequence[Trace]) -> list[tuple[list[float | None] | None, str | None]]:
        """Per trace ``(scores, None)``, or ``(None, reason)`` where the base refuses it (see
        :func:`~prmkit.scoring.score_each`; the base's refusals come in one call)."""
        from prmkit.scoring._traces import score_each

        traces = list(traces)
        base = score_each(self.base, traces) if self.base is not None else [([1.0] * len(t.steps), None)
                                                                            for t in traces]
        return [(None, why) if row is None else (self._checked(row, t), None)
                for (row, why), t in zip(base, traces, strict=True)]


def add_calculator_scores(traces: Sequence[Trace], key: str = "prm", *, checked_key: str | None = None,
                          alone_key: str = "calculator", aggregate: AggregateSpec = "min") -> CalculatorScorer:
    """Check the PRM step scores stored under ``key`` with the calculator, without running the model
    again: store them under ``checked_key`` (default ``"{key}+calculator"``) with the flagged steps set
    to 0, and the calculator's own step scores under ``alone_key``, each with its ``aggregate`` trace
    score (:func:`~prmkit.scoring.score_traces`). A trace without scores under ``key`` is no error
    (``StoredScorer(key, missing="none")``): its steps stay unscored under ``checked_key`` except those
    the calculator flags (0). Returns the checking scorer (its ``checks`` count the steps read and
    flagged).

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("2 + 3 = 5.", scores={"prm": 0.9}),
    ...           Step("5 * 4 = 21.", scores={"prm": 0.8}), Step("Done.", scores={"prm": 0.7})])
    >>> add_calculator_scores([t]).checks
    {'steps': 3, 'with_equations': 2, 'flagged': 1}
    >>> [s.scores["prm+calculator"] for s in t.steps], [s.scores["calculator"] for s in t.steps]
    ([0.9, 0.0, 0.7], [1.0, 0.0, 1.0])
    >>> t.meta["scores"]
    {'prm+calculator:min': 0.0, 'calculator:min': 0.0}
    """
    from prmkit.scoring._traces import score_traces

    checked = CalculatorScorer(StoredScorer(key, missing="none"))
    score_traces(checked, traces, checked_key or f"{key}+calculator", aggregate=aggregate)
    score_traces(CalculatorScorer(), traces, alone_key, aggregate=aggregate)
    return checked
