"""Generation backends behind one interface: ``torch`` (prmkit's own batched decode loop over
transformers weights, in the dtype :func:`choose_compute` finds fast on this device — the local
default), ``ct2`` (CTranslate2 int8, the default only without torch or transformers), ``hf`` (transformers ``generate``, GGUF included),
``openai_compat``
(vLLM, llama.cpp server, Ollama) and ``scripted`` (deterministic, for tests).

Sampling traces from a policy (the ``prmkit generate`` stage) lives in :mod:`prmkit.generate`."""

from prmkit.policies._base import (
    POLICIES,
    Completion,
    GenerationRequest,
    Policy,
    SamplingParams,
    apply_stop,
    default_backend,
    derive_seed,
    get_policy,
    int8_problem,
    load_policy,
    native_bf16,
    register_policy,
)
from prmkit.policies._cache import (
    CACHE_KINDS,
    CacheEntry,
    cache_entries,
    clear_cache,
    inductor_cache_dir,
    use_inductor_cache,
)
from prmkit.policies._compute import ComputeChoice, CpuInfo, choose_compute, cpu_info
from prmkit.policies._hf import cache_dir, default_policy_model, gguf_cache_dir, load_causal_lm
from prmkit.policies._openai_compat import (
    PolicyConnectionError,
    PolicyHTTPError,
    PolicyResponseError,
    PolicyServerError,
    PolicyTimeoutError,
)
from prmkit.policies._scripted import ScriptedPolicy

__all__ = ["POLICIES", "Completion", "GenerationRequest", "Policy", "SamplingParams", "apply_stop",
           "default_backend", "derive_seed", "get_policy", "register_policy", "ScriptedPolicy", "PolicyServerError",
           "PolicyConnectionError", "PolicyTimeoutError", "PolicyHTTPError", "PolicyResponseError", "load_policy",
           "native_bf16", "int8_problem", "cache_dir", "default_policy_model", "gguf_cache_dir", "load_causal_lm",
           "CACHE_KINDS", "CacheEntry", "cache_entries", "clear_cache", "inductor_cache_dir",
           "use_inductor_cache", "ComputeChoice", "CpuInfo", "choose_compute", "cpu_info"]
