"""Step checkers: tools that read one step of a solution and flag it, each flag with its reason.

A checker sees the problem, the steps before, and the step (``check(problem, previous_steps, step)``)
and returns the :class:`CheckFlag` s it raises there; none is no evidence either way (a checker that
cannot read a step never flags it). Built in (:data:`CHECKERS`, entry-point group ``prmkit.checkers``):

- ``calculator`` (:class:`CalculatorChecker`): written arithmetic, :func:`check_arithmetic`'s
  equations, and GSM8K's ``<<48/2=24>>`` calculator annotations where a text has them;
- ``sympy`` (:class:`~prmkit.scoring.SympyChecker`): equalities and simplifications in LaTeX math
  (``a = b = c`` chains with ``\\frac``, powers, roots), parsed by math-verify's LaTeX parser;
- ``provenance`` (:class:`~prmkit.scoring.ProvenanceChecker`): every number a step uses comes from the
  problem, an earlier step, or is computed in this step.

:class:`CheckedScorer` is the one rule that combines checkers with a learned PRM: the PRM's step scores
are kept, and a step any checker flags scores ``flagged`` (0.0); alone, a step scores 1.0 or
``flagged``. On the command line: ``--model DIR -s check=calculator,sympy,provenance`` (or
``--scorer checks -s checks=sympy``).

>>> from prmkit.trace import Problem, Step, Trace
>>> t = Trace("t", Problem("Ann has 3 bags of 4 apples."), [Step("3 * 4 = 13 apples.")])
>>> [[str(f) for f in flags] for flags in check_trace(t, ["calculator"])]
[['calculator: 3 * 4 = 13, but 3 * 4 is 12']]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.scoring._protocol import StepScorer
from prmkit.trace import Trace

__all__ = ["CheckFlag", "StepChecker", "CHECKERS", "register_checker", "get_checker", "get_checkers",
           "CalculatorChecker", "check_trace", "CheckedScorer", "format_number"]


@dataclass(frozen=True)
class CheckFlag:
    """One checker's finding on one step: the ``checker`` that raised it and its ``reason``."""

    checker: str
    reason: str

    def __str__(self) -> str:
        return f"{self.checker}: {self.reason}"

    def to_dict(self) -> dict[str, str]:
        return {"checker": self.checker, "reason": self.reason}


@runtime_checkable
class StepChecker(Protocol):
    """A tool that checks one step: ``name``, and ``check(problem, previous_steps, step)`` -> the flags
    it raises on ``step`` (texts: the problem's, the earlier steps', this step's); ``[]`` when it
    finds nothing wrong or cannot read the step."""

    name: str

    def check(self, problem: str, previous_steps: Sequence[str], step: str) -> list[CheckFlag]: ...


def format_number(value: Fraction) -> str:
    """``value`` as a reason writes it: an integer, a decimal of up to 6 places, else ``a/b (≈ x)``.

    >>> format_number(Fraction(12)), format_number(Fraction(5, 2)), format_number(Fraction(10, 3))
    ('12', '2.5', '10/3 (≈ 3.3333)')
    """
    if value.denominator == 1:
        return str(value.numerator)
    for places in range(1, 7):
        scaled = value * 10 ** places
        if scaled.denominator == 1:
            return f"{float(value):.{places}f}"
    return f"{value.numerator}/{value.denominator} (≈ {float(value):.4f})"


#: A GSM8K calculator annotation: ``<<48/2=24>>`` (the expression, ``=``, the result).
_ANNOTATION = re.compile(r"<<([^<>=]*)=([^<>=]*)>>")


class CalculatorChecker:
    """The calculator as a checker: each wrong equation :func:`~prmkit.scoring.check_arithmetic` reads
    in the step, and each wrong GSM8K ``<<expression=result>>`` annotation, is a flag. The text around
    an annotation is read as written (``60 students x 2/3 = <<60*2/3=40>>40``: the annotation holds
    the computation; taking it out would leave ``2/3 = 40``). The scorer ``-s check=calculator``
    (:class:`~prmkit.scoring.CalculatorScorer`) is unchanged: it does not read annotations.

    >>> c = CalculatorChecker()
    >>> [str(f) for f in c.check("", [], "She sold 48/2 = <<48/2=25>>25 clips.")]
    ['calculator: 48/2 = 25, but 48/2 is 24']
    >>> c.check("", [], "She sold 48/2 = <<48/2=24>>24 clips and 2 + 2 = 4.")
    []
    """

    name = "calculator"

    def check(self, problem: str, previous_steps: Sequence[str], step: str) -> list[CheckFlag]:
        from prmkit.scoring._calculator import _agrees, _parse, check_arithmetic

        flags = []
        for m in _ANNOTATION.finditer(step):
            expression, written = m.group(1).strip(), m.group(2).strip()
            value = _parse(expression)
            if value is None or _parse(written) is None or not re.fullmatch(r"-?[\d,]*\.?\d+", written):
                continue
            if not _agrees(value, written):
                flags.append(CheckFlag(self.name, f"{expression} = {written}, but {expression} is "
                                                  f"{format_number(value)}"))
        for e in check_arithmetic(step):
            if not e.ok:
                flag = CheckFlag(self.name, f"{e.expression} = {e.written}, but {e.expression} is "
                                            f"{format_number(e.value)}")
                if flag not in flags:
                    flags.append(flag)
        return flags

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


#: name -> "module:attr" of a checker class or factory.
CHECKERS = Registry("checker", {
    "calculator": "prmkit.scoring._checkers:CalculatorChecker",
    "sympy": "prmkit.scoring._sympy_check:SympyChecker",
    "provenance": "prmkit.scoring._provenance:ProvenanceChecker",
}, group="prmkit.checkers")


