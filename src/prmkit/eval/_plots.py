"""Figures of the evaluation report, drawn from the results (never from traces).

Each function takes one section of the results (typed: :class:`~prmkit.eval.BonSection`,
:class:`~prmkit.eval.StepMetricsSection`, ...; or its JSON dict, read into that class first; the
probes' figures take the probe's own numbers) and returns the figure as PNG bytes, or ``None`` when the section
holds nothing to draw. Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas,
never through ``pyplot``: no global figure state leaks between calls or into a user's session, and
the same data gives the same bytes (the PNG carries no software version or timestamp).

matplotlib is optional: ``pip install "prmkit[plot]"``.

>>> png = plot_bon({"ns": [1, 2], "methods": {"prm": {"selector": "bon", "acc": [0.5, 0.6],
...                                                    "lo": [0.4, 0.5], "hi": [0.6, 0.7]}}})
>>> png[:8] == PNG_SIGNATURE, plot_bon({"ns": [], "methods": {}})
(True, None)
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prmkit.errors import MissingDependencyError
from prmkit.eval._results import (
    BonSection,
    MethodCurve,
    PRMBenchClass,
    PRMBenchSection,
    ProbesSection,
    ProcessBenchSection,
    ScoreBin,
    ScorerSteps,
    StepMetricsSection,
    ThresholdSweep,
    probe_result_class,
)
from prmkit.eval._tts_section import tts_curves
from prmkit.search import TtsResult

if TYPE_CHECKING:
    from prmkit.eval.probes import GamingResult, LengthBiasResult

__all__ = [
    "PNG_SIGNATURE", "plot_bon", "bon_line_styles", "plot_reliability", "plot_length_bias", "plot_threshold_sweep",
    "plot_prmbench", "plot_gaming", "plot_tts",
]

#: The eight bytes every PNG file starts with.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

_DPI = 100
# A fixed, colour-blind-safe cycle (Okabe-Ito): the same method keeps its colour whatever the user's
# matplotlib style says.
_BOLD_COLORS = ("#D55E00", "#0072B2", "#009E73", "#000000", "#CC79A7")
_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999",
           "#882255", "#44AA99", "#DDCC77")


def _figure(width: float = 6.4, height: float = 4.0):
    """A fresh Figure on an Agg canvas (matplotlib imported here so that prmkit imports without it)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError("matplotlib", "plot", "report figures") from None
    fig = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # No "Software" chunk: the bytes depend on the data only, not on the matplotlib version.
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def _num(x: Any) -> float:
    """A plottable float: None (not computable) becomes NaN, which matplotlib leaves as a gap."""
    if x is None or isinstance(x, bool):
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _nums(xs: Sequence[Any] | None, n: int) -> list[float]:
    xs = list(xs or [])
    return [_num(xs[i]) if i < len(xs) else math.nan for i in range(n)]


def _finite(xs: Sequence[float]) -> bool:
    return any(not math.isnan(x) for x in xs)


def _section(cls: type, x: Any) -> Any:
    """A section as its typed result: as it is, or read from its dict (None when there is nothing)."""
    if x is None or isinstance(x, cls):
        return x
    return cls.from_dict(x) if x else None


def bon_line_styles(methods: Mapping[str, MethodCurve], highlight: Sequence[str] | None = None
                    ) -> dict[str, dict[str, Any]]:
    """How :func:`plot_bon` draws each method: ``bold`` (legend in bold), ``band`` (its bootstrap
    band), ``linewidth``, ``alpha``, ``markersize``.

    With ``highlight`` (the verdict's methods, its main method first) those are bold, the main one
    banded, and the rest thin and light; without it every line is normal and bands go to the first
    PRM line and the reference methods. Overlapping bands hide everything; the tables carry every
    interval.

    >>> st = bon_line_styles({"PRM (min)": MethodCurve(), "PRM (last)": MethodCurve(), "ORM": MethodCurve("bon")},
    ...                      ["PRM (min)", "ORM"])
    >>> [(k, v["bold"], v["band"], v["alpha"]) for k, v in st.items()]
    [('PRM (min)', True, True, 1.0), ('PRM (last)', False, False, 0.35), ('ORM', True, False, 1.0)]
    """
    bold = {str(h) for h in highlight or () if h in methods}
    if bold:
        banded = {next(str(h) for h in highlight or () if h in methods)}
    else:
        banded = {"PRM (min)" if "PRM (min)" in methods
                  else next((str(n) for n in methods if str(n).startswith("PRM")), "")}
        banded |= {str(n) for n, m in methods.items() if m.selector in ("oracle", "majority")}
        banded |= {str(n) for n, m in methods.items() if m.selector == "bon" and str(n).startswith("ORM")}
    out = {}
    for name in methods:
        light = bool(bold) and str(name) not in bold
        out[str(name)] = {"bold": str(name) in bold, "band": str(name) in banded,
                          "linewidth": 0.9 if light else (2.4 if bold else 1.5),
                          "alpha": 0.35 if light else 1.0, "markersize": 2 if light else (4 if bold else 3)}
    return out


