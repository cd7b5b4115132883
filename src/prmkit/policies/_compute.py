"""What ``auto`` computes in: decided by what is fast on this device, not only by what can run.

One rule serves the ``torch`` policy's ``dtype="auto"``, the scorer's and training's
``precision="auto"`` (:func:`choose_compute`):

- a CUDA device: bfloat16 where it supports it, else float32;
- a CPU: the candidates are bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX) and
  int8: through ``torch._int_mm`` where the CPU has int8 dot-product instructions (AVX512-VNNI,
  AVX-VNNI or AMX) and ``_int_mm`` is exact, else through fbgemm's u8 x s8 product with 7-bit
  weights (:func:`~prmkit.policies._int8._int8_fbgemm_kernel`) where torch has it and it is exact;
  without a candidate, float32 with no probe. Otherwise a micro-probe times
  each candidate against float32 on products of the model's shapes (well under a second) and the
  fastest wins; its answer is kept in prmkit's cache (``compute/``), keyed by the CPU's identity
  (model name and instruction flags), the thread count and the torch version, so a process pays it
  once per machine. A probe made while other work holds every core (load average above the core
  count) decides for its own process only and is not kept: a busy hour must not decide for good.

Why the instruction sets and not ``_int_mm`` alone: on a CPU without VNNI (AVX2 only, e.g. many AMD
Zen 2/3 machines and older Intel servers) oneDNN's int8 products are the slow path, 5-50x float32's
(measured on a 2-core AMD EPYC with AVX2: 16 rows x 576 x 1,536, 117 ms against 3.5 ms), so an
exactness check alone had ``auto`` choose a decode loop that sampled nothing in 20 minutes. There
fbgemm's kernel, written for AVX2, is the fast int8 path: 0.61 against float32's 1.13 ms for one 64 x 576
-> 1,536 product, and SmolLM2 samples at 336 tokens/s against 173 with the compiled float32 loop.

>>> ComputeChoice("float32", "no candidate", "cpu", "AVX2").describe()
'float32 (no candidate; CPU class AVX2)'
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prmkit.policies._int8 import _int8_fbgemm_kernel, _int8_kernel

__all__ = ["CpuInfo", "ComputeChoice", "cpu_info", "choose_compute", "COMPUTE_DTYPES"]

#: The dtypes :func:`choose_compute` chooses among (torch's names).
COMPUTE_DTYPES = ("bfloat16", "int8", "float32")

#: The probe's shape when the caller gives none: SmolLM2-135M's hidden and MLP sizes, 16 rows.
DEFAULT_SHAPE = (16, 576, 1536)

#: A candidate must beat float32 by this factor to be chosen: within noise, float32 is exact and
#: needs no conversions.
MARGIN = 1.1


@dataclass(frozen=True)
class CpuInfo:
    """What matters about a CPU for choosing a dtype: its ``model`` name, torch's ``capability``
    (``torch.backends.cpu.get_cpu_capability()``: ``"AVX2"``, ``"AVX512"``, ...) and the instruction
    sets that make bfloat16 or int8 products fast."""

    model: str
    capability: str
    vnni: bool = False           #: AVX512-VNNI or AVX-VNNI (int8 dot products)
    avx512_bf16: bool = False    #: native bfloat16 dot products
    amx: bool = False            #: AMX tiles (bfloat16 and int8)

    @property
    def cpu_class(self) -> str:
        """One name for the class of CPU: ``AMX``, ``AVX512-BF16``, ``VNNI``, or torch's capability
        (``AVX2``, ``AVX512``, ``DEFAULT``)."""
        if self.amx:
            return "AMX"
        if self.avx512_bf16:
            return "AVX512-BF16"
        if self.vnni:
            return f"{self.capability}-VNNI" if self.capability.startswith("AVX512") else "AVX-VNNI"
        return self.capability

    @property
    def native_bf16(self) -> bool:
        return self.avx512_bf16 or self.amx

    @property
    def fast_int8(self) -> bool:
        return self.vnni or self.amx

    def key(self) -> str:
        """The cache key of a decision on this CPU: its identity, the thread count and torch's version."""
        torch_version = _torch_version()
        threads = _threads()
        raw = json.dumps([asdict(self), torch_version, threads], sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ComputeChoice:
    """What ``auto`` chose (``dtype``: bfloat16, int8 or float32), why (``reason``), for which
    ``device`` and CPU class, and the probe's timings (milliseconds per product, by dtype) where it
    ran; ``cached``: the decision came from prmkit's cache."""

    dtype: str
    reason: str
    device: str
    cpu_class: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    cached: bool = False
    #: The int8 kernel the decode loop uses when ``dtype`` is int8 (``int_mm`` or ``fbgemm``).
    kernel: str | None = None

    def describe(self) -> str:
        """One log line: the dtype and why."""
        where = f"; CPU class {self.cpu_class}" if self.cpu_class else ""
        return f"{self.dtype} ({self.reason}{where})"

    def to_dict(self) -> dict[str, Any]:
        """As recorded in a run's provenance and ``describe()``."""
        return asdict(self)


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _cpuinfo_text() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """This machine's :class:`CpuInfo`: torch's own checks where it has them, else ``/proc/cpuinfo``'s
    flags."""
    import torch

    text = _cpuinfo_text()
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")),
                 "") or os.uname().machine
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines()
                      if ln.startswith(("flags", "Features"))), []))

    def check(name: str, *flag_names: str) -> bool:
        fn = getattr(torch.cpu, name, None)
        if fn is not None:
            try:
                return bool(fn())
            except RuntimeError:  # pragma: no cover - depends on the build
                pass
        return any(f in flags for f in flag_names)

    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # pragma: no cover - an old torch
        capability = "DEFAULT"
    vnni = check("_is_vnni_supported", "avx512_vnni") or check("_is_avx_vnni_supported", "avx_vnni")
    return CpuInfo(model=model, capability=capability, vnni=vnni,
                   avx512_bf16=check("_is_avx512_bf16_supported", "avx512_bf16"),
                   amx=check("_is_amx_tile_supported", "amx_tile", "amx_int8"))


