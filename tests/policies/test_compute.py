"""``auto`` decides by what is fast here (issue 43): each CPU class forced, the probe's verdict, the
cache keyed by the CPU, and the ``torch`` policy, the scorer and training following the same rule."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from prmkit.policies import _compute  # noqa: E402
from prmkit.policies._compute import ComputeChoice, CpuInfo, choose_compute  # noqa: E402

AVX2 = CpuInfo("AMD EPYC (test)", "AVX2")
VNNI = CpuInfo("Intel Xeon (test)", "AVX512", vnni=True)
BF16 = CpuInfo("Intel Xeon Cooper Lake (test)", "AVX512", vnni=True, avx512_bf16=True)
AMX = CpuInfo("Intel Xeon Sapphire Rapids (test)", "AVX512", vnni=True, avx512_bf16=True, amx=True)


class _Probe:
    """A scripted probe: fixed milliseconds per dtype, and a record of what it was asked."""

    def __init__(self, **ms: float) -> None:
        self.ms = ms
        self.calls: list[tuple[tuple[int, int, int], list[str]]] = []
        self.kernels: list[str] = []

    def __call__(self, shape, dtypes, int8_kernel="int_mm", **kw):
        self.calls.append((shape, list(dtypes)))
        self.kernels.append(int8_kernel)
        return {d: self.ms[d] for d in (*dtypes, "float32")}


@pytest.fixture()
def machine(monkeypatch, tmp_path):
    """``machine(cpu, probe)``: make this process see ``cpu`` and time with ``probe``; a fresh
    cache folder and no decisions remembered."""
    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_compute, "_MEMO", {})
    monkeypatch.setattr("prmkit.policies._base._cpu_int8_problem", lambda: None)
    monkeypatch.setattr(_compute, "_busy", lambda: None)  # a quiet machine, whatever this one's load

    def use(cpu: CpuInfo, probe: _Probe | None = None) -> _Probe:
        probe = probe or _Probe(float32=10.0, int8=4.0, bfloat16=5.0)
        monkeypatch.setattr(_compute, "cpu_info", lambda: cpu)
        monkeypatch.setattr(_compute, "probe", probe)
        return probe

    return use


def test_cpu_classes_are_named_by_their_fastest_instructions():
    assert [c.cpu_class for c in (AVX2, VNNI, BF16, AMX)] == ["AVX2", "AVX512-VNNI", "AVX512-BF16", "AMX"]
    assert CpuInfo("Intel Core (test)", "AVX2", vnni=True).cpu_class == "AVX-VNNI"
    assert (AVX2.native_bf16, AVX2.fast_int8, VNNI.fast_int8, VNNI.native_bf16) == (False, False, True, False)


def test_avx2_only_probes_fbgemm_s_int8_and_else_runs_float32_without_probing(machine, monkeypatch):
    """Without VNNI the int8 candidate is fbgemm's product (``_int_mm`` is the slow path there),
    taken where the probe shows it faster; without fbgemm there is no candidate and no probe."""
    probe = machine(AVX2, _Probe(float32=10.0, int8=5.0))
    got = choose_compute("cpu", shape=(64, 576, 1536))
    assert (got.dtype, got.kernel, got.cpu_class) == ("int8", "fbgemm", "AVX2")
    assert probe.kernels == ["fbgemm"] and probe.calls == [((64, 576, 1536), ["int8"])]  # no bfloat16
    assert got.reason == "probe at 64x576x1536: int8 (fbgemm) 5.00 ms, float32 10.00 ms"
    probe = machine(AVX2, _Probe(float32=10.0, int8=9.5))
    assert choose_compute("cpu", shape=(16, 576, 1536)).dtype == "float32"
    monkeypatch.setattr(_compute, "_int8_fbgemm_kernel", lambda torch_: (None, None))
    probe = machine(AVX2)
    got = choose_compute("cpu")
    assert got.dtype == "float32" and got.cpu_class == "AVX2" and got.kernel is None
    assert "no int8 dot-product instructions (VNNI or AMX) and no fbgemm int8 product" in got.reason
    assert "no native bfloat16" in got.reason
    assert probe.calls == []  # nothing to try: no time spent


def test_vnni_takes_int8_only_where_the_probe_shows_it_faster(machine):
    probe = machine(VNNI, _Probe(float32=10.0, int8=4.0))
    got = choose_compute("cpu", shape=(16, 576, 1536))
    assert got.dtype == "int8" and probe.calls == [((16, 576, 1536), ["int8"])]
    assert got.kernel == "int_mm" and probe.kernels == ["int_mm"]  # VNNI: _int_mm's exact int8 sums
    assert got.reason == "probe at 16x576x1536: int8 (int_mm) 4.00 ms, float32 10.00 ms"
    machine(VNNI, _Probe(float32=10.0, int8=9.5))  # within the margin: float32, exact and simpler
    got = choose_compute("cpu", shape=(16, 64, 128))
    assert got.dtype == "float32" and "none beats float32 by 1.1x" in got.reason


def test_native_bfloat16_and_amx_take_the_fastest(machine):
    machine(BF16, _Probe(float32=10.0, int8=6.0, bfloat16=4.0))
    assert choose_compute("cpu").dtype == "bfloat16"
    probe = machine(AMX, _Probe(float32=10.0, int8=2.0, bfloat16=3.0))
    got = choose_compute("cpu")
    assert got.dtype == "int8" and probe.calls[0][1] == ["bfloat16", "int8"]
    # A caller that can run only bfloat16 (the scorer, training) is offered only that.
    probe = machine(AMX, _Probe(float32=10.0, bfloat16=3.0))
    assert choose_compute("cpu", candidates=("bfloat16",)).dtype == "bfloat16"
    assert probe.calls[0][1] == ["bfloat16"]


def test_int8_needs_an_exact_int_mm_as_well(machine, monkeypatch):
    probe = machine(VNNI)
    monkeypatch.setattr("prmkit.policies._base._cpu_int8_problem",
                        lambda: "torch._int_mm does not give exact integer sums here")
    got = choose_compute("cpu", candidates=("int8",))
    assert got.dtype == "float32" and "exact integer sums" in got.reason and probe.calls == []


def test_cuda_takes_bfloat16_where_the_gpu_has_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert choose_compute("cuda:0").dtype == "bfloat16"
    assert choose_compute("cuda", candidates=("int8",)).dtype == "float32"  # int8 is a CPU path
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    got = choose_compute("cuda")
    assert got.dtype == "float32" and got.reason == "no bfloat16 on this GPU"


def test_the_decision_is_cached_per_cpu(machine, monkeypatch, tmp_path):
    probe = machine(VNNI, _Probe(float32=10.0, int8=4.0))
    lines: list[str] = []
    first = choose_compute("cpu", log=lines.append)
    assert not first.cached and len(probe.calls) == 1
    assert lines == [f"compute: {first.describe()}"] and "CPU class AVX512-VNNI" in lines[0]
    files = sorted((tmp_path / "cache" / "compute").iterdir())
    assert len(files) == 1 and json.loads(files[0].read_text())["dtype"] == "int8"
    monkeypatch.setattr(_compute, "_MEMO", {})  # a new process: read from the cache, no probe
    again = choose_compute("cpu")
    assert again.cached and again.dtype == "int8" and again.kernel == "int_mm" and len(probe.calls) == 1
    # Another CPU (same flags, another model): its own probe and its own entry.
    other = machine(CpuInfo("Intel Xeon, another (test)", "AVX512", vnni=True), _Probe(float32=10.0, int8=20.0))
    assert choose_compute("cpu").dtype == "float32" and len(other.calls) == 1
    assert len(list((tmp_path / "cache" / "compute").iterdir())) == 2
    # Another torch version or thread count: another key.
    key = VNNI.key()
    monkeypatch.setattr(_compute, "_threads", lambda: 64)
    assert VNNI.key() != key
    # A damaged entry is measured again and replaced, not trusted.
    monkeypatch.setattr(_compute, "_MEMO", {})
    for f in (tmp_path / "cache" / "compute").iterdir():
        f.write_text("{not json")
    machine(VNNI, probe)
    assert choose_compute("cpu").dtype == "int8" and len(probe.calls) == 2


def test_a_probe_on_a_busy_machine_decides_for_its_process_only(machine, monkeypatch, tmp_path):
    probe = machine(VNNI, _Probe(float32=10.0, int8=4.0))
    monkeypatch.setattr(_compute, "_busy", lambda: "the machine was busy (load average 5.0 on 2 cores)")
    first = choose_compute("cpu")
    assert first.dtype == "int8" and first.reason.endswith("; not kept: the machine was busy (load average 5.0 on 2 cores)")
    assert not (tmp_path / "cache" / "compute").exists()  # nothing kept on disk
    assert choose_compute("cpu") is first and len(probe.calls) == 1  # this process asks once
    monkeypatch.setattr(_compute, "_MEMO", {})  # the next process, on a quiet machine: probes, and keeps it
    monkeypatch.setattr(_compute, "_busy", lambda: None)
    assert not choose_compute("cpu").cached and len(probe.calls) == 2
    assert len(list((tmp_path / "cache" / "compute").iterdir())) == 1


def test_busy_means_every_core_already_taken(monkeypatch):
    monkeypatch.setattr(_compute.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(_compute.os, "getloadavg", lambda: (2.0, 0.0, 0.0))
    assert _compute._busy() is None
    monkeypatch.setattr(_compute.os, "getloadavg", lambda: (2.5, 0.0, 0.0))
    assert _compute._busy() == "the machine was busy (load average 2.5 on 2 cores)"


def test_cache_list_shows_the_decisions(machine, tmp_path):
    from prmkit.policies import cache_entries

    machine(VNNI)
    choose_compute("cpu")
    entries = cache_entries(["compute"], root=tmp_path / "cache")
    assert [e.kind for e in entries] == ["compute"] and entries[0].key == VNNI.key()


def test_the_real_probe_times_each_dtype_it_is_asked_for():
    got = _compute.probe((4, 32, 64), ["bfloat16"], repeats=1)
    assert set(got) == {"float32", "bfloat16"} and all(v > 0 for v in got.values())


def test_describe_says_what_and_why():
    c = ComputeChoice("int8", "probe at 16x576x1536: int8 4.00 ms, float32 10.00 ms", "cpu", "AVX512-VNNI",
                      {"int8": 4.0, "float32": 10.0})
    assert c.describe() == "int8 (probe at 16x576x1536: int8 4.00 ms, float32 10.00 ms; CPU class AVX512-VNNI)"
    assert c.to_dict()["timings_ms"] == {"int8": 4.0, "float32": 10.0}


# -- the same rule for the torch policy, the scorer and training ------------------------------------------

def test_scorer_and_training_auto_use_bf16_only_where_it_is_faster(machine, monkeypatch):
    from prmkit.models import _precision
    from prmkit.models._precision import resolve_precision

    monkeypatch.setattr(_precision, "bf16_problem", lambda device: None)
    machine(BF16, _Probe(float32=10.0, bfloat16=4.0))
    assert resolve_precision("auto", "cpu", auto="bf16").used == "bf16"
    monkeypatch.setattr(_compute, "_MEMO", {})
    machine(BF16, _Probe(float32=10.0, bfloat16=12.0))  # emulated-speed bf16: float32 wins
    got = resolve_precision("auto", "cpu", auto="bf16", shape=(64, 32, 64))
    assert got.used == "fp32" and "probe at 64x32x64" in got.note
    assert got.describe().startswith("fp32 (auto requested: probe at 64x32x64: bfloat16 12.00 ms")
    # bf16 asked for by name is not second-guessed; fp32 asked for is fp32.
    assert resolve_precision("bf16", "cpu", auto="bf16").used == "bf16"
    assert resolve_precision("fp32", "cpu", auto="bf16").used == "fp32"
