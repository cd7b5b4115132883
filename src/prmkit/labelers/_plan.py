"""The records of labeling: plans that ask for rollouts, the rollouts, the report, and helpers.

A rollout-based labeler (``mc``, ``binary``, ``advantage``, ``judge``, ``consensus``) does not call a
policy itself. For each trace it runs a *plan*: a generator that yields the generations it needs (a
list of :class:`Need`, each "rollouts ``indices`` from prefix ``p`` on channel ``c``"), receives them
as :class:`Rollout` records, and finally returns a :class:`PlanResult` with the step labels. The engine
(:mod:`prmkit.labelers._engine`) drives the plans of many traces at once: it looks each need up in
the label store, sends only the missing generations to the policy (inline, a process pool or Ray),
commits each result to the store as it arrives, and feeds the plans. So every labeler is resumable
and parallel for free, and a binary search never asks for a rollout it does not need.

Prefixes: prefix ``p`` of a trace is its first ``p`` steps (``p = 0`` is the bare problem); the
rollout continues the assistant's answer after them. Step ``i`` (0-based) is judged from prefix
``i + 1``. Prefix ``n`` (every step) is never rolled out when the trace has a final answer: the trace
itself is the one continuation, and its answer decides (Math-Shepherd labels the last step by the
correctness of the final answer in the same way).

Rollout seeds are a pure function of ``(seed, trace id, prefix, rollout index)``: rollout ``r`` from
prefix ``p`` of trace ``T`` is sample ``r`` of the request keyed ``"T@p"``, whose seed is
``derive_seed(seed, "T@p", r)`` in every backend. A resumed run therefore asks for exactly the
rollouts an uninterrupted run would have made, and gets the same ones back from a seeded backend.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from prmkit._result import Record
from prmkit.data import answers_equal, extract_answer
from prmkit.errors import PrmkitError
from prmkit.policies import GenerationRequest, SamplingParams
from prmkit.trace import StepLabel, Trace

if TYPE_CHECKING:
    from prmkit.labelers._executors import PolicyInfo, PolicyLike

__all__ = [
    "JUDGE_PREFIX", "Need", "Rollout", "PlanResult", "Plan", "LabelReport", "Channel", "prefix_text",
    "terminal_success", "rollout_key", "request_hash", "reached_answer", "cost_of", "gather",
    "first_error_values",
]

#: The prefix index under which judge calls are stored (a judge reads the whole trace).
JUDGE_PREFIX = -1


@dataclass(frozen=True)
class Need:
    """Generations a plan needs: rollouts ``indices`` from prefix ``prefix`` on ``channel``
    (``"rollout"`` for the labeling policy, ``"judge"`` for a judge)."""

    channel: str
    prefix: int
    indices: tuple[int, ...]


@dataclass
class Rollout:
    """One generation and what it cost. ``reached``: whether the prefix plus this completion reaches
    the reference answer (None for a judge call). ``fresh``: made by this run, not read back from
    the store."""

    trace_id: str
    prefix: int
    index: int
    seed: int | None
    text: str
    tokens: int = 0
    prompt_tokens: int = 0
    seconds: float = 0.0
    reached: bool | None = None
    finish_reason: str = "stop"
    request_hash: str = ""
    fresh: bool = False


@dataclass
class PlanResult:
    """What a plan returns: the labels of every step (a list per step, possibly empty: unlabelled),
    counters for the report (``"judge_unparseable"``, ``"budget_exhausted"``, ...) and free notes
    kept in the trace's labeling summary."""

    labels: list[list[StepLabel]]
    counts: Counter[str] = field(default_factory=Counter)
    notes: dict[str, Any] = field(default_factory=dict)
    issues: list[str] = field(default_factory=list)


#: A plan: yields lists of needs, receives the rollouts of each need (in need order, each in index
#: order), returns the labels.
Plan = Generator[list[Need], list[list[Rollout]], PlanResult]