def register_checker(name: str, target: Any) -> None:
    """Register a checker class or factory (``"module:attr"``, or the object) under ``name``."""
    CHECKERS.register(name, target)


def get_checker(name: str, **kwargs: Any) -> StepChecker:
    """The checker registered as ``name``, built with ``kwargs``.

    >>> get_checker("calculator").name
    'calculator'
    """
    if name not in CHECKERS:
        raise PrmkitError(f"unknown check {name!r}; known: {', '.join(sorted(CHECKERS))}")
    return CHECKERS.create(name, **kwargs)


def get_checkers(spec: str | StepChecker | Sequence[str | StepChecker]) -> list[StepChecker]:
    """Checkers from names (``"calculator,sympy"``, a list of names) or checker objects, in order; a
    name given twice is one checker.

    >>> [c.name for c in get_checkers("calculator, sympy")]
    ['calculator', 'sympy']
    """
    items: list[Any] = [spec] if not isinstance(spec, str | Sequence) else \
        ([p.strip() for p in spec.split(",")] if isinstance(spec, str) else list(spec))
    out: list[StepChecker] = []
    for item in items:
        if isinstance(item, str):
            if not item:
                raise PrmkitError(f"empty check name in {spec!r}; give names separated by commas, "
                                  f"e.g. calculator,sympy")
            item = get_checker(item)
        if not isinstance(item, StepChecker):
            raise PrmkitError(f"{item!r} is not a step checker (it needs name and check(problem, "
                              "previous_steps, step))")
        if all(c.name != item.name for c in out):
            out.append(item)
    if not out:
        raise PrmkitError("no checks given; e.g. calculator,sympy,provenance")
    return out


def check_trace(trace: Trace, checkers: str | Sequence[str | StepChecker]) -> list[list[CheckFlag]]:
    """Per step of ``trace``, the flags every checker raises there, in the checkers' order."""
    found = get_checkers(checkers)
    texts = [s.text for s in trace.steps]
    return [[f for c in found for f in c.check(trace.problem.text, texts[:i], text)]
            for i, text in enumerate(texts)]


class CheckedScorer:
    """The rule that combines step checkers with a learned PRM: the PRM's (``base``) step scores with
    every step that any of ``checkers`` flags set to ``flagged``; alone (no ``base``), 1.0 per step or
    ``flagged``. Registered as ``checks`` (``--scorer checks -s checks=sympy``), and made by ``model``
    with ``check=`` a list of names (``--model DIR -s check=calculator,sympy,provenance``). A step
    with no flag keeps the PRM's score exactly, so the checkers can only lower a trace's minimum.

    ``checks`` counts steps read, steps flagged, and the flags of each checker; :meth:`flags` gives
    each step's flags with their reasons.

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace("t", Problem("q"), [Step("$2^3 = 8$."), Step("$\\\\frac{6}{4} = \\\\frac{2}{3}$."),
    ...                                Step("Done.")])
    >>> CheckedScorer(None, "calculator,sympy").score([t])
    [[1.0, 0.0, 1.0]]
    """

    kind = "prm"

    def __init__(self, base: StepScorer | None = None,
                 checkers: str | Sequence[str | StepChecker] = "calculator", *, flagged: float = 0.0) -> None:
        if base is not None and base.kind != "prm":
            raise PrmkitError(f"checks judge steps: {base.name} is an {base.kind.upper()}, not a PRM")
        if not 0.0 <= float(flagged) <= 1.0:
            raise PrmkitError(f"flagged must be a score in [0, 1], got {flagged!r}")
        self.base = base
        self.checkers = get_checkers(checkers)
        self.flagged = float(flagged)
        names = "+".join(c.name for c in self.checkers)
        self.name = names if base is None else f"{base.name}+{names}"
        self.checks: dict[str, int] = {"steps": 0, "flagged": 0, **{c.name: 0 for c in self.checkers}}

    @property
    def stats(self) -> object:
        return getattr(self.base, "stats", None)

    def flags(self, traces: Sequence[Trace]) -> list[list[list[CheckFlag]]]:
        """Per trace, per step: the flags raised there (empty: no checker flags the step)."""
        out = []
        for trace in traces:
            per_step = check_trace(trace, self.checkers)
            for flags in per_step:
                self.checks["steps"] += 1
                self.checks["flagged"] += bool(flags)
                for name in {f.checker for f in flags}:
                    self.checks[name] = self.checks.get(name, 0) + 1
            out.append(per_step)
        return out

    def _checked(self, row: Sequence[float | None], flags: list[list[CheckFlag]]) -> list[float | None]:
        return [self.flagged if f else s for s, f in zip(row, flags, strict=True)]

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        """Per trace: one score per step."""
        traces = list(traces)
        base = self.base.score(traces) if self.base is not None else [[1.0] * len(t.steps) for t in traces]
        return [self._checked(row, f) for row, f in zip(base, self.flags(traces), strict=True)]

    def score_each(self, traces: Sequence[Trace]) -> list[tuple[list[float | None] | None, str | None]]:
        """Per trace ``(scores, None)``, or ``(None, reason)`` where the base refuses it (see
        :func:`~prmkit.scoring.score_each`)."""
        from prmkit.scoring._traces import score_each

        traces = list(traces)
        base = score_each(self.base, traces) if self.base is not None else [([1.0] * len(t.steps), None)
                                                                            for t in traces]
        out: list[tuple[list[float | None] | None, str | None]] = []
        for (row, why), t in zip(base, traces, strict=True):
            out.append((None, why) if row is None else (self._checked(row, self.flags([t])[0]), None))
        return out
