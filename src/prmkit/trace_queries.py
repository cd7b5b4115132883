"""Queries about the record, and the one function that writes scores onto it.

Every stage asks the same questions of a :class:`~prmkit.trace.Trace` — which scores does it carry,
is it right, what is its final answer, does a step state the answer — so they live here, beside the
record, and no stage reaches into another for them. :func:`write_scores` is the only code that
stores a scorer's results on a trace (scoring, search, the reward model and the demo all call it), so
an unscored step is treated the same way everywhere: it gets no entry.

>>> from prmkit.trace import Problem, Step, Trace
>>> t = Trace(id="t", problem=Problem("1+1?", answer="2"), steps=[Step("1+1=2"), Step("The answer is 2.")],
...           final_answer="2")
>>> write_scores(t, [0.9, None], kind="prm", key="prm", trace_scores={"prm:min": 0.9})
>>> stored_scores(t, "prm"), t.meta["scores"], is_correct(t), states_answer(t.steps[-1].text)
([0.9, None], {'prm:min': 0.9}, True, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from prmkit.data import answers_equal, states_answer
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Trace

__all__ = ["stored_scores", "score_keys", "write_scores", "partly_scored", "is_correct", "final_answer",
           "states_answer", "problem_key"]


# -- scores stored on traces ---------------------------------------------------------------------------

def stored_scores(trace: Trace, key: str) -> list[float | None]:
    """The scores ``key`` gave ``trace``: one per step (``step.scores[key]``, a PRM) or one for the
    trace (``trace.meta["scores"][key]``, an ORM); ``[]`` when it has none."""
    if any(key in s.scores for s in trace.steps):
        return [s.scores.get(key) for s in trace.steps]
    value = (trace.meta.get("scores") or {}).get(key)
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def score_keys(traces: Sequence[Trace]) -> list[str]:
    """Every scorer name found on ``traces`` (step scores, then trace scores), in first-seen order.
    Aggregated trace scores written by ``prmkit score`` (``"prm:min"``) are not scorer names."""
    keys: dict[str, None] = {}
    for t in traces:
        for s in t.steps:
            keys.update(dict.fromkeys(s.scores))
        keys.update(dict.fromkeys(k for k in (t.meta.get("scores") or {}) if ":" not in k))
    return list(keys)


def write_scores(trace: Trace, scores: Sequence[float | None], *, kind: str, key: str,
                 trace_scores: Mapping[str, float | None] | None = None) -> None:
    """Store a scorer's result for ``trace``.

    - PRM (``kind="prm"``): ``step.scores[key]`` for every step with a score; a step without one (cut
      by ``max_length``, or not scored) gets no entry. ``scores`` has one value per step (fewer: the
      trailing steps are unscored, as for a partial trace in search).
    - ORM: ``trace.meta["scores"][key]`` from the one-element list, unless it is None.
    - ``trace_scores``: further trace-level values stored in ``trace.meta["scores"]`` (an aggregated
      PRM score such as ``{"prm:min": 0.4}``); None values are not stored.
    - A PRM result that leaves steps unscored marks the trace *scored in part*:
      ``trace.meta["scored_steps"][key]`` is how many steps got a score (absent when all did), so a
      trace score from the steps that fit is never mistaken for one of the whole trace
      (:func:`partly_scored`).

    Scores are checked as a reader checks them (:class:`~prmkit.trace.Step`, ``meta.scores``), so
    nothing is written that cannot be read back: a PRM's step score is a probability in [0, 1]; NaN
    and infinite scores are refused everywhere. An empty ``meta["scores"]`` is never left behind.
    """
    if kind not in ("prm", "orm"):
        raise PrmkitError(f"kind must be 'prm' or 'orm', got {kind!r}")
    for what, values in (("step score", scores), ("trace score", list((trace_scores or {}).values()))):
        bad = next((v for v in values if v is not None and not _is_number(v)), None)
        if bad is not None:
            raise PrmkitError(f"trace {trace.id!r}: {what} {bad!r} refused (a score is a number)")
        bad = next((v for v in values if v is not None and not math.isfinite(v)), None)
        if bad is not None:
            raise PrmkitError(f"trace {trace.id!r}: {what} {bad} refused (NaN and infinite scores "
                              "are never stored)")
    if kind == "prm":
        for i, v in enumerate(scores):
            if v is not None and not 0.0 <= v <= 1.0:
                raise PrmkitError(f"trace {trace.id!r}: step {i + 1} score {key!r} {v!r} refused (a step "
                                  "score is a probability in [0, 1], as a reader checks it)")
    meta = trace.meta.setdefault("scores", {})
    if kind == "orm":
        if len(scores) > 1:
            raise PrmkitError(f"trace {trace.id!r}: an ORM gives one score, got {len(scores)}")
        if scores and scores[0] is not None:
            meta[key] = scores[0]
    else:
        if len(scores) > len(trace.steps):
            raise PrmkitError(f"trace {trace.id!r}: {len(scores)} step scores for {len(trace.steps)} steps")
        for step, v in zip(trace.steps, scores, strict=False):
            if v is not None:
                step.scores[key] = v
        if scores:
            _mark_scored_steps(trace, key, sum(v is not None for v in scores))
    for name, v in (trace_scores or {}).items():
        if v is not None:
            meta[name] = v
    if not meta:
        del trace.meta["scores"]


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _mark_scored_steps(trace: Trace, key: str, scored: int) -> None:
    marks = trace.meta.get("scored_steps") or {}
    if scored < len(trace.steps):
        marks[key] = scored
    else:
        marks.pop(key, None)
    if marks:
        trace.meta["scored_steps"] = marks
    else:
        trace.meta.pop("scored_steps", None)


def partly_scored(trace: Trace, key: str) -> bool:
    """Whether the PRM ``key`` scored only some of ``trace``'s steps (``scored_steps < steps``: steps
    cut by ``max_length``), so its trace score covers only the steps that fit.

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b"), Step("c")])
    >>> write_scores(t, [0.9, 0.8, None], kind="prm", key="prm")
    >>> partly_scored(t, "prm"), t.meta["scored_steps"]
    (True, {'prm': 2})
    >>> write_scores(t, [0.9, 0.8, 0.7], kind="prm", key="prm")
    >>> partly_scored(t, "prm"), "scored_steps" in t.meta
    (False, False)
    """
    marks = trace.meta.get("scored_steps")
    return isinstance(marks, dict) and key in marks


# -- answers -----------------------------------------------------------------------------------------------

def final_answer(trace: Trace) -> str | None:
    """The trace's final answer, as the importer or ``prmkit generate`` extracted it (not guessed
    again here: a trace without one does not vote)."""
    return trace.final_answer


def is_correct(trace: Trace) -> bool | None:
    """True / False from the trace's outcome; for an ``unknown`` outcome, its final answer against the
    reference answer; None when there is no reference to compare with."""
    if trace.outcome != "unknown":
        return trace.outcome == "correct"
    if trace.problem.answer is None:
        return None
    answer = final_answer(trace)
    return answer is not None and answers_equal(answer, trace.problem.answer)


def problem_key(problem: Problem) -> str:
    """How problems are told apart: their id, else their text."""
    return problem.id or problem.text
