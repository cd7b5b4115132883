"""Training precision on the ``tiny`` backbone: bf16 autocast trains with a finite loss close to fp32's,
every run records what it computed in, and a run asking for bf16 where the hardware has none falls
back to fp32 and says so (the capability check monkeypatched)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from prmkit.models import FP32_SDPA, _precision, bf16_problem
from prmkit.train import load_config, train

NO_BF16 = bf16_problem(torch.device("cpu"))


def config(marker_files, out, *overrides):
    return load_config("tiny", ["progress=false", "log_every=1", "eval_fraction=0", "max_steps=2", "lr=1e-2",
                                "bucketing=false", f"train=[{marker_files['train']}]",
                                f"eval=[{marker_files['eval']}]", *overrides], output_dir=str(out))


@pytest.mark.skipif(NO_BF16 is not None, reason=f"no native bf16 here: {NO_BF16}")
def test_bf16_trains_with_a_loss_close_to_fp32(marker_files, tmp_path):
    runs = {}
    for precision in ("fp32", "bf16"):
        logs: list[str] = []
        result = train(config(marker_files, tmp_path / precision, f"precision={precision}"), log=logs.append)
        runs[precision] = result
        assert result.precision == {"requested": precision, "used": precision, "note": None}
        assert any(line.startswith(f"precision: {precision}") for line in logs)
        info = json.loads((Path(result.output_dir) / "prmkit_rm.json").read_text())
        assert info["precision"] == result.precision and info["train_config"]["precision"] == precision
        # bf16 on a CPU trains with float32 attention; the saved model knows nothing of it
        assert ("attention in float32 (on this CPU faster than in bf16)" in logs) == (precision == "bf16")
        assert FP32_SDPA not in (Path(result.output_dir) / "config.json").read_text()
    fp32, bf16 = ([h["loss"] for h in runs[p].history if "loss" in h] for p in ("fp32", "bf16"))
    assert all(math.isfinite(v) for v in bf16)
    # step 1 is the same weights on the same batch: only the arithmetic differs (bf16 keeps ~3 digits)
    assert bf16[0] == pytest.approx(fp32[0], abs=0.02)
    assert runs["bf16"].eval["eval_loss"] == pytest.approx(runs["fp32"].eval["eval_loss"], abs=0.05)


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