@dataclass
class LabelReport(Record):
    """What a labeling run did. Nothing is silently lost: every trace is ``labelled`` or ``skipped``
    (with its id and why), and every unlabelled step is counted.

    ``rollouts``: generations the labels used (counted once each); ``generated``: of them, made by
    this run; ``reused``: read back from the store; ``wasted``: generations made only to reach a
    rollout index (a resumed prefix whose first rollouts were stored) and thrown away. ``store``:
    the label store's file (None: memory only, or not known); not part of :meth:`to_dict`, nor of
    equality.

    >>> r = LabelReport("symbolic", traces=2, labelled=1, steps=3, skipped=[("t2", "no steps")])
    >>> LabelReport.from_dict(r.to_dict()) == r
    True
    >>> r.lines()[1:]
    ['skipped t2: no steps (written unchanged)']
    """

    kind: ClassVar[str] = "label"
    labeler: str = ""
    traces: int = 0
    labelled: int = 0
    steps: int = 0
    unlabelled_steps: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    rollouts: int = 0
    judge_calls: int = 0
    generated: int = 0
    reused: int = 0
    wasted: int = 0
    tokens: int = 0
    seconds: float = 0.0
    wall_seconds: float = 0.0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    issues: list[str] = field(default_factory=list)
    store: str | None = field(default=None, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)

    def skip_reasons(self) -> Counter[str]:
        return Counter(reason for _, reason in self.skipped)

    def lines(self, limit: int = 10) -> list[str]:
        """What a terminal shows of it: :meth:`summary`, the store, then up to ``limit`` skipped traces
        and issues each."""
        out = [self.summary()]
        if self.store is not None:
            out.append(f"store: {self.store} ({self.wall_seconds:.1f} s)")
        out += [f"skipped {tid}: {why} (written unchanged)" for tid, why in self.skipped[:limit]]
        if len(self.skipped) > limit:
            out.append(f"… and {len(self.skipped) - limit} more skipped traces (written unchanged)")
        out += [f"issue {issue}" for issue in self.issues[:limit]]
        return out

    def summary(self) -> str:
        """One line for people: traces, labels, rollouts, cost."""
        parts = [f"{self.labelled}/{self.traces} traces labelled by {self.labeler}",
                 f"{self.steps - self.unlabelled_steps}/{self.steps} steps labelled"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped ("
                         + ", ".join(f"{n} {r}" for r, n in self.skip_reasons().items()) + ")")
        if self.rollouts or self.judge_calls:
            parts.append(f"{self.rollouts} rollouts" + (f" + {self.judge_calls} judge calls"
                                                         if self.judge_calls else "")
                         + f" ({self.generated} generated, {self.reused} from the store"
                         + (f", {self.wasted} wasted" if self.wasted else "") + ")")
            parts.append(f"{self.tokens} tokens, {self.seconds:.1f} s generating")
        parts += [f"{k} {v}" for k, v in sorted(self.counts.items()) if v]
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in (
            "labeler", "traces", "labelled", "steps", "unlabelled_steps", "rollouts", "judge_calls",
            "generated", "reused", "wasted", "tokens", "seconds", "wall_seconds")}
        d.update(labels=dict(self.labels), counts=dict(self.counts),
                 skipped=[list(s) for s in self.skipped], issues=list(self.issues))
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> LabelReport:
        r = super().from_dict(d, where=where)
        r.skipped = [(str(tid), str(why)) for tid, why in r.skipped]
        return r


@dataclass
class Channel:
    """One generation source of a labeler: the policy, how it samples, and what the store keys it by.

    ``kind`` is ``"rollout"`` (continuations checked against the answer) or ``"judge"``.
    """

    kind: str
    policy: PolicyLike
    params: SamplingParams
    workers: int | None = None
    ray_address: str | None = None
    shots: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    info: PolicyInfo | None = None



# -- shared helpers -----------------------------------------------------------------------------------

