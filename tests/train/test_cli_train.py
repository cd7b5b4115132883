"""``prmkit train``: in process through ``prmkit.cli.main``, and on two processes with ``accelerate launch``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from prmkit.cli import main
from prmkit.models import RewardModel
from prmkit.trace import read_traces
from prmkit.train import example_configs


def test_train_prm_writes_a_model(marker_files, tmp_path, capsys):
    out = tmp_path / "prm"
    main(["train", "prm", "--config", "tiny", f"train=[{marker_files['train']}]", f"output_dir={out}",
          "max_steps=2", "progress=false", "eval_fraction=0.25"])
    info = json.loads((out / "prmkit_rm.json").read_text())
    assert (info["kind"], info["steps"], info["processes"]) == ("prm", 2, 1)
    assert info["train_config"]["eval_fraction"] == 0.25
    # the held-out quarter (by problem) was evaluated; the eval and train traces add up to the file's 48
    assert info["train_data"]["traces"] + info["eval_data"]["traces"] == 48 and info["eval_data"]["traces"] > 0
    err = capsys.readouterr().err
    assert f"saved PRM to {out}" in err and "final eval: " in err
    rm = RewardModel.from_pretrained(str(out))
    trace = next(read_traces(marker_files["eval"]))
    assert len(rm.score([trace])[0]) == len(trace.steps)


def test_a_bad_config_exits_1_listing_every_problem(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "orm", "--config", "tiny", "batch=3", "lr=fast", "lora.r=four", "max_steps=0",
              "epochs=0", f"output_dir={tmp_path / 'never'}"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    for problem in ("batch: unknown key (did you mean batch_size?)", "lr: expected float, got str 'fast'",
                    "lora.r: expected int, got str 'four'", "train: give at least one trace file",
                    "epochs or max_steps must be positive"):
        assert problem in err
    assert "Traceback" not in err and not (tmp_path / "never").exists()

    with pytest.raises(SystemExit) as info:
        main(["train", "prm", "--config", "missing.yaml", "train=[x]"])
    assert info.value.code == 1 and "no config file 'missing.yaml'" in capsys.readouterr().err


def test_configs_lists_the_shipped_configs(capsys):
    main(["train", "configs"])
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == sorted(example_configs())  # the literal list is test_config.SHIPPED


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_with_accelerate_launch(marker_files, tmp_path):
    """Two processes of batch 2 make the same two updates as one process of batch 4 on the same four
    traces (a process's share of the labelled positions differs: 3+4 vs 4+2 steps, then 2+4 vs 4+3)."""
    out = tmp_path / "ddp"
    args = [f"train=[{marker_files['four']}]", "max_steps=2", "bucketing=false", "lr=1e-2", "progress=false",
            "eval_fraction=0", "precision=fp32"]
    # --multi_gpu, not --cpu: accelerate launch --cpu starts one process (several only through mpirun);
    # with no GPU visible, the two torchrun processes train on CPU over gloo
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(_free_port()),
           "-m", "prmkit", "train", "prm", "--config", "tiny", *args, "batch_size=2", f"output_dir={out}"]
    # a fresh cache: both processes want the tiny backbone, which the main one must build alone
    env = {**os.environ, "PRMKIT_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[:6000]
    log = proc.stderr + proc.stdout
    assert "2 optimizer steps (1/epoch, 2 process(es), batch 2 x accumulation 1, AdamW " in log
    assert log.count("saved PRM to") == 1  # the main process speaks and saves
    info = json.loads((out / "prmkit_rm.json").read_text())
    assert (info["processes"], info["steps"]) == (2, 2)
    rm = RewardModel.from_pretrained(str(out))
    trace = next(read_traces(marker_files["eval"]))
    assert len(rm.score([trace])[0]) == len(trace.steps)

    one = tmp_path / "one"
    main(["train", "prm", "--config", "tiny", *args, "batch_size=4", f"output_dir={one}"])
    a, b = load_file(str(out / "model.safetensors")), load_file(str(one / "model.safetensors"))
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5  # all-reduce sums in another order
