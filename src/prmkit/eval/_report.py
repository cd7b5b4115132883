"""The evaluation report: typed results rendered as JSON, Markdown (with PNG figures) and HTML.

The results are one typed section each (:class:`~prmkit.eval.EvalResults`; the classes are in
:mod:`prmkit.eval._results`): ``summary``, ``card``, ``bon``, ``step_metrics``, ``probes``,
``processbench``, ``prmbench``, ``labels``, ``meta``. A results dict (a file's JSON) is read into them
once, at the boundary (:func:`~prmkit.eval.as_results`); the section renderers take the typed objects.
:func:`write_report` writes

- ``report.json``: every number, as given (sorted keys, indented);
- ``report.md`` with its figures in ``figures/`` (linked relatively);
- ``report.html``: one self-contained file (inline CSS, figures as ``data:`` URIs), to mail or archive.

Sections come in a fixed order: the summary verdict first, then the process-supervision card (always
shown: a card that is absent reads as every field missing), best-of-N, step metrics, probes,
ProcessBench, PRMBench, labels, any section prmkit does not know (rendered generically, never
dropped), and the run's meta last. An absent section is left out.

Numbers read the same everywhere: accuracies and fractions as percentages with one decimal
(``62.5%``), AUROC / F1 / PRMScore / ECE / correlations with three decimals, differences between
accuracies in percentage points, and ``—`` for a number that could not be computed.

>>> md = render_markdown({"bon": {"ns": [1], "problems": 8, "methods": {"prm": {"selector": "bon",
...     "acc": [0.625], "lo": [0.5], "hi": [0.75]}}}})
>>> "62.5% [50.0%, 75.0%]" in md, "**missing**" in md
(True, True)
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prmkit._durable import write_bytes_file, write_text_file
from prmkit._jsonio import decode_utf8
from prmkit._result import Record
from prmkit.errors import FormatError, MissingDependencyError, PrmkitError
from prmkit.eval._annotation_section import render_annotation
from prmkit.eval._card import Card
from prmkit.eval._doc import _DASH, Inline, ReportDoc, _auto, _bad, _ci, _f3, _int, _num, _pct, _pp
from prmkit.eval._oversight import render_monitorability
from prmkit.eval._processbench import miss_words
from prmkit.eval._results import (
    BonSection,
    CheckedSection,
    Comparison,
    Duplicates,
    EvalResults,
    Headline,
    LabelPair,
    LabelsSection,
    MetaSection,
    MethodCurve,
    OtherSection,
    OutOfRange,
    PRMBenchClass,
    PRMBenchSection,
    ProbeOutcome,
    ProbesSection,
    ProcessBenchSection,
    Rival,
    ScoreBin,
    StepMetricsSection,
    SummarySection,
    ThresholdSweep,
    as_results,
)
from prmkit.eval._tts_section import render_tts
from prmkit.search import TtsResult

__all__ = [
    "SECTION_ORDER", "ReportDoc", "write_report", "render_markdown", "render_html", "render_figures",
    "load_results", "check_results",
]

#: Known sections in the order the report shows them (unknown ones go before ``meta``).
SECTION_ORDER: tuple[str, ...] = ("summary", "card", "bon", "checked", "bon_live", "tts", "step_metrics",
                                  "probes", "processbench", "prmbench", "labels", "meta")

_DEFAULT_TITLE = "prmkit evaluation report"
_NONE_NOTE = "— marks a number that could not be computed"

def _md_escape(s: str, cell: bool = False) -> str:
    # "&" first, so that text holding "&lt;" shows as written; "<" and ">" as entities, so no raw
    # HTML (a step's "<script>") ever reaches a Markdown renderer.
    s = (str(s).replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("&", "&amp;")
         .replace("<", "&lt;").replace(">", "&gt;"))
    if cell:
        s = s.replace("|", "\\|").replace("\n", " ")
    return s


_BLOCK_MARK = re.compile(r"(?m)^([ \t]*)([#+=~|-])")
_LIST_NUMBER = re.compile(r"(?m)^([ \t]*)(\d+)([.)])")


def _block_safe(text: str) -> str:
    """Markdown text whose lines cannot open a block (heading, list, rule, fence, table) by accident."""
    return _LIST_NUMBER.sub(r"\1\2\\\3", _BLOCK_MARK.sub(r"\1\\\2", text))


def _fence(text: str, least: int) -> str:
    """A run of backticks longer than any in ``text`` (at least ``least``): a fence it cannot close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(least, longest + 1)


def _md_inline(x: Inline, cell: bool = False) -> str:
    if isinstance(x, list):
        return "".join(_md_inline(p, cell) for p in x)
    if isinstance(x, tuple):
        kind, s = x
        if kind == "code":
            s = str(s).replace("\n", " ") if cell else str(s)
            if cell:
                s = s.replace("|", "\\|")
            fence = _fence(s, 1)
            pad = " " if s.startswith("`") or s.endswith("`") else ""
            return f"{fence}{pad}{s}{pad}{fence}"
        inner = _md_escape(s, cell)
        return f"**{inner}**" if kind in ("b", "fail") else f"*{inner}*"
    return _md_escape(x, cell)


def _html_inline(x: Inline) -> str:
    if isinstance(x, list):
        return "".join(_html_inline(p) for p in x)
    if isinstance(x, tuple):
        kind, s = x
        if kind == "fail":
            return f'<strong class="fail">{html.escape(str(s))}</strong>'
        tag = {"b": "strong", "code": "code", "em": "em"}[kind]
        return f"<{tag}>{html.escape(str(s))}</{tag}>"
    return html.escape(str(x))


