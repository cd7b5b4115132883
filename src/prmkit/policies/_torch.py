"""``torch``: a transformers model decoded by prmkit's own batched loop, in bfloat16 where the
hardware computes it natively.

Why a loop of our own. On a 2-core CPU, ``model.generate`` spends more than half of each decode step
outside the matrix products that must be done: building masks and position ids, growing the KV cache
by concatenation, the attention dispatcher, per-step Python in the generation utilities. With the
weights in bfloat16 (about twice the fp32 matrix throughput on a CPU with AVX512-BF16 or AMX) those
overheads are most of the time. This backend loads the model with transformers (any folder, hub id or
GGUF file ``hf`` takes, adapters merged the same way), runs each request's prompt once (through
transformers, or with prepacked bfloat16 weights through the loop's own products,
:meth:`_Plan.prefill`, giving transformers' cache bit for bit), and then decodes batches of whole
requests (:meth:`TorchPolicy._chunks`) with:

- a single fused q/k/v product and a single fused gate/up product per layer, and in bfloat16 on a
  CPU every weight reordered once into oneDNN's blocked layout (:func:`_linear_kernel`: ``F.linear``
  reorders it on every call; the products give the same bits and run 1.2-2x faster);
- a preallocated float32 KV cache (no concatenation; on a CPU, batched products over slices of a
  bfloat16 cache copy the slices first, of a float32 one they do not), in two parts (:class:`_KV`):
  each request's prompt stored once for its N rows and read once per step for all of them, and each
  row's new tokens; grouped-query attention per key/value head without repeating keys. On a CPU,
  reading the cache is most of attention's cost, so the shared prompt saves most of it;
- rows that have all ended leave the batch by whole requests, once they are a quarter of it;
- the same rotary embedding module, RMSNorm arithmetic and per-row seeded sampling as
  ``hf`` — so at float32 it produces ``hf``'s completions (checked by the tests), and a request's
  completions do not depend on the rest of its batch (up to floating-point ties, as with ``hf``).

Supported architectures: Llama-style decoders (``llama``, ``qwen2``, ``mistral`` within its sliding
window) — the model family of the embedded default and most small open models. Anything else falls
back to ``model.generate`` (``describe()["engine"]`` says which ran).

``dtype="auto"`` (the default) is what :func:`~prmkit.policies.choose_compute` finds fast here: on a
CUDA device bfloat16 where it has it; on a CPU bfloat16 where it computes it natively (AVX512-BF16
or AMX) and int8 where the loop can run the model (through ``torch._int_mm`` with VNNI or AMX,
through fbgemm's product on an AVX2-only CPU, where ``_int_mm`` is 5-50x slower than float32), each
only where a micro-probe at the model's shapes shows it beating float32; float32 otherwise.
``describe()["compute"]`` says what was chosen and why. bfloat16 and int8 change the logits by rounding, so sampled texts differ
from float32's; ``benchmarks/generate.py --quality`` compares the pass@1 they reach.

``dtype="int8"`` (a CPU): the loop's products in int8 (:func:`_int8_kernel`: weights quantized once
per output channel, each input row when it comes, integer sums by ``torch._int_mm``), with
SmoothQuant's factors from a fixed calibration text folded into the weights first
(:meth:`_Plan._smooth`); everything else in float32, prompts through the same products. The LM
head's product goes through oneDNN's own int8 linear (:func:`_int8_head_kernel`) where that gives
the same integer sums. A decode step reads a quarter of float32's weight bytes; on 2 cores without
AMX the int8 products run at 0.25-0.57 TMAC/s, bound by the kernel, not by memory, and at 16 rows
most of a step is small operations. Rows stay independent of their batch (every scale is a row's or
a channel's, integer sums are exact). ``int8_kernel``: ``auto`` (``int_mm`` where the CPU has int8
dot products, else ``fbgemm``), or either by name; ``fbgemm``
(:func:`~prmkit.policies._int8._int8_fbgemm_kernel`) quantizes weights to 7 bits so that its 16-bit
pair sums cannot overflow, and its products, its LM head's included, run eagerly (compiled they ran
slower: 227 against 336 tokens/s on SmolLM2, 2 AVX2 cores).

``compile="auto"`` (the default) runs the layers of the int8 loop, and of the float32 loop on a CPU,
through ``torch.compile`` (inductor) for models of at least ``COMPILE_MIN_PARAMETERS`` parameters
(:meth:`_Plan.compile`): it fuses those small operations, at the cost of seconds of compiling once a
process. The norms' sums then run in another order, so a compiled decode's logits differ from the
eager loop's by rounding (and now and then an int8 rounding of an activation); rows stay independent
of their batch (tested). On an AVX2-only CPU asked for float32, the compiled float32 loop decodes
SmolLM2 at 16 rows about 1.3x faster than the eager one (95-106 against 73-76 tokens/s on 2 cores),
where the eager one only tied ``hf``. Below that size, and where the loop is eager,
float32 gives ``hf``'s completions. ``compile=False`` keeps the eager loop; ``compile=True``
compiles whatever the dtype; torch's own ``TORCH_COMPILE_DISABLE=1`` keeps it eager whatever ``compile``
says (``describe()`` then has ``compiled_off``).
"""

from __future__ import annotations

import functools
import itertools
import types
import warnings
from pathlib import Path
from typing import Any

import prmkit.policies._compute as _compute
from prmkit.policies._base import SamplingParams
from prmkit.policies._cache import use_inductor_cache
from prmkit.policies._compute import ComputeChoice, choose_compute
from prmkit.policies._hf import HFPolicy, _RowSampler, _torch, cache_dir, weights_key
from prmkit.policies._int8 import (
    INT8_KERNELS,
    _int8_fbgemm_kernel,
    _int8_head_kernel,
    _int8_kernel,
    int8_kernel_for,
)

__all__ = ["TorchPolicy", "decode_support"]

#: ``config.model_type`` values the decode loop implements.
SUPPORTED = ("llama", "qwen2", "mistral")

