"""Compiled elementwise parts of a decoder for training (with ``precision=int8``).

Once a training step's matrix products run in int8 (:mod:`prmkit.train._int8`), the decoder's small
elementwise operations weigh: on SmolLM2-135M (8 x 300 tokens, 2 cores) the MLP's activation times
its up projection, the RMSNorms and the rotary embedding, run eagerly, each operation one pass over
memory forward and two or three backward, cost about a fifth of a step (4.14 s against 5.34 s with
them compiled, in one process, alternating). This module runs each of them
as one ``torch.compile``-d function (dynamic sizes), whose forward and backward inductor fuses into
a pass or two each, where gradients are recorded (a forward pass without them runs the model's own
eager code, as :mod:`prmkit.train._int8` does):

* an MLP ``down(act(gate(x)) * up(x))``: ``act(g) * u`` compiled, one function per kind of activation;
* an RMSNorm (a module whose class name ends in ``RMSNorm``): its own class's ``forward`` compiled;
* the rotary embedding: the model's module's own ``apply_rotary_pos_emb`` compiled, for the context's
  duration.

A norm or the rotary function runs its own code, compiled. An MLP is switched only after a probe shows
that its own forward computes ``down(act(gate(x)) * up(x))`` (on a small random input, without
gradients). The forward methods and the module function are restored on exit. Where compiling fails
the eager functions run, with a warning.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["fused_elementwise"]

_fell_back: list[str] = []


def _guarded(compiled: Any, eager: Any) -> Any:
    """``compiled`` where gradients are recorded, ``eager`` elsewhere (so that evaluation inside a
    training run computes what it computes outside one, and compiles nothing); falling back to
    ``eager`` for good, with a warning, where compiling fails."""
    import torch

    def call(*args: Any) -> Any:
        if not _fell_back and torch.is_grad_enabled():
            try:
                return compiled(*args)
            except Exception as e:  # noqa: BLE001 - no C++ compiler, an inductor bug: run eagerly
                _fell_back.append(f"{type(e).__name__}: {e}")
                warnings.warn(f"fused training operations: torch.compile failed ({_fell_back[0][:200]}); "
                              "running them eagerly", stacklevel=2)
        return eager(*args)

    return call


@functools.cache
def _act_mul(key: str, act: Any) -> Any:
    """``act(g) * u``, compiled; one per kind of activation (``key``: its repr)."""
    import torch

    def eager(g: Any, u: Any) -> Any:
        return act(g) * u

    return _guarded(torch.compile(eager, dynamic=True), eager)


@functools.cache
def _norm(cls: type) -> Any:
    import torch

    return _guarded(torch.compile(cls.forward, dynamic=True), cls.forward)


@functools.cache
def _rotary(fn: Any) -> Any:
    import torch

    return _guarded(torch.compile(fn, dynamic=True), fn)


def _is_mlp(m: Any) -> bool:
    return all(hasattr(m, n) for n in ("gate_proj", "up_proj", "down_proj", "act_fn"))


def _is_norm(m: Any) -> bool:
    return type(m).__name__.endswith("RMSNorm") and hasattr(m, "weight")


def _same(a: Any, b: Any) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6))


def _probe_input(m: Any, width: int) -> Any:
    import torch

    p = next(m.parameters())
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 3, width, generator=g).to(device=p.device, dtype=p.dtype)


def _mlp_forward(m: Any, eager: bool) -> Any | None:
    """The fused forward for MLP ``m``, or None where ``m``'s own forward computes something else."""
    act = m.act_fn
    fused = (lambda g, u: act(g) * u) if eager else _act_mul(repr(act), act)

    def forward(x: Any) -> Any:
        return m.down_proj(fused(m.gate_proj(x), m.up_proj(x)))

    import torch

    x = _probe_input(m, m.gate_proj.in_features)
    was = m.training
    m.eval()  # no dropout (a LoRA layer's) in the probe
    try:
        with torch.no_grad():
            ok = _same(m(x), m.down_proj(act(m.gate_proj(x)) * m.up_proj(x)))
    finally:
        m.train(was)
    return forward if ok else None


@contextmanager
def fused_elementwise(model: Any, *, enabled: bool = True, compiled: bool = True) -> Iterator[dict[str, int]]:
    """Within the context, ``model``'s MLP activations, RMSNorms and rotary embedding run compiled
    (module docstring); yields how many of each were switched (``{}`` when not ``enabled``).
    ``compiled=False`` switches to the same functions uncompiled (tests). Everything is restored on
    exit, whatever happens."""
    if not enabled:
        yield {}
        return
    switched: list[Any] = []
    patched: list[tuple[Any, str, Any]] = []
    counts = {"mlp": 0, "norm": 0, "rotary": 0}
    try:
        for m in model.modules():
            if "forward" in vars(m):
                continue
            if _is_mlp(m):
                fwd = _mlp_forward(m, eager=not compiled)
                if fwd is not None:
                    m.forward = fwd
                    switched.append(m)
                    counts["mlp"] += 1
            elif _is_norm(m):
                cls = type(m)
                norm = _norm(cls) if compiled else cls.forward
                m.forward = functools.partial(norm, m)
                switched.append(m)
                counts["norm"] += 1
            mod = sys.modules.get(type(m).__module__)
            fn = getattr(mod, "apply_rotary_pos_emb", None)
            if fn is not None and not any(p[0] is mod for p in patched):
                patched.append((mod, "apply_rotary_pos_emb", fn))
                mod.apply_rotary_pos_emb = _rotary(fn) if compiled else fn
                counts["rotary"] += 1
        yield counts
    finally:
        for m in switched:
            vars(m).pop("forward", None)
        for mod, name, fn in patched:
            setattr(mod, name, fn)
