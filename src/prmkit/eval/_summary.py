"""The report's verdict: did checking the steps beat checking the answer — in plain words, whatever the
result.

Works on the ``bon`` section (see :mod:`prmkit.eval._bon`): the main method's accuracy at the largest N
against each rival's, and the paired bootstrap difference with its 95% interval. A difference counts as
a win or a loss only when its interval excludes 0; otherwise the text says the data cannot tell them
apart.

:func:`bon_report` is the one place that says which methods the verdict is about
(:data:`MAIN_METHOD` against :data:`RIVALS`): it computes the curves, their paired comparisons and the
verdict from scored traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from prmkit._result import Record
from prmkit.errors import FormatError
from prmkit.eval._bon import BonCurves, BonMethod, bon_curves, default_methods
from prmkit.eval._results import BonLiveSection, BonSection, CheckedSection, Headline, Rival, SummarySection
from prmkit.trace import Trace

__all__ = ["MAIN_METHOD", "RIVALS", "EXTRA_COMPARISONS", "BonReport", "bon_report", "bon_verdict",
           "CheckedMethods", "checked_methods", "checked_bon_report", "headline_sentence"]

#: The method the verdict is about, chosen before any result is seen: the field's usual PRM reading.
MAIN_METHOD = "PRM (min)"
#: What the main method must beat: checking only the answer, and not checking at all.
RIVALS: tuple[str, ...] = ("ORM", "majority")
#: Paired comparisons reported besides main-vs-rival (not part of the verdict).
EXTRA_COMPARISONS: tuple[tuple[str, str], ...] = (("PRM weighted (min)", "majority"),)


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
    parts += _worse_than_chance(bon, main, headline)
    return {"verdict": " ".join(parts), "headline": headline}


def _worse_than_chance(bon: dict[str, Any], main: str, headline: dict[str, Any]) -> list[str]:
    """Sentences naming the results below random choice at the largest N, or below their own N=1
    (more candidates made the pick worse): point estimates, stated whether or not an interval would
    separate them, because a selector that loses to a coin is the first thing a reader must know.
    Fills ``headline`` with ``random_acc``, ``below_random`` and ``below_n1`` (method names)."""
    ns = bon.get("ns") or []
    methods = bon.get("methods") or {}
    k = len(ns) - 1

    def acc(name: str, i: int) -> float | None:
        values = (methods.get(name) or {}).get("acc") or []
        return values[i] if i < len(values) else None

    rand = next((name for name, m in methods.items() if m.get("selector") == "random"), None)
    judged = [name for name, m in methods.items() if m.get("selector") not in ("random", "oracle")
              and acc(name, k) is not None]
    racc = acc(rand, k) if rand is not None else None
    below_random = [m for m in judged if racc is not None and acc(m, k) < racc]
    below_n1 = [m for m in judged if ns[0] == 1 and k > 0 and acc(m, 0) is not None and acc(m, k) < acc(m, 0)]
    if racc is not None:
        headline["random_acc"] = racc
    headline["below_random"], headline["below_n1"] = below_random, below_n1
    n, out = ns[-1], []
    low = [f"below random choice ({_pct(racc)})"] if main in below_random else []
    if main in below_n1:
        low.append(f"below its own N=1 ({_pct(acc(main, 0))}): more candidates made its pick worse")
    if low:
        out.append(f"{main} at N={n} ({_pct(acc(main, k))}) fell " + " and ".join(low) + ".")
    others = [f"{m} ({_pct(acc(m, k))})" for m in below_random if m != main]
    if others:
        out.append(f"Also below random choice at N={n}: {', '.join(others)}.")
    others = [m for m in below_n1 if m != main and m not in below_random]
    if others:
        out.append(f"Also below their own N=1 at N={n}: {', '.join(others)}.")
    return out


@dataclass(eq=False)
class BonReport(Record):
    """The result of :func:`bon_report`: the curves, and the verdict (None when the traces hold no
    main method to judge). ``to_dict()`` gives the report's ``bon`` and ``summary`` sections.

    Read back with :meth:`from_dict`, the curves have no bootstrap replicates (they are not in the
    dict, so :meth:`BonCurves.compare` needs the run): two reports are equal when their dicts are."""

    kind: ClassVar[str] = "bon_report"
    curves: BonCurves
    summary: dict[str, Any] | None
    extra: dict[str, Any] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BonReport) and self.to_dict() == other.to_dict()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bon": self.curves.to_dict()}
        if self.summary is not None:
            out["summary"] = self.summary
        out.update(self.extra)
        return out

    def lines(self) -> list[str]:
        """The curves' table, then the verdict (when there is one)."""
        verdict = self.summary_section()
        return self.curves.lines() + (verdict.lines() if verdict is not None else [])

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> BonReport:
        where = where or cls.kind
        if not isinstance(d, Mapping) or not isinstance(d.get("bon"), Mapping):
            raise FormatError("must be an object with a bon section", field=where)
        b = d["bon"]
        try:
            methods = {name: m for name, m in b["methods"].items()}
            curves = BonCurves(
                ns=list(b["ns"]), problems=b["problems"], candidates=b["candidates"],
                bootstrap=b["bootstrap"], seed=b["seed"],
                methods=[BonMethod(name, m["selector"], m.get("key"), m.get("aggregate"))
                         for name, m in methods.items()],
                acc={name: list(m["acc"]) for name, m in methods.items()},
                lo={name: list(m["lo"]) for name, m in methods.items()},
                hi={name: list(m["hi"]) for name, m in methods.items()},
                replicates={}, comparisons=[dict(c) for c in b.get("comparisons") or []],
                unjudged_problems=b.get("unjudged_problems", 0))
        except (KeyError, TypeError, AttributeError) as e:
            raise FormatError(f"not best-of-N curves ({type(e).__name__}: {e})", field=f"{where}.bon") from None
        return cls(curves, d.get("summary"),
                   extra={k: v for k, v in d.items() if k not in ("bon", "summary")})

    def bon_section(self, kind: str = "bon") -> BonSection:
        """The curves as the report's section ``kind`` (``bon``, or ``bon_live`` for a second pair)."""
        cls = BonLiveSection if kind == "bon_live" else BonSection
        return cls.from_dict(self.curves.to_dict())

    def summary_section(self) -> SummarySection | None:
        """The verdict as the report's section ``summary`` (None: no main method to judge)."""
        return None if self.summary is None else SummarySection.from_dict(self.summary)

    def checked_section(self) -> CheckedSection:
        """Curves and verdict together, as the report's section ``checked``
        (:func:`checked_bon_report`)."""
        return CheckedSection.from_dict(self.to_dict())