#: ``compile="auto"`` compiles the int8 loop's layers (:meth:`_Plan.compile`) for models of at least
#: this many parameters: compiling costs seconds once a process, which a model the size of the
#: embedded default's (135M) repays within its first batches, and a tiny one never does.
COMPILE_MIN_PARAMETERS = 50_000_000

#: The calibration text of ``dtype="int8"`` (see :meth:`TorchPolicy._calibration_ids`).
CALIBRATION = (
    "The quick brown fox jumps over the lazy dog. In 1905 Einstein published four papers. "
    "Step 1: 12 * 7 = 84. Step 2: 84 - 19 = 65. So the answer is 65. A train leaves at 3 pm and travels "
    "60 miles per hour; how far does it go in 2.5 hours? It goes 150 miles. def f(x): return x ** 2 + 1. "
    "Paris is the capital of France, and the Seine flows through it.")


def _ranges_path(lm: Any, source: str | None, calibration: list[int]) -> Path | None:
    """Where SmoothQuant's activation ranges (:meth:`_Plan._smooth`) for the model whose weights
    ``source`` names (a key of its bytes: :func:`~prmkit.policies._hf.weights_key`; None: not
    cached) are kept: ``cache_dir()/smoothquant/<source>-<key>.safetensors``, the key a hash of the
    calibration tokens, the device, the dtype, and this CPU, thread count and torch version (a float
    sum's order, and so a range's last bit, can depend on each). A calibration pass costs SmolLM2 about
    3 s on 2 cores; reading the ranges back, milliseconds, and the same int8 weights."""
    import hashlib

    if source is None:
        return None
    raw = [calibration, str(lm.device), str(lm.dtype), _compute.cpu_info().key()]
    key = hashlib.sha256(repr(raw).encode()).hexdigest()[:16]
    return cache_dir() / "smoothquant" / f"{source}-{key}.safetensors"


def _read_ranges(path: Path | None, names: set[str], torch: Any) -> dict[str, Any] | None:
    """The ranges kept at ``path`` if it holds exactly ``names`` (else None: computed again)."""
    if path is None or not path.is_file():
        return None
    try:
        from safetensors.torch import load_file

        kept = load_file(str(path))
    except Exception:  # noqa: BLE001 - a damaged entry costs one calibration pass, nothing else
        return None
    return kept if set(kept) == names and all(v.dtype == torch.float32 for v in kept.values()) else None


def _keep_ranges(path: Path, ranges: dict[str, Any]) -> None:
    """Save ranges for the next process (best effort: a read-only cache costs it a calibration pass)."""
    from safetensors.torch import save

    from prmkit._durable import write_bytes_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_file(path, save({k: v.detach().cpu().contiguous() for k, v in ranges.items()}))
    except OSError:
        pass


def decode_support(model: Any) -> str | None:
    """None if the decode loop can run ``model``, else why not (the backend then uses
    ``model.generate``)."""
    cfg = model.config
    kind = getattr(cfg, "model_type", None)
    if kind not in SUPPORTED:
        return f"model type {kind!r} is not one of {', '.join(SUPPORTED)}"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act!r} (only silu)"
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(inner, "rotary_emb"):
        return "not a decoder with .model.layers and .model.rotary_emb"
    for layer in inner.layers:
        at = layer.self_attn
        if any(hasattr(at, n) for n in ("q_norm", "k_norm")):
            return "attention with q/k norms"
    return None


