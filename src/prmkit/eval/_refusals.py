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
from typing import Any

from prmkit.envs import refusal_rates
from prmkit.errors import PrmkitError
from prmkit.eval._stats import auroc, percentile_interval, stratified_resamples
from prmkit.scoring import StepScorer, trace_score
from prmkit.trace import Trace, read_traces

__all__ = ["refusal_eval", "refusal_eval_file"]


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
                 bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """``{"rates": per organism, "separation": {name: {auroc, ci, reasoned, surface}}, "difference"}``
    for ``scorers`` (name -> a PRM or ORM step scorer; a PRM's trace score is its min step score).
    The intervals are :func:`~prmkit.eval.percentile_interval` s over ``bootstrap`` replicates
    (:func:`~prmkit.eval.stratified_resamples`, reasoned and surface refusals apart), each holding
    its estimate, the AUROC on all refusals."""
    if not any(isinstance(t.meta.get("spec"), dict) for t in traces):
        raise PrmkitError("no spec-environment trajectories (made by prmkit agent spec) in the input")
    out: dict[str, Any] = {"rates": refusal_rates(traces), "separation": {}}
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
        out["separation"][name] = {"auroc": value, "reasoned": len(p), "surface": len(n),
                                   "ci": _ci([_separation(sc, dp, dn) for dp, dn in draws], value)}
    if len(scores) == 2:
        (a, sa), (b, sb) = scores.items()
        diffs = [(x - y) if x is not None and y is not None else None
                 for x, y in ((_separation(sa, p, n), _separation(sb, p, n)) for p, n in draws)]
        da, db = out["separation"][a]["auroc"], out["separation"][b]["auroc"]
        value = None if da is None or db is None else da - db
        out["difference"] = {"of": f"{a} - {b}", "value": value, "ci": _ci(diffs, value)}
    out["provenance"] = {"traces": len(traces), "bootstrap": bootstrap, "seed": seed,
                         "scorers": {k: s.name for k, s in (scorers or {}).items()}}
    return out


def refusal_eval_file(inp: str | os.PathLike, scorers: dict[str, StepScorer] | None = None, *, bootstrap: int = 1000,
                      seed: int = 0) -> dict[str, Any]:
    """:func:`refusal_eval` on the traces of ``inp``."""
    return refusal_eval(list(read_traces(inp)), scorers, bootstrap=bootstrap, seed=seed)
