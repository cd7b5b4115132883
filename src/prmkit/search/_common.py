"""Shared pieces of selection, search and verifier-guided generation.

- building traces from steps (:func:`steps_to_trace`) and finishing them (:func:`finish_trace`);
- counting compute (:class:`ComputeMeter`): tokens generated and tokens scored, so methods can be
  compared at equal compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.policies import Completion, GenerationRequest, Policy, SamplingParams
from prmkit.scoring import StepScorer
from prmkit.trace import Problem, Step, Trace

__all__ = ["steps_to_trace", "prefix_of", "finish_trace", "ComputeMeter"]

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
    from prmkit.generate import completion_to_trace

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