def _to_markdown(doc: ReportDoc, figure_paths: Mapping[str, str | os.PathLike]) -> str:
    out: list[str] = []
    for block in doc.blocks:
        kind = block[0]
        if kind == "h":
            out.append("#" * block[1] + " " + _md_inline(block[2], cell=True))
        elif kind == "p":
            text = _block_safe(_md_inline(block[1]))
            out.append("> " + text.replace("\n", "\n> ") if block[2] == "verdict" else text)
        elif kind == "table":
            headers, rows = block[1], block[2]
            lines = ["| " + " | ".join(_md_inline(h, True) for h in headers) + " |",
                     "|" + "|".join(" --- " for _ in headers) + "|"]
            lines += ["| " + " | ".join(_md_inline(c, True) for c in r) + " |" for r in rows]
            out.append("\n".join(lines))
        elif kind == "figure":
            path = figure_paths.get(block[1])
            if path is not None:
                caption = _md_escape(block[2], cell=True).replace("[", "\\[").replace("]", "\\]")
                out.append(f"![{caption}]({Path(path).as_posix()})")
        elif kind == "ul":
            out.append("\n".join("- " + _block_safe(_md_inline(i)).replace("\n", "\n  ") for i in block[1]))
        elif kind == "code":
            fence = _fence(block[1], 3)
            out.append(f"{fence}\n{block[1]}\n{fence}")
    return "\n\n".join(out) + "\n"


