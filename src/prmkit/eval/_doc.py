"""The report's document model: a list of blocks (headings, paragraphs, tables, figures, lists)
rendered to Markdown and HTML by :mod:`prmkit.eval._report`, and the number formatters that give
every number the report's look. Section renderers and probes (``Probe.details``) write into a
:class:`ReportDoc`; this module imports nothing from the rest of ``eval``, so probes and the report
both depend on it and not on each other."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ReportDoc", "Inline"]

_DASH = "—"

# -- number formatting ---------------------------------------------------------------------------------


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _bad(x: Any) -> bool:
    return not _is_num(x) or (isinstance(x, float) and not math.isfinite(x))


def _pct(x: Any) -> str:
    """A fraction as a percentage: 0.625 -> ``62.5%``."""
    return _DASH if _bad(x) else f"{100 * x:.1f}%"


def _f3(x: Any) -> str:
    """AUROC, F1, PRMScore, ECE, correlations: three decimals."""
    return _DASH if _bad(x) else f"{x:.3f}"


def _pp(x: Any) -> str:
    """A difference of accuracies in percentage points, signed."""
    return _DASH if _bad(x) else f"{100 * x:+.1f} pp"


def _num(x: Any) -> str:
    """A number of no fixed scale, by its magnitude, so that a small one never reads as zero: three
    decimals from 0.1 to 100, one from 100 up; from 0.001 to 0.1 three decimals when they hold it
    exactly, else three significant digits; below 0.001 scientific notation with up to three
    significant digits; zero as 0.000; an int as it is.

    >>> [_num(x) for x in (1e-4, 1e-6, -2.345e-5, 0.0123, 0.04, 0.5, 12.0, 1234.56, 0.0, 7)]
    ['1e-4', '1e-6', '-2.35e-5', '0.0123', '0.040', '0.500', '12.000', '1234.6', '0.000', '7']
    """
    if _bad(x):
        return _DASH
    if isinstance(x, int):
        return str(x)
    a = abs(x)
    if a == 0:
        return "0.000"
    if a >= 100:
        return f"{x:.1f}"
    if a >= 0.1:
        return f"{x:.3f}"
    if a >= 1e-3:
        three = f"{x:.3f}"
        return three if abs(float(three) - x) <= 1e-12 else f"{x:.3g}"
    mantissa, exp = f"{x:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exp)}"


def _int(x: Any) -> str:
    if _bad(x):
        return _DASH
    return str(int(x)) if float(x).is_integer() else _num(x)


def _ci(acc: Any, lo: Any, hi: Any) -> str:
    """``62.5% [50.0%, 75.0%]`` (the interval left out when it is unknown)."""
    if _bad(lo) or _bad(hi):
        return _pct(acc)
    return f"{_pct(acc)} [{_pct(lo)}, {_pct(hi)}]"


_FRACTION_WORDS = ("acc", "accuracy", "frac", "rate", "agreement", "pass")


def _auto(key: Any, x: Any) -> str:
    """A value of unknown meaning: fractions (by their key: ``*_acc``, ``frac_*``, ``*_rate``,
    ``agreement``, ``pass@k``) as percentages, other floats by magnitude (:func:`_num`: a learning
    rate of 1e-4 reads ``1e-4``, not ``0.000``)."""
    if x is None:
        return _DASH
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return _DASH
        words = str(key).lower().replace("@", "_").replace("-", "_").split("_")
        if 0 <= x <= 1 and any(w in _FRACTION_WORDS for w in words):
            return _pct(x)
        return _num(x)
    if isinstance(x, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in x):
            return ", ".join(_auto(key, v) for v in x) or _DASH
        return json.dumps(x, sort_keys=True, default=str)
    if isinstance(x, Mapping):
        return json.dumps(x, sort_keys=True, default=str)
    return str(x)


# -- a tiny document model, rendered to Markdown and HTML --------------------------------------------

#: Inline text: a str (plain), ``("b", s)`` bold, ``("fail", s)`` bold in red (HTML), ``("code", s)``
#: code, ``("em", s)`` emphasis, or a list of them.
Inline = Any


class ReportDoc:
    """The report as a list of blocks, rendered to both Markdown and HTML; what a section renderer (or a
    probe's ``details``, see :class:`~prmkit.eval.Probe`) writes into.

    Text is :data:`Inline`: a plain str, or ``("b", text)`` bold, ``("fail", text)`` bold and red,
    ``("em", text)``, ``("code", text)``, or a list of those. An empty table or list is left out. The
    formatters give numbers the report's look: :meth:`pct` for fractions, :meth:`f3` for AUROC, F1 and
    correlations, :meth:`num` for numbers of no fixed scale, :meth:`count` for counts, each ``—`` for
    a number that could not be computed.

    >>> doc = ReportDoc()
    >>> doc.table(["Source", "AUROC"], [["arith", doc.f3(0.8125)], ["gsm8k", doc.f3(None)]])
    >>> doc.blocks[0][2]
    [['arith', '0.812'], ['gsm8k', '—']]
    """

    def __init__(self) -> None:
        self.blocks: list[tuple[Any, ...]] = []

    @staticmethod
    def pct(x: Any) -> str:
        """A fraction as a percentage: 0.625 -> ``62.5%``."""
        return _pct(x)

    @staticmethod
    def f3(x: Any) -> str:
        """Three decimals: 0.8125 -> ``0.812``."""
        return _f3(x)

    @staticmethod
    def num(x: Any) -> str:
        """A number of no fixed scale (a mean change, a slope, a learning rate), by magnitude:
        ``1e-4`` stays ``1e-4``, 0.0123 reads ``0.0123``, 0.5 ``0.500``."""
        return _num(x)

    @staticmethod
    def count(x: Any) -> str:
        """A count: 12 -> ``12`` (a non-integer keeps three decimals)."""
        return _int(x)

    def heading(self, level: int, text: Inline, anchor: str | None = None) -> None:
        self.blocks.append(("h", min(level, 6), text, anchor))

    def para(self, *parts: Inline, cls: str | None = None) -> None:
        self.blocks.append(("p", list(parts), cls))

    def table(self, headers: Sequence[Inline], rows: Sequence[Sequence[Inline]]) -> None:
        if rows:
            self.blocks.append(("table", list(headers), [list(r) for r in rows]))

    def figure(self, name: str, caption: str) -> None:
        self.blocks.append(("figure", name, caption))

    def bullets(self, items: Sequence[Inline]) -> None:
        if items:
            self.blocks.append(("ul", list(items)))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))


