"""The labeler interface: plans that ask for rollouts, a report, and the helpers every labeler shares.

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
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from prmkit._registry import Registry
from prmkit.data import answers_equal, extract_answer
from prmkit.errors import PrmkitError
from prmkit.policies import GenerationRequest, SamplingParams
from prmkit.trace import StepLabel, Trace, now

if TYPE_CHECKING:
    from prmkit.labelers._executors import PolicyInfo, PolicyLike
    from prmkit.labelers._store import LabelStore

__all__ = [
    "Need", "Rollout", "PlanResult", "Plan", "LabelReport", "Labeler", "RolloutLabeler",
    "LABELERS", "get_labeler", "register_labeler", "prefix_text", "terminal_success",
    "rollout_key", "JUDGE_PREFIX", "gather",
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
class LabelReport:
    """What a labeling run did. Nothing is silently lost: every trace is ``labelled`` or ``skipped``
    (with its id and why), and every unlabelled step is counted.

    ``rollouts``: generations the labels used (counted once each); ``generated``: of them, made by
    this run; ``reused``: read back from the store; ``wasted``: generations made only to reach a
    rollout index (a resumed prefix whose first rollouts were stored) and thrown away.
    """

    labeler: str
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

    def skip_reasons(self) -> Counter[str]:
        return Counter(reason for _, reason in self.skipped)

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
        return d


@runtime_checkable
class Labeler(Protocol):
    """Anything that labels traces in place and says what it did."""

    #: Registry name (``"mc"``, ``"binary"``, ...), written as ``StepLabel.labeler``.
    name: str
    #: The labeler's arguments as JSON, written as ``StepLabel.args`` and into the provenance.
    args: dict[str, Any]

    def label(self, traces: Sequence[Trace], *, store: LabelStore | str | None = None,
              progress: bool = False) -> LabelReport:
        """Append labels to ``traces`` (in place) and return the report."""
        ...


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


# -- the base class of rollout labelers ----------------------------------------------------------------

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


class RolloutLabeler(ABC):
    """Base class of the labelers that generate: subclasses set ``name``, ``sources`` and
    ``channels`` and implement :meth:`plan`; :meth:`label` runs the plans through the engine.

    Executors (process pools, Ray actors) start on the first :meth:`label` and stay up until
    :meth:`close` (or the end of a ``with`` block), so labeling several batches loads a model once.
    """

    name = ""
    #: Label sources this labeler writes; labels of these sources from this labeler already on a
    #: trace are replaced (so relabeling a file does not stack duplicates).
    sources: tuple[str, ...] = ()
    #: Whether a trace needs a reference answer (rollout checks) to be labelled.
    needs_answer = True

    def __init__(self) -> None:
        self.args: dict[str, Any] = {}
        self.channels: dict[str, Channel] = {}
        self._executors: dict[str, Any] = {}
        self.answer_method = "auto"

    # -- to implement ------------------------------------------------------------------------------
    @abstractmethod
    def plan(self, trace: Trace) -> Plan | PlanResult:
        """The plan that labels ``trace`` (see the module docstring); a labeler that needs no
        generation may return the :class:`PlanResult` directly."""

    # -- shared ------------------------------------------------------------------------------------
    def skip_reason(self, trace: Trace) -> str | None:
        """Why ``trace`` cannot be labelled (counted in the report), or None."""
        if not trace.steps:
            return "no steps"
        if self.needs_answer and trace.problem.answer is None:
            return "no reference answer"
        return None

    def request(self, channel: str, trace: Trace, prefix: int) -> GenerationRequest:
        """The request behind rollouts from ``prefix`` of ``trace`` on ``channel``: the trace's
        prompt (see :func:`~prmkit.labelers._engine.rollout_messages`) with the first ``prefix``
        steps as the assistant's text so far, keyed ``"<trace id>@<prefix>"``."""
        from prmkit.labelers._engine import rollout_messages

        ch = self.channels[channel]
        messages = rollout_messages(trace, ch.shots, ch.info.prompt_shots if ch.info else None)
        return GenerationRequest(messages, prefix=prefix_text(trace, prefix),
                                 key=rollout_key(trace.id, prefix))

    def model_id(self, channel: str = "rollout") -> str | None:
        ch = self.channels.get(channel)
        return ch.info.model_id if ch is not None and ch.info is not None else None

    def make_label(self, value: float, source: str, *, kind: str = "hard", channel: str = "rollout",
                   rollouts: Sequence[Rollout] = (), meta: dict[str, Any] | None = None,
                   count: int | None = None) -> StepLabel:
        """A label with full provenance: this labeler, its args, the model, rollouts and cost."""
        return StepLabel(value, source=source, kind=kind, labeler=self.name, args=dict(self.args),
                         model=self.model_id(channel), rollouts=len(rollouts) if count is None else count,
                         cost=cost_of(rollouts), time=now(), meta=dict(meta or {}))

    def describe(self) -> dict[str, Any]:
        """Name, args, and the policies behind each channel (once started)."""
        return {"name": self.name, "args": dict(self.args),
                **{ch: (c.info.describe if c.info is not None else None)
                   for ch, c in self.channels.items()}}

    def start(self) -> None:
        """Start the executors of every channel (done by :meth:`label` when needed)."""
        from prmkit.labelers._executors import make_executor

        for name, ch in self.channels.items():
            if name in self._executors:
                continue
            # Channels with the same policy and placement share one executor (one model load).
            twin = next((n for n, c in self.channels.items() if n in self._executors
                         and (c.policy is ch.policy or c.policy == ch.policy)
                         and (c.workers, c.ray_address) == (ch.workers, ch.ray_address)), None)
            if twin is not None:
                self._executors[name] = self._executors[twin]
            else:
                self._executors[name] = make_executor(ch.policy, workers=ch.workers,
                                                      ray_address=ch.ray_address)
            ch.info = self._executors[name].info()

    def close(self) -> None:
        """Shut the executors down."""
        for ex in {id(ex): ex for ex in self._executors.values()}.values():
            ex.close()
        self._executors.clear()

    def __enter__(self) -> RolloutLabeler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def label(self, traces: Sequence[Trace], *, store: LabelStore | str | None = None,
              progress: bool = False, report: LabelReport | None = None) -> LabelReport:
        """Label ``traces`` in place. ``store``: a :class:`~prmkit.labelers.LabelStore` or a path
        (rollouts found there are reused, new ones committed as they complete); None keeps them in
        memory only."""
        from prmkit.labelers._engine import run_labeler

        return run_labeler(self, list(traces), store=store, progress=progress, report=report)


