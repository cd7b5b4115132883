"""Where rollouts are generated: inline, in a local process pool, or on Ray actors.

An executor takes one :class:`~prmkit.policies.GenerationRequest` with its
:class:`~prmkit.policies.SamplingParams` at a time and returns a :class:`concurrent.futures.Future` of
``(completions, seconds)``. The engine keeps several in flight and commits each result as it lands.

- ``inline`` (``workers=0``, or a :class:`~prmkit.policies.Policy` *instance*): generation runs in the
  calling process, one request after another.
- ``process`` (a :class:`PolicySpec`, ``workers >= 1``; the default for a spec): a
  :class:`concurrent.futures.ProcessPoolExecutor` whose workers each build the policy once from its
  spec (a loaded model cannot be shipped to a worker; its name and arguments can). Workers start with
  ``spawn``, which is safe whatever threads the parent runs, and exit when the main process dies
  (even by SIGKILL), so no worker outlives it.
- ``ray`` (``ray_address``): ``workers`` Ray actors, each holding the policy built from its spec;
  ``ray.init(address=ray_address)`` joins the cluster (``"auto"``, ``"ray://host:10001"``, or
  ``"local"`` to start one here). Needs ``pip install "prmkit[ray]"``.
"""

from __future__ import annotations

import importlib
import itertools
import multiprocessing
import os
import pickle
import signal
import time
from abc import ABC, abstractmethod
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from prmkit._procs import exit_with_parent
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.policies import (
    POLICIES,
    Completion,
    GenerationRequest,
    Policy,
    SamplingParams,
    get_policy,
)
from prmkit.provenance import redact_secrets

__all__ = ["PolicySpec", "PolicyInfo", "PolicyLike", "Executor", "InlineExecutor", "ProcessExecutor",
           "RayExecutor", "make_executor"]


@dataclass(frozen=True)
class PolicySpec:
    """How to build a policy: a registered backend ``name`` (``"hf"``, ``"openai_compat"``,
    ``"scripted"``) or a ``"module:attr"`` factory, and its keyword arguments. Picklable, so process
    pool workers and Ray actors can build their own copy.

    >>> PolicySpec("scripted", {"completions": ["The answer is 4."]}).build().name
    'scripted'
    """

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def factory(self) -> Any:
        """The class or function that builds the policy (imported, not called: a cheap check)."""
        if ":" in self.name:
            module, _, attr = self.name.partition(":")
            try:
                return getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as e:
                raise PrmkitError(f"cannot load policy factory {self.name!r}: {e}") from None
        return POLICIES.load(self.name)

    def build(self) -> Policy:
        if ":" in self.name:
            return self.factory()(**self.kwargs)
        return get_policy(self.name, **self.kwargs)

    def to_dict(self) -> dict[str, Any]:
        """How the spec is recorded (a labeler's ``args``): secrets such as ``api_key`` redacted."""
        return redact_secrets({"name": self.name,
                               "kwargs": {k: (v if isinstance(v, (str, int, float, bool, type(None), list,
                                                                  dict)) else repr(v))
                                          for k, v in self.kwargs.items()}})

    def __repr__(self) -> str:  # what an error message or a log shows: never a secret
        return f"PolicySpec({self.name!r}, {redact_secrets(dict(self.kwargs))!r})"


#: A policy argument: a built policy (runs inline), a spec, or a registered backend name.
PolicyLike = Policy | PolicySpec | str


@dataclass(frozen=True)
class PolicyInfo:
    """What a started executor's policy says about itself (for provenance and prompts)."""

    name: str
    model_id: str
    describe: dict[str, Any]
    prompt_shots: int | None = None
    #: The policy's ``reproducible`` attribute: True when a request gets the same completions
    #: whatever else is asked (a resumed run equals an uninterrupted one), False when the backend
    #: cannot promise that, None when it does not say.
    reproducible: bool | None = None


def _info(policy: Policy) -> PolicyInfo:
    return PolicyInfo(getattr(policy, "name", type(policy).__name__),
                      str(getattr(policy, "model_id", "unknown")), dict(policy.describe()),
                      getattr(policy, "prompt_shots", None), getattr(policy, "reproducible", None))


