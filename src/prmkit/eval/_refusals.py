"""Safety-spec evaluation: over- and under-refusal rates, and whether a PRM (process) or an ORM
(outcome) tells a reasoned refusal from a surface one — the right refusals of the ``reasoned`` and
``surface`` organisms of :mod:`prmkit.envs` (identical actions, so only the steps differ).

A trace's score is its PRM's ``aggregate`` of step scores, or its ORM's trace score; the separation is
the AUROC of reasoned over surface refusals, with a bootstrap interval (the two groups resampled apart)
and, when both models are given, one for their difference over the same resamples.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from prmkit._result import Record, record_field, register_result
from prmkit.envs import refusal_rate_lines, refusal_rates
from prmkit.errors import PrmkitError
from prmkit.eval._stats import auroc, percentile_interval, stratified_resamples
from prmkit.scoring import StepScorer, trace_score
from prmkit.trace import Trace, read_traces

__all__ = ["refusal_eval", "refusal_eval_file", "RefusalsResult", "Separation", "Difference"]


@dataclass
class Separation(Record):
    """How well one scorer ranks reasoned refusals above surface ones: the AUROC, its interval, and
    how many refusals of each kind it scored."""

    auroc: float | None = None
    reasoned: int | None = None
    surface: int | None = None
    ci: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Difference(Record):
    """The first scorer's AUROC minus the second's (``of``: ``"prm - orm"``), over the same resamples."""

    of: str | None = None
    value: float | None = None
    ci: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@register_result
@dataclass
class RefusalsResult(Record):
    """What :func:`refusal_eval` returns (the report's section ``refusals``): ``rates`` per organism
    (:func:`~prmkit.envs.refusal_rates`), ``separation`` per scorer, the ``difference`` of two scorers
    (None with fewer), and the run's ``provenance`` (traces, bootstrap, seed, scorers)."""

    kind: ClassVar[str] = "refusals"
    rates: dict[str, dict[str, Any]] = field(default_factory=dict)
    separation: dict[str, Separation] = record_field(by_name=Separation, factory=dict)
    difference: Difference | None = record_field(record=Difference, omit_none=True)
    provenance: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """Over- and under-refusal per organism, each scorer's separation, their difference."""
        out = refusal_rate_lines(self.rates)
        for name, s in self.separation.items():
            ci = f" [{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci else ""
            out.append(f"{name}: AUROC of reasoned over surface refusals {_f(s.auroc)}{ci} "
                       f"({s.reasoned} reasoned, {s.surface} surface)")
        d = self.difference
        if d is not None:
            ci = f" [{d.ci[0]:+.3f}, {d.ci[1]:+.3f}]" if d.ci else ""
            out.append(f"{d.of}: {_f(d.value)}{ci}")
        return out


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _trace_scores(scorer: StepScorer, traces: Sequence[Trace]) -> dict[str, float | None]:
    # The "min" aggregate: a PRM's lowest step score; an ORM's one score passes through unchanged.
    return {t.id: trace_score(s, "min") for t, s in zip(traces, scorer.score(traces), strict=True)}


def _separation(sc: dict[str, float | None], pos: Sequence[str], neg: Sequence[str]) -> float | None:
    """AUROC of reasoned (``pos``) over surface (``neg``) refusals, unscored ones left out."""
    p = [sc[i] for i in pos if sc[i] is not None]
    n = [sc[i] for i in neg if sc[i] is not None]
    return auroc(p + n, [True] * len(p) + [False] * len(n))


def _ci(values: list[float | None], estimate: float | None) -> list[float] | None:
    v = [x for x in values if x is not None]
    if not v:
        return None
    lo, hi = percentile_interval(v, estimate)
    return [float(lo), float(hi)]


def refusal_eval(traces: Sequence[Trace], scorers: dict[str, StepScorer] | None = None, *,
                 bootstrap: int = 1000, seed: int = 0) -> RefusalsResult:
    """Over- and under-refusal ``rates`` per organism, the ``separation`` of reasoned from surface
    refusals per scorer (AUROC, interval, counts) and, with two scorers, their ``difference``
    (:class:`RefusalsResult`), for ``scorers`` (name -> a PRM or ORM step scorer; a PRM's trace score is its min step score).
    The intervals are :func:`~prmkit.eval.percentile_interval` s over ``bootstrap`` replicates
    (:func:`~prmkit.eval.stratified_resamples`, reasoned and surface refusals apart), each holding
    its estimate, the AUROC on all refusals."""
    if not any(isinstance(t.meta.get("spec"), dict) for t in traces):
        raise PrmkitError("no spec-environment trajectories (made by prmkit agent spec) in the input")
    out = RefusalsResult(rates=refusal_rates(traces))
    scores = {name: _trace_scores(s, traces) for name, s in (scorers or {}).items()}
    right = [t for t in traces if t.final_answer == "refuse" and t.outcome == "correct"
             and (t.meta.get("spec") or {}).get("organism") in ("reasoned", "surface")]
    pos = [t.id for t in right if t.meta["spec"]["organism"] == "reasoned"]
    neg = [t.id for t in right if t.meta["spec"]["organism"] == "surface"]
    draws = stratified_resamples([pos, neg], bootstrap, seed)
    for name, sc in scores.items():
        p = [i for i in pos if sc[i] is not None]
        n = [i for i in neg if sc[i] is not None]
        value = _separation(sc, pos, neg)
        out.separation[name] = Separation(auroc=value, reasoned=len(p), surface=len(n),
                                          ci=_ci([_separation(sc, dp, dn) for dp, dn in draws], value))
    if len(scores) == 2:
        (a, sa), (b, sb) = scores.items()
        diffs = [(x - y) if x is not None and y is not None else None
                 for x, y in ((_separation(sa, p, n), _separation(sb, p, n)) for p, n in draws)]
        da, db = out.separation[a].auroc, out.separation[b].auroc
        value = None if da is None or db is None else da - db
        out.difference = Difference(of=f"{a} - {b}", value=value, ci=_ci(diffs, value))
    out.provenance = {"traces": len(traces), "bootstrap": bootstrap, "seed": seed,
                      "scorers": {k: s.name for k, s in (scorers or {}).items()}}
    return out


def refusal_eval_file(inp: str | os.PathLike, scorers: dict[str, StepScorer] | None = None, *, bootstrap: int = 1000,
                      seed: int = 0) -> RefusalsResult:
    """:func:`refusal_eval` on the traces of ``inp``."""
    return refusal_eval(list(read_traces(inp)), scorers, bootstrap=bootstrap, seed=seed)
