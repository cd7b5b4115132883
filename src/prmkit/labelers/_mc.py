"""``mc``: Monte Carlo step labels in the manner of Math-Shepherd (Wang et al., 2024).

From the prefix that ends with step ``i`` (the problem prompt, then steps ``0..i`` as the assistant's
text so far) the policy writes ``k`` completions. Each one that ends with the reference answer (its
final answer extracted and compared with :func:`~prmkit.data.answers_equal`) is a success:

- ``mc_hard``: +1 if any completion succeeds, else -1 ("hard estimation");
- ``mc_soft``: the fraction that succeeds, a soft label in [0, 1] ("soft estimation").

The last step is labelled by the trace's own final answer (the trace is its one completion), with no
rollouts, unless no answer can be read from it. A trace of ``n`` steps costs ``k * (n - 1)`` rollouts.
"""

from __future__ import annotations

from typing import Any

from prmkit.errors import PrmkitError
from prmkit.labelers._base import RolloutLabeler, setup_rollouts
from prmkit.labelers._plan import Need, Plan, PlanResult, terminal_success
from prmkit.trace import StepLabel, Trace

__all__ = ["MCLabeler", "MC_SOURCES"]

MC_SOURCES: tuple[str, ...] = ("mc_hard", "mc_soft")


def _sources(sources: Any) -> tuple[str, ...]:
    if isinstance(sources, str):
        sources = [s.strip() for s in sources.split(",") if s.strip()]
    out = tuple(sources)
    bad = [s for s in out if s not in MC_SOURCES]
    if bad or not out:
        raise PrmkitError(f"mc sources must be a non-empty subset of {MC_SOURCES}, got {sources!r}")
    return out


class MCLabeler(RolloutLabeler):
    """Math-Shepherd Monte Carlo labels: ``k`` rollouts from every step prefix.

    ``policy``: a built policy (runs in this process), a :class:`~prmkit.labelers.PolicySpec` or a
    backend name (runs in a pool of ``workers`` processes, or on Ray with ``ray_address``).
    ``sources``: which of ``mc_hard`` / ``mc_soft`` to write (both by default). ``seed``: the run
    seed; rollout ``r`` of prefix ``p`` of trace ``T`` is sampled with
    ``derive_seed(seed, "T@p", r)``. ``shots``: worked examples in the rollout prompt (default: the
    prompt the trace was generated with). ``answer_method``: how answers are compared
    (:func:`~prmkit.data.answers_equal`).

    >>> from prmkit.policies import ScriptedPolicy
    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("2+2?", answer="4"), steps=[Step("2+2=4"),
    ...           Step("The answer is 4.")], final_answer="4")
    >>> MCLabeler(ScriptedPolicy(["The answer is 4.", "The answer is 5."]), k=2).label([t]).rollouts
    2
    >>> [lab.value for lab in t.labels("mc_soft")]
    [0.5, 1.0]
    """

    name = "mc"
    sources = MC_SOURCES

    def __init__(self, policy: Any, *, k: int = 8, sources: Any = MC_SOURCES,
                 max_new_tokens: int = 128, temperature: float = 0.7, top_p: float = 1.0,
                 seed: int | None = 0, shots: int | None = None, workers: int | None = None,
                 ray_address: str | None = None, answer_method: str = "auto") -> None:
        super().__init__()
        self.write = _sources(sources)
        self.k = k
        setup_rollouts(self, policy, k=k, max_new_tokens=max_new_tokens, temperature=temperature,
                       top_p=top_p, seed=seed, shots=shots, workers=workers,
                       ray_address=ray_address, answer_method=answer_method,
                       sources=list(self.write))

    def plan(self, trace: Trace) -> Plan:
        n = len(trace.steps)
        term = terminal_success(trace, method=self.answer_method)
        prefixes = list(range(1, n)) + ([n] if term is None else [])
        results = yield [Need("rollout", p, tuple(range(self.k))) for p in prefixes]
        by_prefix = dict(zip(prefixes, results, strict=True))
        labels: list[list[StepLabel]] = []
        successes = []
        for i in range(n):
            rs = by_prefix.get(i + 1)
            if rs is None:  # the last step of a trace with an answer: the trace decides
                hits, total, meta = int(bool(term)), 1, {"prefix": i + 1, "terminal": True}
                rs = []
            else:
                hits, total = sum(bool(r.reached) for r in rs), len(rs)
                meta = {"prefix": i + 1, "successes": hits}
            successes.append(hits)
            labs = []
            if "mc_hard" in self.write:
                labs.append(self.make_label(1 if hits else -1, "mc_hard", rollouts=rs, meta=meta))
            if "mc_soft" in self.write:
                labs.append(self.make_label(hits / total, "mc_soft", kind="soft", rollouts=rs,
                                            meta=meta))
            labels.append(labs)
        return PlanResult(labels, notes={"k": self.k, "successes": successes})
