"""Compute precision of training and scoring: ``fp32``, ``bf16`` (autocast) or ``auto``.

``bf16`` is mixed precision: weights, gradients and optimizer state stay float32 and only the
operations ``torch.autocast`` lists (matrix products, attention) run in bfloat16 (prmkit keeps the
head at the label positions in float32, and bf16 training on a CPU its attention too: see
:func:`fp32_attention`). It is used only where
the hardware does bfloat16 natively (an AVX512-BF16 or AMX CPU through oneDNN, or a CUDA GPU that
reports bf16 support); elsewhere a request for it falls back to fp32, and the :class:`Precision` says
so (``note``), so a run's log and result can tell what it really computed in.

>>> Precision("fp32", "fp32").describe()
'fp32'
>>> Precision("bf16", "fp32", "this CPU has no native bfloat16").describe()
'fp32 (bf16 requested: this CPU has no native bfloat16)'
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any

from prmkit.errors import PrmkitError

__all__ = ["PRECISIONS", "Precision", "bf16_problem", "resolve_precision", "fp32_attention", "FP32_SDPA",
           "gqa_attention", "GQA_SDPA"]

#: The values a ``precision`` setting takes.
PRECISIONS = ("auto", "fp32", "bf16")


@dataclass(frozen=True)
class Precision:
    """What a run asked for (``requested``), what it computes in (``used``: fp32 or bf16), and why
    bf16 was not used where it was wanted (``note``: the device's problem with it)."""

    requested: str
    used: str
    note: str | None = None

    def describe(self) -> str:
        """One line for a log: what is used, and what was asked and why it differs."""
        if self.note:
            return f"{self.used} ({self.requested} requested: {self.note})"
        if self.requested == "auto":
            return f"{self.used} (auto)"
        return self.used

    def to_dict(self) -> dict[str, Any]:
        """``{"requested", "used", "note"}``, as recorded in ``prmkit_rm.json``."""
        return asdict(self)

    def autocast(self, device: Any) -> AbstractContextManager:
        """The context to run forward passes in: bfloat16 autocast, or nothing for fp32."""
        if self.used != "bf16":
            return nullcontext()
        import torch

        return torch.autocast(device_type=_device_type(device), dtype=torch.bfloat16)

    @contextmanager
    def inference(self, device: Any) -> Iterator[None]:
        """The context to score in: no autograd, and :meth:`autocast`. In bfloat16 it is
        ``torch.no_grad`` rather than ``torch.inference_mode``: autocast keeps each weight's bfloat16
        copy for the whole context only outside inference mode; inside it, every product casts its
        weight again (a fifth of a bf16 scoring pass of SmolLM2 on a CPU went to those copies). The
        casts are the same either way, so are the scores."""
        import torch

        grad_off = torch.no_grad() if self.used == "bf16" else torch.inference_mode()
        with grad_off, self.autocast(device):
            yield


def _device_type(device: Any) -> str:
    return getattr(device, "type", None) or str(device).split(":")[0]


def bf16_problem(device: Any) -> str | None:
    """Why bfloat16 compute is not available (natively) on ``device``; None when it is.

    On a CPU: oneDNN must be built in and report bf16 support, the CPU must have AVX512-BF16 or AMX
    instructions (without them oneDNN emulates bfloat16, slower than float32), and a small bf16
    matrix product under autocast must match float32 to bfloat16 precision.
    """
    kind = _device_type(device)
    if kind == "cuda":
        import torch

        return None if torch.cuda.is_bf16_supported() else "this GPU has no bfloat16 support"
    if kind == "cpu":
        return _cpu_bf16_problem()
    return f"bf16 is not checked on {kind!r} devices"


@functools.lru_cache(maxsize=1)
def _cpu_bf16_problem() -> str | None:
    import torch

    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN (mkldnn)"
    probe = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    if probe is not None and not probe():
        return "oneDNN reports no bfloat16 support on this CPU"
    native = [getattr(torch.cpu, n, None) for n in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    native = [f for f in native if f is not None]
    if native and not any(f() for f in native):
        return "this CPU has no native bfloat16 (AVX512-BF16 or AMX); emulated bf16 is slower than fp32"
    try:
        g = torch.Generator().manual_seed(0)
        a = torch.randn(16, 64, generator=g)
        b = torch.randn(64, 16, generator=g)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            c = a @ b
        if c.dtype != torch.bfloat16:
            return f"autocast did not compute in bfloat16 (got {c.dtype})"
        err = float((c.float() - a @ b).abs().max())
        if not err < 0.5:  # bf16 inputs: about 3 significant digits of a sum of 64 products of size ~1
            return f"a bfloat16 matrix product is off by {err:.3g}"
    except RuntimeError as e:  # pragma: no cover - depends on the build
        return f"a bfloat16 matrix product failed: {e}"
    return None


def resolve_precision(requested: str, device: Any, *, auto: str,
                      shape: tuple[int, int, int] | None = None) -> Precision:
    """What ``requested`` (``auto`` / ``fp32`` / ``bf16``) computes in on ``device``.

    ``auto`` means the caller's measured default (``auto=``: ``bf16`` or ``fp32``); where bf16 is
    wanted (``bf16``, or ``auto`` resolving to it) and :func:`bf16_problem` finds a problem, the result
    is fp32 with the problem as its ``note``. ``auto`` on a CPU also asks
    :func:`~prmkit.policies.choose_compute` (the rule the ``torch`` policy follows) whether bf16 is
    faster than fp32 at ``shape`` (``(rows, hidden, intermediate)``; default SmolLM2's sizes), and
    computes in fp32, saying why, where it is not.
    """
    if requested not in PRECISIONS:
        raise PrmkitError(f"precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested == "fp32":
        return Precision("fp32", "fp32")
    want = auto if requested == "auto" else "bf16"
    if want == "fp32":
        return Precision(requested, "fp32")
    problem = bf16_problem(device)
    if problem is None and requested == "auto" and _device_type(device) == "cpu":
        from prmkit.policies import choose_compute

        choice = choose_compute("cpu", shape=shape, candidates=("bfloat16",))
        if choice.dtype != "bfloat16":
            problem = choice.reason
    if problem is None:
        return Precision(requested, "bf16")
    return Precision(requested, "fp32", problem)


#: The attention implementation :func:`fp32_attention` switches a model to (transformers' registry name).
FP32_SDPA = "prmkit_sdpa_fp32"


@contextmanager
def fp32_attention(model: Any, enabled: bool = True) -> Iterator[bool]:
    """Inside bf16 autocast, run the model's attention in float32 (yields whether it did).

    Measured on this machine's CPU (2 cores, AMX), SmolLM2-135M, batch 8 x 159 tokens: torch's CPU
    flash-attention backward takes 0.88 s in bfloat16 against 0.27 s in float32 (the forward 0.11 s
    against 0.17 s), so a bf16 training step is faster with float32 attention, which is also the more
    precise. Only models on transformers' ``sdpa`` attention through its AttentionInterface are
    switched (to :data:`FP32_SDPA`: ``sdpa`` on float32 queries, keys and values), and back on exit.
    """
    if not enabled or not _on_sdpa(model):
        yield False
        return
    _register_fp32_sdpa()
    with _attention_switched(model, FP32_SDPA):
        yield True


def _on_sdpa(model: Any) -> bool:
    """Whether ``model`` runs transformers' ``sdpa`` attention and can be switched to another."""
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    return impl == "sdpa" and getattr(model, "_can_set_attn_implementation", lambda: False)()


@contextmanager
def _attention_switched(model: Any, name: str) -> Iterator[None]:
    """``model`` on the registered attention ``name`` inside, back on its own on exit (errors too)."""
    impl = model.config._attn_implementation
    model.set_attn_implementation(name)
    try:
        yield
    finally:
        model.set_attn_implementation(impl)


@functools.lru_cache(maxsize=1)
def _register_fp32_sdpa() -> None:
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    def sdpa_fp32(module, query, key, value, attention_mask, **kwargs):
        with torch.autocast(device_type=query.device.type, enabled=False):
            return sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask,
                                          **kwargs)

    AttentionInterface.register(FP32_SDPA, sdpa_fp32)
    ALL_MASK_ATTENTION_FUNCTIONS.register(FP32_SDPA, sdpa_mask)


#: The attention implementation :func:`gqa_attention` switches a model to (transformers' registry name).
GQA_SDPA = "prmkit_sdpa_gqa"


@contextmanager
def gqa_attention(model: Any, enabled: bool = True) -> Iterator[bool]:
    """On a CPU, run a grouped-query model's attention without repeating its keys and values (yields
    whether it did).

    transformers' ``sdpa`` attention copies each key/value head once per query head it serves
    (``repeat_kv``) whenever there is a mask (a padded batch, a KV cache: every pass of
    :class:`~prmkit.scoring.PrefixCachingScorer`), since CUDA's fused kernels take grouped heads only
    without one. torch's CPU flash-attention kernel takes them with a mask too
    (``scaled_dot_product_attention(..., enable_gqa=True)``) and gives the same bits; measured here
    (2 cores, SmolLM2-135M's 9 query heads over 3 key/value heads, 16 rows of 12 queries over 109
    keys) 0.47 against 0.89 ms a call. The model is switched to :data:`GQA_SDPA` only where it is on
    transformers' ``sdpa`` through its AttentionInterface, on a CPU, with fewer key/value heads than
    query heads; back on exit. Anything the plain kernel call does not cover (a position bias, a
    softcap, attention weights asked for) goes to transformers' own ``sdpa`` unchanged.
    """
    if (not enabled or not _on_sdpa(model) or not _grouped(model)
            or _device_type(_model_device(model)) != "cpu" or not _sdpa_takes_gqa()):
        yield False
        return
    _register_gqa_sdpa()
    with _attention_switched(model, GQA_SDPA):
        yield True


@functools.lru_cache(maxsize=1)
def _sdpa_takes_gqa() -> bool:
    """Whether this torch's ``scaled_dot_product_attention`` takes ``enable_gqa`` with a mask on a CPU
    (torch >= 2.5), tried once on a tiny input."""
    import torch

    q, kv = torch.zeros(1, 2, 1, 4), torch.zeros(1, 1, 2, 4)
    try:
        torch.nn.functional.scaled_dot_product_attention(q, kv, kv, attn_mask=torch.ones(1, 1, 1, 2, dtype=torch.bool),
                                                         enable_gqa=True)
    except (TypeError, RuntimeError):
        return False
    return True


def _grouped(model: Any) -> bool:
    cfg = model.config
    cfg = cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg
    heads = getattr(cfg, "num_attention_heads", None)
    kv = getattr(cfg, "num_key_value_heads", None)
    return bool(heads and kv and kv < heads)


def _model_device(model: Any) -> Any:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return "cpu"


@functools.lru_cache(maxsize=1)
def _register_gqa_sdpa() -> None:
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    def sdpa_gqa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                 **kwargs):
        if (getattr(module, "num_key_value_groups", 1) == 1 or query.device.type != "cpu"
                or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None
                or kwargs.get("output_attentions")):
            return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                          scaling=scaling, is_causal=is_causal, **kwargs)
        # The causal flag as transformers' sdpa decides it: only without a mask, and not for one query.
        q_len = query.shape[2]
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        causal = bool(q_len > 1 and attention_mask is None and causal)
        if causal and key.shape[2] > q_len:  # an empty static cache's prefill: the kernel aligns upper-left
            key, value = key[:, :, :q_len], value[:, :, :q_len]
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=causal,
            enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(GQA_SDPA, sdpa_gqa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GQA_SDPA, sdpa_mask)
