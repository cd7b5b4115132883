"""A training run can be extended (issue 15): resumed with a larger max_steps it continues from its
newest checkpoint (``keep_final_checkpoint`` keeps one beside a finished model), says that the
schedule changed, and a smaller total is refused."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")

from prmkit.errors import PrmkitError  # noqa: E402
from prmkit.train import load_config, train  # noqa: E402

QUIET = ["progress=false", "log_every=1", "precision=fp32", "eval_fraction=0", "lr=2e-2"]


def config(marker_files, out, *overrides):
    return load_config("tiny", [*QUIET, *overrides], output_dir=str(out), train=[str(marker_files["train"])])


def test_a_finished_run_is_extended_from_its_final_checkpoint(marker_files, tmp_path):
    out = tmp_path / "run"
    first = train(config(marker_files, out, "max_steps=2", "keep_final_checkpoint=true"), log=lambda *a: None)
    assert first.steps == 2 and (out / "checkpoint-2").is_dir() and (out / "model.safetensors").is_file()

    logs: list[str] = []
    longer = train(config(marker_files, out, "max_steps=4", "keep_final_checkpoint=true"), log=logs.append)
    assert longer.resumed_from == str(out / "checkpoint-2") and longer.steps == 4
    assert any(line.startswith("extending the run: epochs 1.0 -> 1.0, max_steps 2 -> 4 (4 steps); the "
                               "learning-rate schedule is recomputed") for line in logs), logs
    # the first two steps are the first run's, not redone
    assert [h["step"] for h in longer.history] == [1, 2, 3, 4]
    assert [h["loss"] for h in longer.history[:2]] == [h["loss"] for h in first.history]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-4"]

    with pytest.raises(PrmkitError, match=r"checkpoint-4 is at step 4, past this run's 3 steps: a run can "
                                          r"be extended .*, not shortened"):
        train(config(marker_files, out, "max_steps=3"), log=lambda *a: None)
    # other settings still must match
    with pytest.raises(PrmkitError, match="lr: checkpoint has 0.02, config has 0.01"):
        train(config(marker_files, out, "max_steps=6", "lr=1e-2"), log=lambda *a: None)


def test_without_keep_final_checkpoint_a_finished_run_leaves_none(marker_files, tmp_path):
    out = tmp_path / "run"
    train(config(marker_files, out, "max_steps=2"), log=lambda *a: None)
    assert not list(out.glob("checkpoint-*"))


def test_the_command_refuses_to_replace_a_finished_model_unless_asked(marker_files, tmp_path, capsys):
    from prmkit.cli import main

    out = tmp_path / "run"
    args = ["train", "prm", "--config", "tiny", f"train=[{marker_files['train']}]", f"output_dir={out}",
            *QUIET, "max_steps=1"]

    def run(*extra):
        try:
            main([*args, *extra])
        except SystemExit as e:
            return e.code or 0
        return 0

    assert run() == 0
    before = (out / "model.safetensors").read_bytes()
    capsys.readouterr()
    assert run() == 1
    assert capsys.readouterr().err == (f"error: {out}: already holds a trained model; pass --overwrite to replace "
                                       "it (to extend a run instead, train it with keep_final_checkpoint=true, "
                                       "then rerun with a larger max_steps)\n")
    assert (out / "model.safetensors").read_bytes() == before
    assert run("--overwrite", "seed=1") == 0 and (out / "model.safetensors").read_bytes() != before
    # a run kept with its final checkpoint is extended without --overwrite: nothing is replaced
    assert run("--overwrite", "keep_final_checkpoint=true") == 0
    assert run("keep_final_checkpoint=true", "max_steps=2") == 0
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]