def _timed_generate(policy: Policy, request: GenerationRequest, params: SamplingParams
                    ) -> tuple[list[Completion], float]:
    t0 = time.perf_counter()
    out = policy.generate([request], params)
    if len(out) != 1 or len(out[0]) != params.n:
        raise PrmkitError(f"policy {getattr(policy, 'name', policy)!r} returned "
                          f"{[len(r) for r in out]} completions for 1 request of n={params.n}")
    return out[0], time.perf_counter() - t0


class Executor(ABC):
    """The executor interface (see the module docstring)."""

    kind = ""

    @abstractmethod
    def info(self) -> PolicyInfo:
        """The policy's description (part of the label store's run key)."""

    @abstractmethod
    def submit(self, request: GenerationRequest, params: SamplingParams) -> Future:
        """Start one generation request; the future yields its completions."""

    @property
    def capacity(self) -> int:
        """How many requests are worth keeping in flight."""
        return 1

    def flush(self) -> None:  # noqa: B027 - optional hook: most executors start work on submit
        """Start whatever :meth:`submit` only queued (called before the engine waits)."""

    def close(self) -> None:  # noqa: B027 - optional hook: most executors hold nothing to release
        """Release workers or actors (nothing by default)."""


class InlineExecutor(Executor):
    """Generates in the calling process.

    ``batch`` requests are kept in flight and generated together by one ``policy.generate`` call at
    :meth:`flush` (a local model decodes many rows for about the price of one); the default is the
    policy's ``request_batch`` attribute, else 1 (then :meth:`submit` returns a finished future).
    """

    kind = "inline"

    def __init__(self, policy: Policy, batch: int | None = None) -> None:
        self.policy = policy
        self.batch = max(1, batch if batch is not None else int(getattr(policy, "request_batch", 1)))
        self._queued: list[tuple[GenerationRequest, SamplingParams, Future]] = []

    def info(self) -> PolicyInfo:
        return _info(self.policy)

    @property
    def capacity(self) -> int:
        return self.batch

    def submit(self, request: GenerationRequest, params: SamplingParams) -> Future:
        fut: Future = Future()
        self._queued.append((request, params, fut))
        if self.batch == 1:
            self.flush()
        return fut

    def flush(self) -> None:
        queued, self._queued = self._queued, []
        groups: dict[SamplingParams, list[tuple[GenerationRequest, Future]]] = {}
        for request, params, fut in queued:
            groups.setdefault(params, []).append((request, fut))
        for params, items in groups.items():
            t0 = time.perf_counter()
            try:
                out = self.policy.generate([r for r, _ in items], params)
                if len(out) != len(items) or any(len(row) != params.n for row in out):
                    raise PrmkitError(f"policy {getattr(self.policy, 'name', self.policy)!r} returned "
                                      f"{[len(r) for r in out]} completions for {len(items)} requests "
                                      f"of n={params.n}")
            except BaseException as e:  # delivered through the futures, as a pool would
                for _, fut in items:
                    fut.set_exception(e)
                continue
            per = (time.perf_counter() - t0) / len(items)
            for (_, fut), row in zip(items, out, strict=True):
                fut.set_result((row, per))


# -- process pool ---------------------------------------------------------------------------------------

_WORKER_POLICY: Policy | None = None
_WORKER_ERROR: str | None = None


def _exit_quietly(signum: int, frame: object) -> None:
    os._exit(128 + signum)


def _worker_init(spec: PolicySpec, parent: int | None = None) -> None:
    # An exception here would only break the pool ("terminated abruptly"); keep it to report.
    global _WORKER_POLICY, _WORKER_ERROR
    # Ctrl-C reaches the whole foreground process group: the main process reports it in one line and
    # shuts the pool down; a worker just ends, without a traceback of its own.
    signal.signal(signal.SIGINT, _exit_quietly)
    if parent is not None:  # the pool starts its workers from the thread that first submits to it, in
        exit_with_parent(parent)  # prmkit the thread that runs the labelling, which outlives the pool
    try:
        _WORKER_POLICY = spec.build()
    except Exception as e:
        _WORKER_ERROR = str(e) if isinstance(e, PrmkitError) else f"{type(e).__name__}: {e}"


def _worker_policy() -> Policy:
    if _WORKER_POLICY is None:
        raise PrmkitError(f"the policy failed to start in a worker process: {_WORKER_ERROR}")
    return _WORKER_POLICY


def _worker_info() -> PolicyInfo:
    return _info(_worker_policy())