class _Plan:
    """The decoder's weights arranged for the loop: fused q/k/v and gate/up matrices per layer."""

    def __init__(self, lm: Any, torch: Any, int8: bool = False, calibration: list[int] | None = None,
                 kernel: str = "int_mm", ranges: Path | None = None) -> None:
        cfg, inner = lm.config, lm.model
        #: Where SmoothQuant's activation ranges are kept (:func:`_ranges_path`), or None.
        self.ranges_path = ranges
        #: Whether they came from there instead of a calibration pass.
        self.ranges_cached = False
        self.nh = cfg.num_attention_heads
        self.kvh = getattr(cfg, "num_key_value_heads", None) or self.nh
        self.hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.nh
        self.eps = cfg.rms_norm_eps
        self.scale = self.hd ** -0.5
        self.torch = torch
        self.compiled = None  # the compiled layers (:meth:`_Plan.compile`), or None: eager
        self.layers_per_call = 1
        window = getattr(cfg, "sliding_window", None)
        self.window = window if (window and getattr(cfg, "use_sliding_window", True)) else None
        self.embed = inner.embed_tokens.weight
        self.rotary = inner.rotary_emb
        self.norm = inner.norm.weight
        if not int8:
            self.linear, pack = _linear_kernel(self.embed, torch)
        elif kernel == "fbgemm":
            self.linear, pack = _int8_fbgemm_kernel(torch)
            if pack is None:
                raise RuntimeError("int8_kernel='fbgemm' needs torch's fbgemm quantized engine (x86 CPUs)")
        else:
            self.linear, pack = _int8_kernel(torch)
            if pack is None:
                raise RuntimeError("int8 products need torch._int_mm on this device (torch >= 2.2, CPU)")
        self.int8 = int8
        #: The int8 kernel (:data:`INT8_KERNELS`), or None: float products.
        self.kernel = kernel if int8 else None
        self.packed = pack is not None  # weights prepared for the loop's own products
        pack = pack or (lambda w: w)
        self.splits = [(self.nh + self.kvh) * self.hd, self.kvh * self.hd]  # q and k together, then v

        def cat_bias(*mods):
            if all(getattr(m, "bias", None) is None for m in mods):
                return None
            return torch.cat([m.bias if m.bias is not None else
                              torch.zeros(m.weight.shape[0], dtype=m.weight.dtype, device=m.weight.device)
                              for m in mods])

        def packed(n1, wqkv, bqkv, wo, bo, n2, wgu, bgu, wd, bd):
            return n1, pack(wqkv), bqkv, pack(wo), bo, n2, pack(wgu), bgu, pack(wd), bd

        # Smoothing needs every layer's float weights; otherwise each layer is packed as it comes
        # (its fused copies freed at once: a large model's weights are not held twice).
        self.smoothed = bool(int8 and calibration)
        self.layers = []
        with torch.no_grad():
            for layer in inner.layers:
                at, mlp = layer.self_attn, layer.mlp
                qkv = (at.q_proj, at.k_proj, at.v_proj)
                gu = (mlp.gate_proj, mlp.up_proj)
                entry = (
                    layer.input_layernorm.weight, torch.cat([m.weight for m in qkv]), cat_bias(*qkv),
                    at.o_proj.weight, at.o_proj.bias,
                    layer.post_attention_layernorm.weight, torch.cat([m.weight for m in gu]), cat_bias(*gu),
                    mlp.down_proj.weight, mlp.down_proj.bias,
                )
                self.layers.append(entry if self.smoothed else packed(*entry))
            head = lm.get_output_embeddings().weight
            if self.smoothed:
                raw, self.norm, head = self._smooth(lm, self.layers, head, calibration, torch)
                self.layers = [packed(*entry) for entry in raw]
            # The LM head, int8: oneDNN's prepacked u8 x s8 product where it gives int8's exact sums
            # (2.4x faster than ``_int_mm`` and its int32 -> float32 scaling for 16 x 49,152 outputs);
            # fbgemm's product serves the head as it serves the layers.
            hlinear, hpack = _int8_head_kernel(torch) if int8 and kernel == "int_mm" else (None, None)
            self.head_linear = hlinear or self.linear
            self.lm_head = (hpack or pack)(head)
        self.layer = _layer_function(torch, self.linear, self.scale, self.eps, self.nh, self.kvh, self.hd,
                                     tuple(self.splits))

    def _smooth(self, lm: Any, raw: list[tuple[Any, ...]], head: Any, ids: list[int], torch: Any,
                alpha: float = 0.5) -> tuple[list[tuple[Any, ...]], Any, Any]:
        """SmoothQuant (Xiao et al., 2023) for the int8 products: an input channel's outliers are
        moved into the weights that read it. Each product's input channel ``j`` is divided by
        ``s_j = max|x_j| ** alpha / max|W[:, j]| ** (1 - alpha)`` (``max|x_j|`` over the
        calibration tokens ``ids`` run through the float32 model) and the weight's column ``j``
        multiplied by it, folded into what makes the input: the RMSNorm weights before q/k/v,
        gate/up and the LM head; the value rows before the output product (one factor per value
        channel, shared by the query heads that read it); the up rows before the down product. In
        float arithmetic the model is unchanged; quantized per input row, a few large channels no
        longer flatten the rest to zero. On SmolLM2 it cut the KL divergence of the int8 logits from
        float32's three- to fourfold (README, ``torch`` backend)."""
        stats: dict[Any, Any] = {}
        inner = lm.model
        watch = [(("head",), lm.get_output_embeddings())]
        for i, layer in enumerate(inner.layers):
            watch += [((i, "qkv"), layer.self_attn.q_proj), ((i, "o"), layer.self_attn.o_proj),
                      ((i, "gu"), layer.mlp.gate_proj), ((i, "d"), layer.mlp.down_proj)]

        def hook(key: Any) -> Any:
            def seen(module: Any, args: Any, out: Any) -> None:
                x = args[0].detach()
                top = x.abs().reshape(-1, x.shape[-1]).amax(0).float()
                stats[key] = torch.maximum(stats[key], top) if key in stats else top
            return seen

        names = {key: ".".join(map(str, key)) for key, _ in watch}
        kept = _read_ranges(self.ranges_path, set(names.values()), torch)
        if kept is not None:
            stats = {key: kept[name].to(self.embed.device) for key, name in names.items()}
            self.ranges_cached = True
        else:
            hooks = [m.register_forward_hook(hook(key)) for key, m in watch]
            try:
                lm(torch.tensor([ids], device=self.embed.device))
            finally:
                for h in hooks:
                    h.remove()
            if self.ranges_path is not None:
                _keep_ranges(self.ranges_path, {names[key]: v for key, v in stats.items()})

        def factor(key: Any, w: Any) -> Any:
            act = stats[key].clamp_min(1e-5) ** alpha
            return (act / w.abs().amax(0).float().clamp_min(1e-5) ** (1 - alpha)).clamp_min(1e-5)

        g, v0 = self.nh // self.kvh, (self.nh + self.kvh) * self.hd
        out = []
        for i, (n1, wqkv, bqkv, wo, bo, n2, wgu, bgu, wd, bd) in enumerate(raw):
            s = factor((i, "qkv"), wqkv)
            n1, wqkv = n1 / s, wqkv * s
            sv = factor((i, "o"), wo).view(self.kvh, g, self.hd).amax(1)  # (kv heads, head dim)
            wqkv = torch.cat((wqkv[:v0], wqkv[v0:] / sv.reshape(-1, 1)))
            if bqkv is not None:
                bqkv = torch.cat((bqkv[:v0], bqkv[v0:] / sv.reshape(-1)))
            wo = wo * sv[:, None].expand(-1, g, -1).reshape(-1)
            s = factor((i, "gu"), wgu)
            n2, wgu = n2 / s, wgu * s
            sd, half = factor((i, "d"), wd), wgu.shape[0] // 2
            wgu = torch.cat((wgu[:half], wgu[half:] / sd[:, None]))
            if bgu is not None:
                bgu = torch.cat((bgu[:half], bgu[half:] / sd))
            out.append((n1, wqkv, bqkv, wo, bo, n2, wgu, bgu, wd * sd, bd))
        s = factor(("head",), head)
        return out, self.norm / s, head * s

    def rms(self, x: Any, weight: Any, torch: Any) -> Any:
        return _rms(x, weight, self.eps, torch)

    def rotated_qkv(self, h: Any, wqkv: Any, bqkv: Any, cos: Any, sin: Any, torch: Any) -> tuple[Any, Any]:
        """``(qk, v)`` of normed hidden states ``h`` ``(batch, positions, hidden)``: queries and keys
        ``(batch, q + kv heads, positions, head dim)`` with the rotary embedding applied (``cos``,
        ``sin`` broadcast over heads), values as the product gives them."""
        b, n = h.shape[:2]
        half = self.hd // 2
        qk, v = self.linear(h, wqkv, bqkv).split(self.splits, dim=-1)
        qk = qk.view(b, n, self.nh + self.kvh, self.hd).transpose(1, 2)
        return qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), dim=-1) * sin, v

    def mlp_residual(self, x: Any, n2: Any, wgu: Any, bgu: Any, wd: Any, bd: Any, torch: Any) -> Any:
        """``x`` plus the layer's MLP of its normed ``x``."""
        gate, up = self.linear(self.rms(x, n2, torch), wgu, bgu).chunk(2, dim=-1)
        return x + self.linear(torch.nn.functional.silu(gate) * up, wd, bd)

    def compile(self, layers_per_call: int | None = None) -> None:
        """Decode steps run their layers through ``torch.compile`` (inductor), ``layers_per_call``
        at a time (default :func:`_layers_per_call`: up to 3, the most that divides the model's layer
        count). At a few rows an eager int8 step is mostly small operations around the products
        (quantizing each input row, norms, rotary, softmax); inductor fuses them into a few C++
        loops (a 16-row SmolLM2 step: 35 -> 26 ms on 2 cores without AMX, one layer a call), and
        each call of a compiled function costs its guards and wrapper (~0.1 ms), which two layers a
        call halve (another ~6% of tokens/s at 16 rows). The compiled code is built without
        inductor's per-call checks of its inputs' sizes, strides and alignment
        (:data:`COMPILE_OPTIONS`: Dynamo's guards already check what the graph was specialized on);
        with them off, three layers a call gain another 3-5% over two (16 rows, SmolLM2's 30 layers:
        about 565 -> 595 tokens/s here), at a longer first compile (about 10 s more). One
        compiled function serves every run of layers; the sizes that vary (rows, groups, prompt
        width, the step) are marked
        dynamic (:func:`_mark_dynamic`), while the model's own sizes stay constants. A process
        compiles at its first decode: one graph for batches of several groups, one for a single
        group (and one for single rows), some seconds each, fewer where inductor's on-disk cache has
        them from an earlier process (kept in :func:`~prmkit.policies.inductor_cache_dir` unless
        ``TORCHINDUCTOR_CACHE_DIR`` says otherwise). A decode's first step runs eagerly. Where
        compiling fails (no C++ compiler, an unsupported torch), the loop warns once and goes on
        eagerly (:meth:`step`)."""
        # What inductor compiles is kept in prmkit's cache (``inductor/torch-<version>``), not in its
        # default under /tmp, unless the user chose a folder: a reboot then costs no recompiling.
        use_inductor_cache()
        self.layers_per_call = layers_per_call or _layers_per_call(len(self.layers))
        self.compiled = _compiled_layers(self.layer, self.torch)

    def step(self, tokens: Any, positions: Any, kv: _KV, t: int, torch: Any) -> Any:
        """Float32 logits ``(rows, vocab)`` of one new token per row (the ``t``-th of the decode),
        its keys and values written into ``kv``. Hidden states stay ``(rows, hidden)``: at a few
        rows a step is bound by the number of operations, not by their arithmetic."""
        x = torch.nn.functional.embedding(tokens, self.embed)  # (b, hidden)
        cos, sin = self.rotary(x, positions[:, None])  # (b, 1, hd): broadcast over heads
        span = torch.empty(0, t + 1, device=x.device)
        args = [(*weights, kv.prompt_keys[i], kv.prompt_values[i], kv.mask, kv.keys[i], kv.values[i])
                for i, weights in enumerate(self.layers)]
        done = 0
        # A decode's first step runs eagerly: torch.compile gives a size of 1 (``span``'s at t = 0)
        # a graph of its own (it specializes sizes 0 and 1), which would run one step a batch.
        compiled = self.compiled if t else None
        if compiled is not None:
            torch._dynamo.maybe_mark_dynamic(span, 1)  # mark what varies: graphs compile it symbolic
            _mark_dynamic(torch, kv, x, cos, sin)
            k = self.layers_per_call
            try:
                while done + k <= len(args):
                    x = compiled(x, cos, sin, span, tuple(args[done:done + k]))
                    done += k
            except Exception as exc:  # noqa: BLE001 - any compiler failure: decode eagerly
                self.compiled = None
                first = str(exc).strip().splitlines()[:1]
                warnings.warn(f"torch.compile of the decode loop failed ({type(exc).__name__}"
                              f"{': ' + first[0] if first else ''}); decoding eagerly", stacklevel=2)
        for layer_args in args[done:]:
            x = self.layer(x, cos, sin, *layer_args, span)
        return self.head_linear(self.rms(x, self.norm, torch), self.lm_head, None).float()

    def prefill(self, ids: Any, past: list[tuple[Any, Any]] | None, torch: Any) -> list[tuple[Any, Any]]:
        """Keys and values ``(1, kv heads, start + tokens, head dim)`` per layer of a prompt: ``ids``
        ``(1, tokens)`` after ``past`` (each layer's keys and values of the ``start`` tokens before
        them, or None), through the loop's products and transformers' Llama arithmetic (attention by
        ``scaled_dot_product_attention`` with a causal mask), as a forward pass of the model fills its
        cache. Nothing after the last layer's keys and values is computed."""
        F = torch.nn.functional
        linear = self.linear
        n = ids.shape[1]
        start = past[0][0].shape[2] if past else 0
        nh, kvh, hd = self.nh, self.kvh, self.hd
        x = F.embedding(ids, self.embed)  # (1, n, hidden)
        cos, sin = self.rotary(x, torch.arange(start, start + n, device=ids.device)[None])
        cos, sin = cos[:, None], sin[:, None]  # (1, 1, n, hd): broadcast over heads
        # Token i sees the past and new tokens 0..i.
        mask = torch.ones(n, start + n, dtype=torch.bool, device=ids.device).tril(start) if start else None
        out = []
        last = len(self.layers) - 1
        for i, (n1, wqkv, bqkv, wo, bo, n2, wgu, bgu, wd, bd) in enumerate(self.layers):
            qk, v = self.rotated_qkv(self.rms(x, n1, torch), wqkv, bqkv, cos, sin, torch)
            q, k = qk.split((nh, kvh), dim=1)
            v = v.view(1, n, kvh, hd).transpose(1, 2)
            if past:
                k, v = torch.cat((past[i][0], k), dim=2), torch.cat((past[i][1], v), dim=2)
            out.append((k, v))
            if i == last:
                break
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                               scale=self.scale, enable_gqa=kvh != nh)
            x = x + linear(o.transpose(1, 2).reshape(1, n, nh * hd), wo, bo)
            x = self.mlp_residual(x, n2, wgu, bgu, wd, bd, torch)
        return out


