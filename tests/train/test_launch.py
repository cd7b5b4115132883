"""``prmkit.train.launch`` / ``prmkit train prm --num-processes N``: N CPU processes really start, train
together, and the result equals one process with N times the batch."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from prmkit.cli import main
from prmkit.errors import PrmkitError
from prmkit.train import TrainConfig, launch, load_config, train
from prmkit.train._trainer import _write_config_yaml


@pytest.fixture
def quiet_env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


@pytest.mark.slow
def test_two_cpu_processes_make_the_update_of_one_with_twice_the_batch(marker_files, tmp_path, capfd,
                                                                      quiet_env):
    """As ``test_two_processes_with_accelerate_launch``: two processes of batch 2 on the four traces make
    the same two updates as one process of batch 4."""
    args = [f"train=[{marker_files['four']}]", "max_steps=2", "bucketing=false", "lr=1e-2", "progress=false",
            "eval_fraction=0", "precision=fp32"]
    out = tmp_path / "two"
    result = launch(load_config("tiny", [*args, "batch_size=2", f"output_dir={out}"]), 2)
    log = "".join(capfd.readouterr())
    assert "starting 2 training processes on CPU (gloo, 1 thread(s) each)" in log
    assert "2 optimizer steps (1/epoch, 2 process(es), batch 2 x accumulation 1, AdamW " in log
    assert log.count("saved PRM to") == 1  # the main process speaks and saves
    info = json.loads((out / "prmkit_rm.json").read_text())
    assert (info["processes"], info["steps"]) == (2, 2)
    assert not list(tmp_path.glob("two/checkpoint-*")) and not list(tmp_path.glob("two/.tmp-*"))

    one = train(load_config("tiny", [*args, "batch_size=4", f"output_dir={tmp_path / 'one'}"]), log=lambda m: None)
    # the main process's result comes back, with the tokens of both processes
    assert (result.output_dir, result.steps, result.tokens) == (str(out), 2, one.tokens)
    assert result.precision == one.precision and result.train_data == one.train_data
    a, b = load_file(str(out / "model.safetensors")), load_file(str(tmp_path / "one" / "model.safetensors"))
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5  # all-reduce sums in another order


@pytest.mark.slow
def test_a_failing_process_is_one_error(tmp_path, capfd, quiet_env):
    cfg = TrainConfig(train=[str(tmp_path / "missing.jsonl")], output_dir=str(tmp_path / "never"), progress=False)
    with pytest.raises(PrmkitError, match="training on 2 processes failed"):
        launch(cfg, 2)
    err = capfd.readouterr().err
    assert "error (process 0): " in err and "missing.jsonl" in err and "Traceback" not in err
    assert not (tmp_path / "never").exists()


def test_the_cli_passes_num_processes(monkeypatch, tmp_path, capsys):
    calls = []
    monkeypatch.setattr("prmkit.train.launch", lambda cfg, n, log: calls.append((cfg, n)) or _NoEval())
    monkeypatch.chdir(tmp_path)  # the CLI reads the data files before it launches: they must be there
    (tmp_path / "t.jsonl").write_text(json.dumps({"id": "a", "problem": {"text": "q"}, "steps": [{"text": "s"}]})
                                      + "\n")
    main(["train", "orm", "--config", "tiny", "--num-processes", "3", "train=[t.jsonl]", "lr=0.5"])
    [(cfg, n)] = calls
    assert (n, cfg.kind, cfg.lr, cfg.train) == (3, "orm", 0.5, ["t.jsonl"])

    with pytest.raises(SystemExit):
        main(["train", "prm", "--config", "tiny", "--num-processes", "0", "train=[t.jsonl]"])
    assert "--num-processes" in capsys.readouterr().err and len(calls) == 1


class _NoEval:
    eval = None

    def eval_line(self):
        return None


def test_launch_checks_before_it_starts_anything(monkeypatch, tmp_path):
    with pytest.raises(PrmkitError, match="train: give at least one trace file"):
        launch(TrainConfig(output_dir=str(tmp_path / "never")), 2)
    monkeypatch.setenv("WORLD_SIZE", "2")  # under accelerate launch: each process trains, none launches
    with pytest.raises(PrmkitError, match="already one of several processes"):
        launch(TrainConfig(train=["t.jsonl"]), 2)
    assert not (tmp_path / "never").exists()


def test_the_processes_read_back_the_same_config(tmp_path):
    cfg = load_config("smollm2-lora", ["train=[a.jsonl, b.jsonl]", "lr=3e-5", "lora.r=4", "max_traces=7",
                                       "convention={name: mine, tag: ' ки'}", "kind=orm"])
    _write_config_yaml(cfg, tmp_path / "c.yaml")
    assert load_config(str(tmp_path / "c.yaml")) == cfg


def test_a_training_process_leaves_its_process_group_before_it_exits(monkeypatch, tmp_path):
    """A process of a multi-process run destroys the process group its training joined, done or
    failed: left to the interpreter's exit, gloo's threads sometimes aborted a process that had
    already saved its work (exit status -6, "terminate called without an active exception")."""
    import torch.distributed as dist

    from prmkit.train import _launch

    def train_in_a_group(fail):
        def run(config, log):  # one process's group, as accelerate starts it on several
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
            assert dist.is_initialized()
            if fail:
                raise PrmkitError("no labelled steps")
            return type("Result", (), {"to_dict": lambda self: {"ok": True}})()
        return run

    monkeypatch.setattr(_launch, "load_config", lambda path: path)
    for fail, status in ((False, 0), (True, 1)):
        monkeypatch.setattr(_launch, "train", train_in_a_group(fail))
        assert _launch.worker(["config.yaml", "--result", str(tmp_path / "result.json")]) == status
        assert not dist.is_initialized()
    assert json.loads((tmp_path / "result.json").read_text()) == {"ok": True}
