"""**Domain transfer** (:func:`transfer_probe`): step AUROC, F1 and first-error accuracy per data
source, and how much the AUROC drops away from the training domain."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prmkit._result import Record, record_field
from prmkit.errors import PrmkitError
from prmkit.eval._doc import ReportDoc
from prmkit.eval._metrics import f1_score, first_error_index
from prmkit.eval.probes._base import ProbeContext, ProbeNotApplicable
from prmkit.eval.probes._common import _TOL, _fmt, _step_auroc, _step_pairs
from prmkit.scoring import StepScorer, score_traces
from prmkit.trace import Trace

__all__ = ["SourceStats", "TransferResult", "transfer_probe", "TransferProbe"]


@dataclass
class SourceStats(Record):
    """Step metrics on one data source: ``traces`` with a labelled, scored step, ``steps`` labelled
    and scored, step AUROC (valid = positive), F1 of flagging invalid steps (score below the
    threshold), and first-error accuracy over the traces whose first error is known."""

    traces: int | None = None
    steps: int | None = None
    auroc: float | None = None
    f1_error: float | None = None
    first_error_acc: float | None = None
    first_error_traces: int | None = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class TransferResult(Record):
    """The result of :func:`transfer_probe` (a :class:`~prmkit._result.Record`: its ``to_dict`` is the
    probe's part of the report, ``from_dict`` reads it back); ``measured`` is False when the drop
    cannot be told (``failed`` None)."""

    sources: dict[str, SourceStats] = record_field(by_name=SourceStats, factory=dict)
    in_domain: str | None = None
    out_of_domain: str | None = None
    auroc_drop: float | None = None
    failed: bool | None = None
    measured: bool | None = None
    criterion: str | None = None
    key: str | None = "prm"
    threshold: float | None = 0.5
    extra: dict[str, Any] = field(default_factory=dict)


def _source_stats(traces: Sequence[Trace], key: str, label_source: str | None, threshold: float,
                  neutral: str) -> SourceStats:
    rows = [_step_pairs(t, key, label_source, neutral) for t in traces]
    pairs = [p for r in rows for p in r]
    tp = sum(1 for s, v in pairs if not v and s < threshold)
    fp = sum(1 for s, v in pairs if v and s < threshold)
    fn = sum(1 for s, v in pairs if not v and s >= threshold)
    hits = judged = 0
    for t in traces:
        target = t.first_error(label_source)
        scores = [s.scores.get(key) for s in t.steps]
        if target is None or all(v is None for v in scores):
            continue
        judged += 1
        hits += first_error_index(scores, threshold) == target
    return SourceStats(traces=sum(1 for r in rows if r), steps=len(pairs), auroc=_step_auroc(pairs),
                       f1_error=f1_score(tp, fp, fn),
                       first_error_acc=hits / judged if judged else None, first_error_traces=judged)


def transfer_probe(scorer: StepScorer | None, sources: Mapping[str, Sequence[Trace]], in_domain: str, *,
                   key: str = "prm", label_source: str | Mapping[str, str | None] | None = None,
                   threshold: float = 0.5, neutral: str = "positive", max_drop: float = 0.1,
                   min_auroc: float = 0.55) -> TransferResult:
    """Step metrics per data source (``sources``: name -> labelled traces) and the AUROC lost away
    from ``in_domain``, the source the PRM was trained on.

    With a ``scorer``, every source is scored first and the scores stored on its traces
    (:func:`~prmkit.scoring.score_traces` under ``key``, which changes the given traces); with None,
    the stored scores are used. ``label_source``: one label source for every source, or a mapping
    source name -> label source (sources differ: symbolic labels on one, synthetic on another; a
    name not in it uses each step's latest label). ``auroc_drop``: in-domain AUROC minus out-of-domain AUROC, for the
    other source with the largest drop (``out_of_domain`` names it).

    ``failed``: the drop is ``max_drop`` (0.1) or more, or an out-of-domain AUROC is below
    ``min_auroc`` (0.55, near chance); None (cannot measure) when no AUROC can be compared.

    >>> from prmkit.trace import Problem, Step, StepLabel
    >>> def tr(rows):
    ...     return Trace(id="t", problem=Problem("q"), steps=[
    ...         Step("s", labels=[StepLabel(v)], scores={"prm": p}) for v, p in rows])
    >>> r = transfer_probe(None, {"a": [tr([(1, 0.9), (-1, 0.1)])], "b": [tr([(1, 0.4), (-1, 0.6)])]}, "a")
    >>> r.out_of_domain, r.auroc_drop, r.failed
    ('b', 1.0, True)
    """
    if in_domain not in sources:
        raise PrmkitError(f"in_domain {in_domain!r} is not one of the sources: "
                          f"{', '.join(sources) or 'none'}")
    if scorer is not None:
        for traces in sources.values():
            score_traces(scorer, traces, key)
    per = (dict(label_source) if isinstance(label_source, Mapping)
           else dict.fromkeys(sources, label_source))
    stats = {name: _source_stats(traces, key, per.get(name), threshold, neutral)
             for name, traces in sources.items()}
    home = stats[in_domain].auroc
    out_names = [n for n in stats if n != in_domain]
    # The largest drop is the lowest out-of-domain AUROC; naming it works even when the in-domain
    # AUROC is undefined.
    defined = {n: a for n in out_names if (a := stats[n].auroc) is not None}
    out_of_domain = min(defined, key=defined.__getitem__) if defined else None
    drop = home - defined[out_of_domain] if out_of_domain is not None and home is not None else None
    low = [n for n, a in defined.items() if a < min_auroc]
    rule = (f"fails when the step AUROC away from '{in_domain}' is {max_drop} or more below the "
            f"in-domain AUROC, or below {min_auroc}")
    failed: bool | None = bool(low) or (drop is not None and drop >= max_drop - _TOL)
    if out_of_domain is None:
        failed = None
        criterion = "cannot measure: no other source has a defined step AUROC; " + rule
    elif home is None and not low:
        failed = None
        criterion = f"cannot measure: the in-domain AUROC is undefined; {rule}"
    else:
        criterion = rule + f"; in-domain {_fmt(home)}, {out_of_domain} {_fmt(stats[out_of_domain].auroc)}"
        if len(defined) > 1:  # the largest drop decides; the other sources are named too
            criterion += " (the largest drop), " + ", ".join(
                f"{name} {_fmt(auroc)}" for name, auroc in defined.items() if name != out_of_domain)
    return TransferResult(sources=stats, in_domain=in_domain, out_of_domain=out_of_domain, auroc_drop=drop,
                          failed=failed, measured=failed is not None, criterion=criterion, key=key,
                          threshold=threshold)


class TransferProbe:
    """:func:`transfer_probe` over ``ctx.transfer_sources`` (and ``ctx.traces`` when ``ctx.in_domain``
    names them; see :func:`run_probes`), scored with ``ctx.scorer`` when there is one."""

    name = "transfer"
    title = "domain transfer: how much step AUROC is lost away from the training data?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        if not ctx.transfer_sources:
            raise ProbeNotApplicable("the transfer probe needs a second data source (transfer_sources)")
        if ctx.in_domain is None:
            raise PrmkitError("transfer_sources given without in_domain (the source the PRM was trained on)")
        if ctx.in_domain in ctx.transfer_sources:
            # Every source is data of its own, with its own labels; the scorer scores each.
            return transfer_probe(ctx.scorer, ctx.transfer_sources, in_domain=ctx.in_domain,
                                  key=ctx.key).to_dict()
        # ctx.traces are the in-domain source: already scored, with ctx.label_source's labels.
        if ctx.scorer is not None:
            for traces in ctx.transfer_sources.values():
                score_traces(ctx.scorer, traces, ctx.key)
        return transfer_probe(None, {ctx.in_domain: ctx.traces, **ctx.transfer_sources},
                              in_domain=ctx.in_domain, key=ctx.key,
                              label_source={ctx.in_domain: ctx.label_source}).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"AUROC drop {ReportDoc.f3(TransferResult.from_dict(result).auroc_drop)}"

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        r = TransferResult.from_dict(result, where="probes.transfer")  # the report hands it as JSON
        srcs = {k: v for k, v in (r.sources or {}).items() if isinstance(v, SourceStats)}
        doc.table(["Source", "Traces", "Steps", "AUROC", "F1 (error)", "First-error accuracy"],
                  [[k, doc.count(v.traces), doc.count(v.steps), doc.f3(v.auroc), doc.f3(v.f1_error),
                    doc.pct(v.first_error_acc)] for k, v in srcs.items()])
        doc.para(f"In domain: {r.in_domain or '—'}; out of domain: "
                 f"{r.out_of_domain or '—'}; AUROC drop {doc.f3(r.auroc_drop)}.")
        return ["sources", "in_domain", "out_of_domain", "auroc_drop"]