def plot_bon(bon: BonSection | Mapping[str, Any] | None, highlight: Sequence[str] | None = None) -> bytes | None:
    """Best-of-N accuracy against N (log2 axis): one line per method; the oracle (pass@N) dashed.

    ``highlight``: the methods the verdict is about (say ``PRM (min)``, ``ORM``, ``majority``) are
    drawn bold with their bootstrap bands and named in bold in the legend; every other method is a
    thin light line without a band, there for context. Without it, the first PRM line and the
    reference methods are banded. ``None`` when there is no N or no method."""
    bon = _section(BonSection, bon)
    if bon is None:
        return None
    ns = [n for n in bon.ns or []]
    methods = {k: m for k, m in (bon.methods or {}).items() if isinstance(m, MethodCurve)}
    if not ns or not methods:
        return None
    fig = _figure(8.4, 4.4)
    ax = fig.add_subplot(1, 1, 1)
    drawn = False
    look = bon_line_styles(methods, highlight)
    bold = {name for name, st in look.items() if st["bold"]}
    order = [str(h) for h in highlight or () if str(h) in bold]
    banded = {name for name, st in look.items() if st["band"]}
    styles = ("-", "-.", ":")
    for i, (name, m) in enumerate(methods.items()):
        acc = [100 * v for v in _nums(m.acc, len(ns))]
        if not _finite(acc):
            continue
        lo = [100 * v for v in _nums(m.lo, len(ns))]
        hi = [100 * v for v in _nums(m.hi, len(ns))]
        st = look[str(name)]
        # The verdict's methods get the most distinct colours, in the verdict's order.
        color = (_BOLD_COLORS[order.index(str(name)) % len(_BOLD_COLORS)] if st["bold"]
                 else _COLORS[i % len(_COLORS)])
        oracle = m.selector == "oracle"
        ax.plot(ns, acc, marker="o", markersize=st["markersize"], color=color, label=str(name),
                linewidth=st["linewidth"], alpha=st["alpha"], zorder=3 if st["bold"] else 1,
                linestyle="--" if oracle else styles[(i // len(_COLORS)) % len(styles)])
        if st["band"] and _finite(lo) and _finite(hi):
            ax.fill_between(ns, lo, hi, color=color, alpha=0.12, linewidth=0)
        drawn = True
    if not drawn:
        return None
    if len(ns) > 1 and min(ns) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel("N (candidates per problem)")
    ax.set_ylabel("accuracy (%)")
    problems = bon.problems
    banded_names = ", ".join(str(n) for n in methods if str(n) in banded) if bold else "PRM, ORM, majority, oracle"
    ax.set_title(f"Best-of-N accuracy ({problems} problems; 95% bootstrap band{'' if len(banded) == 1 else 's'} "
                 f"for {banded_names})"
                 if problems else "Best-of-N accuracy (95% bootstrap bands)", fontsize=10)
    ax.grid(True, alpha=0.3)
    legend = ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    for text in legend.get_texts():
        if text.get_text() in bold:
            text.set_fontweight("bold")
        elif bold:
            text.set_color("#777777")
    fig.tight_layout()
    return _png(fig)


def plot_reliability(step_metrics: StepMetricsSection | ScorerSteps | Mapping[str, Any] | None) -> bytes | None:
    """Reliability diagram (fraction of steps correct against mean score, per score bin) with the
    step count per bin below. Takes one scorer's metrics (:class:`~prmkit.eval.ScorerSteps`, or a dict
    with ``bins``) or the whole ``step_metrics`` section (scorer key -> metrics), drawn together."""
    if isinstance(step_metrics, ScorerSteps):
        per: dict[str, ScorerSteps] = {"": step_metrics}
    elif isinstance(step_metrics, StepMetricsSection):
        per = step_metrics.named()
    elif not step_metrics:
        return None
    elif "bins" in step_metrics:
        per = {"": ScorerSteps.from_dict(step_metrics)}
    else:
        per = StepMetricsSection.from_dict(step_metrics).named()
    per_key = {k: [b for b in v.bins or [] if isinstance(b, ScoreBin)] for k, v in per.items() if v.bins}
    eces = {k: per[k].ece for k in per_key}
    if not per_key:
        return None
    fig = _figure(6.4, 5.2)
    grid = fig.add_gridspec(2, 1, height_ratios=(3, 1), hspace=0.08)
    ax = fig.add_subplot(grid[0])
    counts = fig.add_subplot(grid[1], sharex=ax)
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, label="perfect calibration")
    width = 1.0 / max(len(per_key), 1)
    for i, (key, bins) in enumerate(per_key.items()):
        color = _COLORS[i % len(_COLORS)]
        xs = [_num(b.mean_score) for b in bins]
        ys = [_num(b.frac_correct) for b in bins]
        ece = eces[key]
        label = key or "score"
        if ece is not None:
            label += f" (ECE {_num(ece):.3f})"
        ax.plot(xs, ys, marker="o", markersize=4, color=color, label=label)
        lefts = [_num(b.lo) for b in bins]
        widths = [_num(b.hi) - _num(b.lo) for b in bins]
        counts.bar([lo + w * width * i for lo, w in zip(lefts, widths, strict=True)],
                   [b.count or 0 for b in bins], width=[w * width for w in widths],
                   align="edge", color=color, alpha=0.7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("fraction of steps correct")
    ax.set_title("Step score reliability")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.tick_params(labelbottom=False)
    counts.set_xlabel("predicted P(step correct)")
    counts.set_ylabel("steps")
    fig.subplots_adjust(left=0.12, right=0.97, top=0.93, bottom=0.1)
    return _png(fig)


def plot_length_bias(length_bias: LengthBiasResult | ProbesSection | Mapping[str, Any] | None) -> bytes | None:
    """Mean trace score per number of steps (the length-bias probe's ``by_length``), marker area by
    how many traces have that length. Takes the probe's result (its dict is read into
    :class:`~prmkit.eval.LengthBiasResult` first) or the ``probes`` section."""
    from prmkit.eval.probes import LengthRow

    lb = _probe_result("length_bias", length_bias)
    rows = [r for r in (lb.by_length if lb is not None else None) or []
            if isinstance(r, LengthRow) and r.mean_score is not None]
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: r.steps or 0)
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    xs = [r.steps for r in rows]
    ys = [_num(r.mean_score) for r in rows]
    ns = [r.n or 0 for r in rows]
    biggest = max(ns) or 1
    ax.plot(xs, ys, color=_COLORS[0], linewidth=1)
    ax.scatter(xs, ys, s=[20 + 180 * n / biggest for n in ns], color=_COLORS[0], alpha=0.7, zorder=3)
    ax.set_xlabel("number of steps")
    ax.set_ylabel(f"mean score ({lb.aggregate or 'aggregate'})")
    rho = lb.spearman
    ax.set_title("Score by trace length" + (f" (Spearman {_num(rho):.3f})" if rho is not None else ""))
    ax.set_xticks(xs)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def plot_threshold_sweep(processbench: ProcessBenchSection | Mapping[str, Any] | None) -> bytes | None:
    """ProcessBench F1 against the threshold, one line per sweep (the split it was tuned on), its
    best threshold marked."""
    pb = _section(ProcessBenchSection, processbench)
    sweeps = [s for s in (pb.sweep if pb is not None else None) or []
              if isinstance(s, ThresholdSweep) and s.thresholds and s.f1]
    if not sweeps:
        return None
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    for i, s in enumerate(sweeps):
        color = _COLORS[i % len(_COLORS)]
        ts = [_num(t) for t in s.thresholds or []]
        ax.plot(ts, _nums(s.f1, len(ts)), color=color, label=f"tuned on {s.tuned_on}")
        best = s.best
        if best is not None:
            ax.axvline(_num(best), color=color, linestyle="--", linewidth=1)
    ax.set_xlabel("threshold on P(step correct)")
    ax.set_ylabel("F1 of error and correct accuracy")
    ax.set_title("ProcessBench threshold sweep (dashed: best)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def plot_prmbench(prmbench: PRMBenchSection | Mapping[str, Any] | None) -> bytes | None:
    """PRMScore per PRMBench class as bars, the overall score as a line."""
    pr = _section(PRMBenchSection, prmbench)
    classes = {k: v for k, v in ((pr.classes if pr is not None else None) or {}).items()
               if isinstance(v, PRMBenchClass)}
    if not classes:
        return None
    names = list(classes)
    fig = _figure(max(6.4, 0.6 * len(names) + 2), 4.0)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(len(names)), [_num(classes[n].prmscore) for n in names], color=_COLORS[0])
    overall = pr.overall.prmscore if isinstance(pr.overall, PRMBenchClass) else None
    if overall is not None:
        ax.axhline(_num(overall), color=_COLORS[1], linestyle="--", label=f"overall {_num(overall):.3f}")
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("PRMScore")
    ax.set_title("PRMBench by class")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def plot_gaming(gaming: GamingResult | ProbesSection | Mapping[str, Any] | None) -> bytes | None:
    """Fraction of traces whose score rose under each perturbation, one bar per aggregate. Takes the
    gaming probe's result (its dict is read into :class:`~prmkit.eval.GamingResult` first) or the
    ``probes`` section (typed or its dict)."""
    g = _probe_result("gaming", gaming)
    perts = g.rises() if g is not None else {}
    if not perts:
        return None
    aggs = list(g.aggregates or [])
    for per in perts.values():
        aggs += [a for a in per if a not in aggs]
    names = list(perts)
    fig = _figure(max(6.4, 1.0 * len(names) + 2), 4.0)
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(len(aggs), 1)
    for j, agg in enumerate(aggs):
        ys = [100 * _num(_frac_rose(perts[p].get(agg))) for p in names]
        ax.bar([i - 0.4 + width * (j + 0.5) for i in range(len(names))], ys, width=width,
               color=_COLORS[j % len(_COLORS)], label=agg)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("traces whose score rose (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Gaming probe: scores raised by perturbations that should not help", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, title="aggregate")
    fig.tight_layout()
    return _png(fig)


def _frac_rose(stats: Any) -> float | None:
    from prmkit.eval.probes import RiseStats

    return stats.frac_rose if isinstance(stats, RiseStats) else None


def _probe_result(name: str, x: Any) -> Any:
    """Probe ``name``'s typed result from its result, its dict, or the ``probes`` section (typed or
    its dict); None when there is none."""
    if x is None:
        return None
    cls = probe_result_class(name)
    if isinstance(x, cls):
        return x
    if isinstance(x, ProbesSection):
        return x.result(name)
    if name in x:  # the section's dict (a probe's own dict has no key of its name)
        return ProbesSection.from_dict(x).result(name)
    return cls.from_dict(x, where=f"probes.{name}") if x else None


_MARKERS = ("o", "s", "^", "D", "v", "P")


def plot_tts(tts: TtsResult | Mapping[str, Any] | None) -> bytes | None:
    """Test-time compute (``prmkit tts``): accuracy against tokens generated per problem (log2 axis),
    one panel per verifier (majority vote, which uses none, drawn in each), one colour per method and
    one marker per aggregator; each point a budget N with its 95% Wilson interval as an error bar.
    ``None`` when no cell has a judged problem."""
    tts = _section(TtsResult, tts)
    if tts is None:
        return None
    curves = [c for c in tts_curves(tts) if any(p.acc is not None and p.generated for p in c.points)]
    if not curves:
        return None
    verifiers = list(dict.fromkeys(c.verifier for c in curves if c.verifier is not None)) or [None]
    methods = list(dict.fromkeys(c.method for c in curves))
    aggregates = list(dict.fromkeys(c.aggregate for c in curves if c.aggregate is not None))
    fig = _figure(5.2 * len(verifiers) + 1.8, 4.2)
    axes = [fig.add_subplot(1, len(verifiers), i + 1) for i in range(len(verifiers))]
    for ax, verifier in zip(axes, verifiers, strict=True):
        for c in curves:
            if c.verifier not in (verifier, None):
                continue
            pts = [p for p in c.points if p.acc is not None and p.generated]
            xs = [p.generated for p in pts]
            ys = [100 * p.acc for p in pts]  # type: ignore[operator]
            err = [[100 * (p.acc - p.lo) for p in pts], [100 * (p.hi - p.acc) for p in pts]]  # type: ignore[operator]
            color = _COLORS[methods.index(c.method) % len(_COLORS)]
            marker = _MARKERS[aggregates.index(c.aggregate) % len(_MARKERS)] if c.aggregate else "x"
            label = c.method if c.aggregate is None else f"{c.method} ({c.aggregate})"
            ax.errorbar(xs, ys, yerr=err, color=color, marker=marker, markersize=4, linewidth=1.4,
                        capsize=2, elinewidth=0.8, alpha=0.9, label=label,
                        linestyle="--" if c.verifier is None else "-")
            for p, x, y in zip(pts, xs, ys, strict=True):
                ax.annotate(f"{p.n}", (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points",
                            color=color)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens generated per problem")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-2, 102)
        ax.set_title(f"verifier: {verifier}" if verifier else "no verifier", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.suptitle(f"Accuracy against compute ({tts.problems} problems; 95% Wilson intervals; "
                 "point labels: N)", fontsize=10)
    fig.tight_layout()
    return _png(fig)
