"""The int8 products of the ``torch`` policy's decode loop (and of :func:`choose_compute`'s probe,
which times the loop's own product): W8A8 through ``torch._int_mm`` for CPUs with VNNI or AMX, W7A8
through fbgemm for AVX2-only ones. Weights quantized once per output channel, each input row when it
comes, exact integer sums, so a row's output never depends on its batch."""

from __future__ import annotations

import functools
from typing import Any

from prmkit.policies._base import int8_problem

__all__: list[str] = []


def _int8_weight(w: Any, torch: Any) -> tuple[Any, Any]:
    """``(q, scale)``: each row of ``w`` quantized once, symmetric, to int8 ``(out, in)`` with a
    float32 scale per row (output channel)."""
    w = w.detach().float()
    scale = w.abs().amax(dim=1).clamp_min(1e-30) / 127
    return torch.round(w / scale[:, None]).to(torch.int8), scale


def _int8_rows(x: Any, torch: Any) -> tuple[Any, Any, Any]:
    """``(x, s, lead)``: the input's rows flat in float32 ``(rows, in)``, each row's symmetric int8
    scale ``(rows, 1)``, and the leading shape to restore (None: ``x`` came flat, as a decode step's
    rows do)."""
    lead = x.shape[:-1] if x.dim() != 2 else None
    if lead is not None:
        x = x.reshape(-1, x.shape[-1])
    if x.dtype != torch.float32:
        x = x.float()
    return x, x.abs().amax(dim=-1, keepdim=True).clamp_min_(1e-30).div_(127), lead


def _int8_out(out: Any, bias: Any, lead: Any) -> Any:
    """A product's float32 output ``(rows, out)`` plus ``bias``, in the input's leading shape."""
    if bias is not None:
        out.add_(bias)
    return out if lead is None else out.view(*lead, out.shape[-1])


@functools.cache
def _int8_kernel(torch: Any) -> tuple[Any, Any]:
    """``(linear, pack)`` of int8 products (W8A8, as CTranslate2's int8 on a CPU): each weight row
    quantized once, symmetric, with a float32 scale per output channel; each input row quantized
    when it comes, symmetric, with its own scale; the product in int8 with int32 sums
    (``torch._int_mm``: oneDNN, VNNI where the CPU has it), scaled back to float32. Integer sums are
    exact and every scale belongs to one row or one channel, so a row's output does not depend on
    the other rows of its batch. ``(None, None)`` where this torch has no working ``_int_mm``."""
    def pack(w: Any) -> Any:
        q, scale = _int8_weight(w, torch)
        return q.t(), scale  # (in, out) view

    def linear(x: Any, w: Any, bias: Any = None) -> Any:
        wt, ws = w
        x, s, lead = _int8_rows(x, torch)
        out = torch._int_mm(torch.div(x, s).round_().to(torch.int8), wt).mul(s).mul_(ws)  # int32 * float32
        return _int8_out(out, bias, lead)

    return (linear, pack) if int8_problem("cpu") is None else (None, None)


def _int8_head_kernel(torch: Any) -> tuple[Any, Any]:
    """``(linear, pack)`` of :func:`_int8_kernel`'s W8A8 product through oneDNN's own int8 linear
    (``torch.ops.onednn.qlinear_pointwise``, what inductor's x86 quantization calls): weights
    prepacked once into its blocked layout, inputs as unsigned bytes (the int8 value + 128 with zero
    point 128: the same integer sums), each output channel's weight scale applied inside the
    product, each row's input scale after. Per row the output is ``float(sum) * w_scale * x_scale``
    exactly (checked here against ``torch._int_mm`` on a small product, row by row and in a batch,
    before it is used), so rows stay independent of their batch. Faster than ``_int_mm`` for wide
    outputs (the LM head: 1.3 against 3.1 ms at 16 x 49,152 on 2 cores without AMX), not for the
    narrow products of a layer. ``(None, None)`` where the op is missing or not exact."""
    def pack(w: Any) -> Any:
        q, scale = _int8_weight(w, torch)
        return (torch.ops.onednn.qlinear_prepack(q, None), scale,
                torch.zeros(q.shape[0], dtype=torch.long, device=q.device))

    def linear(x: Any, w: Any, bias: Any = None) -> Any:
        packed, ws, zp = w
        x, s, lead = _int8_rows(x, torch)
        qu = torch.div(x, s).round_().add_(128).to(torch.uint8)
        out = torch.ops.onednn.qlinear_pointwise(qu, 1.0, 128, packed, ws, zp, None, 1.0, 0, torch.float32,
                                                 "none", [], "").mul_(s)
        return _int8_out(out, bias, lead)

    try:
        if not torch.backends.mkldnn.is_available():
            return None, None
        gen = torch.Generator().manual_seed(0)
        w = torch.randn(96, 64, generator=gen)
        x = torch.randn(5, 64, generator=gen) * torch.tensor([0.01, 1.0, 30.0, 1.0, 0.5])[:, None]
        packed = pack(w)
        got = linear(x, packed)
        ws = w.abs().amax(dim=1) / 127
        s = x.abs().amax(dim=-1, keepdim=True) / 127
        q = torch.div(x, s).round_().to(torch.int8)
        want = torch._int_mm(q, torch.round(w / ws[:, None]).to(torch.int8).t()).float().mul_(ws).mul_(s)
        exact = torch.equal(got, want) and all(torch.equal(linear(x[i:i + 1], packed)[0], got[i]) for i in range(5))
    except (AttributeError, RuntimeError, NotImplementedError):
        return None, None
    return (linear, pack) if exact else (None, None)