def bon_report(traces: Iterable[Trace], *, prm_key: str = "prm", orm_key: str = "orm",
               bootstrap: int = 1000, seed: int = 0, main: str = MAIN_METHOD,
               rivals: Sequence[str] = RIVALS,
               extra_comparisons: Sequence[tuple[str, str]] = EXTRA_COMPARISONS,
               methods: Sequence[BonMethod] | None = None) -> BonReport:
    """Best-of-N curves of :func:`~prmkit.eval.default_methods` on scored ``traces`` (step scores under
    ``prm_key``, ORM trace scores under ``meta["scores"][orm_key]``), or of ``methods`` where given
    (methods over several score keys, named as the report should show them), with ``bootstrap`` replicates,
    the paired comparisons of ``main`` with each rival and ``extra_comparisons`` (those whose two
    methods both exist), and :func:`bon_verdict` of ``main`` against ``rivals`` (a rival without
    scores is named as not evaluated). Without ``main`` among the methods (no PRM scores) there is
    no verdict: ``summary`` is None.

    >>> from prmkit.trace import Problem, Step
    >>> p = Problem("2 + 3?", answer="5", id="p")
    >>> ts = [Trace(id=str(i), problem=p, steps=[Step("s", scores={"prm": s})], final_answer=a,
    ...             outcome="correct" if a == "5" else "incorrect")
    ...       for i, (a, s) in enumerate([("5", 0.9), ("6", 0.2)])]
    >>> r = bon_report(ts, bootstrap=50)
    >>> [(c["a"], c["b"]) for c in r.to_dict()["bon"]["comparisons"] if c["n"] == 2]
    [('PRM (min)', 'majority'), ('PRM weighted (min)', 'majority')]
    >>> r.summary["headline"]["versus"]["ORM"] is None  # no ORM scores: named, not compared
    True
    """
    traces = list(traces)
    methods = list(methods) if methods is not None else default_methods(traces, prm_key=prm_key, orm_key=orm_key)
    names = {m.name for m in methods}
    wanted = [(main, r) for r in rivals] + [tuple(c) for c in extra_comparisons]
    curves = bon_curves(traces, methods, bootstrap=bootstrap, seed=seed,
                        comparisons=[(a, b) for a, b in wanted if a in names and b in names])
    summary = bon_verdict(curves.to_dict(), main, list(rivals)) if main in names else None
    return BonReport(curves, summary)


class CheckedMethods(NamedTuple):
    """The best-of-N methods of a PRM whose steps a tool checks (:func:`checked_methods`)."""

    main: BonMethod  #: ``"{label} (min)"``: the checked PRM, the one a verdict is about
    weighted: BonMethod  #: ``"{label} weighted (min)"``: the checked PRM's weighted vote
    prm: BonMethod  #: ``"PRM (min)"``: the PRM alone
    alone: BonMethod  #: ``"{check_key} alone"``: the tool's own step scores