def choose_compute(device: Any = "cpu", *, shape: tuple[int, int, int] | None = None,
                   candidates: tuple[str, ...] = ("bfloat16", "int8"), cache: bool = True,
                   log=None) -> ComputeChoice:
    """The dtype ``auto`` computes in on ``device`` (see the module docs).

    ``shape``: ``(rows, hidden, intermediate)`` of the products to probe (default
    :data:`DEFAULT_SHAPE`); ``candidates``: the dtypes the caller can run besides float32 (the
    scorer and training: bfloat16; the ``torch`` policy's decode loop: bfloat16 and int8);
    ``cache``: keep and reuse the decision in prmkit's cache; ``log``: where the one line saying the
    choice goes (None: nowhere).
    """
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    if kind == "cuda":
        choice = _cuda_choice(candidates)
    elif kind != "cpu":
        choice = ComputeChoice("float32", f"no auto rule for {kind!r} devices", kind)
    else:
        choice = _cpu_choice(cpu_info(), shape or DEFAULT_SHAPE, candidates, cache)
    if log is not None:
        log(f"compute: {choice.describe()}")
    return choice


def _cuda_choice(candidates: tuple[str, ...]) -> ComputeChoice:
    import torch

    if "bfloat16" in candidates and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return ComputeChoice("bfloat16", "this GPU computes bfloat16", "cuda")
    return ComputeChoice("float32", "no bfloat16 on this GPU", "cuda")


def _cpu_choice(info: CpuInfo, shape: tuple[int, int, int], candidates: tuple[str, ...],
                cache: bool) -> ComputeChoice:
    from prmkit.policies._base import int8_problem

    usable, why_not = [], []
    if "bfloat16" in candidates:
        if info.native_bf16:
            usable.append("bfloat16")
        else:
            why_not.append("no native bfloat16 (AVX512-BF16 or AMX)")
    kernel = None
    if "int8" in candidates:
        import torch

        if info.fast_int8 and (problem := int8_problem("cpu")) is not None:
            why_not.append(problem)
        elif not info.fast_int8 and _int8_fbgemm_kernel(torch)[0] is None:
            why_not.append("no int8 dot-product instructions (VNNI or AMX) and no fbgemm int8 product")
        else:
            usable.append("int8")
            kernel = "int_mm" if info.fast_int8 else "fbgemm"
    if not usable:
        return ComputeChoice("float32", "; ".join(why_not) or "float32 asked for", "cpu", info.cpu_class)
    memo_key = (info, shape, tuple(usable))
    if cache and memo_key in _MEMO:
        return _MEMO[memo_key]
    path = _cache_path(info, shape, usable) if cache else None
    if path is not None and path.exists():
        try:
            saved = json.loads(path.read_text())
            _MEMO[memo_key] = ComputeChoice(saved["dtype"], saved["reason"], "cpu", info.cpu_class,
                                            saved["timings_ms"], cached=True, kernel=saved.get("kernel"))
            return _MEMO[memo_key]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # an unreadable entry is measured again and replaced
    timings = probe(shape, usable, int8_kernel=kernel or "int_mm")
    best = min(usable, key=timings.__getitem__)
    shown = ", ".join(f"{d}{f' ({kernel})' if d == 'int8' else ''} {timings[d]:.2f} ms"
                      for d in (*usable, "float32"))
    rows, hidden, inter = shape
    if timings[best] * MARGIN < timings["float32"]:
        dtype, reason = best, f"probe at {rows}x{hidden}x{inter}: {shown}"
    else:
        dtype, reason = "float32", f"probe at {rows}x{hidden}x{inter}: {shown}; none beats float32 by {MARGIN}x"
    if path is not None and (busy := _busy()):
        # Timings taken while other work holds the cores say more about that work than about this
        # CPU: the decision serves this process, and the next one probes again.
        reason += f"; not kept: {busy}"
        path = None
    choice = ComputeChoice(dtype, reason, "cpu", info.cpu_class, timings, kernel=kernel if dtype == "int8" else None)
    if path is not None:
        _save(path, choice)
    if cache:
        _MEMO[memo_key] = choice
    return choice


