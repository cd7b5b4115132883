"""Shared pieces of selection, search and verifier-guided generation.

- reading the scores a trace carries (:func:`stored_scores`) and aggregating them (:func:`trace_score`);
- whether a trace is right (:func:`is_correct`) and what its final answer is (:func:`final_answer`);
- building traces from steps (:func:`steps_to_trace`) and finishing them (:func:`finish_trace`);
- counting compute (:class:`ComputeMeter`): tokens generated and tokens scored, so methods can be
  compared at equal compute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from prmkit.data._answers import answers_equal, extract_answer_is, extract_boxed
from prmkit.errors import PrmkitError
from prmkit.policies._base import Completion, GenerationRequest, Policy, SamplingParams
from prmkit.scoring import get_aggregator
from prmkit.scoring._protocol import StepScorer
from prmkit.trace import Problem, Step, Trace

__all__ = ["trace_score", "stored_scores", "score_keys", "write_scores",
           "is_correct", "final_answer", "states_answer", "steps_to_trace", "prefix_of", "finish_trace",
           "ComputeMeter", "problem_key"]

Aggregator = Callable[[Sequence[float | None]], float | None]


# -- aggregation ---------------------------------------------------------------------------------------

def trace_score(scores: Sequence[float | None], aggregate: str | Aggregator = "min") -> float | None:
    """One number for a trace from its step scores, by an aggregator of :mod:`prmkit.scoring`
    (a name such as ``"min"`` or ``"first_below:0.5"``, or a callable); an ORM's one-element list
    passes through every aggregator but ``first_below``.

    >>> trace_score([0.9, 0.4, None, 0.7], "min"), trace_score([], "min") is None
    (0.4, True)
    """
    return get_aggregator(aggregate)(list(scores)) if scores else None


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


def write_scores(trace: Trace, scores: Sequence[float | None], *, kind: str, key: str) -> None:
    """Store ``scores`` on ``trace`` as ``RewardModel.score_traces`` does: per step for a PRM
    (unscored steps get no entry), in ``meta["scores"]`` for an ORM."""
    if kind == "orm":
        if scores and scores[0] is not None:
            trace.meta.setdefault("scores", {})[key] = scores[0]
        return
    for step, v in zip(trace.steps, scores, strict=False):
        if v is not None:
            step.scores[key] = v


# -- answers ---------------------------------------------------------------------------------------------

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


def states_answer(step: str) -> bool:
    """Whether a step states the final answer ("The answer is 8.", a ``\\boxed{}``), which ends a
    search path. The last number of any step is not enough: most steps end with one."""
    return extract_answer_is(step) is not None or extract_boxed(step) is not None


def problem_key(problem: Problem) -> str:
    """How problems are told apart: their id, else their text."""
    return problem.id or problem.text


# -- traces from steps -----------------------------------------------------------------------------------

def prefix_of(steps: Sequence[str]) -> str:
    """The assistant text before the next step: every step followed by a newline."""
    return "".join(s + "\n" for s in steps)


def steps_to_trace(problem: Problem, steps: Sequence[str], *, trace_id: str) -> Trace:
    """A (partial) trace of ``steps`` joined by newlines, each step's span pointing into the text;
    what search hands the scorer."""
    text = "\n".join(steps)
    out, at = [], 0
    for s in steps:
        out.append(Step(s, span=(at, at + len(s))))
        at += len(s) + 1
    return Trace(id=trace_id, problem=problem, steps=out, text=text)


def finish_trace(problem: Problem, text: str, *, trace_id: str, source: str, tokens: int,
                 label: bool = True, meta: dict[str, Any] | None = None) -> Trace:
    """A complete trace as ``prmkit generate`` makes it (steps, answer, outcome, symbolic labels)."""
    from prmkit.policies._sampling import completion_to_trace

    return completion_to_trace(problem, Completion(text, num_tokens=tokens), trace_id=trace_id,
                               source=source, label=label, meta=meta)


# -- compute accounting ------------------------------------------------------------------------------------

@dataclass
class ComputeMeter:
    """Calls the policy and the scorer and counts what they cost.

    ``generated_tokens``: the ``num_tokens`` of every completion (lookahead rollouts included).
    ``scored_tokens``: the scorer's own count when it keeps one (``stats.tokens_computed`` of a
    :class:`~prmkit.scoring.PrefixCachingScorer`: only the tokens it ran, prefixes reused from
    earlier calls not counted again), else the length of every trace handed to it, problem
    included: tokens of the scorer's ``tokenizer`` when it has one, otherwise whitespace-separated
    words (what ``ScriptedPolicy`` counts too).
    """

    policy: Policy
    scorer: StepScorer
    generated_tokens: int = 0
    generations: int = 0
    scored_tokens: int = 0
    scored_traces: int = 0
    scorer_calls: int = 0

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        if not requests:
            return []
        out = self.policy.generate(requests, params)
        for row in out:
            self.generations += len(row)
            self.generated_tokens += sum(c.num_tokens for c in row)
        return out

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        if not traces:
            return []
        before = self._own_count()
        out = self.scorer.score(traces)
        if len(out) != len(traces):
            raise PrmkitError(f"scorer {self.scorer.name!r} returned {len(out)} results for "
                              f"{len(traces)} traces")
        after = self._own_count()
        if before is not None and after is not None:
            self.scored_tokens += after - before
        else:
            self.scored_tokens += sum(self._length(t) for t in traces)
        self.scored_traces += len(traces)
        self.scorer_calls += 1
        return out

    def _own_count(self) -> int | None:
        count = getattr(getattr(self.scorer, "stats", None), "tokens_computed", None)
        return count if isinstance(count, int) else None

    def _length(self, trace: Trace) -> int:
        text = "\n".join([trace.problem.text, *(s.text for s in trace.steps)])
        tok = getattr(self.scorer, "tokenizer", None)
        if tok is not None:
            return len(tok(text, add_special_tokens=False)["input_ids"])
        return len(text.split())

    def to_dict(self) -> dict[str, int]:
        """The counts, for a result's ``meta``."""
        return {"generated_tokens": self.generated_tokens, "generations": self.generations,
                "scored_tokens": self.scored_tokens, "scored_traces": self.scored_traces,
                "scorer_calls": self.scorer_calls}
