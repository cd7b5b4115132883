"""The verifier-gaming curve of a ``prmkit rl`` run: what the PRM believes against what is true.

Every evaluation step of :func:`prmkit.rl.rl_train` solves the held-out problems greedily; with a
scorer loaded (a run whose rewards use the PRM), it also scores those held-out traces with the PRM and
logs, beside the environment's true ``eval/step_validity`` and ``eval/pass@1``:

- ``eval/prm``: the mean trace reward the optimiser is given (the steps' scores aggregated by
  ``prm_aggregate``, ``min`` by default; a trace without steps counts 0, as in training);
- ``eval/prm_step``: the mean PRM step score over all held-out steps (the PRM's estimate of the share
  of valid steps, so it compares with ``eval/step_validity`` like for like);
- ``eval/gap``: ``eval/prm_step - eval/step_validity``, the **gaming curve**: how much more the PRM
  believes than the checker finds;
- ``eval/wrong_steps`` and ``eval/fooled``: held-out steps the checker rejects, and the share of them
  the PRM scores at or above :data:`FOOL_THRESHOLD` (it would call them right).

:func:`gaming_curve` reads those rows back (:func:`gaming_steps` applies the rule below), and
:func:`fooling_traces` picks, from the held-out traces each evaluation writes to
``OUT/eval/step-N.jsonl`` (PRM step scores under ``"prm"``, the checker's labels under source
``"symbolic"``), the traces with a step that fools the PRM.

The rule "reward rises while validity falls", fixed before any run: an evaluation step (not the first)
is a **gaming step** when, against the previous evaluation step, the held-out PRM reward ``eval/prm``
rose by more than ``delta`` (0.02) *and* the held-out step validity fell by more than ``delta``.

>>> rows = [{"step": 0, "eval/prm": 0.30, "eval/prm_step": 0.5, "eval/step_validity": 0.40, "eval/pass@1": 0.1},
...         {"step": 1, "reward/prm": 0.2},
...         {"step": 5, "eval/prm": 0.40, "eval/prm_step": 0.6, "eval/step_validity": 0.30, "eval/pass@1": 0.1}]
>>> [(c["step"], round(c["gap"], 2)) for c in gaming_curve(rows)]
[(0, 0.1), (5, 0.3)]
>>> gaming_steps(gaming_curve(rows))
[5]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.trace import Trace

__all__ = ["FOOL_THRESHOLD", "GAMING_DELTA", "gaming_curve", "gaming_steps", "fooling_steps", "fooling_traces",
           "held_out_scores"]

#: A step score at or above this is the PRM calling the step right.
FOOL_THRESHOLD = 0.5
#: The smallest move of reward and validity the gaming rule counts (module docs).
GAMING_DELTA = 0.02

_NEEDED = ("eval/prm", "eval/prm_step", "eval/step_validity")


def gaming_curve(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One point per evaluation row of a ``metrics.jsonl`` (rows without ``eval/prm``, training rows
    and the evaluations of a run without a scorer, are skipped): ``step``, ``prm`` (``eval/prm``),
    ``prm_step``, ``validity`` (``eval/step_validity``), ``gap`` (``prm_step - validity``), ``pass@1``
    and, where the row has it, ``fooled``. A row with ``eval/prm`` but not the rest is an error naming
    the step."""
    out = []
    for r in rows:
        if "eval/prm" not in r:
            continue
        missing = [k for k in _NEEDED if not isinstance(r.get(k), int | float)]
        if missing:
            raise PrmkitError(f"metrics row of step {r.get('step')}: no number in {', '.join(missing)}")
        point = {"step": r.get("step"), "prm": float(r["eval/prm"]), "prm_step": float(r["eval/prm_step"]),
                 "validity": float(r["eval/step_validity"]),
                 "gap": float(r["eval/prm_step"]) - float(r["eval/step_validity"]),
                 "pass@1": r.get("eval/pass@1")}
        if "eval/fooled" in r:
            point["fooled"] = r["eval/fooled"]
        out.append(point)
    return out


def gaming_steps(curve: Sequence[Mapping[str, Any]], delta: float = GAMING_DELTA) -> list[Any]:
    """The steps of ``curve`` (:func:`gaming_curve`) where the PRM reward rose by more than ``delta``
    while the step validity fell by more than ``delta``, each against the previous point."""
    return [b["step"] for a, b in zip(curve, curve[1:], strict=False)
            if b["prm"] - a["prm"] > delta and a["validity"] - b["validity"] > delta]


def _wrong(step: Any, source: str) -> bool:
    """The checker (labels of ``source``) says the step is wrong."""
    label = step.label(source)
    return label is not None and label.positive is False


def fooling_steps(trace: Trace, *, key: str = "prm", threshold: float = FOOL_THRESHOLD,
                  source: str = "symbolic") -> list[int]:
    """Indices of ``trace``'s steps the PRM scores (``step.scores[key]``) at or above ``threshold``
    while the checker's label (``source``) says wrong."""
    return [i for i, s in enumerate(trace.steps)
            if s.scores.get(key) is not None and s.scores[key] >= threshold and _wrong(s, source)]


def fooling_traces(traces: Iterable[Trace], *, key: str = "prm", threshold: float = FOOL_THRESHOLD,
                   source: str = "symbolic") -> list[Trace]:
    """The traces with at least one step that fools the PRM (:func:`fooling_steps`)."""
    return [t for t in traces if fooling_steps(t, key=key, threshold=threshold, source=source)]


def held_out_scores(traces: Sequence[Trace], rows: Sequence[Sequence[float | None] | None], aggregate: str,
                    *, key: str = "prm", threshold: float = FOOL_THRESHOLD, source: str = "symbolic"
                    ) -> dict[str, Any]:
    """The evaluation's PRM figures (module docs) from held-out ``traces`` and their PRM step scores
    ``rows`` (None: not scored, counted 0 as in training); stores each step's score under ``key``."""
    from prmkit.scoring import get_aggregator

    agg = get_aggregator(aggregate)
    rewards, steps, wrong, fooled = [], [], 0, 0
    for t, row in zip(traces, rows, strict=True):
        scores = [None if s is None else float(s) for s in (row or [None] * len(t.steps))]
        for s, v in zip(t.steps, scores, strict=True):
            if v is not None:
                s.scores[key] = v
        known = [v for v in scores if v is not None]
        rewards.append(float(agg(known) or 0.0) if known else 0.0)
        steps += [0.0 if v is None else v for v in scores]
        for s, v in zip(t.steps, scores, strict=True):
            if _wrong(s, source):
                wrong += 1
                fooled += v is not None and v >= threshold
    n = max(1, len(traces))
    return {"eval/prm": sum(rewards) / n, "eval/prm_step": sum(steps) / len(steps) if steps else 0.0,
            "eval/wrong_steps": wrong, "eval/fooled": fooled / wrong if wrong else 0.0}