def _linear_kernel(weight: Any, torch: Any) -> tuple[Any, Any]:
    """``(linear, pack)``: the product the loop uses and how to prepare a weight for it (None: as is).

    bfloat16 on a CPU: oneDNN's linear over weights reordered once into its blocked layout
    (``torch.ops.mkldnn``, what inductor's freezing uses). ``F.linear`` reorders a bfloat16 weight on
    every call; prepacked, the products of a decode step run 1.2-2x faster and give the same bits (the
    same oneDNN kernel: checked here on a random product before it is used, else ``F.linear``).
    Everywhere else (float32, CUDA, a torch without oneDNN): ``F.linear``."""
    F = torch.nn.functional
    plain = (F.linear, None)
    if weight.dtype != torch.bfloat16 or weight.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return plain
    try:
        ops = torch.ops.mkldnn

        def pack(w: Any) -> Any:
            return ops._reorder_linear_weight(w.detach(), 64)

        def linear(x: Any, w: Any, bias: Any = None) -> Any:
            return ops._linear_pointwise(x, w, bias, "none", [], "")

        gen = torch.Generator().manual_seed(0)
        w = torch.randn(96, 64, generator=gen).to(torch.bfloat16)
        bias = torch.randn(96, generator=gen).to(torch.bfloat16)
        x = torch.randn(5, 1, 64, generator=gen).to(torch.bfloat16)
        same = (torch.equal(linear(x, pack(w), bias), F.linear(x, w, bias))
                and torch.equal(linear(x[:2], pack(w)), F.linear(x[:2], w)))
    except (AttributeError, RuntimeError):
        return plain
    return (linear, pack) if same else plain


