"""int8 training products (``precision=int8``): the backbone's linear layers multiply in int8.

On a CPU without native bfloat16 (no AVX512-BF16, no AMX) float32 is the fastest floating-point
precision, and a training step of SmolLM2-135M spends about 70% of its time in float32 matrix
products running near the cores' peak. Such a CPU usually has VNNI, whose int8 products
(``torch._int_mm`` through oneDNN) run 3-6x faster than float32's at training sizes. This module
runs the three products of each linear layer there, as int8 mixed-precision training does (SwitchBack,
Wortsman et al., 2023; torchao's ``Int8MixedPrecisionTrainingConfig``):

* forward ``y = x W^T``: each row of ``x`` (a token) and of ``W`` (an output channel) quantized
  symmetrically with its own scale;
* input gradient ``dx = dy W``: each row of ``dy`` (a token) and each column of ``W`` (an input channel);
* weight gradient ``dW = dy^T x``: each column of ``dy`` and of ``x`` (a channel, over the batch's tokens).

Integer sums are exact; the products are scaled back to float32. Weights, gradients, optimizer state,
attention, norms and the head stay float32, so the model saved is an ordinary float32 model, and
a forward pass without gradients (evaluation, scoring) computes in float32. Rounding to int8 perturbs
each product by about 0.5-1% of its scale, so a run does not follow fp32's run step for step; whether it
keeps the held-out loss is measured (``benchmarks/train_vs_trl.py --precisions fp32,int8``), not assumed.

The quantize-multiply-rescale is one ``torch.compile``-d function (inductor fuses each quantization into
one pass over its input and the rescaling into the product's output): unfused, the quantizations cost
as much time as the int8 products save (measured: torchao's eager version of the same scheme, 7.2 s a
step against 7.2 s in float32). Where compiling fails the eager function runs, with a warning.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["int8_products"]


def _rows(x: Any) -> tuple[Any, Any]:
    """``x`` (M, K) in int8, one scale per row (token): ``(q, scale (M, 1))``."""
    import torch

    s = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-30) / 127
    return torch.round(x / s).clamp_(-127, 127).to(torch.int8), s


def _columns_t(x: Any) -> tuple[Any, Any]:
    """``x`` (M, K) in int8, one scale per column (channel), written transposed: ``(q (K, M), scale (1, K))``."""
    import torch

    s = x.abs().amax(dim=0, keepdim=True).clamp_min(1e-30) / 127
    return torch.round(x / s).clamp_(-127, 127).to(torch.int8).t().contiguous(), s


def _forward(qx: Any, sx: Any, w: Any) -> Any:
    """``x W^T`` from ``x``'s rows in int8 (:func:`_rows`), ``W`` per output channel."""
    import torch

    sw = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-30) / 127
    qw = torch.round(w / sw).clamp_(-127, 127).to(torch.int8)
    return torch._int_mm(qx, qw.t()) * sx * sw.t()


def _grad_input(dy: Any, w: Any) -> Any:
    """``dy W`` through int8: each row of ``dy`` (a token) and each column of ``W`` (an input channel)
    quantized symmetrically with its own scale, integer sums, scaled back to float32. ``W`` is
    quantized where it lies, not transposed first (1536 x 576: 8.4 ms against 10.1 ms)."""
    import torch

    qy, sy = _rows(dy)
    sw = w.abs().amax(dim=0, keepdim=True).clamp_min(1e-30) / 127
    qw = torch.round(w / sw).clamp_(-127, 127).to(torch.int8)
    return torch._int_mm(qy, qw) * sy * sw


def _grad_weight(dy: Any, qxt: Any, sx: Any) -> Any:
    """``dy^T x`` from ``x``'s columns in int8 (:func:`_columns_t`), ``dy`` per column, each over the
    tokens. Computed as ``(x^T dy)^T`` so that ``torch._int_mm``'s left operand is row-major (twice as
    fast as a column-major one here: a (1536 x 2400) @ (2400 x 576) product with its quantization took
    5.9 ms this way, 11.4 ms with ``dy^T`` as the left operand, 14.0 ms in float32)."""
    import torch

    sy = dy.abs().amax(dim=0, keepdim=True).clamp_min(1e-30) / 127
    qy = torch.round(dy / sy).clamp_(-127, 127).to(torch.int8)
    # Written out contiguous, in the weight's layout, by the rescaling pass itself: a transposed view
    # would be copied by autograd when it accumulates the gradient (a pass more, 2.3 ms for 576 x 1536).
    return (torch._int_mm(qxt, qy) * sx.t() * sy).t().contiguous()


