"""The policy interface: sample N completions per prompt, or continue from a prefix of steps.

Every backend (``hf``, ``openai_compat``, ``scripted``) implements one method over a batch of
requests, :meth:`Policy.generate`. A request is a chat prompt plus an optional ``prefix``: text the
assistant has already written (the steps so far), which the completion continues. Sampling N
solutions to a problem is a request with an empty prefix and ``params.n = N``; a Monte Carlo rollout
or a search expansion is a request whose prefix holds the steps kept so far.

Backends are found by name in :data:`POLICIES` (``"name" -> "module:attr"``, imported on first use,
so a missing optional dependency only matters for the backend that needs it).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from prmkit._registry import Registry
from prmkit.errors import PrmkitError

__all__ = ["SamplingParams", "GenerationRequest", "Completion", "Policy", "POLICIES", "get_policy",
           "register_policy", "derive_seed", "apply_stop", "default_backend", "load_policy", "LOCAL_BACKENDS",
           "native_bf16", "int8_problem"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``n`` completions per request; ``stop`` strings end a completion (the stop string
    is not part of the returned text); ``seed`` makes sampling repeatable (backends derive one seed per
    request from it, so a request's completions do not depend on what else is in the batch)."""

    n: int = 1
    max_new_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = 0

    def __post_init__(self) -> None:
        errors = []
        if self.n < 1:
            errors.append(f"n must be >= 1, got {self.n}")
        if self.max_new_tokens < 1:
            errors.append(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            errors.append(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            errors.append(f"top_p must be in (0, 1], got {self.top_p}")
        if errors:
            raise PrmkitError("sampling parameters: " + "; ".join(errors))
        object.__setattr__(self, "stop", tuple(self.stop))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass
class GenerationRequest:
    """A chat prompt (OpenAI-style ``messages``) and the assistant text written so far (``prefix``).

    ``key`` identifies the request for seeding (say ``"arith-0-17"`` or ``"arith-0-17#s3/step2"``):
    the same key and seed give the same completions whatever batch the request is in.
    ``tools``: OpenAI tool schemas for a backend with tool calling (``openai_compat`` sends them and
    returns the model's calls in ``Completion.meta["tool_calls"]``); other backends ignore them.
    """

    messages: list[dict[str, Any]]
    prefix: str = ""
    key: str = ""
    tools: list[dict[str, Any]] | None = None


@dataclass
class Completion:
    """One sampled continuation: ``text`` (after the prefix, stop string removed), why it ended
    (``"stop"``: end of sequence or a stop string; ``"length"``: ``max_new_tokens`` reached), and the
    token counts it cost."""

    text: str
    finish_reason: str = "stop"
    num_tokens: int = 0
    prompt_tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Policy(Protocol):
    """A generation backend."""

    #: Registry name of the backend ("hf", "openai_compat", "scripted").
    name: str
    #: What produced the text, for provenance (a path, hub id or served model name).
    model_id: str

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        """``params.n`` completions for each request, in request order."""
        ...

    def describe(self) -> dict[str, Any]:
        """The backend's settings, recorded in every trace's provenance."""
        ...


def derive_seed(seed: int | None, key: str, index: int = 0) -> int | None:
    """A per-request seed from a base seed, the request key and a sample index (stable across runs
    and platforms, unlike ``hash()``)."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}:{key}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def apply_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` at the earliest stop string; returns ``(text, stopped)``."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


#: name -> "module:attr" of the policy class.
POLICIES = Registry("policy backend", {
    "hf": "prmkit.policies._hf:HFPolicy",
    "ct2": "prmkit.policies._ct2:CT2Policy",
    "torch": "prmkit.policies._torch:TorchPolicy",
    "openai_compat": "prmkit.policies._openai_compat:OpenAICompatPolicy",
    "scripted": "prmkit.policies._scripted:ScriptedPolicy",
}, group="prmkit.policies")


def native_bf16(device: str = "cpu") -> bool:
    """Whether ``device`` computes bfloat16 matrix products natively: on CPU, the AVX512-BF16 or AMX
    instructions (oneDNN's own bf16 check also passes on plain AVX-512, which only emulates bfloat16);
    on CUDA, ``torch.cuda.is_bf16_supported``. False without torch or where torch cannot tell."""
    try:
        import torch
    except ImportError:
        return False
    try:
        if device.startswith("cuda"):
            return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return False


def int8_problem(device: Any = "cpu") -> str | None:
    """Why int8 matrix products (``torch._int_mm``, int32 sums) cannot serve on ``device``; None when
    they can: a CPU whose ``_int_mm`` gives exact integer sums on a small product. The decode loop's
    int8 products (``prmkit.policies``' ``torch`` backend) and int8 training (``precision=int8``) both
    ask it. GPUs are not handled (``_int_mm`` there has other shape rules)."""
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    if kind != "cpu":
        return f"int8 products are implemented for CPUs only, not {kind!r} devices"
    return _cpu_int8_problem()


@functools.lru_cache(maxsize=1)
def _cpu_int8_problem() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    try:
        g = torch.Generator().manual_seed(0)
        a = torch.randint(-127, 128, (5, 64), generator=g, dtype=torch.int8)
        b = torch.randint(-127, 128, (96, 64), generator=g, dtype=torch.int8)
        if not torch.equal(torch._int_mm(a, b.t()), (a.long() @ b.long().t()).int()):
            return "torch._int_mm does not give exact integer sums here"
    except (AttributeError, RuntimeError) as e:
        return f"torch._int_mm is not available here ({e})"
    return None


def default_backend() -> str:
    """The local backend used when none is named: ``torch`` (prmkit's decode loop, in the dtype
    :func:`~prmkit.policies.choose_compute` finds fast on this device) where torch and transformers
    are installed; else ``ct2`` (CTranslate2 int8) where ``ctranslate2`` is installed; else ``hf``.

    In ``benchmarks/generate.py``: about ×2-2.7 ``hf`` in bfloat16 on CPUs with AVX512-BF16 or AMX,
    ×3 in int8 on an AVX-512 VNNI CPU without them (where ``ct2`` ran at ×0.7-0.8 ``hf``); on an
    AVX2-only CPU it runs float32 (``docs/benchmarks.md`` has each CPU class measured)."""
    import importlib.util

    if all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers")):
        return "torch"
    return "ct2" if importlib.util.find_spec("ctranslate2") is not None else "hf"


def register_policy(name: str, target: str) -> None:
    """Register a backend class as ``"module:attr"`` under ``name``."""
    POLICIES.register(name, target)


def get_policy(name: str, **kwargs: Any) -> Policy:
    """An instance of the backend registered as ``name``, built with ``kwargs``."""
    return POLICIES.create(name, **kwargs)


#: Backends that decode locally in batches (they take ``batch_size`` and ``progress``).
LOCAL_BACKENDS = ("hf", "ct2", "torch")


def load_policy(name: str | None = None, options: dict[str, Any] | None = None, *,
                batch_size: int | None = None) -> Policy:
    """The backend a command line names: ``name`` (None: :func:`default_backend`) built with
    ``options`` (``-p KEY=VALUE``); local backends get ``batch_size`` where given and no per-batch
    progress bar (the stage shows its own)."""
    name = name or default_backend()
    kwargs = dict(options or {})
    if name in LOCAL_BACKENDS:
        if batch_size is not None:
            kwargs.setdefault("batch_size", batch_size)
        kwargs.setdefault("progress", False)
    return get_policy(name, **kwargs)