class _KV:
    """The KV cache of one decode batch: ``groups`` of ``n`` rows each (the samples of one prompt).

    A group's prompt keys and values are stored once (``prompt_keys[i]``: ``(groups, kv heads,
    prompt positions, head dim)``, left-padded, with an additive mask) and each row's new tokens apart
    (``keys[i]``: ``(rows, kv heads, new tokens, head dim)``). Attention reads the prompt once per group
    for all its rows' queries — on a CPU, reading the cache is most of attention's cost — and joins the
    two parts in one softmax. Float32: CPU batched products over slices of it run without copies.
    """

    def __init__(self, parts: list[tuple[Any, int, int]], n: int, prompt: int, new: int, kvh: int,
                 hd: int, device: Any, torch: Any) -> None:
        groups = len(parts)
        self.groups, self.n = groups, n
        f32 = torch.float32
        self.prompt_keys, self.prompt_values = [], []
        self.mask = torch.zeros(groups, 1, 1, prompt, dtype=f32, device=device)
        for gi, (_, _, pad) in enumerate(parts):
            self.mask[gi, ..., :pad] = float("-inf")
        for layer in range(len(parts[0][0].layers)):
            pk = torch.zeros(groups, kvh, prompt, hd, dtype=f32, device=device)
            pv = torch.zeros(groups, kvh, prompt, hd, dtype=f32, device=device)
            for gi, (cache, _, pad) in enumerate(parts):
                if pad == prompt:  # a one-token prompt: nothing before the token decoded first
                    continue
                pk[gi, :, pad:] = cache.layers[layer].keys[0]
                pv[gi, :, pad:] = cache.layers[layer].values[0]
            self.prompt_keys.append(pk)
            self.prompt_values.append(pv)
        rows = groups * n
        # One position more than a decode writes: at its last step a compiled step's slice of the
        # cache never reaches the end (a case ``torch.compile`` would compile a graph for).
        self.keys = [torch.empty(rows, kvh, new + 1, hd, dtype=f32, device=device) for _ in self.prompt_keys]
        self.values = [torch.empty(rows, kvh, new + 1, hd, dtype=f32, device=device) for _ in self.prompt_keys]
        self.prompt = prompt
        self.marked = False  # sizes marked dynamic for torch.compile (:func:`_mark_dynamic`)

    def keep(self, groups: Any, torch: Any) -> Any:
        """Keep only ``groups`` (a tensor of group indices, in order); returns the kept row indices."""
        n = self.n
        rows = (groups[:, None] * n + torch.arange(n, device=groups.device)).flatten()
        self.prompt_keys = [k[groups] for k in self.prompt_keys]
        self.prompt_values = [v[groups] for v in self.prompt_values]
        self.mask = self.mask[groups]
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]
        self.groups = len(groups)
        self.marked = False
        return rows

def _mark_dynamic(torch: Any, kv: _KV, *rows: Any) -> None:
    """Tell ``torch.compile`` which sizes of a compiled decode step vary: the rows (dim 0 of the
    hidden states and rotary tables ``rows``, of the cache), the groups and the prompt width (of the
    prompt part and its mask), the new tokens' room (``max_new_tokens``). The cache's tensors are
    marked once (marks stay on a tensor)."""
    mark = torch._dynamo.maybe_mark_dynamic
    for tensor in rows:
        mark(tensor, 0)
    if kv.marked:
        return
    mark(kv.mask, 0)
    mark(kv.mask, 3)
    for tensor in (*kv.prompt_keys, *kv.prompt_values):
        mark(tensor, 0)
        mark(tensor, 2)
    for tensor in (*kv.keys, *kv.values):
        mark(tensor, 0)
        mark(tensor, 2)
    kv.marked = True


