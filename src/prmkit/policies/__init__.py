"""Generation backends behind one interface: ``ct2`` (CTranslate2, the fast local default), ``hf``
(transformers, GGUF included), ``openai_compat``
(vLLM, llama.cpp server, Ollama) and ``scripted`` (deterministic, for tests)."""

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
    register_policy,
)
from prmkit.policies._openai_compat import (
    PolicyConnectionError,
    PolicyHTTPError,
    PolicyResponseError,
    PolicyServerError,
    PolicyTimeoutError,
)
from prmkit.policies._sampling import SampleReport, completion_to_trace, problems_from_file, sample_traces
from prmkit.policies._scripted import ScriptedPolicy

__all__ = ["POLICIES", "Completion", "GenerationRequest", "Policy", "SamplingParams", "apply_stop",
           "default_backend", "derive_seed", "get_policy", "register_policy", "ScriptedPolicy", "PolicyServerError",
           "PolicyConnectionError", "PolicyTimeoutError", "PolicyHTTPError", "PolicyResponseError",
           "SampleReport", "completion_to_trace", "problems_from_file", "sample_traces"]
