"""The W8A8 int8 products of the ``torch`` policy's decode loop (and of :func:`choose_compute`'s
probe, which times the loop's own product): weights quantized once per output channel, each input
row when it comes, integer sums, so a row's output never depends on its batch."""

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