def _rms(x: Any, weight: Any, eps: float, torch: Any) -> Any:
    """transformers' LlamaRMSNorm: normalise in float32, cast back, then scale."""
    if x.dtype == torch.float32:  # the same bits without two no-op casts (a decode step is ~100 ops a layer)
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _attend(q: Any, pk: Any, pv: Any, mask: Any, keys: Any, values: Any, t: int, scale: float,
            torch: Any) -> Any:
    """Attention output ``(rows, kv heads, group, head dim)`` for queries ``q`` of that shape over a
    :class:`_KV` layer: its groups' prompts ``pk`` / ``pv`` ``(groups, kv heads, prompt, head dim)``
    with their additive ``mask``, and the rows' new positions ``0..t`` of ``keys`` / ``values``. The
    sizes come from the tensors' shapes (what ``torch.compile`` needs to keep them symbolic)."""
    b, kvh, g, hd = q.shape
    G, P = pk.shape[0], pk.shape[2]
    n = b // G
    # The prompt part: a group's rows' queries stacked against its prompt's keys.
    qp = q.view(G, n, kvh, g, hd).transpose(1, 2).reshape(G, kvh, n * g, hd)
    sp = torch.matmul(qp, pk.transpose(-1, -2)) * scale + mask
    sp = sp.view(G, kvh, n, g, P).transpose(1, 2).reshape(b, kvh, g, P)
    sg = torch.matmul(q, keys[:, :, :t + 1].transpose(-1, -2)) * scale
    p = torch.softmax(torch.cat((sp, sg), dim=-1), dim=-1)
    pp, pg = p.split((P, t + 1), dim=-1)
    pp = pp.reshape(G, n, kvh, g, P).transpose(1, 2).reshape(G, kvh, n * g, P)
    op = torch.matmul(pp, pv).view(G, kvh, n, g, hd).transpose(1, 2)
    return op.reshape(b, kvh, g, hd) + torch.matmul(pg, values[:, :, :t + 1])


