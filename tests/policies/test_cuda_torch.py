"""The torch backend (prmkit's decode loop) on a GPU, checked against the same loop on the CPU and
against ``hf`` on the GPU, on a tiny local model with wide random weights.

The rest of the suite pins the CPU (tests/conftest.py hides CUDA). These run only where a GPU is present
and asked for: ``PRMKIT_TEST_CUDA=1 pytest -m cuda tests/policies/test_cuda_torch.py``; elsewhere they
skip and say why.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from decode_checks import REQS, rows, step_logits_gap, wide_copy  # noqa: E402

from prmkit.policies import SamplingParams, get_policy  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="no CUDA device visible (run with PRMKIT_TEST_CUDA=1 on a GPU machine)"),
]


@pytest.fixture(scope="module")
def wide_lm(tiny_lm, tmp_path_factory):
    """The tiny Llama with wide random weights (default-initialised ones give nearly flat logits, where
    a sample hangs on the last bit of rounding, which differs between devices)."""
    return wide_copy(tiny_lm, tmp_path_factory.mktemp("wide_llama_cuda"))


def _pol(folder, backend, device, dtype="float32", batch_size=4):
    return get_policy(backend, model=folder, adapter=None, device=device, dtype=dtype,
                      batch_size=batch_size, progress=False)


SAMPLED = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=7)
GREEDY = SamplingParams(n=1, max_new_tokens=10, temperature=0)


def test_float32_on_the_gpu_equals_hf_there_and_greedy_equals_the_cpu(wide_lm):
    """At float32 the loop on the GPU gives hf's completions on the GPU (the same per-row counter-based
    noise, computed there), and greedy ones equal to the CPU's; the prefix of request b is continued."""
    gpu = _pol(wide_lm, "torch", "cuda")
    assert gpu.model.device.type == "cuda" and gpu.describe()["engine"] == "prmkit decode loop"
    cpu = _pol(wide_lm, "torch", "cpu")
    hf_gpu = _pol(wide_lm, "hf", "cuda")
    for sp in (SAMPLED, GREEDY):
        assert rows(gpu.generate(REQS, sp)) == rows(hf_gpu.generate(REQS, sp))
    assert rows(gpu.generate(REQS, GREEDY)) == rows(cpu.generate(REQS, GREEDY))
    assert len({c[0] for row in rows(gpu.generate(REQS, SAMPLED)) for c in row}) > 2


def test_float32_batched_equals_one_at_a_time_on_the_gpu(wide_lm):
    gpu = _pol(wide_lm, "torch", "cuda")
    together = gpu.generate(REQS, SAMPLED)
    alone = [gpu.generate([r], SAMPLED)[0] for r in reversed(REQS)][::-1]
    assert rows(together) == rows(alone)


def test_logits_on_the_gpu_equal_a_transformers_forward(wide_lm):
    """Each decode step's logits on the GPU equal a plain forward pass over the prompt and the tokens
    so far (float32)."""
    gpu = _pol(wide_lm, "torch", "cuda", batch_size=6)
    worst, compared, steps = step_logits_gap(gpu, REQS)  # checks each step's logits are on the GPU
    assert compared == 6 * steps and steps >= 2 and worst < 1e-4


def test_auto_dtype_on_the_gpu_is_bfloat16_and_repeats(wide_lm):
    """``dtype="auto"`` on a GPU with bfloat16 decodes in bfloat16; the same call gives the same
    completions twice (run-to-run determinism for the same batch plan)."""
    pol = get_policy("torch", model=wide_lm, adapter=None, device="cuda", batch_size=4, progress=False)
    want = "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    assert pol.describe()["dtype"] == want
    assert next(pol.model.parameters()).dtype == getattr(torch, want)
    a, b = pol.generate(REQS, SAMPLED), pol.generate(REQS, SAMPLED)
    assert rows(a) == rows(b)
    assert all(c.num_tokens > 0 and c.finish_reason in ("stop", "length") for row in a for c in row)