def _busy() -> str | None:
    """Why a probe now would not be this CPU's answer (the load average over the last minute above the
    number of cores: other work already holds every core), or None."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average here
        return None
    cores = os.cpu_count() or 1
    return f"the machine was busy (load average {load:.1f} on {cores} cores)" if load > cores else None


#: Decisions this process has already made or read, so asking again costs nothing.
_MEMO: dict[tuple[Any, ...], ComputeChoice] = {}


def _cache_path(info: CpuInfo, shape: tuple[int, int, int], usable: list[str]) -> Path | None:
    from prmkit.policies._hf import cache_dir

    name = f"{info.key()}-{'x'.join(map(str, shape))}-{'-'.join(sorted(usable))}.json"
    return cache_dir() / "compute" / name


def _save(path: Path, choice: ComputeChoice) -> None:
    """Keep a decision (best effort: a read-only cache only costs the next process its probe)."""
    from prmkit._durable import write_text_file

    entry = {"dtype": choice.dtype, "reason": choice.reason, "timings_ms": choice.timings_ms, "kernel": choice.kernel,
             "cpu": asdict(cpu_info()), "torch": _torch_version(), "threads": _threads()}
    try:
        write_text_file(path, json.dumps(entry, indent=1) + "\n")
    except OSError:
        pass


def probe(shape: tuple[int, int, int], dtypes: list[str], *, repeats: int = 7,
          int8_kernel: str = "int_mm") -> dict[str, float]:
    """Milliseconds per pair of products ``(rows, hidden) @ (hidden, inter)`` and back, in float32
    and in each of ``dtypes``, the way prmkit computes them (int8: each row quantized when it comes,
    the decode loop's ``int8_kernel``: ``torch._int_mm`` or fbgemm's product, rescaled; bfloat16:
    bfloat16 inputs and weights); the best of ``repeats`` rounds after one warm-up, the dtypes
    timed in turn within each round. Seeded;
    about 0.1 s at SmolLM2's sizes on 2 cores."""
    import torch

    rows, hidden, inter = shape
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, hidden, generator=g)
    w1 = torch.randn(inter, hidden, generator=g) / hidden ** 0.5
    w2 = torch.randn(hidden, inter, generator=g) / inter ** 0.5
    runs: dict[str, Any] = {"float32": lambda: torch.nn.functional.linear(
        torch.nn.functional.linear(x, w1), w2)}
    if "bfloat16" in dtypes:
        xb, b1, b2 = x.bfloat16(), w1.bfloat16(), w2.bfloat16()
        runs["bfloat16"] = lambda: torch.nn.functional.linear(torch.nn.functional.linear(xb, b1), b2)
    if "int8" in dtypes:  # the decode loop's own int8 product
        linear, pack = (_int8_fbgemm_kernel if int8_kernel == "fbgemm" else _int8_kernel)(torch)
        p1, p2 = pack(w1), pack(w2)
        runs["int8"] = lambda: linear(linear(x, p1), p2)
    best = dict.fromkeys(runs, float("inf"))
    with torch.inference_mode():
        for fn in runs.values():
            fn()
        # Round by round, each dtype in turn: a burst of other work slows one round of every dtype,
        # not every round of one, and the best of each is what the CPU can do.
        for _ in range(repeats):
            for name, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
    return {name: round(t * 1000, 4) for name, t in best.items()}
