"""Verifier-guided generation: sample whole solutions and let the verifier accept, rank or repair them.

- :func:`reject` (rejection sampling): sample until a trace's score reaches ``threshold``, at most
  ``budget`` samples; when none does, the best-scored sample is returned, marked not accepted.
- :func:`rerank`: sample ``n`` and pick one by a selection method (``bon`` by default; ``weighted``
  too). Sampling uses the request key ``prmkit generate`` uses (the problem id), so with the same
  seed it picks among the very traces ``generate`` would have written.
- :func:`revise` (PRM only): score every step, cut the trace at the first step below ``threshold``
  and regenerate from there (the steps before the cut kept as the prefix), up to ``rounds`` times;
  the last version is returned, accepted when no step is below the threshold.

Each returns a :class:`GuidedResult`: the final trace, whether it passed, and every
:class:`Attempt` with its score and why it was rejected (for ``revise``: the cut step, its text and
score), plus the compute spent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prmkit.envs import PromptBuilder
from prmkit.errors import PrmkitError
from prmkit.policies import Policy, SamplingParams
from prmkit.provenance import GuidedProvenance, PolicyRef
from prmkit.scoring import StepScorer, trace_score
from prmkit.search._common import ComputeMeter, finish_trace, prefix_of
from prmkit.trace import Problem, Trace
from prmkit.trace_queries import problem_key, write_scores

__all__ = ["Attempt", "GuidedResult", "reject", "rerank", "revise"]


@dataclass
class Attempt:
    """One sampled trace and the verdict on it.

    ``score``: its aggregated score. ``step_scores``: the scorer's raw scores. ``reason``: why it was
    accepted or rejected. ``cut``/``cut_text``/``cut_score`` (``revise``): the first step below the
    threshold, where the next version was regenerated from.
    """

    trace: Trace
    score: float | None
    step_scores: list[float | None]
    accepted: bool
    reason: str
    cut: int | None = None
    cut_text: str | None = None
    cut_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"trace": self.trace.id, "score": self.score, "step_scores": list(self.step_scores),
             "accepted": self.accepted, "reason": self.reason}
        if self.cut is not None:
            d.update(cut=self.cut, cut_text=self.cut_text, cut_score=self.cut_score)
        return d


@dataclass
class GuidedResult:
    """The outcome of a verifier-guided generation for one problem."""

    method: str
    trace: Trace
    accepted: bool
    reason: str
    attempts: list[Attempt]
    compute: dict[str, int] = field(default_factory=dict)

    @property
    def rejected(self) -> list[Attempt]:
        """Every attempt other than the returned one."""
        return [a for a in self.attempts if a.trace is not self.trace]


def _params(n: int, max_new_tokens: int, temperature: float, top_p: float, seed: int) -> SamplingParams:
    return SamplingParams(n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                          seed=seed)


class _Run:
    """Sampling, scoring and bookkeeping shared by the three methods."""

    def __init__(self, method: str, problem: Problem, policy: Policy, scorer: StepScorer,
                 prompts: PromptBuilder | None, aggregate: str, args: dict[str, Any]) -> None:
        self.method = method
        self.problem = problem
        self.prompts = prompts or PromptBuilder()
        self.scorer = scorer
        self.aggregate = aggregate
        self.meter = ComputeMeter(policy, scorer)
        self.pid = problem_key(problem)
        self.args = args
        self.count = 0

    def sample(self, key: str, params: SamplingParams, prefix: str = "") -> list[Trace]:
        out = self.meter.generate([self.prompts.request(self.problem, prefix=prefix, key=key)], params)
        traces = []
        for c in out[0]:
            traces.append(finish_trace(self.problem, prefix + c.text,
                                       trace_id=f"{self.pid}/{self.method}/{self.count}",
                                       source=self.meter.policy.model_id, tokens=c.num_tokens,
                                       meta={"problem_id": self.pid, "sample": self.count}))
            self.count += 1
        return traces

    def score(self, traces: list[Trace]) -> list[tuple[list[float | None], float | None]]:
        # A trace without steps (an empty completion) is not scorable: score None.
        scorable = [t for t in traces if t.steps]
        raw = dict(zip(map(id, scorable), self.meter.score(scorable), strict=True))
        out = []
        for t in traces:
            s = raw.get(id(t), [])
            write_scores(t, s, kind=self.scorer.kind, key=self.scorer.name)
            out.append((list(s), trace_score(s, self.aggregate)))
        return out

    def result(self, trace: Trace, accepted: bool, reason: str, attempts: list[Attempt]) -> GuidedResult:
        compute = self.meter.to_dict()
        trace.meta["guided"] = {"method": self.method, "accepted": accepted, "reason": reason,
                                "aggregate": self.aggregate, "compute": compute,
                                "attempts": [a.to_dict() for a in attempts]}
        trace.add_provenance(GuidedProvenance(
            self.method, policy=PolicyRef.from_dict(self.meter.policy.describe()), scorer=self.scorer.name,
            settings=dict(self.args)))
        return GuidedResult(self.method, trace, accepted, reason, attempts, compute)


def _fmt(x: float | None) -> str:
    return "unscored" if x is None else f"{x:.4g}"


def reject(problem: Problem, policy: Policy, scorer: StepScorer, prompts: PromptBuilder | None = None,
           *, threshold: float = 0.5, budget: int = 8, batch: int = 1, aggregate: str = "min",
           max_new_tokens: int = 256, temperature: float = 0.7, top_p: float = 1.0,
           seed: int = 0) -> GuidedResult:
    """Sample ``batch`` traces at a time until one scores at least ``threshold`` (the first such in
    sample order is returned), spending at most ``budget`` samples."""
    if budget < 1 or batch < 1:
        raise PrmkitError(f"budget and batch must be >= 1, got {budget} and {batch}")
    run = _Run("reject", problem, policy, scorer, prompts, aggregate,
               {"threshold": threshold, "budget": budget, "batch": batch, "aggregate": aggregate,
                "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed})
    attempts: list[Attempt] = []
    call = 0
    while len(attempts) < budget:
        n = min(batch, budget - len(attempts))
        traces = run.sample(f"{run.pid}/reject/{call}", _params(n, max_new_tokens, temperature, top_p, seed))
        call += 1
        for t, (raw, score) in zip(traces, run.score(traces), strict=True):
            if score is not None and score >= threshold:
                attempts.append(Attempt(t, score, raw, True, f"score {_fmt(score)} >= {threshold}"))
                return run.result(t, True, f"sample {len(attempts)} of at most {budget} passed "
                                           f"(score {_fmt(score)} >= {threshold})", attempts)
            attempts.append(Attempt(t, score, raw, False, f"score {_fmt(score)} < {threshold}"))
    best = max(range(len(attempts)), key=lambda i: (attempts[i].score is not None,
                                                    attempts[i].score or 0.0, -i))
    return run.result(attempts[best].trace, False,
                      f"no sample reached {threshold} within the budget of {budget}; returning the best "
                      f"(sample {best + 1}, score {_fmt(attempts[best].score)})", attempts)


def rerank(problem: Problem, policy: Policy, scorer: StepScorer, prompts: PromptBuilder | None = None,
           *, n: int = 8, method: str = "bon", aggregate: str = "min", max_new_tokens: int = 256,
           temperature: float = 0.7, top_p: float = 1.0, seed: int = 0) -> GuidedResult:
    """Sample ``n`` traces and pick one with the selection ``method`` (``bon``, ``weighted``)."""
    from prmkit.search._select import select

    run = _Run("rerank", problem, policy, scorer, prompts, aggregate,
               {"n": n, "method": method, "aggregate": aggregate, "max_new_tokens": max_new_tokens,
                "temperature": temperature, "seed": seed})
    # The key prmkit generate uses, so the candidates are the traces it would have sampled.
    traces = run.sample(run.pid, _params(n, max_new_tokens, temperature, top_p, seed))
    scored = run.score(traces)
    sel = select(traces, method, aggregate=aggregate, scores=[raw for raw, _ in scored])
    chosen = sel.index if sel.index is not None else 0  # nothing scored: the first sample
    attempts = [Attempt(t, score, raw, i == chosen,
                        "chosen" if i == chosen else f"ranked below the choice (score {_fmt(score)})")
                for i, (t, (raw, score)) in enumerate(zip(traces, scored, strict=True))]
    return run.result(traces[chosen], sel.index is not None, sel.reason, attempts)


def revise(problem: Problem, policy: Policy, scorer: StepScorer, prompts: PromptBuilder | None = None,
           *, threshold: float = 0.5, rounds: int = 2, aggregate: str = "min", max_new_tokens: int = 256,
           temperature: float = 0.7, top_p: float = 1.0, seed: int = 0) -> GuidedResult:
    """Sample a trace; while a step scores below ``threshold`` and fewer than ``rounds`` revisions
    were made, keep the steps before the first such step and regenerate the rest. At most
    ``rounds + 1`` traces are sampled. Unscored steps (``None``) never trigger a cut."""
    if scorer.kind != "prm":
        raise PrmkitError(f"revise cuts at the first low-scoring step, so it needs a PRM; scorer "
                          f"{scorer.name!r} is an {scorer.kind.upper()}")
    if rounds < 0:
        raise PrmkitError(f"rounds must be >= 0, got {rounds}")
    run = _Run("revise", problem, policy, scorer, prompts, aggregate,
               {"threshold": threshold, "rounds": rounds, "aggregate": aggregate,
                "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed})
    params = _params(1, max_new_tokens, temperature, top_p, seed)
    attempts: list[Attempt] = []
    prefix = ""
    for r in range(rounds + 1):
        trace = run.sample(f"{run.pid}/revise/{r}", params, prefix)[0]
        [(raw, score)] = run.score([trace])
        cut = next((i for i, s in enumerate(raw) if s is not None and s < threshold), None)
        if cut is None:
            attempts.append(Attempt(trace, score, raw, True, f"no step below {threshold}"))
            return run.result(trace, True, f"version {r + 1}: no step scores below {threshold}",
                              attempts)
        step = trace.steps[cut]
        why = f"step {cut} scores {_fmt(raw[cut])} < {threshold}"
        attempts.append(Attempt(trace, score, raw, False, why, cut=cut, cut_text=step.text,
                                cut_score=raw[cut]))
        prefix = prefix_of([s.text for s in trace.steps[:cut]])
    last = attempts[-1]
    return run.result(last.trace, False, f"still {last.reason} after {rounds} revision(s)", attempts)