_PARTS = {"rows": _rows, "columns_t": _columns_t, "forward": _forward, "grad_input": _grad_input,
          "grad_weight": _grad_weight}


@functools.cache
def _compiled(kind: str) -> Any:
    """One compiled function per part, each called with contiguous inputs, so that a few graphs of
    symbolic sizes serve every layer (a transposed view's strides would be guarded on)."""
    import torch

    return torch.compile(_PARTS[kind], dynamic=True)


_fell_back: list[str] = []


def _call(kind: str, *args: Any, compiled: bool) -> Any:
    args = tuple(a.contiguous() for a in args)
    if compiled and not _fell_back:
        try:
            return _compiled(kind)(*args)
        except Exception as e:  # noqa: BLE001 - no C++ compiler, an inductor bug: run eagerly instead
            _fell_back.append(f"{type(e).__name__}: {e}")
            warnings.warn(f"int8 training products: torch.compile failed ({_fell_back[0][:200]}); "
                          "running them eagerly (correct, but about as slow as float32)", stacklevel=3)
    return _PARTS[kind](*args)


class _Memo:
    """The last input quantized one way, reused while it is the same tensor, unchanged: a layer's
    query, key and value products (and gate and up) take the same input, so it is quantized once for
    the three. The input is held, so its memory cannot be reused by another tensor with the same
    address and shape."""

    def __init__(self, kind: str) -> None:
        self.kind, self.src, self.key, self.val = kind, None, None, None

    def __call__(self, x: Any, compiled: bool) -> Any:
        key = (x.data_ptr(), tuple(x.shape), x.stride(), x._version, compiled)
        if self.src is None or key != self.key:
            self.val = _call(self.kind, x, compiled=compiled)
            self.src, self.key = x, key
        return self.val

    def clear(self) -> None:
        self.src = self.key = self.val = None


_MEMOS = {"rows": _Memo("rows"), "columns_t": _Memo("columns_t")}


def _product(kind: str, a: Any, b: Any, compiled: bool) -> Any:
    """``forward`` (``a`` = x, ``b`` = W), ``grad_input`` (dy, W) or ``grad_weight`` (dy, x)."""
    if kind == "forward":
        return _call("forward", *_MEMOS["rows"](a, compiled), b, compiled=compiled)
    if kind == "grad_weight":
        return _call("grad_weight", a, *_MEMOS["columns_t"](b, compiled), compiled=compiled)
    return _call(kind, a, b, compiled=compiled)


@functools.cache
def _function() -> Any:
    import torch

    class Int8Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, compiled):
            lead = x.shape[:-1]
            x2 = x.reshape(-1, x.shape[-1]).float()
            ctx.save_for_backward(x2, weight)
            ctx.compiled, ctx.lead, ctx.has_bias = compiled, lead, bias is not None
            out = _product("forward", x2, weight.detach().float(), compiled)
            if bias is not None:
                out = out + bias
            return out.view(*lead, out.shape[-1]).to(x.dtype)

        @staticmethod
        def backward(ctx, dy):
            x2, weight = ctx.saved_tensors
            dy2 = dy.reshape(-1, dy.shape[-1]).float()
            dx = dw = db = None
            if ctx.needs_input_grad[0]:
                dx = _product("grad_input", dy2, weight.detach().float(), ctx.compiled).view(*ctx.lead, weight.shape[1])
            if ctx.needs_input_grad[1]:
                dw = _product("grad_weight", dy2, x2, ctx.compiled).to(weight.dtype)
            if ctx.has_bias and ctx.needs_input_grad[2]:
                db = dy2.sum(0)
            return dx, dw, db, None

    return Int8Linear


@contextmanager
def int8_products(model: Any, *, enabled: bool = True, compiled: bool = True) -> Iterator[int]:
    """Within the context, every ``torch.nn.Linear`` of ``model`` multiplies in int8 where gradients
    are being recorded (a training forward pass and its backward), and in float32 otherwise; yields
    how many layers it switched (0 when not ``enabled``). The layers' forward methods are restored on
    exit, whatever happens."""
    if not enabled:
        yield 0
        return
    import torch

    fn = _function()
    switched = []

    def forward_of(layer: Any) -> Any:
        plain = layer.forward

        def forward(x: Any) -> Any:
            if torch.is_grad_enabled() and (x.requires_grad or layer.weight.requires_grad):
                return fn.apply(x, layer.weight, layer.bias, compiled)
            return plain(x)

        return forward

    try:
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and "forward" not in vars(m):
                m.forward = forward_of(m)
                switched.append(m)
        yield len(switched)
    finally:
        for m in switched:
            vars(m).pop("forward", None)
        for memo in _MEMOS.values():
            memo.clear()
