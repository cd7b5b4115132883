"""Training precision on the ``tiny`` backbone: bf16 autocast and int8 products train with a finite loss close to fp32's,
every run records what it computed in, and a run asking for bf16 where the hardware has none falls
back to fp32 and says so (the capability check monkeypatched)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from prmkit.models import FP32_SDPA, RewardModel, _precision, bf16_problem
from prmkit.policies import int8_problem
from prmkit.train import load_config, train

NO_BF16 = bf16_problem(torch.device("cpu"))
NO_INT8 = int8_problem(torch.device("cpu"))


def config(marker_files, out, *overrides):
    return load_config("tiny", ["progress=false", "log_every=1", "eval_fraction=0", "max_steps=2", "lr=1e-2",
                                "bucketing=false", f"train=[{marker_files['train']}]",
                                f"eval=[{marker_files['eval']}]", *overrides], output_dir=str(out))


@pytest.mark.parametrize("low", [
    pytest.param("bf16", marks=pytest.mark.skipif(NO_BF16 is not None, reason=f"no native bf16 here: {NO_BF16}")),
    pytest.param("int8", marks=pytest.mark.skipif(NO_INT8 is not None, reason=f"no int8 products here: {NO_INT8}"))])
@pytest.mark.slow
def test_low_precision_trains_with_a_loss_close_to_fp32(marker_files, tmp_path, low):
    runs = {}
    for precision in ("fp32", low):
        logs: list[str] = []
        result = train(config(marker_files, tmp_path / precision, f"precision={precision}"), log=logs.append)
        runs[precision] = result
        assert result.precision == {"requested": precision, "used": precision, "note": None}
        assert any(line.startswith(f"precision: {precision}") for line in logs)
        info = json.loads((Path(result.output_dir) / "prmkit_rm.json").read_text())
        assert info["precision"] == result.precision and info["train_config"]["precision"] == precision
        # bf16 on a CPU trains with float32 attention; the saved model knows nothing of it
        assert ("attention in float32 (on this CPU faster than in bf16)" in logs) == (precision == "bf16")
        assert any(s.startswith("int8 products in the backbone's") for s in logs) == (precision == "int8")
        assert FP32_SDPA not in (Path(result.output_dir) / "config.json").read_text()
    fp32, lows = ([h["loss"] for h in runs[p].history if "loss" in h] for p in ("fp32", low))
    assert all(math.isfinite(v) for v in lows)
    # step 1 is the same weights on the same batch: only the arithmetic differs (bf16 keeps ~3 digits,
    # int8 products about 2)
    assert lows[0] == pytest.approx(fp32[0], abs=0.02)
    # after 2 steps at lr 1e-2 the runs have gone apart by their rounding: int8 products round each
    # value to 1/254 of its row's largest (bf16: 1/256 of its own magnitude), so a wider bound (a tiny
    # model's int8 run ended 0.063 from fp32's here; the SmolLM2 runs in the README, 0.004)
    assert runs[low].eval["eval_loss"] == pytest.approx(runs["fp32"].eval["eval_loss"],
                                                        abs=0.05 if low == "bf16" else 0.1)
    # the saved model is an ordinary float32 one
    rm = RewardModel.from_pretrained(runs[low].output_dir)
    assert all(p.dtype == torch.float32 for p in rm.model.parameters())


@pytest.mark.parametrize("requested", ["bf16", "auto"])
def test_no_native_bf16_falls_back_to_fp32_and_says_so(marker_files, tmp_path, monkeypatch, requested):
    monkeypatch.setattr(_precision, "bf16_problem", lambda device: "no bfloat16 on this test CPU")
    logs: list[str] = []
    result = train(config(marker_files, tmp_path / "run", f"precision={requested}", "max_steps=1"),
                   log=logs.append)
    want = {"requested": requested, "used": "fp32", "note": "no bfloat16 on this test CPU"}
    assert result.precision == want
    assert f"precision: fp32 ({requested} requested: no bfloat16 on this test CPU)" in logs
    info = json.loads((tmp_path / "run" / "prmkit_rm.json").read_text())
    assert info["precision"] == want and info["train_config"]["precision"] == requested


def test_fp32_is_fp32_and_optimizer_is_recorded(marker_files, tmp_path, monkeypatch):
    def never(device):  # fp32 asks nothing of the hardware
        raise AssertionError("fp32 must not check for bf16")

    monkeypatch.setattr(_precision, "bf16_problem", never)
    result = train(config(marker_files, tmp_path / "run", "precision=fp32", "max_steps=1"), log=lambda *a: None)
    assert result.precision == {"requested": "fp32", "used": "fp32", "note": None}
    assert result.optimizer in ("fused", "foreach", "for-loop")
    info = json.loads((tmp_path / "run" / "prmkit_rm.json").read_text())
    assert info["optimizer"] == result.optimizer