def prefix_text(trace: Trace, p: int) -> str:
    """The assistant text of prefix ``p``: the first ``p`` steps and the separator after them, so a
    completion continues with the next step. Cut from ``trace.text`` when the steps have spans (the
    original separators kept), else the steps joined by newlines.

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b")])
    >>> prefix_text(t, 0), prefix_text(t, 1), prefix_text(t, 2)
    ('', 'a\\n', 'a\\nb\\n')
    """
    n = len(trace.steps)
    if not 0 <= p <= n:
        raise PrmkitError(f"trace {trace.id}: prefix {p} outside 0..{n}")
    if p == 0:
        return ""
    steps = trace.steps
    if trace.text is not None and all(s.span is not None for s in steps):
        if p < n:
            return trace.text[:steps[p].span[0]]
        end = steps[-1].span[1]
        rest = trace.text[end:]
        return trace.text[:end] + (rest if rest.strip() == "" and rest else "\n")
    return "".join(s.text + "\n" for s in steps[:p])


def terminal_success(trace: Trace, *, method: str = "auto") -> bool | None:
    """Whether the whole trace reaches the reference answer: its final answer (``final_answer``, else
    the answer extracted from its steps) against ``problem.answer``. None when either is missing."""
    if trace.problem.answer is None:
        return None
    answer = trace.final_answer
    if answer is None:
        answer = extract_answer("\n".join(s.text for s in trace.steps))
    if answer is None:
        return None
    return answers_equal(answer, trace.problem.answer, method=method)


def rollout_key(trace_id: str, prefix: int) -> str:
    """The request key of prefix ``prefix`` of a trace; rollout ``r`` is sample ``r`` of it."""
    return f"{trace_id}@{prefix}"


def request_hash(request: GenerationRequest, answer: str | None) -> str:
    """What a stored rollout must match to be reused: the prompt, the prefix and the reference
    answer (a trace id that now names a different trace must not reuse old rollouts)."""
    blob = json.dumps([request.messages, request.prefix, answer], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def reached_answer(prefix: str, completion: str, answer: str | None, *, method: str = "auto") -> bool:
    """Whether ``prefix + completion`` ends with the reference answer (extracted as a trace's is)."""
    got = extract_answer(prefix + completion)
    return got is not None and answer is not None and answers_equal(got, answer, method=method)


def first_error_values(n: int, first: int | None, *, known_good: int, after_error: str = "unlabelled"
                       ) -> list[int | None]:
    """The hard label of each of ``n`` steps from a first-error search: +1 before the first error
    ``first`` (0-based; -1: no error), -1 at it and, with ``after_error="negative"``, after it (else
    None: unlabelled). A search stopped by its budget (``first`` None) labels only the ``known_good``
    steps it found right, +1 each.

    >>> first_error_values(4, 1, known_good=0), first_error_values(4, 1, known_good=0, after_error="negative")
    ([1, -1, None, None], [1, -1, -1, -1])
    >>> first_error_values(3, -1, known_good=0), first_error_values(3, None, known_good=2)
    ([1, 1, 1], [1, 1, None])
    """
    if first is None:
        return [1 if i < known_good else None for i in range(n)]
    return [1 if first == -1 or i < first else -1 if i == first or after_error == "negative" else None
            for i in range(n)]


def cost_of(rollouts: Iterable[Rollout]) -> dict[str, float]:
    """``{"tokens", "prompt_tokens", "seconds"}`` summed over ``rollouts``."""
    rs = list(rollouts)
    return {"tokens": sum(r.tokens for r in rs), "prompt_tokens": sum(r.prompt_tokens for r in rs),
            "seconds": round(sum(r.seconds for r in rs), 6)}


def gather(*plans: Plan) -> Generator[list[Need], list[list[Rollout]], list[PlanResult]]:
    """Run several plans side by side as one (their needs are asked for together); returns their
    results in order. ``consensus`` uses it to run ``mc`` and ``judge`` on a trace at once."""
    results: list[PlanResult | None] = [None] * len(plans)
    current: dict[int, list[Need]] = {}
    for i, g in enumerate(plans):
        try:
            current[i] = next(g)
        except StopIteration as stop:
            results[i] = stop.value
    while current:
        order = list(current)
        answers = yield [need for i in order for need in current[i]]
        at = 0
        for i in order:
            k = len(current[i])
            part, at = answers[at:at + k], at + k
            try:
                current[i] = plans[i].send(part)
            except StopIteration as stop:
                results[i] = stop.value
                del current[i]
    return results  # type: ignore[return-value]  # every plan has returned by now