def _worker_generate(request: GenerationRequest, params: SamplingParams
                     ) -> tuple[list[Completion], float]:
    return _timed_generate(_worker_policy(), request, params)


class ProcessExecutor(Executor):
    """A local process pool; each of ``workers`` processes builds the policy once from ``spec``."""

    kind = "process"

    def __init__(self, spec: PolicySpec, workers: int = 1) -> None:
        if workers < 1:
            raise PrmkitError(f"workers must be >= 1 for a process pool, got {workers}")
        spec.factory()  # an unknown backend fails here, not in every worker
        try:
            pickle.dumps(spec)
        except Exception as e:
            raise PrmkitError(f"policy {spec.name!r} cannot be sent to worker processes ({e}); "
                              "use workers=0 to generate in this process") from None
        self.spec = spec
        self.workers = workers
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_worker_init, initargs=(spec, os.getpid()))
        self._info: PolicyInfo | None = None

    def info(self) -> PolicyInfo:
        if self._info is None:
            try:
                self._info = self._pool.submit(_worker_info).result()
            except PrmkitError:
                raise
            except Exception as e:
                raise PrmkitError(f"policy {self.spec.name!r} failed to start in a worker "
                                  f"process: {type(e).__name__}: {e}") from None
        return self._info

    def submit(self, request: GenerationRequest, params: SamplingParams) -> Future:
        return self._pool.submit(_worker_generate, request, params)

    @property
    def capacity(self) -> int:
        return 2 * self.workers

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# -- Ray ------------------------------------------------------------------------------------------------

class _PolicyActor:
    """A Ray actor holding one policy (wrapped with ``ray.remote`` when Ray is there)."""

    def __init__(self, spec: PolicySpec) -> None:
        self.policy = spec.build()

    def info(self) -> PolicyInfo:
        return _info(self.policy)

    def generate(self, request: GenerationRequest, params: SamplingParams
                 ) -> tuple[list[Completion], float]:
        return _timed_generate(self.policy, request, params)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "fanning rollouts out over Ray") from None
    return ray


class RayExecutor(Executor):
    """``workers`` Ray actors, each building the policy from ``spec``; requests go round robin."""

    kind = "ray"

    def __init__(self, spec: PolicySpec, address: str, workers: int = 1,
                 actor_options: dict[str, Any] | None = None) -> None:
        ray = _ray()
        if workers < 1:
            raise PrmkitError(f"workers must be >= 1 for Ray, got {workers}")
        spec.factory()
        self._owns = False
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False)
            self._owns = True
        actor = ray.remote(**(actor_options or {"num_cpus": 1}))(_PolicyActor)
        self.actors = [actor.remote(spec) for _ in range(workers)]
        self._next = itertools.cycle(self.actors)
        self.spec = spec
        self.workers = workers
        self._info: PolicyInfo | None = None

    def info(self) -> PolicyInfo:
        if self._info is None:
            self._info = _ray().get(self.actors[0].info.remote())
        return self._info

    def submit(self, request: GenerationRequest, params: SamplingParams) -> Future:
        return next(self._next).generate.remote(request, params).future()

    @property
    def capacity(self) -> int:
        return 2 * self.workers

    def close(self) -> None:
        ray = _ray()
        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._owns:
            ray.shutdown()


def make_executor(policy: PolicyLike, *, workers: int | None = None,
                  ray_address: str | None = None) -> Executor:
    """The executor for a policy argument.

    A built policy runs inline (``workers`` must then be None or 0: a loaded model cannot be sent to
    other processes — pass a :class:`PolicySpec` instead). A spec or a backend name runs in a process
    pool of ``workers`` (default 1) or, with ``ray_address``, on ``workers`` Ray actors; ``workers=0``
    runs it inline.
    """
    if isinstance(policy, str):
        policy = PolicySpec(policy)
    if not isinstance(policy, PolicySpec):
        if ray_address is not None or (workers or 0) > 0:
            raise PrmkitError("a built policy can only run in this process; pass a PolicySpec "
                              "(backend name and arguments) to use worker processes or Ray")
        return InlineExecutor(policy)
    if ray_address is not None:
        return RayExecutor(policy, ray_address, workers or 1)
    if workers == 0:
        return InlineExecutor(policy.build())
    return ProcessExecutor(policy, workers or 1)