# -- the registry -------------------------------------------------------------------------------------

#: name -> "module:attr" of each labeler class.
LABELERS = Registry("labeler", {
    "mc": "prmkit.labelers._mc:MCLabeler",
    "binary": "prmkit.labelers._binary:BinarySearchLabeler",
    "advantage": "prmkit.labelers._advantage:AdvantageLabeler",
    "judge": "prmkit.labelers._judge:JudgeLabeler",
    "consensus": "prmkit.labelers._consensus:ConsensusLabeler",
    "symbolic": "prmkit.labelers._symbolic:SymbolicLabeler",
})


def register_labeler(name: str, target: str) -> None:
    """Register a labeler class as ``"module:attr"`` under ``name``."""
    LABELERS.register(name, target)


def get_labeler(name: str, **kwargs: Any) -> Any:
    """An instance of the labeler registered as ``name``, built with ``kwargs``.

    >>> get_labeler("symbolic").name
    'symbolic'
    """
    return LABELERS.create(name, **kwargs)


def sampling_params(*, k: int, max_new_tokens: int, temperature: float, top_p: float, seed: int | None,
                    stop: Sequence[str] = ()) -> SamplingParams:
    """The rollout sampling parameters (``n`` is set per request by the engine)."""
    return SamplingParams(n=max(1, k), max_new_tokens=max_new_tokens, temperature=temperature,
                          top_p=top_p, stop=tuple(stop), seed=seed)


def check_k(k: int, what: str = "k") -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PrmkitError(f"{what} must be a positive integer, got {k!r}")
    return k


def policy_args(policy: Any) -> Any:
    """How a policy argument is recorded in a labeler's args (the policy's own settings go into
    the provenance once it is started)."""
    from prmkit.labelers._executors import PolicySpec

    if isinstance(policy, PolicySpec):
        return policy.to_dict()
    if isinstance(policy, str):
        return {"name": policy}
    return {"name": getattr(policy, "name", type(policy).__name__),
            "model": getattr(policy, "model_id", None)}


def setup_rollouts(labeler: RolloutLabeler, policy: Any, *, k: int, max_new_tokens: int,
                   temperature: float, top_p: float, seed: int | None, shots: int | None,
                   workers: int | None, ray_address: str | None, answer_method: str,
                   **extra: Any) -> None:
    """Give ``labeler`` its ``"rollout"`` channel and record the arguments common to every
    rollout labeler (``extra``: the labeler's own, recorded first)."""
    from prmkit.data import EQUALITY_METHODS

    check_k(k)
    if answer_method not in EQUALITY_METHODS:
        raise PrmkitError(f"answer_method must be one of {EQUALITY_METHODS}, got {answer_method!r}")
    if shots is not None and shots < 0:
        raise PrmkitError(f"shots must be >= 0, got {shots}")
    labeler.answer_method = answer_method
    labeler.channels["rollout"] = Channel(
        "rollout", policy, sampling_params(k=k, max_new_tokens=max_new_tokens,
                                           temperature=temperature, top_p=top_p, seed=seed),
        workers=workers, ray_address=ray_address, shots=shots)
    labeler.args.update(extra)
    labeler.args.update({"policy": policy_args(policy), "k": k, "max_new_tokens": max_new_tokens,
                         "temperature": temperature, "top_p": top_p, "seed": seed, "shots": shots,
                         "answer_method": answer_method})
