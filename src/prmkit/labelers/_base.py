"""The labeler interface, the base class of the labelers that generate, and the labeler registry.

A :class:`RolloutLabeler` gives the engine (:mod:`prmkit.labelers._engine`) one *plan* per trace (see
:mod:`prmkit.labelers._plan`) and its generation *channels* (a policy and how it samples); the engine
does the rest: store look-ups, fan-out, commits, labels and accounting. A new labeler is one file: a
subclass with ``name`` and :meth:`~RolloutLabeler.plan`, registered in :data:`LABELERS` (or through
the ``prmkit.labelers`` entry-point group, see :mod:`prmkit._registry`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.labelers._engine import run_labeler
from prmkit.labelers._executors import Executor, PolicySpec, make_executor
from prmkit.labelers._plan import (
    Channel,
    LabelReport,
    Plan,
    PlanResult,
    Rollout,
    cost_of,
    prefix_text,
    rollout_key,
)
from prmkit.labelers._prompts import rollout_messages
from prmkit.policies import GenerationRequest, SamplingParams
from prmkit.trace import StepLabel, Trace, now

if TYPE_CHECKING:
    from prmkit.labelers._store import LabelStore

__all__ = [
    "Labeler", "RolloutLabeler", "LABELERS", "get_labeler", "register_labeler", "sampling_params",
    "check_k", "policy_args", "setup_rollouts",
]


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


# -- the base class of rollout labelers ----------------------------------------------------------------

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
    #: ``prmkit label`` options that feed an ``__init__`` parameter of another name (parameter ->
    #: option, e.g. a judge's ``max_new_tokens`` from ``judge_max_new_tokens``); every other option
    #: goes to the parameter of its own name, if there is one (see
    #: :func:`~prmkit.labelers.build_labeler`).
    option_names: ClassVar[dict[str, str]] = {}

    def __init__(self) -> None:
        self.args: dict[str, Any] = {}
        self.channels: dict[str, Channel] = {}
        self._executors: dict[str, Executor] = {}
        self.answer_method = "auto"

    # -- to implement ------------------------------------------------------------------------------
    @abstractmethod
    def plan(self, trace: Trace) -> Plan | PlanResult:
        """The plan that labels ``trace`` (see :mod:`prmkit.labelers._plan`); a labeler that needs
        no generation may return the :class:`~prmkit.labelers.PlanResult` directly."""

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
        prompt (see :func:`~prmkit.labelers.rollout_messages`) with the first ``prefix``
        steps as the assistant's text so far, keyed ``"<trace id>@<prefix>"``."""
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

    def start(self) -> dict[str, Executor]:
        """Start the executors of every channel (done by :meth:`label` when needed); returns them by
        channel name."""
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
        return dict(self._executors)

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
        return run_labeler(self, list(traces), store=store, progress=progress, report=report)


# -- the registry -------------------------------------------------------------------------------------

#: name -> "module:attr" of each labeler class.
LABELERS = Registry("labeler", {
    "mc": "prmkit.labelers._mc:MCLabeler",
    "binary": "prmkit.labelers._binary:BinarySearchLabeler",
    "omegaprm": "prmkit.labelers._omegaprm:OmegaPRMLabeler",
    "advantage": "prmkit.labelers._advantage:AdvantageLabeler",
    "judge": "prmkit.labelers._judge:JudgeLabeler",
    "consensus": "prmkit.labelers._consensus:ConsensusLabeler",
    "symbolic": "prmkit.labelers._symbolic:SymbolicLabeler",
    "spec": "prmkit.labelers._spec:SpecJudgeLabeler",
}, group="prmkit.labelers")


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
