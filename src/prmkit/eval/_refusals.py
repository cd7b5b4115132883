"""Safety-spec evaluation: over- and under-refusal rates, and whether a PRM (process) or an ORM
(outcome) tells a reasoned refusal from a surface one — the right refusals of the ``reasoned`` and
``surface`` organisms of :mod:`prmkit.envs` (identical actions, so only the steps differ).

A trace's score is its PRM's ``aggregate`` of step scores, or its ORM's trace score; the separation is
the AUROC of reasoned over surface refusals, with a bootstrap interval (the two groups resampled apart)
and, when both models are given, one for their difference over the same resamples.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

from prmkit.envs import refusal_rates, refusal_separation
from prmkit.errors import PrmkitError
from prmkit.trace import Trace, read_traces

__all__ = ["refusal_eval", "refusal_eval_file"]


def _trace_scores(scorer: Any, traces: Sequence[Trace]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for t, s in zip(traces, scorer.score(traces), strict=True):
        vals = [x for x in s if x is not None]
        out[t.id] = (min(vals) if getattr(scorer, "kind", "prm") == "prm" else vals[0]) if vals else None
    return out


def _auroc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    if not pos or not neg:
        return None
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def refusal_eval(traces: Sequence[Trace], scorers: dict[str, Any] | None = None, *, bootstrap: int = 1000,
                 seed: int = 0) -> dict[str, Any]:
    """``{"rates": per organism, "separation": {name: {auroc, ci, reasoned, surface}}, "difference"}``
    for ``scorers`` (name -> a PRM or ORM step scorer; a PRM's trace score is its min step score)."""
    if not any(isinstance(t.meta.get("spec"), dict) for t in traces):
        raise PrmkitError("no spec-environment trajectories (made by prmkit agent spec) in the input")
    out: dict[str, Any] = {"rates": refusal_rates(traces), "separation": {}}
    scores = {name: _trace_scores(s, traces) for name, s in (scorers or {}).items()}
    right = [t for t in traces if t.final_answer == "refuse" and t.outcome == "correct"
             and (t.meta.get("spec") or {}).get("organism") in ("reasoned", "surface")]
    pos = [t.id for t in right if t.meta["spec"]["organism"] == "reasoned"]
    neg = [t.id for t in right if t.meta["spec"]["organism"] == "surface"]
    rng = random.Random(seed)
    draws = [([rng.choice(pos) for _ in pos], [rng.choice(neg) for _ in neg]) for _ in range(bootstrap)] \
        if pos and neg else []

    def auc(sc: dict[str, float | None], p: Sequence[str], n: Sequence[str]) -> float | None:
        return _auroc([sc[i] for i in p if sc[i] is not None], [sc[i] for i in n if sc[i] is not None])

    def ci(values: list[float | None]) -> list[float] | None:
        v = sorted(x for x in values if x is not None)
        return [v[int(0.025 * (len(v) - 1))], v[round(0.975 * (len(v) - 1))]] if v else None

    for name, sc in scores.items():
        sep = refusal_separation(traces, lambda t, sc=sc: sc[t.id])
        sep["ci"] = ci([auc(sc, p, n) for p, n in draws])
        out["separation"][name] = sep
    if len(scores) == 2:
        (a, sa), (b, sb) = scores.items()
        diffs = [(x - y) if x is not None and y is not None else None
                 for x, y in ((auc(sa, p, n), auc(sb, p, n)) for p, n in draws)]
        da, db = out["separation"][a]["auroc"], out["separation"][b]["auroc"]
        out["difference"] = {"of": f"{a} - {b}", "value": None if da is None or db is None else da - db,
                             "ci": ci(diffs)}
    out["provenance"] = {"traces": len(traces), "bootstrap": bootstrap, "seed": seed,
                         "scorers": {k: getattr(s, "name", type(s).__name__) for k, s in (scorers or {}).items()}}
    return out


def refusal_eval_file(inp: str | os.PathLike, scorers: dict[str, Any] | None = None, *, bootstrap: int = 1000,
                      seed: int = 0) -> dict[str, Any]:
    """:func:`refusal_eval` on the traces of ``inp``."""
    return refusal_eval(list(read_traces(inp)), scorers, bootstrap=bootstrap, seed=seed)
