"""A quantity-provenance checker: every number a step uses comes from somewhere.

A number in a step is explained when it is

- in the problem, as digits (``1,200``, ``2.5``, ``\\frac{3}{4}``'s 3 and 4) or as a word (``three``,
  ``twice``, ``a dozen``, ``half``, ``a third``, ``quarter``), or a percentage of it as a fraction
  (``20%`` -> 0.2);
- in an earlier step;
- computed in this step: written after an ``=`` (the result of a computation written out), or one
  operation (``+ - * /``) away from two explained numbers (a result written without its equation:
  "so 12 - 7 leaves her 5" reads 5 as computed);
- a common constant (:data:`CONSTANTS`: 0, 1, 2, 10, 100, 1000, unit conversions such as 60, 24, 7,
  12, 365) or a list marker, step number, ordinal (``1st``), or an exponent (``x^2``).

An unexplained number is flagged with its reason (``12 is not in the problem, an earlier step, or
computed in this step``). It catches an invented quantity or a misread one; it does not see a known
number used in the wrong place (a wrong operand), which looks explained.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from prmkit.scoring._checkers import CheckFlag, format_number

__all__ = ["ProvenanceChecker", "numbers_in", "CONSTANTS"]

#: Numbers any step may use without saying where they come from: small constants, powers of ten, and
#: the unit conversions word problems lean on (minutes, hours, days, weeks, months, years). Chosen by
#: the false flags on right solutions (GSM8K train's reference solutions, MATH-500's), not on
#: ProcessBench: ``python benchmarks/checkers.py --calibrate`` prints what each one saves.
CONSTANTS: frozenset[Fraction] = frozenset(Fraction(x) for x in (
    0, 1, 2, 3, 4, 10, 100, 1000, 12, 24, 60, 7, 30, 52, 365, 3600, Fraction(1, 2), 180, 360))

_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "million": 1_000_000, "dozen": 12, "twice": 2, "double": 2, "triple": 3,
    "thrice": 3, "half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4,
    "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
    "pair": 2, "couple": 2, "score": 20, "week": 7, "weeks": 7, "hour": 60, "hours": 60,
}
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\.?\d)")
_WORD = re.compile(r"[a-z]+")
#: Numbers that are not quantities: list markers and step numbers at a line's start (``1.``,
#: ``Step 2:``, ``(3)``), ordinals (``1st``), exponents (``^2``, ``^{3}``), LaTeX arguments of
#: ``\\sqrt[3]``, and the ``<<...>>`` of a GSM8K annotation (checked by the calculator).
_NOT_QUANTITY = re.compile(r"(?im)^\s*(?:step\s*)?\(?\d+[.):]\s|step\s+\d+|\d+(?:st|nd|rd|th)\b"
                           r"|\^\s*\{?-?\d+\}?|\\sqrt\[\d+\]|<<[^<>]*>>")


_ASY = re.compile(r"\[asy\].*?(?:\[/asy\]|$)|^.*\b(?:draw|label|dot|fill|filldraw|pair|path|size|unitsize)\(.*$",
                  re.S | re.M)


def _plain(text: str) -> str:
    """``text`` without what holds no quantities: list markers, step numbers, ordinals, exponents,
    GSM8K annotations, Asymptote figures (``[asy] ... [/asy]``, ``draw(...)`` lines)."""
    return _NOT_QUANTITY.sub(" ", _ASY.sub(" ", text))


def _pieces(token: str) -> list[Fraction]:
    """A number as written, and where it has commas, each piece between them (``90,120`` may be the
    pair of coordinates 90 and 120, not ninety thousand)."""
    whole = [Fraction(token.replace(",", ""))]
    return whole + [Fraction(p) for p in token.split(",")] if "," in token else whole


def numbers_in(text: str) -> list[Fraction]:
    """The numbers written as digits in ``text``, in order (thousands commas read, list markers,
    step numbers, ordinals and exponents left out).

    >>> [str(x) for x in numbers_in("1. She pays $1,200.50 for 3 items; x^2 is the 2nd.")]
    ['2401/2', '3']
    """
    return [_pieces(m.group(1) + (m.group(2) or ""))[0] for m in _NUMBER.finditer(_plain(text))]


def _tokens(text: str) -> list[str]:
    return [m.group(1) + (m.group(2) or "") for m in _NUMBER.finditer(_plain(text))]


def _word_numbers(text: str) -> set[Fraction]:
    found = {Fraction(_WORDS[w]) for w in _WORD.findall(text.lower()) if w in _WORDS}
    return found | {1 / x for x in found if x}  # "a third" is also 1/3


def _with_percent(numbers: Iterable[Fraction]) -> set[Fraction]:
    out = set(numbers)
    out |= {x / 100 for x in out} | {x * 100 for x in out if x < 1}  # 20% <-> 0.2
    return out


_COMPUTED = re.compile(r"(?:=|\\approx|≈)\s*(?:\\\$|\$|\\\(|\{|\\boxed\{|\\text\{\s*)*\s*(-?(?:\d{1,3}(?:,\d{3})+|\d+)"
                       r"(?:\.\d+)?)")


class ProvenanceChecker:
    """Flags a number a step uses that comes from nowhere (see the module docs). ``constants``: the
    numbers any step may use (default :data:`CONSTANTS`); ``one_operation``: a number one ``+ - * /``
    away from two explained numbers counts as computed in the step (default True).

    >>> c = ProvenanceChecker()
    >>> problem = "Tom has 15 apples and gives away a third of them. How many are left?"
    >>> c.check(problem, [], "A third of 15 is 15 / 3 = 5, so 15 - 5 = 10 are left.")
    []
    >>> [str(f) for f in c.check(problem, [], "He gives away 41 apples.")]
    ['provenance: 41 is not in the problem, an earlier step, or computed in this step']
    """

    name = "provenance"

    def __init__(self, *, constants: Iterable[Any] | None = None, one_operation: bool = True) -> None:
        self.constants = frozenset(Fraction(x) for x in constants) if constants is not None else CONSTANTS
        self.one_operation = one_operation

    def known(self, problem: str, previous_steps: Sequence[str]) -> set[Fraction]:
        """The numbers a step may use without computing them: the problem's (digits and words, with
        percentages as fractions), the earlier steps', and the constants."""
        found = _with_percent(_all_pieces(problem)) | _word_numbers(problem) | set(self.constants)
        for s in previous_steps:
            found |= _with_percent(_all_pieces(s))
        return found

    def check(self, problem: str, previous_steps: Sequence[str], step: str) -> list[CheckFlag]:
        known = self.known(problem, previous_steps) | _word_numbers(step)
        plain = _plain(step)
        for m in _COMPUTED.finditer(plain):
            known.add(abs(Fraction(m.group(1).replace(",", ""))))
        for formula in _FORMULA.findall(plain):  # a chain's last side is its result
            last = re.split(r"=", next(g for g in formula if g))[-1] if "=" in "".join(formula) else ""
            known |= set(_all_pieces(last))

        def explained(token: str, pool: set[Fraction]) -> bool:
            whole, *parts = _pieces(token)
            return whole in pool or bool(parts) and all(p in pool for p in parts)

        tokens = list(dict.fromkeys(_tokens(step)))
        if not self.one_operation:
            unexplained = [t for t in tokens if not explained(t, known)]
        elif all(explained(t, known) for t in tokens):
            unexplained = []
        else:  # in order: a number the step reached becomes an operand for the numbers after it
            pool = set(known)
            derived = pool | _one_operation(pool)
            unexplained = []
            for t in tokens:
                if not explained(t, derived):
                    unexplained.append(t)
                for x in _pieces(t):
                    if x not in pool:
                        derived |= _with(x, pool)
                        pool.add(x)
        return [CheckFlag(self.name, f"{format_number(_pieces(t)[0])} is not in the problem, an earlier step, "
                                     "or computed in this step") for t in unexplained]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "one_operation": self.one_operation,
                "constants": sorted(format_number(x) for x in self.constants)}