_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1b1b1b;line-height:1.45}
h1{border-bottom:2px solid #333;padding-bottom:.2em}h2{border-bottom:1px solid #ccc;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.92em;display:block;max-width:100%;
overflow-x:auto}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}
td{font-variant-numeric:tabular-nums}
.verdict{font-size:1.15em;background:#fff8e1;border-left:6px solid #e0a000;padding:.8em 1em;margin:1em 0}
.note{color:#555;font-size:.9em}.fail{color:#b00020}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}
code,pre{background:#f4f4f4;border-radius:3px}pre{padding:.6em;overflow-x:auto}
""".strip()


def _to_html(doc: ReportDoc, figures: Mapping[str, bytes], title: str) -> str:
    out: list[str] = []
    for block in doc.blocks:
        kind = block[0]
        if kind == "h":
            anchor = f' id="{html.escape(block[3])}"' if block[3] else ""
            out.append(f"<h{block[1]}{anchor}>{_html_inline(block[2])}</h{block[1]}>")
        elif kind == "p":
            cls = f' class="{block[2]}"' if block[2] else ""
            tag = "div" if block[2] == "verdict" else "p"
            out.append(f"<{tag}{cls}>{_html_inline(block[1])}</{tag}>")
        elif kind == "table":
            head = "".join(f"<th>{_html_inline(h)}</th>" for h in block[1])
            body = "".join("<tr>" + "".join(f"<td>{_html_inline(c)}</td>" for c in r) + "</tr>"
                           for r in block[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "figure":
            png = figures.get(block[1])
            if png is not None:
                data = base64.b64encode(png).decode("ascii")
                cap = html.escape(block[2])
                out.append(f'<figure><img alt="{cap}" src="data:image/png;base64,{data}">'
                           f"<figcaption>{cap}</figcaption></figure>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_html_inline(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "code":
            out.append(f"<pre><code>{html.escape(block[1])}</code></pre>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
            + "\n".join(out) + "\n</body>\n</html>\n")


# -- generic rendering (unknown sections and leftover keys) -------------------------------------------

def _is_table_list(x: Any) -> bool:
    return isinstance(x, list) and bool(x) and all(isinstance(v, Mapping) for v in x)


def _generic(doc: ReportDoc, value: Any, level: int, name: str = "") -> None:
    """Data prmkit has no class for, as it is: nested dicts as key/value tables (one heading per nested
    dict), lists of dicts as tables."""
    if isinstance(value, Mapping):
        if level > 6:
            doc.code(json.dumps(value, indent=2, sort_keys=True, default=str))
            return
        flat = [(k, v) for k, v in value.items()
                if not isinstance(v, Mapping) and not _is_table_list(v)]
        doc.table(["Key", "Value"], [[str(k), _auto(k, v)] for k, v in flat])
        if not value:
            doc.para(("em", "(empty)"))
        for k, v in value.items():
            if isinstance(v, Mapping) or _is_table_list(v):
                doc.heading(level, str(k))
                _generic(doc, v, level + 1, str(k))
    elif _is_table_list(value):
        cols: list[str] = []
        for row in value:
            cols += [str(c) for c in row if str(c) not in cols]
        doc.table(cols, [[_auto(c, row.get(c)) for c in cols] for row in value])
    else:
        doc.para(_auto(name, value))


def _leftover(doc: ReportDoc, r: Record, handled: Iterable[str], level: int) -> None:
    """Fields of a known section that its renderer did not show (its ``extra`` above all): shown
    generically, never dropped."""
    rest = {k: v for k, v in r.to_dict().items() if k not in set(handled)}
    if rest:
        doc.heading(level, "Other fields")
        _generic(doc, rest, level + 1)


# -- sections --------------------------------------------------------------------------------------------

def _summary(doc: ReportDoc, s: SummarySection | OtherSection, figs: set[str]) -> None:
    if isinstance(s, OtherSection):  # a verdict given as a line of text
        doc.para(("b", "Verdict."), " " + str(s.value), cls="verdict")
        return
    if s.verdict:
        doc.para(("b", "Verdict."), " " + str(s.verdict), cls="verdict")
    else:
        doc.para(("em", "The results carry no verdict."), cls="note")
    h = s.headline
    if isinstance(h, Headline) and h.is_comparison:
        # The verdict's numbers as one table: the main method, then each rival with the paired
        # difference (main minus rival) and its interval.
        rows = [[("b", str(h.main)), _ci(h.main_acc, h.main_acc_lo, h.main_acc_hi), _DASH, ""]]
        for rival, v in (h.versus or {}).items():
            if not isinstance(v, Rival):
                rows.append([str(rival), _DASH, _DASH, "not evaluated"])
                continue
            span = (f"{_pp(v.acc_diff)} [{_pp(v.acc_diff_lo)}, {_pp(v.acc_diff_hi)}]"
                    if not _bad(v.acc_diff) else _DASH)
            rows.append([str(rival), _ci(v.acc, v.acc_lo, v.acc_hi), span,
                         str(v.call if v.call is not None else "")])
        if not _bad(h.random_acc):
            below = h.main in (h.below_random or [])
            rows.append(["random choice", _pct(h.random_acc), _DASH,
                         ("fail", f"{h.main} fell below it") if below else ""])
        doc.table(["Method", f"Accuracy at N={h.n}" if h.n is not None else "Accuracy",
                   f"{h.main} minus it", "Call"], rows)
        # below_random / below_n1 are said in the verdict's words; n1_acc is in the best-of-N table.
        _leftover(doc, h, ("n", "main", "main_acc", "main_acc_lo", "main_acc_hi", "versus",
                           "random_acc", "below_random", "below_n1", "main_n1_acc"), 3)
    elif isinstance(h, Headline) and h.to_dict():  # numbers of another shape: a table of them
        _generic_headline(doc, h)
    _leftover(doc, s, ("verdict", "headline"), 3)


def _generic_headline(doc: ReportDoc, h: Headline) -> None:
    numbers = h.to_dict()
    doc.table(["Headline", "Value"], [[str(k), _auto(k, v)] for k, v in numbers.items()
                                      if not isinstance(v, Mapping)])
    for k, v in numbers.items():
        if isinstance(v, Mapping):
            doc.heading(3, str(k))
            _generic(doc, v, 4)


def _card(doc: ReportDoc, c: Card | OtherSection | None, figs: set[str]) -> None:
    from prmkit.eval._card import card_from_provenance

    if not isinstance(c, Card):
        doc.para(("em", "These results carry no card, so every field is missing: build one with"), " ",
                 ("code", "prmkit.eval.card_from_provenance(traces, model_dirs, results)"), ".",
                 cls="note")
    card = c if isinstance(c, Card) else card_from_provenance()
    rows = []
    for title, value, source in card.rows():
        shown = [("b", "missing"), " — nothing in the provenance says"] if value is None else value
        rows.append([title, shown, source or _DASH])
    doc.table(["Field", "Value", "Source"], rows)
    if isinstance(c, Card):
        if c.extra:
            doc.heading(3, "Other fields")
            _generic(doc, c.extra, 4)
    elif c is not None and c.value:
        _generic(doc, c.value, 3, "card")


def _bon(doc: ReportDoc, b: BonSection, figs: set[str]) -> None:
    ns = list(b.ns or [])
    bits = []
    if b.problems is not None:
        bits.append(f"{_int(b.problems)} problems")
    if b.candidates is not None:
        bits.append(f"at least {_int(b.candidates)} candidates per problem")
    if b.bootstrap is not None:
        seed = f", seed {b.seed}" if b.seed is not None else ""
        bits.append(f"intervals: 95% bootstrap over problems, {_int(b.bootstrap)} resamples{seed}")
    if not _bad(b.unjudged_problems) and b.unjudged_problems:
        bits.append(f"{_int(b.unjudged_problems)} problems left out: none of their candidates could be "
                    "judged (no outcome, no reference answer)")
    if bits:
        doc.para("; ".join(bits) + ".")
    rows = []
    for name, m in (b.methods or {}).items():
        if not isinstance(m, MethodCurve):
            continue
        acc, lo, hi = (list(v or []) for v in (m.acc, m.lo, m.hi))
        score = m.key or _DASH
        if m.aggregate:
            score = f"{score} ({m.aggregate})"
        cells = [_ci(acc[i] if i < len(acc) else None, lo[i] if i < len(lo) else None,
                     hi[i] if i < len(hi) else None) for i in range(len(ns))]
        rows.append([("b", str(name)), str(m.selector or _DASH), score, *cells])
    doc.table(["Method", "Selector", "Score (aggregate)", *[f"N={n}" for n in ns]], rows)
    if "bon" in figs:
        doc.figure("bon", "Best-of-N accuracy against N (log2 axis); when there is a verdict, its methods "
                   "bold (the main one with its 95% bootstrap band) and the others light; oracle dashed")
    comps = [c for c in b.comparisons or [] if isinstance(c, Comparison)]
    if comps:
        doc.heading(3, "Paired comparisons")
        doc.para("Accuracy differences (first minus second) with 95% paired bootstrap intervals; in bold "
                 "where the interval excludes 0.", cls="note")
        doc.bullets(_comparison_items(comps))
    _leftover(doc, b, ("ns", "problems", "candidates", "bootstrap", "seed", "methods", "comparisons",
                       "unjudged_problems"), 3)


def _checked(doc: ReportDoc, c: CheckedSection, figs: set[str]) -> None:
    """The verdict PRM with a tool checking its steps (:func:`~prmkit.eval.checked_bon_report`): its
    verdict, then its best-of-N table."""
    doc.para("The same PRM's step scores, with a calculator checking each step's written arithmetic: a "
             "step whose equation is wrong scores 0. Against the PRM alone and the calculator alone, it "
             "shows what each part is worth.", cls="note")
    if isinstance(c.summary, SummarySection):
        _summary(doc, c.summary, set())
    if isinstance(c.bon, BonSection):
        _bon(doc, c.bon, set())
    _leftover(doc, c, ("summary", "bon"), 3)


def _comparison_items(comps: Sequence[Comparison]) -> list[Inline]:
    """One bullet per pair of methods, its N in order. A comparison with no difference in any
    resample (``+0.0 pp [+0.0, +0.0]``: both chose the same candidate every time, as at N=1) says
    nothing: such N are folded into one "same choices" note instead of a line each."""
    pairs: dict[tuple[str, str], list[Comparison]] = {}
    for c in comps:
        pairs.setdefault((str(c.a), str(c.b)), []).append(c)
    items: list[Inline] = []
    for (a, b), cs in pairs.items():
        parts: list[Inline] = []
        same = []
        for c in cs:
            d, lo, hi = c.diff, c.lo, c.hi
            if not any(_bad(v) for v in (d, lo, hi)) and d == lo == hi == 0:
                same.append(str(c.n))
                continue
            text = f"N={c.n} {_pp(d)}"
            if not (_bad(lo) or _bad(hi)):
                text += f" [{_pp(lo)}, {_pp(hi)}]"
                if lo > 0 or hi < 0:  # type: ignore[operator]
                    parts.append(("b", text))
                    continue
            parts.append(text)
        line: list[Inline] = [("b", f"{a} − {b}"), ": "]
        for i, part in enumerate(parts):
            line += ["; " if i else "", part]
        if same:
            line.append(("; " if parts else "") + f"same choices in every resample at N={', '.join(same)}")
        items.append(line)
    return items


_STEP_COLS = (("n", "Steps", _int), ("positives", "Positives", _int), ("negatives", "Negatives", _int),
              ("auroc", "AUROC", _f3), ("threshold", "Threshold", _f3), ("f1_error", "F1 (error)", _f3),
              ("f1_correct", "F1 (correct)", _f3), ("accuracy", "Accuracy", _pct), ("ece", "ECE", _f3),
              ("brier", "Brier", _f3))


def _step_metrics(doc: ReportDoc, sm: StepMetricsSection, figs: set[str]) -> None:
    per = sm.named()
    rows = [[("b", k), *[fmt(getattr(m, key)) for key, _, fmt in _STEP_COLS]] for k, m in per.items()]
    doc.table(["Scorer", *[t for _, t, _ in _STEP_COLS]], rows)
    if any(m.auroc is None for m in per.values()):
        doc.para(("em", "An AUROC of — : the scorer's steps held only one class (all correct or all "
                        "wrong), so there is nothing to rank."), cls="note")
    if "reliability" in figs:
        doc.figure("reliability", "Reliability diagram: fraction of steps correct per score bin, "
                   "step counts below")
    for k, m in per.items():
        bins = [b for b in m.bins or [] if isinstance(b, ScoreBin)]
        if bins:
            doc.heading(3, f"Score bins: {k}")
            doc.table(["Scores", "Steps", "Mean score", "Correct"],
                      [[f"{_f3(b.lo)}–{_f3(b.hi)}", _int(b.count), _f3(b.mean_score), _pct(b.frac_correct)]
                       for b in bins])
        if m.has("error_precision") or m.has("error_recall"):
            doc.para(f"{k}: flagging the steps scored below the threshold as errors finds "
                     f"{_pct(m.error_recall)} of the wrong steps (recall); "
                     + ("no step was flagged, so precision is undefined." if _bad(m.error_precision) else
                        f"{_pct(m.error_precision)} of the flagged steps are wrong (precision)."))
        _leftover(doc, m, [c for c, _, _ in _STEP_COLS] + ["bins", "error_precision", "error_recall"], 4)
    scalars = sm.scalars()
    if scalars:
        doc.heading(3, "Other fields")
        _generic(doc, scalars, 4)


def _verdict_cell(p: ProbeOutcome) -> Inline:
    if p.failed is True:
        return ("fail", "FAILED")
    if p.failed is False:
        return "passed"
    return "cannot measure" if p.measured is False else "no verdict"


#: Settings a probe records beside its numbers, in words (shown on one line, not as a table).
_PROBE_SETTINGS = (("key", "scores {}"), ("aggregate", "aggregate {}"), ("threshold", "threshold {}"),
                   ("eps", "a rise counts above {}"), ("max_frac", "fails above {} of traces"),
                   ("seed", "seed {}"))


def _probe_settings(doc: ReportDoc, p: ProbeOutcome, shown: set[str]) -> list[str]:
    """One line of the probe's settings (the keys above that ``details`` did not show); returns them."""
    used, words = [], []
    numbers = p.extra
    for key, text in _PROBE_SETTINGS:
        value = numbers.get(key)
        if key in shown or key not in numbers or not _is_scalar(value):
            continue
        shown_value = _pct(value) if key == "max_frac" else _num(value) if _is_number(value) else str(value)
        words.append(text.format(shown_value))
        used.append(key)
    skipped = p.skipped_counts()
    if skipped is not None and "skipped" not in shown:
        nonzero = {k: v for k, v in skipped.items() if v}
        if nonzero:
            words.append("traces an edit could not apply to: "
                         + ", ".join(f"{k} {_int(v)}" for k, v in nonzero.items()))
        used.append("skipped")
    if words:
        doc.para(("em", "Settings:"), " " + "; ".join(words) + ".", cls="note")
    return used


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_scalar(x: Any) -> bool:
    return x is None or isinstance(x, (str, int, float, bool))


def _probe(name: str) -> Any:
    """The registered probe ``name`` (:data:`~prmkit.eval.PROBES`, read now, so a probe registered
    after import counts), or None: not registered here, or its plugin fails to import. The result of
    a probe without one is still shown, generically."""
    from prmkit.eval.probes._base import PROBES

    if name not in PROBES:
        return None
    try:
        return PROBES.create(name)
    except (ImportError, AttributeError, PrmkitError):
        return None


def _probe_number(probe: Any, p: ProbeOutcome) -> str:
    headline = getattr(probe, "headline", None)
    return (headline(p.numbers) or _DASH) if headline is not None else _DASH


def _probes(doc: ReportDoc, probes: ProbesSection, figs: set[str]) -> None:
    # Each probe renders its own numbers (Probe.headline and Probe.details); the report adds the
    # verdict, the criterion, and every field the probe did not show.
    per = probes.named()
    known = {k: _probe(k) for k in per}
    doc.table(["Probe", "Result", "Key number", "Criterion"],
              [[("b", k), _verdict_cell(p), _probe_number(known[k], p), str(p.criterion or _DASH)]
               for k, p in per.items()])
    for name, p in per.items():
        doc.heading(3, [f"{name}: ", _verdict_cell(p)])
        if p.criterion:
            doc.para(("em", "Criterion:"), " " + str(p.criterion))
        handled = ["failed", "criterion", "measured", "failed_by"]  # failed_by is in the criterion
        details = getattr(known[name], "details", None)
        if details is not None:
            handled += list(details(doc, p.numbers, figs) or ())
        handled += _probe_settings(doc, p, set(handled))
        _leftover(doc, p, handled, 4)
    scalars = probes.scalars()
    if scalars:
        doc.heading(3, "Other fields")
        _generic(doc, scalars, 4)


_PB_COLS = (("error_acc", "Error acc.", _pct), ("correct_acc", "Correct acc.", _pct), ("f1", "F1", _f3),
            ("n_error", "Erroneous", _int), ("n_correct", "Correct", _int))


def _processbench(doc: ReportDoc, pb: ProcessBenchSection, figs: set[str]) -> None:
    thr = pb.threshold
    thr_text = (f"threshold {_f3(thr)}" if thr is not None
                else "threshold per split (see the table; the splits' thresholds differ)")
    doc.para(f"Step scores {pb.key or _DASH}; {thr_text}; threshold source: "
             f"{pb.threshold_source or _DASH}. A trace counts as right when the first step scored "
             "below the threshold is its labelled first error (or, for a correct trace, when no step is).")
    splits = pb.split_rows()
    doc.table(["Split", *[t for _, t, _ in _PB_COLS], "Threshold", "Threshold source", "Unscored steps"],
              [[("b", k), *[f(getattr(v, c)) for c, _, f in _PB_COLS], _f3(v.threshold),
                str(v.threshold_source or _DASH), _int(v.unscored_steps)]
               for k, v in splits.items()])
    misses = [f"{k}: " + miss_words(_int(v.flagged_early), _int(v.flagged_late), _int(v.not_flagged))
              for k, v in splits.items() if isinstance(v.not_flagged, int) and v.n_error]
    if misses:
        doc.para("Where the misses on erroneous samples fall:")
        doc.bullets(misses)
    dropped = sum(v.unscored_traces or 0 for v in splits.values() if isinstance(v.unscored_traces, int))
    if dropped:
        doc.para(f"{_int(dropped)} traces had no score at all (the scorer could not take them); each counts "
                 "as a miss on its side (Unscored steps counts their steps too).")
    if pb.has("average_f1"):
        doc.para(("b", "Average F1 over splits:"), " " + _f3(pb.average_f1))
    rows = [[split, gen, *[f(getattr(v, c)) for c, _, f in _PB_COLS]] for split, gen, v in pb.generator_rows()]
    if rows:
        doc.heading(3, "By generator")
        doc.table(["Split", "Generator", *[t for _, t, _ in _PB_COLS]], rows)
    sweeps = [s for s in pb.sweep or [] if isinstance(s, ThresholdSweep)]
    if sweeps:
        doc.heading(3, "Threshold sweep")
        doc.bullets([f"tuned on {s.tuned_on}: best threshold {_f3(s.best)}" for s in sweeps])
        if "processbench_sweep" in figs:
            doc.figure("processbench_sweep", "ProcessBench F1 against the threshold (dashed: best)")
    _leftover(doc, pb, ("key", "threshold", "threshold_source", "splits", "average_f1", "by_generator",
                        "sweep"), 3)


_PRMB_COLS = (("prmscore", "PRMScore", _f3), ("f1_positive", "F1 (positive)", _f3),
              ("f1_negative", "F1 (negative)", _f3), ("n_traces", "Traces", _int),
              ("n_steps", "Steps", _int), ("n_error_steps", "Error steps", _int))


def _prmbench(doc: ReportDoc, pr: PRMBenchSection, figs: set[str]) -> None:
    doc.para(f"Step scores {pr.key or _DASH}; threshold {_f3(pr.threshold)}. "
             "PRMScore is the mean of the F1 on correct and on erroneous steps.")
    classes = {k: v for k, v in (pr.classes or {}).items() if isinstance(v, PRMBenchClass)}
    rows = [[k, *[f(getattr(v, c)) for c, _, f in _PRMB_COLS]] for k, v in classes.items()]
    if isinstance(pr.overall, PRMBenchClass):
        rows.append([("b", "overall"), *[("b", f(getattr(pr.overall, c))) for c, _, f in _PRMB_COLS]])
    doc.table(["Class", *[t for _, t, _ in _PRMB_COLS]], rows)
    if "prmbench" in figs:
        doc.figure("prmbench", "PRMScore per PRMBench class (dashed: overall)")
    oor = pr.out_of_range
    if isinstance(oor, OutOfRange):
        doc.heading(3, "Out-of-range error indices")
        policy = oor.policy
        doc.para(f"Traces naming an error index beyond their last step: {_int(oor.traces)} "
                 f"({_int(oor.indices)} such indices); policy: {policy or _DASH}"
                 + (" (those traces left out)" if policy == "exclude" else
                    " (only the in-range indices used)" if policy == "in_range" else "") + ".")
        doc.table(["Class", "Traces"], [[k, _int(v)] for k, v in (oor.by_class or {}).items()])
        _leftover(doc, oor, ("policy", "traces", "indices", "by_class"), 4)
    dup = pr.duplicates
    if isinstance(dup, Duplicates) and dup.traces:
        ids = [str(i) for i in dup.ids or []]
        doc.para(f"Duplicate keys: {_int(dup.traces)} later copies of a sample left out, the first "
                 f"kept as the official loader does ({', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}).")
    _leftover(doc, pr, ("key", "threshold", "classes", "overall", "out_of_range", "duplicates"), 3)


def _labels(doc: ReportDoc, lab: LabelsSection, figs: set[str]) -> None:
    if lab.sources:
        doc.para("Label sources: " + ", ".join(map(str, lab.sources)) + ".")
    doc.table(["Source A", "Source B", "Steps", "Agreement", "Cohen's κ"],
              [[str(p.a), str(p.b), _int(p.steps), _pct(p.agreement), _f3(p.kappa)]
               for p in lab.pairs or [] if isinstance(p, LabelPair)])
    if lab.has("traces"):
        doc.para(f"{_int(lab.traces)} traces have a step labelled by both sources.")
    if lab.has("first_error_agreement"):
        of = (f" of the {_int(lab.first_error_traces)} traces whose first wrong step both sources know"
              if lab.has("first_error_traces") else " of traces")
        doc.para(("b", "First-error agreement:"), " " + _pct(lab.first_error_agreement),
                 f"{of} have the same first wrong step under both.")
    _leftover(doc, lab, ("sources", "pairs", "first_error_agreement", "first_error_traces", "traces"), 3)


def _seconds(x: Any) -> str:
    """A duration to a tenth of a second (``37.1``, ``165.8``), whatever its magnitude."""
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return f"{x:.1f}"
    return _auto("seconds", x)


def _meta(doc: ReportDoc, meta: MetaSection, figs: set[str]) -> None:
    rows = []
    for key, title in (("title", "Title"), ("created", "Created"), ("seconds", "Seconds")):
        if meta.has(key):
            value = getattr(meta, key)
            rows.append([title, _seconds(value) if key == "seconds" else _auto(key, value)])
    stages = meta.stage_seconds_by_stage()
    if meta.has("stage_seconds") and stages is None:
        rows.append(["Seconds by stage", _auto("stage_seconds", meta.stage_seconds)])
    doc.table(["Field", "Value"], rows)
    if meta.command:
        doc.para("Command:")
        doc.code(str(meta.command))
    if stages:  # (anything else is in the table above)
        doc.heading(3, "Seconds by stage")
        doc.table(["Stage", "Seconds"], [[str(k), _seconds(v)] for k, v in stages.items()])
    for key, title in (("data", "Data"), ("models", "Models"), ("seeds", "Seeds"), ("settings", "Settings")):
        if meta.has(key):
            doc.heading(3, title)
            _generic(doc, getattr(meta, key), 4, key)
    _leftover(doc, meta, ("title", "created", "seconds", "command", "data", "models", "seeds", "settings",
                          "stage_seconds"), 3)


_SECTIONS: dict[str, tuple[str, Callable[[ReportDoc, Any, set[str]], None]]] = {
    "summary": ("Summary", _summary),
    "card": ("Process-supervision card", _card),
    "bon": ("Best-of-N", _bon),
    "checked": ("Best-of-N with a calculator check", _checked),
    # The demo's second pair (trained in the run) on the same held-out traces; the figure is the verdict's.
    "bon_live": ("Best-of-N of the pair trained in this run", lambda doc, b, figs: _bon(doc, b, set())),
    "tts": ("Test-time compute: accuracy against compute", render_tts),
    "step_metrics": ("Step metrics", _step_metrics),
    "probes": ("Probes", _probes),
    "processbench": ("ProcessBench", _processbench),
    "prmbench": ("PRMBench", _prmbench),
    "labels": ("Labels", _labels),
    "monitorability": ("Oversight: monitorability", render_monitorability),
    "annotation": ("Human labels: agreement and cost", render_annotation),
    "meta": ("How these numbers were produced", _meta),
}


def _title(results: EvalResults, title: str | None) -> str:
    meta = results.meta
    return title or (meta.title if isinstance(meta, MetaSection) else None) or _DEFAULT_TITLE


def _order(results: EvalResults) -> list[str]:
    known = [k for k in SECTION_ORDER[:-1] if k in results or k == "card"]
    unknown = [k for k in results if k not in SECTION_ORDER]
    return known + unknown + (["meta"] if "meta" in results else [])


def _document(results: EvalResults, figs: set[str], title: str | None, notes: Sequence[str] = ()) -> ReportDoc:
    doc = ReportDoc()
    doc.heading(1, _title(results, title))
    if "summary" in results:  # the verdict comes first, right under the title
        _summary(doc, results["summary"], figs)
    doc.para(("em", f"Numbers are rounded for reading (report.json holds them all); {_NONE_NOTE}."),
             cls="note")
    for n in notes:
        doc.para(("em", n), cls="note")
    for key in _order(results):
        if key == "summary":
            continue
        value = results.get(key)
        name, render = _SECTIONS.get(key, (key, None))
        doc.heading(2, name, anchor=key)
        if render is None or (key != "card" and isinstance(value, OtherSection)):
            _generic(doc, value.value if isinstance(value, OtherSection) else value.to_dict(), 3, key)
        else:  # unknown, or malformed: still shown, as it is
            render(doc, value, figs)
    return doc


# -- figures ----------------------------------------------------------------------------------------------

def render_figures(results: EvalResults | Mapping[str, Any]) -> dict[str, bytes]:
    """PNG bytes of every figure the results can fill, by name (``bon``, ``reliability``, then each
    probe's own, such as ``gaming`` and ``length_bias``, then ``processbench_sweep``, ``prmbench``).
    Needs matplotlib (``prmkit[plot]``)."""
    from prmkit.eval import _plots

    results = as_results(results)
    out: dict[str, bytes] = {}
    _draw(out, "bon", lambda b: _plots.plot_bon(b, highlight=_verdict_methods(results)), results.bon, BonSection)
    _draw(out, "reliability", _plots.plot_reliability, results.step_metrics, StepMetricsSection)
    probes = results.probes
    for name, p in (probes.named() if isinstance(probes, ProbesSection) else {}).items():
        figures = getattr(_probe(name), "figures", None)  # a probe draws its own figures, if any
        if figures is not None and p.numbers:
            out.update({k: png for k, png in figures(p.numbers).items() if png is not None})
    _draw(out, "processbench_sweep", _plots.plot_threshold_sweep, results.processbench, ProcessBenchSection)
    _draw(out, "prmbench", _plots.plot_prmbench, results.prmbench, PRMBenchSection)
    _draw(out, "tts", _plots.plot_tts, results.get("tts"), TtsResult)
    return out


def _verdict_methods(results: EvalResults | Mapping[str, Any]) -> list[str]:
    """The methods the verdict is about (its main method and rivals, and random choice when the
    verdict names it), drawn bold in the best-of-N figure."""
    summary = as_results(results).summary
    h = summary.headline if isinstance(summary, SummarySection) else None
    if not isinstance(h, Headline) or h.main is None:
        return []
    names = [str(h.main)]
    if isinstance(h.versus, dict):
        names += [str(k) for k in h.versus]
    if h.below_random:
        names.append("random")
    return names


def _draw(out: dict[str, bytes], name: str, plot: Callable[[Any], bytes | None], section: Any,
          cls: type) -> None:
    if isinstance(section, cls) and section.to_dict():  # a section with nothing in it draws nothing
        png = plot(section)
        if png is not None:
            out[name] = png


# -- public renderers ---------------------------------------------------------------------------------------

def render_markdown(results: EvalResults | Mapping[str, Any],
                    figure_paths: Mapping[str, str | os.PathLike] | None = None, *,
                    title: str | None = None) -> str:
    """The report as Markdown; ``figure_paths`` maps a figure name (see :func:`render_figures`) to the
    path the Markdown links (relative to the Markdown file). Figures not in it are left out.
    ``results``: typed (:class:`~prmkit.eval.EvalResults`) or a results dict, read section by section."""
    paths = dict(figure_paths or {})
    return _to_markdown(_document(as_results(results), set(paths), title), paths)


def render_html(results: EvalResults | Mapping[str, Any], figures_png_bytes: Mapping[str, bytes] | None = None,
                *, title: str | None = None) -> str:
    """The report as one self-contained HTML page: inline CSS, figures embedded as
    ``data:image/png;base64`` URIs, no scripts and no external resources."""
    figs = dict(figures_png_bytes or {})
    typed = as_results(results)
    return _to_html(_document(typed, set(figs), title), figs, _title(typed, title))


def _jsonable(x: Any) -> Any:
    """Plain JSON data: tuples become lists, keys strings, NaN / infinity None (not computable),
    numpy scalars Python numbers, anything else its ``str``."""
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    item = getattr(x, "item", None)  # numpy scalars
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(x)


def write_report(results: EvalResults | Mapping[str, Any], out_dir: str | os.PathLike, *,
                 title: str | None = None, figures: bool | None = None) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` (+ ``figures/*.png``) and a self-contained ``report.html``
    into ``out_dir``; returns their paths (keys ``json``, ``markdown``, ``html``, and
    ``figure:<name>`` per PNG).

    ``results``: typed (:class:`~prmkit.eval.EvalResults`, what the demo composes) or a results dict
    (what :func:`load_results` reads). ``report.json`` is its JSON form (NaN written as null, numpy
    numbers as Python's); the Markdown and HTML render the typed sections read back from that form, so
    the three files always show the same numbers.

    ``figures``: None draws them when matplotlib is installed and otherwise says in the report how to
    get them; True requires matplotlib (:class:`~prmkit.errors.MissingDependencyError` without it);
    False draws none.
    """
    data = _jsonable(as_results(results).to_dict())
    typed = EvalResults.from_dict(data)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    pngs: dict[str, bytes] = {}
    notes: list[str] = []
    if figures is not False:
        try:
            pngs = render_figures(typed)
        except MissingDependencyError as e:
            if figures:
                raise
            notes.append(f"Figures left out: {e}.")
    fig_paths: dict[str, str] = {}
    if pngs:
        (out / "figures").mkdir(exist_ok=True)
    for name, png in pngs.items():
        path = out / "figures" / f"{name}.png"
        write_bytes_file(path, png)
        written[f"figure:{name}"] = path
        fig_paths[name] = f"figures/{name}.png"
    written["json"] = out / "report.json"
    write_text_file(written["json"], json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False,
                                                allow_nan=False) + "\n", lock=True)
    written["markdown"] = out / "report.md"
    write_text_file(written["markdown"], _to_markdown(_document(typed, set(fig_paths), title, notes),
                                                      fig_paths), lock=True)
    written["html"] = out / "report.html"
    write_text_file(written["html"], _to_html(_document(typed, set(pngs), title, notes), pngs,
                                              _title(typed, title)), lock=True)
    return written


# -- merging results files ---------------------------------------------------------------------------------

# -- the results file's schema ---------------------------------------------------------------------------
# What the renderers and the card read from each known section, checked when a results file is loaded:
# a field of the wrong type is an error naming the file and the field, never a report that shows a
# string's letters as sections ("5", "x") or "best-of-N on None problems". None is allowed wherever a
# number may be missing (rendered "—"); unknown sections and unknown fields pass (rendered as given).

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_INT = (_is_int, "an integer")
_NUM = (_is_num, "a number")
_STR = (lambda v: isinstance(v, str), "a string")
_MAP = (lambda v: isinstance(v, Mapping), "an object")
_LIST = (lambda v: isinstance(v, list), "a list")
_NUMS = (lambda v: isinstance(v, list) and all(x is None or _is_num(x) for x in v), "a list of numbers")
_INTS = (lambda v: isinstance(v, list) and bool(v) and all(_is_int(x) for x in v),
         "a non-empty list of integers")
_STRS = (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings")
_MAPS = (lambda v: isinstance(v, Mapping) and all(isinstance(x, Mapping) for x in v.values()),
         "an object of objects")

_BON_SCHEMA: dict[str, Any] = {
    "ns": _INTS, "problems": _INT, "candidates": _INT, "bootstrap": _INT, "seed": _INT,
    "unjudged_problems": _INT, "comparisons": _LIST,
    "methods": (_MAPS, {"acc": _NUMS, "lo": _NUMS, "hi": _NUMS, "selector": _STR, "key": _STR,
                        "aggregate": _STR}),
}
_SCHEMA: dict[str, dict[str, Any]] = {
    "summary": {"verdict": _STR, "headline": _MAP},
    "bon": _BON_SCHEMA,
    "bon_live": _BON_SCHEMA,
    "checked": {"summary": _MAP, "bon": _MAP},
    "step_metrics": {},
    "probes": {},
    "processbench": {"key": _STR, "threshold": _NUM, "threshold_source": _STR, "average_f1": _NUM,
                     "by_generator": _MAP, "sweep": _LIST,
                     "splits": (_MAPS, {"error_acc": _NUM, "correct_acc": _NUM, "f1": _NUM, "n_error": _INT,
                                        "n_correct": _INT, "threshold": _NUM, "unscored_steps": _INT,
                                        "unscored_traces": _INT, "flagged_early": _INT, "flagged_late": _INT,
                                        "not_flagged": _INT})},
    "prmbench": {"key": _STR, "threshold": _NUM, "overall": _MAP, "out_of_range": _MAP, "duplicates": _MAP,
                 "classes": (_MAPS, {"prmscore": _NUM, "f1_positive": _NUM, "f1_negative": _NUM,
                                     "n_traces": _INT, "n_steps": _INT, "n_error_steps": _INT})},
    "labels": {"sources": _STRS, "pairs": _LIST, "traces": _INT, "first_error_agreement": _NUM,
               "first_error_traces": _INT},
    "monitorability": {},
    "tts": {"problems": _INT, "budgets": _INTS, "verifiers": _MAP, "cells": _LIST},
}
#: Sections that may be something other than an object (the summary: a verdict line; the card: empty).
_NOT_ONLY_MAPS = {"summary": (str,), "card": (type(None),)}


def _check_fields(d: Mapping[str, Any], schema: Mapping[str, Any], where: str, prefix: str) -> None:
    for key, rule in schema.items():
        if key not in d or d[key] is None:
            continue
        (ok, what), inner = rule if isinstance(rule[1], dict) else (rule, None)
        value = d[key]
        if not ok(value):
            raise FormatError(f"must be {what}, got {_shown(value)}", path=where, field=f"{prefix}.{key}")
        if inner is not None:
            for name, item in value.items():
                _check_fields(item, inner, where, f"{prefix}.{key}.{name}")


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}"


def check_results(data: Mapping[str, Any], where: str) -> None:
    """Refuse (:class:`~prmkit.errors.FormatError` naming ``where`` and the field) a results dict
    whose known sections do not have the types the report reads: each a JSON object (the summary may
    be a verdict line), and their fields as ``prmkit eval`` writes them (best-of-N ``ns`` a list of
    integers and ``problems`` an integer, ProcessBench ``splits`` an object of objects, ...).

    >>> check_results({"bon": {"ns": "5x"}}, "bon.json")
    Traceback (most recent call last):
    ...
    prmkit.errors.FormatError: bon.json: bon.ns — must be a non-empty list of integers, got str "5x"
    """
    for section, value in data.items():
        if section == "meta" or (section not in _SCHEMA and section != "card"):
            continue
        if not isinstance(value, (Mapping, *_NOT_ONLY_MAPS.get(section, ()))):
            raise FormatError(f"a section is a JSON object, got {_shown(value)}", path=where, field=section)
        if not isinstance(value, Mapping):
            continue
        _check_fields(value, _SCHEMA.get(section, {}), where, section)


def load_results(paths: Iterable[str | os.PathLike], *, warnings: list[str] | None = None
                 ) -> dict[str, Any]:
    """One results dict from several JSON files (each written by a ``prmkit eval ...`` command, one
    key per section). A section in several files is taken from the last one, with a line appended to
    ``warnings`` (when given) naming both files; ``meta`` is merged key by key (later files win) and
    ``meta["merged_from"]`` lists every file with its sections and command.

    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name, body in (("a.json", {"bon": {"ns": [1]}}), ("b.json", {"bon": {"ns": [2]}})):
    ...     with open(os.path.join(d, name), "w") as f:
    ...         json.dump(body, f)
    >>> w = []
    >>> load_results([os.path.join(d, "a.json"), os.path.join(d, "b.json")], warnings=w)["bon"]
    {'ns': [2]}
    >>> len(w)
    1
    """
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    meta: dict[str, Any] = {}
    merged_from: list[dict[str, Any]] = []
    for p in paths:
        where = str(p)
        try:
            with open(p, "rb") as f:
                data = json.loads(decode_utf8(f.read(), where))  # located if not UTF-8; BOM skipped
        except json.JSONDecodeError as e:
            raise FormatError(f"not valid JSON ({e.msg}, column {e.colno})", path=where,
                              line=e.lineno) from None
        except OSError as e:
            raise PrmkitError(f"cannot read results file {where}: {e.strerror or e}") from None
        if not isinstance(data, dict):
            raise FormatError(f"a results file holds one JSON object of sections, got "
                              f"{type(data).__name__}", path=where)
        file_meta = data.get("meta")
        if isinstance(file_meta, Mapping):
            meta.update({k: v for k, v in file_meta.items() if k != "merged_from"})
        elif file_meta is not None:
            raise FormatError("meta must be an object", path=where, field="meta")
        check_results(data, where)
        for key, value in data.items():
            if key == "meta":
                continue
            if key in merged and warnings is not None:
                warnings.append(f"section {key!r}: {where} replaces the one from {origin[key]}")
            merged[key] = value
            origin[key] = where
        merged_from.append({"path": where, "sections": sorted(k for k in data if k != "meta"),
                            "command": file_meta.get("command") if isinstance(file_meta, Mapping)
                            else None})
    if meta or len(merged_from) > 1:
        merged["meta"] = {**meta, "merged_from": merged_from}
    return merged
