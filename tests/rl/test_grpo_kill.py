"""``prmkit rl`` killed with SIGKILL mid-run resumes from its last checkpoint, losing at most the step it
was in, and then writes what an uninterrupted run writes (sampling is seeded per step, so a resumed step
samples the same tokens)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

pytest.importorskip("peft")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
STEPS = 6


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory) -> Path:
    import torch
    import transformers as T
    from tiny_tokenizers import qwen_tokenizer

    folder = tmp_path_factory.mktemp("policy")
    tok = qwen_tokenizer()
    torch.manual_seed(0)
    cfg = T.Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                        eos_token_id=tok.eos_token_id, pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
    T.Qwen2ForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _config(tmp: Path, policy: Path, out: str) -> Path:
    path = tmp / f"{out}.yaml"
    path.write_text(json.dumps({
        "output_dir": str(tmp / out), "model": str(policy), "adapter": None, "env": {"steps": 1},
        "train_start": 10, "eval_problems": 1, "eval_every": 3, "steps": STEPS, "prompts_per_step": 1,
        "group_size": 2, "max_new_tokens": 6, "learning_rate": 0.05, "rewards": {"outcome": 1.0, "oracle": 1.0},
        "kl_coef": 0.1}))
    return path


def _cmd(config: Path) -> list[str]:
    return [sys.executable, "-m", "prmkit", "rl", "--config", str(config), "--no-progress"]


def _rows(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_sigkill_mid_run_loses_at_most_one_step_and_resumes_to_the_same_run(tiny_policy, tmp_path):
    from prmkit.rl import load_rl_config, rl_train

    # the uninterrupted run, in this process (one thread, as the CLI's below: tests/rl/conftest.py)
    cfg = load_rl_config(_config(tmp_path, tiny_policy, "whole"))
    cfg.progress = False
    rl_train(cfg)
    expected = _rows(tmp_path / "whole")
    assert [r["step"] for r in expected] == list(range(STEPS + 1))

    config = _config(tmp_path, tiny_policy, "killed")
    out = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(config), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        rows = _rows(out) if (out / "metrics.jsonl").exists() else []
        if rows and rows[-1]["step"] >= 2:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = _rows(out)[-1]["step"]  # the last step whose metrics reached the disk
    checkpoint = json.loads((out / "checkpoints" / "latest.json").read_text())["step"]
    assert done - 1 <= checkpoint <= done

    resumed = subprocess.run(_cmd(config), env=ENV, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed after step {checkpoint}" in resumed.stdout
    rows = _rows(out)
    assert [r["step"] for r in rows] == list(range(STEPS + 1))
    for got, want in zip(rows, expected, strict=True):
        for key, value in want.items():
            if key != "seconds":
                assert got[key] == pytest.approx(value, rel=1e-4, abs=1e-6), (got["step"], key)
    # the finished adapter is a plain PEFT folder
    assert {p.name for p in (out / "adapter").iterdir()} == {"adapter_model.safetensors", "adapter_config.json"}
