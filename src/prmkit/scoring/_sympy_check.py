"""A SymPy checker for MATH-style steps: the equalities a step writes in LaTeX, checked for equivalence.

It reads the step's math (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``), splits each formula
into chains ``a = b = c`` (at ``\\\\``, ``,``, ``;``, ``\\quad``, ``\\implies``, ...), parses each side
with the LaTeX parser math-verify uses (``latex2sympy2_extended``, sympy underneath) and judges each
``=`` between two neighbours:

- both sides numbers (``\\frac{3}{4} \\cdot 8 = 6``, ``\\sqrt{50} = 5\\sqrt{2}``, ``2^{10} = 1024``):
  equal exactly; a side written as a decimal may be the other rounded or cut to its digits
  (``\\sqrt{2} = 1.414``);
- both sides with the same variables, and not the chain's first ``=`` (``f(x) = (x+1)^2 = x^2 + 2x
  + 1``): equal as functions (at three random points; all three must disagree to flag).

Not judged (no evidence either way): a first ``=`` between expressions with variables (an equation to
solve, ``2x + 3 = 7``, or a definition), a number set equal to an expression with variables
(``(x-2)(x-3) = 0``), ``\\approx``, inequalities, modular arithmetic, degrees, ``\\pm``, sides with
different units in ``\\text{}``, functions it does not know (``f(3)``), and anything it cannot parse.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from prmkit.scoring._checkers import CheckFlag

__all__ = ["SympyChecker", "math_segments", "equality_chains"]

_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$", re.S)
#: Where a formula holds separate statements: each piece is its own chain.
_SEPARATORS = re.compile(r"\\\\|\\quad|\\qquad|\\implies|\\Rightarrow|\\Longrightarrow|\\rightarrow|\\to(?![A-Za-z])"
                         r"|\\iff|\\therefore|\\text\{\s*(?:and|or|so|thus|then|where|if|since)\s*\}|;"
                         r"|,(?!\d{3}(?!\d))|\\text\{\s*,\s*\}")
#: Relations that end a comparison: only ``=`` between two neighbours is judged.
_RELATION = re.compile(r"(?:\\approx|\\neq?|\\leq?|\\geq?|\\lt|\\gt|\\sim|\\simeq|\\cong|\\leqslant"
                       r"|\\geqslant)(?![A-Za-z])|<|>|≈|≠|≤|≥|=")
#: A formula holding any of these is left alone whole.
_SKIP = re.compile(r"\\pmod|\\bmod|\\mod|\\equiv|\\circ|°|\\pm|\\mp|\\dots|\\ldots|\\cdots|\\infty|\\int"
                   r"|\\lim|\\sum|\\prod|\\in\b|\\subset|\\cup|\\cap|\\begin|\\end|\\vec|\\mathbf|\\overline"
                   r"|\\angle|\\triangle|\\perp|\\parallel|\\%|%|\\lfloor|\\lceil|\\pmatrix|!|\\cdot\s*\\cdot"
                   r"|\\operatorname|\\det|\\gcd|\\max|\\min|\\&|\\star|\\ast|\\diamond|\\clubsuit"
                   r"|\\spadesuit|\\heartsuit|\\odot|\\oplus|\\otimes|\\nabla|\\#")
_TEXT = re.compile(r"\\(?:text|mathrm|textbf|textit|mbox|mathit)\s*\{([^{}]*)\}")
_MAX_SIDE = 200  # characters; longer sides are not parsed


def math_segments(text: str) -> list[str]:
    """The LaTeX formulas in ``text`` (between ``$``, ``$$``, ``\\(\\)``, ``\\[\\]``), in order.

    >>> math_segments("So \\\\(2 + 2 = 4\\\\) and $x = 1$.")
    ['2 + 2 = 4', 'x = 1']
    """
    return [next(g for g in m.groups() if g is not None).strip() for m in _MATH.finditer(text)]


def _clean(side: str) -> tuple[str, tuple[str, ...]] | None:
    """A side ready to parse and the units it names in ``\\text{}`` (None: leave the side alone)."""
    side = side.strip().strip("&").strip().rstrip(".").strip()
    trailing = re.search(r"(?:\\(?:text|mathrm|mbox)\s*\{[^{}]*\}\s*)+$", side)
    units = tuple(sorted(u.strip() for u in _TEXT.findall(trailing.group()) if u.strip())) if trailing else ()
    if trailing:
        side = side[:trailing.start()]
    if _TEXT.search(side) or "_" in side:
        return None  # words inside the expression, or subscripts (bases 110_2, indices a_n)
    side = re.sub(r"\\boxed\s*\{(.*)\}", r"\1", side)
    side = re.sub(r"\\(?:left|right|displaystyle|!|:|>)|&|\\\$|\$", " ", side)
    side = re.sub(r"(?<=\d)(?:\{,\}|\\,)(?=\d{3})", "", side)
    side = re.sub(r"\\[,;]", " ", side)
    side = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", side)
    side = re.sub(r"\\[dt]frac", r"\\frac", side).strip()
    # juxtaposed brackets are products: the parser reads 2(5) as 2 + 5 and (15)(1500) as 15 + 1500
    side = re.sub(r"(?<=[\d)\]}])\s*(?=\()", r" \\cdot ", side)
    if not side or len(side) > _MAX_SIDE or re.search(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", "", side)):
        return None  # empty, too long, or words outside \text{} (prose caught between dollar signs)
    if re.search(r"\d\s*\\frac", side):
        return None  # 2\frac{1}{3}: a mixed number (7/3) to the parser, often 2 times 1/3 to the writer
    if re.search(r"\^\s*\{[^{}]*\^|\^\s*\d{4,}|\^\s*\{\s*\d{4,}|\\binom\s*\{?\s*\d{4,}|\d{16,}", side):
        return None  # towers, huge powers and binomials, long numbers: slow to evaluate, never a slip test
    return side, units


def equality_chains(formula: str) -> list[list[str | None]]:
    """The chains of ``formula``: each a list of sides, with None between two sides joined by any
    relation other than ``=`` (they are not compared).

    >>> equality_chains("x = 2 + 3 = 5 \\\\approx 5.0, y < 2")
    [['x', '2 + 3', '5', None, '5.0'], ['y', None, '2']]
    """
    chains: list[list[str | None]] = []
    for piece in _SEPARATORS.split(formula):
        chain: list[str | None] = []
        pos = 0
        for m in _RELATION.finditer(piece):
            chain.append(piece[pos:m.start()].strip())
            if m.group() != "=":
                chain.append(None)
            pos = m.end()
        chain.append(piece[pos:].strip())
        if len([s for s in chain if s is not None]) >= 2:
            chains.append(chain)
    return chains


def _letters(side: str) -> bool:
    """Whether a side names a variable (a letter outside a LaTeX command: ``e`` is a variable here,
    ``\\pi`` a number)."""
    return re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", side)) is not None


def _decimals(side: str) -> int | None:
    m = re.fullmatch(r"-?\d*\.(\d+)", side.strip())
    return len(m.group(1)) if m else None


class SympyChecker:
    """Equalities in a step's LaTeX, checked with sympy (see the module docs). ``points``: random points
    at which two expressions with variables are compared (``seed`` fixes them).

    >>> c = SympyChecker()
    >>> [str(f) for f in c.check("", [], "Then $\\\\frac{3}{4} \\\\cdot 8 = 5$ and $2^{10} = 1024$.")]
    ['sympy: \\\\frac{3}{4} \\\\cdot 8 = 5, but \\\\frac{3}{4} \\\\cdot 8 is 6']
    >>> c.check("", [], "Solve $2x + 3 = 7$, so $x = 2$; $(x+1)^2 = x^2 + 2x + 1$.")
    []
    """

    name = "sympy"

    def __init__(self, *, symbolic: bool = False, points: int = 3, seed: int = 0) -> None:
        self.symbolic = symbolic
        self.points = points
        self.seed = seed
        self._cache: dict[str, Any] = {}

    def _parse(self, side: str) -> Any:
        if side in self._cache:
            return self._cache[side]
        try:
            from latex2sympy2_extended import latex2sympy
            from sympy.core.function import AppliedUndef

            expr = latex2sympy(side)
            if not hasattr(expr, "free_symbols") or expr.atoms(AppliedUndef) or not expr.is_commutative:
                expr = None
        except ImportError as e:
            from prmkit.errors import PrmkitError

            raise PrmkitError("the sympy checker needs math-verify's LaTeX parser: pip install "
                              "'math-verify>=0.7'") from e
        except Exception:  # the parser's errors are many and undocumented: unparsed is no evidence
            expr = None
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[side] = expr
        return expr

    def _value(self, expr: Any, subs: dict | None = None) -> complex | None:
        try:
            v = complex(expr.evalf(30, subs=subs) if subs else expr.evalf(30))
        except Exception:
            return None
        return v if v == v and abs(v) != float("inf") else None

    def _equal(self, a: Any, b: Any, a_text: str, b_text: str) -> bool | None:
        """True / False, or None where the pair is not judged."""
        sa, sb = a.free_symbols, b.free_symbols
        if not sa and not sb:
            va, vb = self._value(a), self._value(b)
            if va is None or vb is None:
                return None
            for written, other, text in ((vb, va, b_text), (va, vb, a_text)):
                d = _decimals(text)
                if d is not None and abs(written.imag) < 1e-12 and abs(other.imag) < 1e-12:
                    # a decimal: the other side rounded (to within half a unit) or cut to its digits
                    w, v, unit = written.real, other.real, 10.0 ** -d
                    return (abs(v - w) <= unit / 2 * (1 + 1e-9)
                            or (w * v >= 0 and 0 <= abs(v) - abs(w) < unit * (1 + 1e-9)))
            return abs(va - vb) <= 1e-9 * max(1.0, abs(va), abs(vb))
        if sa != sb:
            return None
        rng = random.Random(self.seed)
        verdicts = []
        for _ in range(self.points):
            subs = {s: rng.uniform(0.5, 2.5) for s in sa}
            va, vb = self._value(a, subs), self._value(b, subs)
            if va is None or vb is None:
                return None
            verdicts.append(abs(va - vb) <= 1e-8 * max(1.0, abs(va), abs(vb)))
        if all(verdicts):
            return True
        return False if not any(verdicts) else None

    def check(self, problem: str, previous_steps: Sequence[str], step: str) -> list[CheckFlag]:
        flags: list[CheckFlag] = []
        for formula in math_segments(step):
            if _SKIP.search(formula):
                continue
            for chain in equality_chains(formula):
                for i in range(len(chain) - 1):
                    left, right = chain[i], chain[i + 1]
                    if left is None or right is None:
                        continue
                    flag = self._pair(left, right, first=i == 0 or chain[i - 1] is None)
                    if flag is not None and flag not in flags:
                        flags.append(flag)
        return flags

    def _pair(self, left: str, right: str, *, first: bool) -> CheckFlag | None:
        cl, cr = _clean(left), _clean(right)
        if cl is None or cr is None:
            return None
        (lt, lu), (rt, ru) = cl, cr
        if lu and ru and lu != ru:
            return None  # 5 \text{ cm} = 50 \text{ mm}: a unit conversion, not an equality of numbers
        a, b = self._parse(lt), self._parse(rt)
        if a is None or b is None:
            return None
        if _decimals(lt) is not None or re.fullmatch(r"-?\d+", lt.strip()):
            if _decimals(rt) is not None or re.fullmatch(r"-?\d+", rt.strip()):
                return None  # two bare numbers (``0 = -12``: a contradiction reached, not a computation)
        la, lb = _letters(lt), _letters(rt)
        if la != lb or (la and (first or not self.symbolic)):
            return None  # an equation to solve, a definition, a value found for a variable
        if not la and (a.free_symbols or b.free_symbols):
            return None
        equal = self._equal(a, b, lt, rt)
        if equal is not False:
            return None
        if a.free_symbols:
            return CheckFlag(self.name, f"{left} = {right}, but they differ (e.g. at "
                                        f"{', '.join(sorted(str(s) for s in a.free_symbols))} = a random value)")
        shown = self._value(a)
        value = _short(shown) if shown is not None else "something else"
        exact = _exact(a)
        return CheckFlag(self.name, f"{left} = {right}, but {left} is {exact or value}")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "symbolic": self.symbolic, "points": self.points, "seed": self.seed}


def _short(v: complex) -> str:
    if abs(v.imag) > 1e-12:
        return f"{v.real:.6g}{v.imag:+.6g}i"
    r = v.real
    return str(int(round(r))) if abs(r - round(r)) < 1e-9 and abs(r) < 1e15 else f"{r:.6g}"


def _exact(expr: Any) -> str | None:
    """A rational value as an integer or fraction (``6``, ``5/2``); None otherwise."""
    try:
        import sympy

        value = sympy.nsimplify(expr) if expr.is_number else None
        if value is not None and value.is_Rational and abs(value.q) < 10**6:
            return str(value)
    except Exception:
        return None
    return None