_FORMULA = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$", re.S)


def _all_pieces(text: str) -> list[Fraction]:
    return [x for t in _tokens(text) for x in _pieces(t)]


def _with(x: Fraction, numbers: set[Fraction]) -> set[Fraction]:
    """What one operation makes of ``x`` and one of ``numbers`` (or of ``x`` alone)."""
    out = {x, x * x, x + x}
    if abs(x) < 1000:
        out.add(x ** 3)
    for b in numbers:
        out.update((x + b, abs(x - b), x * b))
        if b:
            out.add(x / b)
        if x:
            out.add(b / x)
    return out


def _one_operation(numbers: set[Fraction]) -> set[Fraction]:
    """Every ``a + b``, ``a - b`` (absolute), ``a * b`` and ``a / b`` of two of ``numbers``, and every
    square and cube of one."""
    nums = sorted(numbers)
    if len(nums) > 400:  # a long solution: the pairs would be many and explain almost anything
        nums = nums[:400]
    out: set[Fraction] = {x * x for x in nums if abs(x) < 10**6} | {x ** 3 for x in nums if abs(x) < 1000}
    for i, a in enumerate(nums):
        for b in nums[i:]:
            out.update((a + b, abs(a - b), a * b))
            if b:
                out.add(a / b)
            if a:
                out.add(b / a)
    return out
