"""The GPU paths, checked against the CPU on the same tiny models: training, scoring, the causal check,
the likelihood scorer and hf sampling.

The rest of the suite pins the CPU (tests/conftest.py hides CUDA: its hand-derived numbers are fp32
numbers, and a model on a GPU loads in bf16 by default). These tests run only where a GPU is present and
asked for: ``PRMKIT_TEST_CUDA=1 pytest -m cuda``; elsewhere they skip and say why.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from prmkit.models import RewardModel, build_tiny_backbone  # noqa: E402
from prmkit.policies import GenerationRequest, SamplingParams, get_policy  # noqa: E402
from prmkit.trace import Problem, Step, Trace  # noqa: E402
from prmkit.train import load_config, train  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="no CUDA device visible (run with PRMKIT_TEST_CUDA=1 on a GPU machine)"),
]


def _traces() -> list[Trace]:
    return [Trace(f"t{i}", Problem(f"Tom has {i} apples and buys 5."),
                  [Step(f"{i} + 5 = {i + 5 + (i % 2)}"), Step(f"The answer is {i + 5 + (i % 2)}.")])
            for i in range(6)]


def test_training_on_the_gpu_uses_bf16_and_scores_like_the_cpu(marker_files, tmp_path):
    cfg = load_config("tiny", ["progress=false", "log_every=1", "eval_fraction=0", "max_steps=3", "lr=1e-2",
                               f"train=[{marker_files['train']}]", f"eval=[{marker_files['eval']}]",
                               "precision=auto"], output_dir=str(tmp_path / "run"))
    result = train(cfg, log=lambda _line: None)
    want = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    assert result.precision["used"] == want
    assert all(math.isfinite(h["loss"]) for h in result.history if "loss" in h)
    assert math.isfinite(result.eval["eval_loss"])
    # bf16 autocast over float32 weights (a model loads in bfloat16 on a GPU by default; training must
    # not keep it so, or AdamW's small updates round away): what was trained is saved in float32
    from safetensors import safe_open

    saved = sorted(Path(result.output_dir).glob("*.safetensors"))
    assert saved
    for f in saved:
        with safe_open(str(f), "pt") as st:
            assert {st.get_slice(k).get_dtype() for k in st.keys()} == {"F32"}, f.name
    # the saved folder scores the same on both devices at fp32 (invariants are fp32 numbers)
    cpu = RewardModel.from_pretrained(result.output_dir, device="cpu", dtype="float32").score(_traces())
    gpu = RewardModel.from_pretrained(result.output_dir, device="cuda", dtype="float32").score(_traces())
    for a, b in zip(cpu, gpu, strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    # bf16 on the GPU (the default dtype there) stays within bf16's rounding of the fp32 scores
    half = RewardModel.from_pretrained(result.output_dir, device="cuda")
    assert next(half.model.parameters()).dtype == torch.bfloat16
    for a, b in zip(cpu, half.score(_traces()), strict=True):
        assert a == pytest.approx(b, abs=3e-2)


def test_causal_backbone_check_runs_on_the_gpu(tmp_path):
    folder = build_tiny_backbone(tmp_path / "tiny", seed=1, hidden=32)
    rm = RewardModel.from_backbone(folder, causal=True, seed=1, device="cuda")
    assert rm.is_causal and rm.device.type == "cuda"
    cpu = RewardModel.from_backbone(folder, causal=True, seed=1, device="cpu", dtype="float32")
    gpu = RewardModel.from_backbone(folder, causal=True, seed=1, device="cuda", dtype="float32")
    for a, b in zip(cpu.score(_traces()), gpu.score(_traces()), strict=True):
        assert a == pytest.approx(b, abs=1e-4)


def test_likelihood_scorer_and_hf_sampling_on_the_gpu(tmp_path):
    from prmkit.scoring import LikelihoodScorer

    folder = build_tiny_backbone(tmp_path / "lm", seed=2, hidden=32)
    cpu_pol = get_policy("hf", model=folder, adapter=None, device="cpu", dtype="float32", progress=False)
    gpu_pol = get_policy("hf", model=folder, adapter=None, device="cuda", dtype="float32", progress=False)
    assert gpu_pol.device.startswith("cuda")
    cpu = LikelihoodScorer(policy=cpu_pol, reduce="mean").score(_traces())
    gpu = LikelihoodScorer(policy=gpu_pol, reduce="mean").score(_traces())
    for a, b in zip(cpu, gpu, strict=True):
        assert a == pytest.approx(b, rel=1e-3)
    # greedy continuation of a prefix: the same tokens on both devices at fp32
    req = [GenerationRequest([{"role": "user", "content": "2 + 2 ="}], prefix="4", key="k")]
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=8, seed=0)
    assert gpu_pol.generate(req, params)[0][0].text == cpu_pol.generate(req, params)[0][0].text
