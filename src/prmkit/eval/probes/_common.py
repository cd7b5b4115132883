"""Helpers the probes share: batched scoring, labelled and scored steps, number formatting."""

from __future__ import annotations

from collections.abc import Sequence

from prmkit.errors import PrmkitError
from prmkit.eval._stats import auroc
from prmkit.eval._stepmetrics import collect_steps
from prmkit.scoring import StepScorer
from prmkit.trace import Trace


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


# Thresholds are compared with a little slack, so that a gap of exactly 0.1 computed as
# 0.09999999999999998 still counts as 0.1.
_TOL = 1e-9


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _score_all(scorer: StepScorer, traces: Sequence[Trace], batch_size: int) -> list[list[float | None]]:
    out: list[list[float | None]] = []
    for i in range(0, len(traces), batch_size):
        chunk = traces[i:i + batch_size]
        got = scorer.score(chunk)
        if len(got) != len(chunk):
            raise PrmkitError(f"scorer {scorer.name!r} returned {len(got)} results for {len(chunk)} traces")
        out.extend(list(s) for s in got)
    return out


def _step_pairs(trace: Trace, key: str, label_source: str | None, neutral: str
                ) -> list[tuple[float, bool]]:
    """``(score, step is valid)`` for every step that has both a score under ``key`` and a verdict."""
    return list(zip(*collect_steps([trace], key, label_source, neutral), strict=True))


def _step_auroc(pairs: Sequence[tuple[float, bool]]) -> float | None:
    return auroc([s for s, _ in pairs], [v for _, v in pairs]) if pairs else None