class TorchPolicy(HFPolicy):
    """A ``transformers`` causal LM decoded by prmkit's own batched loop (see the module docstring).

    Takes what ``hf`` takes; ``dtype="auto"``: what :func:`~prmkit.policies.choose_compute` finds
    fast here (see the module docstring; :attr:`compute` says why); ``"int8"``, ``"bfloat16"`` and
    ``"float32"`` ask for one; ``int8_kernel``: ``"auto"``, ``"int_mm"`` or ``"fbgemm"`` (module
    docstring). ``batch_size``: rows decoded together (rows of several requests share a batch; a CPU
    decode step costs little more for 64 rows than for 16).
    """

    name = "torch"

    def __init__(self, model: str | None = None, *, gguf_file: str | None = None,
                 adapter: str | None = "default", batch_size: int = 64, device: str | None = None,
                 dtype: str | None = "auto", chat_template: str | None = None,
                 trust_remote_code: bool = False, progress: bool = True, allow_pickle: bool = False,
                 compile: bool | str = "auto", int8_kernel: str = "auto") -> None:
        torch = _torch()
        compile = _compile_choice(compile)
        if int8_kernel not in ("auto", *INT8_KERNELS):
            raise ValueError(f"int8_kernel must be 'auto' or one of {', '.join(INT8_KERNELS)}, got {int8_kernel!r}")
        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        cpu = str(dev).startswith("cpu")
        auto = dtype == "auto"
        #: What ``dtype="auto"`` chose and why (None: a dtype was asked for).
        self.compute: ComputeChoice | None = None
        if auto and not cpu:
            self.compute = choose_compute(dev, candidates=("bfloat16",))
            dtype = self.compute.dtype
        int8 = dtype == "int8"
        if int8 and not cpu:
            raise ValueError(f"dtype='int8' runs on a CPU, not on {dev!r}: use bfloat16 or float32 there")
        # On a CPU "auto" loads float32 and decides once the model's shapes are known (below).
        load_dtype = "float32" if int8 or (auto and cpu) else dtype
        super().__init__(model, gguf_file=gguf_file, adapter=adapter, batch_size=batch_size,
                         device=device, dtype=load_dtype, chat_template=chat_template,
                         trust_remote_code=trust_remote_code, progress=progress,
                         allow_pickle=allow_pickle)
        self.fallback = decode_support(self.model)
        if int8 and self.fallback is not None:
            raise ValueError(f"dtype='int8' needs prmkit's decode loop, which cannot run this model: "
                             f"{self.fallback}")
        if auto and cpu:
            cfg = self.model.config
            shape = (min(batch_size, 64), cfg.hidden_size, getattr(cfg, "intermediate_size", 4 * cfg.hidden_size))
            candidates = ("bfloat16", "int8") if self.fallback is None else ("bfloat16",)
            self.compute = choose_compute("cpu", shape=shape, candidates=candidates)
            int8 = self.compute.dtype == "int8"
            if self.compute.dtype == "bfloat16":
                self.model.to(torch.bfloat16)
            _log_choice(self.compute)
        self._plan = None
        if self.fallback is None:
            kernel = int8_kernel
            if int8 and kernel == "auto":
                chosen = self.compute.kernel if self.compute is not None else None
                kernel = chosen or int8_kernel_for(_compute.cpu_info().fast_int8, torch)
            calibration = self._calibration_ids() if int8 else None
            ranges = _ranges_path(self.model, weights_key(model, gguf_file, self.adapter), calibration) if int8 else None
            self._plan = _Plan(self.model, torch, int8=int8, calibration=calibration,
                               kernel=kernel if int8 else "int_mm", ranges=ranges)
            fp32_cpu = cpu and not int8 and self.model.dtype == torch.float32
            # fbgemm's products are not compiled: its ops break inductor's graphs (measured on SmolLM2:
            # 227 tokens/s compiled against 336 eager, 2 AVX2 cores).
            compilable = (int8 and kernel == "int_mm") or fp32_cpu
            # torch's own switch (``TORCH_COMPILE_DISABLE=1``) runs every compiled function eagerly:
            # the plan then stays eager too, and ``describe()`` says so instead of claiming compiled.
            self.compile_disabled = bool(torch._dynamo.config.disable)
            if not self.compile_disabled and (compile is True or (
                    compile == "auto" and compilable and _parameters(self.model) >= COMPILE_MIN_PARAMETERS)):
                self._plan.compile()

    def _calibration_ids(self) -> list[int]:
        """The tokens SmoothQuant's activation ranges are read from (:meth:`_Plan._smooth`): a fixed
        text of prose, arithmetic steps and code, in the chat template where the tokenizer has one,
        so the same model always gets the same int8 weights."""
        tok = self.tokenizer
        turns = [{"role": "user", "content": CALIBRATION}, {"role": "assistant", "content": CALIBRATION}]
        text = CALIBRATION
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(turns, tokenize=False)
        return tok(text, add_special_tokens=not getattr(tok, "chat_template", None))["input_ids"]

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["engine"] = "prmkit decode loop" if self._plan is not None else "transformers generate"
        if self.compute is not None:
            out["compute"] = self.compute.describe()
        if self._plan is not None and self._plan.int8:
            out["dtype"] = "int8"
            out["int8_kernel"] = self._plan.kernel
        if self._plan is not None:
            out["compiled"] = self._plan.compiled is not None
            if self.compile_disabled:
                out["compiled_off"] = "TORCH_COMPILE_DISABLE=1"
        return out

    def _prefix_cache(self, ids: list[int], torch: Any) -> Any:
        """As ``hf``'s, but with int8 products the shared prefix runs through :meth:`_Plan.prefill`
        too, so a prompt's cache comes from one arithmetic."""
        plan = self._plan
        if plan is None or not plan.int8 or (plan.window is not None and len(ids) > plan.window):
            return super()._prefix_cache(ids, torch)
        return self._loop_cache(ids, None, torch)

    def _loop_cache(self, ids: list[int], past: list[tuple[Any, Any]] | None, torch: Any) -> Any:
        """A ``DynamicCache`` of ``ids`` after ``past``, run through :meth:`_Plan.prefill`."""
        from transformers import DynamicCache

        with torch.no_grad():
            kv = self._plan.prefill(torch.tensor([ids], device=self.model.device), past, torch)
        cache = DynamicCache(config=self.model.config)
        for i, (k, v) in enumerate(kv):
            cache.update(k, v, i)
        return cache

    def _prefill(self, ids: list[int], shared: int, torch: Any) -> Any:
        """A prompt's KV cache. With prepacked bfloat16 weights (a CPU with oneDNN) the part after
        the shared prefix runs through :meth:`_Plan.prefill`: transformers' bfloat16 ``F.linear``
        reorders every weight on every call, which made the prompts about 12% of a 64-row
        benchmark's time. Elsewhere as ``hf`` does."""
        plan = self._plan
        if (plan is None or not plan.packed or len(ids) <= shared
                or (plan.window is not None and len(ids) > plan.window)):
            return super()._prefill(ids, shared, torch)
        past = None
        if shared:
            base = self._shared_prefix(ids, shared, torch)
            past = [(layer.keys, layer.values) for layer in base.layers]
        return self._loop_cache(ids[shared:], past, torch)

    def _chunks(self, rows: list[Any], n: int) -> list[list[Any]]:
        """Batches of whole requests (``batch_size // n`` of them), or slices of one request's rows
        when ``n > batch_size``: every batch is groups of equal size that share a prompt."""
        if n > self.batch_size:
            return [rows[i:i + min(self.batch_size, n - (i % n))]
                    for i in _slice_starts(len(rows), n, self.batch_size)]
        step = max(1, self.batch_size // n) * n
        return [rows[i:i + step] for i in range(0, len(rows), step)]

    def _decode(self, chunk: list[tuple[int, list[int], int, int | None]], params: SamplingParams,
                torch: Any) -> list[list[int]]:
        plan = self._plan
        width = max(len(ids) for _, ids, _, _ in chunk)
        if plan is None or (plan.window is not None and width - 1 + params.max_new_tokens > plan.window):
            return super()._decode(chunk, params, torch)
        tok = self.tokenizer
        pad = tok.pad_token_id
        dev = self.model.device
        rows = len(chunk)
        with torch.no_grad():
            parts = self._prompt_parts(chunk, width, torch)
            n = parts[0][1]
            if any(p[1] != n for p in parts):  # not from _chunks: fall back to one group per row
                parts = [(cache, 1, left) for cache, k, left in parts for _ in range(k)]
                n = 1
            kv = _KV(parts, n, width - 1, params.max_new_tokens, plan.kvh, plan.hd, dev, torch)
            del parts
            sampler = (_RowSampler(self._row_seeds(chunk), params.temperature, params.top_p, dev)
                       if params.temperature > 0 else None)
            eos = self._eos_ids()
            stops = [s for s in params.stop if s]
            tokens = torch.tensor([ids[-1] for _, ids, _, _ in chunk], device=dev)
            positions = torch.tensor([len(ids) - 1 for _, ids, _, _ in chunk], device=dev)
            done = [False] * rows
            out: list[list[int]] = [[] for _ in range(rows)]
            live = list(range(rows))  # the chunk's row of each row still decoded
            for t in range(params.max_new_tokens):
                self._batches.step(t, params.max_new_tokens)
                logits = plan.step(tokens, positions, kv, t, torch)
                picked = (sampler.pick(logits) if sampler is not None else logits.argmax(dim=-1)).tolist()
                for j, token in enumerate(picked):
                    r = live[j]
                    if done[r]:
                        picked[j] = pad
                        continue
                    out[r].append(token)
                    if token in eos or (stops and _stopped(tok, out[r], stops)):
                        done[r] = True
                if all(done):
                    break
                tokens = torch.tensor(picked, device=dev)
                positions = positions + 1
                # Groups whose rows have all ended stop costing a row of every product: once a
                # quarter of the batch is such groups, copy the rest into a smaller batch.
                finished = [gi for gi in range(kv.groups) if all(done[live[gi * n + j]] for j in range(n))]
                if finished and len(finished) * 4 >= kv.groups:
                    keep = torch.tensor([gi for gi in range(kv.groups) if gi not in set(finished)], device=dev)
                    idx = kv.keep(keep, torch)
                    tokens, positions = tokens[idx], positions[idx]
                    kept = idx.tolist()
                    live = [live[j] for j in kept]
                    if sampler is not None:
                        sampler.keep(idx)
        return out


@functools.cache
def _layer_function(torch: Any, linear: Any, scale: float, eps: float, nh: int, kvh: int, hd: int,
                splits: tuple[int, int]) -> Any:
    """One decoder layer of a decode step, as a function of tensors only (so ``torch.compile``
    can take it whole, :meth:`_Plan.compile`): ``layer(x, cos, sin, *weights, pk,
    pv, mask, keys, values, span)`` takes hidden states ``x`` ``(rows, hidden)`` and returns the
    layer's output; the new token's keys and values are written at position ``t`` of the layer's
    ``keys`` / ``values`` (:class:`_KV`'s, with ``pk``, ``pv``, ``mask`` its prompt part), where
    ``t + 1`` is the last size of ``span``, an empty tensor (a size, which ``torch.compile`` can
    be told varies; it specializes an int's first value). The model's sizes are constants of the
    closure; compiled, they stay constants (with every size symbolic, inductor's kernels ran 4x
    slower). Cached: plans of models with the same sizes share one function (and so one compiled
    function, :func:`_compiled_layers`, whose graphs then serve them all)."""
    g, half, f32 = nh // kvh, hd // 2, torch.float32
    silu = torch.nn.functional.silu

    def layer(x, cos, sin, n1, wqkv, bqkv, wo, bo, n2, wgu, bgu, wd, bd, pk, pv, mask, keys, values, span):
        b, t = x.shape[0], span.shape[-1] - 1
        qk, v = linear(_rms(x, n1, eps, torch), wqkv, bqkv).split(splits, dim=-1)
        qk = qk.view(b, nh + kvh, hd)
        qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), dim=-1) * sin
        if qk.dtype != f32:
            qk, v = qk.float(), v.float()
        q, k = qk.split((nh, kvh), dim=1)
        keys.select(2, t).copy_(k)
        values.select(2, t).copy_(v.view(b, kvh, hd))
        o = _attend(q.reshape(b, kvh, g, hd), pk, pv, mask, keys, values, t, scale, torch)
        x = x + linear(o.reshape(b, nh * hd).to(x.dtype), wo, bo)
        gate, up = linear(_rms(x, n2, eps, torch), wgu, bgu).chunk(2, dim=-1)
        return x + linear(silu(gate) * up, wd, bd)

    return layer