def checked_methods(*, key: str = "prm+calculator", prm_key: str = "prm", check_key: str = "calculator",
                    label: str = "PRM+calculator") -> CheckedMethods:
    """The methods that judge a PRM whose steps a tool checks (step scores under ``key``) against its
    parts: the PRM alone (``prm_key``) and the check alone (``check_key``), in that order after the
    checked PRM and its weighted vote; :func:`checked_bon_report` reports them.

    >>> [(m.name, m.key) for m in checked_methods()]  # doctest: +NORMALIZE_WHITESPACE
    [('PRM+calculator (min)', 'prm+calculator'), ('PRM+calculator weighted (min)', 'prm+calculator'),
     ('PRM (min)', 'prm'), ('calculator alone', 'calculator')]
    """
    return CheckedMethods(BonMethod(f"{label} (min)", "bon", key, "min"),
                          BonMethod(f"{label} weighted (min)", "weighted", key, "min"),
                          BonMethod("PRM (min)", "bon", prm_key, "min"),
                          BonMethod(f"{check_key} alone", "bon", check_key, "min"))


def checked_bon_report(traces: Iterable[Trace], *, key: str = "prm+calculator", prm_key: str = "prm",
                       check_key: str = "calculator", orm_key: str = "orm", label: str = "PRM+calculator",
                       bootstrap: int = 1000, seed: int = 0) -> BonReport:
    """Best-of-N of a PRM whose steps a tool checks (step scores under ``key``, e.g. a
    :class:`~prmkit.scoring.CalculatorScorer` around the PRM), with its verdict against majority vote,
    the ORM, the PRM alone and the check alone (``check_key``: the tool's own step scores). The last
    two say what each part is worth: a combination that only ties the check alone has learned nothing
    the tool did not already know. Methods: :func:`checked_methods` (``"{label} (min)"``, the
    verdict's; ``"{label} weighted (min)"``, ``"PRM (min)"``, ``"{check_key} alone"``), ``"ORM"``,
    majority, random and pass@N; a method whose scores are absent is left out (and named as not
    evaluated in the verdict).

    >>> from prmkit.trace import Problem, Step
    >>> p = Problem("2 + 3?", answer="5", id="p")
    >>> ts = [Trace(id=str(i), problem=p, final_answer=a, outcome="correct" if a == "5" else "incorrect",
    ...             steps=[Step("s", scores={"prm": s, "calculator": c, "prm+calculator": min(s, c)})])
    ...       for i, (a, s, c) in enumerate([("5", 0.4, 1.0), ("6", 0.9, 0.0)])]
    >>> r = checked_bon_report(ts, bootstrap=50).to_dict()
    >>> r["summary"]["headline"]["main"], r["bon"]["methods"]["PRM+calculator (min)"]["acc"][-1]
    ('PRM+calculator (min)', 1.0)
    >>> r["bon"]["methods"]["PRM (min)"]["acc"][-1]  # at N = 2 the PRM alone picks the slip
    0.0
    """
    traces = list(traces)
    wanted = checked_methods(key=key, prm_key=prm_key, check_key=check_key, label=label)
    scored = {k for t in traces for st in t.steps for k in st.scores}
    methods = [m for m in wanted if m.key in scored]
    methods += [m for m in default_methods(traces, prm_key=prm_key, orm_key=orm_key)
                if m.name in ("ORM", "majority", "random", "oracle (pass@N)")]
    return bon_report(traces, bootstrap=bootstrap, seed=seed, main=wanted.main.name,
                      rivals=("majority", "ORM", wanted.prm.name, wanted.alone.name),
                      extra_comparisons=((wanted.weighted.name, "majority"),), methods=methods)


def headline_sentence(summary: SummarySection | Mapping[str, Any], lead: str = "") -> str:
    """One sentence of a :func:`bon_verdict` result's numbers: the main method's accuracy and each
    rival's paired difference with its interval and call (for a verdict that names a second one).

    >>> print(headline_sentence({"headline": {"n": 4, "main": "A", "main_acc": 0.5, "versus": {
    ...     "B": {"acc_diff": 0.25, "acc_diff_lo": 0.05, "acc_diff_hi": 0.4, "call": "A beat B"},
    ...     "C": None}}}, lead="With a check,"))
    With a check, at N=4 A chose a correct answer for 50.0%: against B +25.0 points [+5.0, +40.0] (A beat B); C not evaluated.
    """
    s = summary if isinstance(summary, SummarySection) else SummarySection.from_dict(summary)
    h = s.headline
    if not isinstance(h, Headline) or h.main is None:
        return f"{lead} no best-of-N result.".strip()
    parts = []
    for rival, v in (h.versus or {}).items():
        if not isinstance(v, Rival) or v.acc_diff is None:
            parts.append(f"{rival} not evaluated")
        else:
            parts.append(f"against {rival} {_pts(v.acc_diff)} points [{_pts(v.acc_diff_lo)}, "
                         f"{_pts(v.acc_diff_hi)}] ({'' if v.call is None else v.call})")
    head = f"{lead} at N={h.n} {h.main} chose a correct answer for {_pct(h.main_acc)}".strip()
    return head[:1].upper() + head[1:] + (": " + "; ".join(parts) if parts else "") + "."