#: The int8 kernels of the decode loop: ``int_mm`` (8-bit weights and inputs through
#: ``torch._int_mm``, for CPUs with int8 dot products: VNNI or AMX) and ``fbgemm`` (7-bit weights,
#: 8-bit inputs through fbgemm's u8 x s8 product, for CPUs without them: AVX2 only).
INT8_KERNELS = ("int_mm", "fbgemm")


@functools.cache
def _int8_fbgemm_kernel(torch: Any) -> tuple[Any, Any]:
    """``(linear, pack)`` of int8 products for a CPU without int8 dot-product instructions (AVX2
    only, no VNNI), where ``torch._int_mm`` runs 5-50x slower than float32 but fbgemm's u8 x s8
    kernel (``vpmaddubsw``, two products summed in 16 bits, then 32-bit sums) runs about twice as
    fast as float32 (0.61 against 1.13 ms for one 64 x 576 -> 1,536 product on 2 AMD EPYC cores).

    As :func:`_int8_kernel`, each input row is quantized when it comes, symmetric, with its own
    scale, to [-127, 127] (passed to fbgemm as unsigned bytes with zero point 128), and each weight row
    once, symmetric, with a float32 scale per output channel, but to 7 bits, [-63, 63]: a pair of
    products then stays within the 16-bit sum (255 * 63 * 2 = 32,130 < 32,767), so the integer sums
    are exact, where 8-bit weights would saturate. Measured on SmolLM2 (teacher-forced logits, no
    smoothing), 7-bit weights with 8-bit inputs keep the KL divergence from float32 at 0.086 against
    W8A8's 0.056, where 7-bit inputs would raise it to 0.21. The product
    (``quantized.linear_with_input_q_dq_qweight_dq_output_fp32``: integer sums, scaled by the weight's
    channel scale, in float32) is checked here against exact integer sums on a small product, row by
    row and in a batch, before it is used. ``(None, None)`` where fbgemm or the op is missing or not
    exact."""
    def pack(w: Any) -> Any:
        w = w.detach().float()
        scale = w.abs().amax(dim=1).clamp_min(1e-30) / 63
        zero = torch.zeros(w.shape[0], dtype=torch.long, device=w.device)
        q = torch.quantize_per_channel(w, scale.double(), zero, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(q, None)

    def linear(x: Any, w: Any, bias: Any = None) -> Any:
        x, s, lead = _int8_rows(x, torch)
        out = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(
            torch.div(x, s).round_(), 1.0, 128, w).mul_(s)
        return _int8_out(out, bias, lead)

    try:
        if "fbgemm" not in torch.backends.quantized.supported_engines:
            return None, None
        import warnings

        with warnings.catch_warnings():  # quantized tensors are deprecated, the fbgemm op is not
            warnings.simplefilter("ignore", UserWarning)
            gen = torch.Generator().manual_seed(0)
            w = torch.randn(96, 64, generator=gen)
            x = torch.randn(5, 64, generator=gen) * torch.tensor([0.01, 1.0, 30.0, 1.0, 0.5])[:, None]
            x[3, :] = x[3].abs()  # a row of large positive inputs: every pair at the 16-bit limit's side
            packed = pack(w)
            got = linear(x, packed)
            ws = w.abs().amax(dim=1) / 63
            qw = torch.round(w / ws[:, None]).long()
            s = x.abs().amax(dim=-1, keepdim=True) / 127
            qx = torch.div(x, s).round_().long()
            want = (qx @ qw.t()).double() * ws.double() * s.double()
            exact = (torch.allclose(got.double(), want, rtol=1e-6, atol=0)
                     and all(torch.equal(linear(x[i:i + 1], packed)[0], got[i]) for i in range(5)))
    except (AttributeError, RuntimeError, NotImplementedError):
        return None, None
    if not exact:
        return None, None
    return linear, lambda w: _quiet(pack, w)


def _quiet(pack: Any, w: Any) -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return pack(w)


def int8_kernel_for(fast_int8: bool, torch: Any) -> str:
    """The int8 kernel the decode loop uses on a CPU: ``int_mm`` where it has int8 dot products
    (``fast_int8``: VNNI or AMX) or where fbgemm's product is unavailable, else ``fbgemm``."""
    if fast_int8 or _int8_fbgemm_kernel(torch)[0] is None:
        return "int_mm"
    return "fbgemm"