@functools.cache
def _compiled_layers(layer: Any, torch: Any) -> Any:
    """``torch.compile`` of ``layer`` applied to a run of layers (:meth:`_Plan.compile`), one per
    ``layer``, that is one per set of model sizes (a new compiled function per plan would add its
    graphs to the same one's, up to torch's limit of recompilations, past which calls run eagerly).
    Each has a code object of its own: Dynamo keeps graphs per code object, and a second model's
    graphs kept beside the first's would fail their size guards, and its automatic dynamic shapes
    would then compile the model's own sizes (hidden, heads) as symbols: slower kernels (see
    :func:`_layer_function`), and graphs inductor's on-disk cache does not have (a test process
    that decoded SmolLM2 before a tiny model compiled the tiny one's four graphs in 99 s, not 40)."""
    def layers(x, cos, sin, span, group):
        for args in group:
            x = layer(x, cos, sin, *args, span)
        return x

    name = f"decode_layers_{next(_CODE_IDS)}"
    code = layers.__code__.replace(co_name=name)  # a new code object
    layers = types.FunctionType(code, layers.__globals__, name, None, layers.__closure__)
    config = torch._inductor.config
    return torch.compile(layers, options={k: v for k, v in COMPILE_OPTIONS.items() if hasattr(config, k)})


_CODE_IDS = itertools.count()


#: Inductor options of the compiled decode layers: no per-call assertions on the inputs' sizes,
#: strides, alignment and scalars in the generated wrapper (Dynamo's guards check the graph's
#: assumptions before each call; the assertions repeat that check, about 30 of them a call).
COMPILE_OPTIONS = {"size_asserts": False, "scalar_asserts": False, "alignment_asserts": False}


def _layers_per_call(layers: int, most: int = 3) -> int:
    """Layers a compiled call runs: the most, up to ``most``, that divides ``layers`` (no layers left
    to run eagerly, no graph of another length).

    >>> [_layers_per_call(n) for n in (30, 28, 24, 2, 7, 1)]
    [3, 2, 3, 2, 1, 1]
    """
    return next(k for k in range(min(most, max(layers, 1)), 0, -1) if layers % k == 0)


def _log_choice(choice: ComputeChoice) -> None:
    """The one log line of ``dtype="auto"``'s choice, on stderr (progress and logs go there)."""
    import sys

    print(f"torch policy: dtype {choice.describe()}", file=sys.stderr, flush=True)


def _compile_choice(value: bool | str) -> bool | str:
    """``compile=`` as given in Python or by ``-p compile=...``: True, False or ``"auto"``."""
    if isinstance(value, bool) or value == "auto":
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"compile must be true, false or 'auto', got {value!r}")


def _parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def _slice_starts(total: int, n: int, size: int) -> list[int]:
    """Start of each slice of at most ``size`` rows that never crosses a request's ``n`` rows."""
    starts = []
    for base in range(0, total, n):
        starts.extend(range(base, base + n, size))
    return starts


def _stopped(tok: Any, row: list[int], stops: list[str]) -> bool:
    """Whether the text of ``row`` now contains a stop string (a character whose bytes are not all
    generated yet is not text yet: the decoder's trailing replacement character is left out).
    Special tokens count with their names, as in ``transformers``' stop-string criterion (which ``hf``
    uses): a sampled ``<|im_start|>`` ends a row whose stop string is ``a``, as it does there."""
    text = tok.decode(row, skip_special_tokens=False)
    if text.endswith("\ufffd"):
        text = text[:-1]
    return any(s in text for s in stops)
