"""The report's verdict: did checking the steps beat checking the answer — in plain words, whatever the
result.

Works on the ``bon`` section (see :mod:`prmkit.eval._bon`): the main method's accuracy at the largest N
against each rival's, and the paired bootstrap difference with its 95% interval. A difference counts as
a win or a loss only when its interval excludes 0; otherwise the text says the data cannot tell them
apart.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bon_verdict"]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pts(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def bon_verdict(bon: dict[str, Any], main: str, rivals: list[str]) -> dict[str, Any]:
    """``{"verdict": paragraph, "headline": numbers}`` comparing ``main`` with each of ``rivals`` at
    the largest N of the curves.

    >>> bon = {"ns": [1, 4], "problems": 8, "methods": {
    ...     "PRM (min)": {"acc": [0.5, 0.625], "lo": [0.3, 0.4], "hi": [0.7, 0.8]},
    ...     "ORM": {"acc": [0.5, 0.5], "lo": [0.3, 0.3], "hi": [0.7, 0.7]}},
    ...     "comparisons": [{"a": "PRM (min)", "b": "ORM", "n": 4, "diff": 0.125, "lo": -0.1, "hi": 0.3}]}
    >>> print(bon_verdict(bon, "PRM (min)", ["ORM"])["verdict"])  # doctest: +NORMALIZE_WHITESPACE
    At N=4 on 8 held-out problems, PRM (min) chose a correct answer for 62.5% [40.0%, 80.0%] of
    problems. Against ORM (50.0% [30.0%, 70.0%]): +12.5 points [-10.0, +30.0] — the interval includes
    0, so these data cannot tell them apart.
    """
    ns = bon.get("ns") or []
    methods = bon.get("methods") or {}
    if not ns or main not in methods:
        return {"verdict": f"No best-of-N result for {main}: nothing to compare.", "headline": {}}
    n = ns[-1]
    k = len(ns) - 1

    def at(name: str) -> tuple[float | None, float | None, float | None]:
        m = methods[name]
        return m["acc"][k], m["lo"][k], m["hi"][k]

    acc, lo, hi = at(main)
    parts = [f"At N={n} on {bon.get('problems', '?')} held-out problems, {main} chose a correct answer "
             f"for {_pct(acc)} [{_pct(lo)}, {_pct(hi)}] of problems."]
    headline: dict[str, Any] = {"n": n, "main": main, "main_acc": acc, "main_acc_lo": lo,
                                "main_acc_hi": hi, "versus": {}}
    comps = {(c["a"], c["b"], c["n"]): c for c in bon.get("comparisons") or []}
    for rival in rivals:
        if rival not in methods:
            parts.append(f"{rival}: not evaluated (no scores), so no comparison.")
            headline["versus"][rival] = None
            continue
        racc, rlo, rhi = at(rival)
        c = comps.get((main, rival, n))
        if c is None or c.get("diff") is None:
            parts.append(f"Against {rival} ({_pct(racc)} [{_pct(rlo)}, {_pct(rhi)}]): no paired "
                         f"interval was computed.")
            headline["versus"][rival] = {"acc": racc, "acc_diff": None}
            continue
        d, dlo, dhi = c["diff"], c["lo"], c["hi"]
        if dlo is not None and dlo > 0:
            call = f"{main} beat {rival}"
        elif dhi is not None and dhi < 0:
            call = f"{main} lost to {rival}"
        else:
            call = "the interval includes 0, so these data cannot tell them apart"
        parts.append(f"Against {rival} ({_pct(racc)} [{_pct(rlo)}, {_pct(rhi)}]): {_pts(d)} points "
                     f"[{_pts(dlo)}, {_pts(dhi)}] — {call}.")
        headline["versus"][rival] = {"acc": racc, "acc_lo": rlo, "acc_hi": rhi, "acc_diff": d,
                                     "acc_diff_lo": dlo, "acc_diff_hi": dhi, "call": call}
    return {"verdict": " ".join(parts), "headline": headline}
