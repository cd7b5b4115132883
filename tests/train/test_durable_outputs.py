"""Folders written by training and export are flushed to disk before they are renamed into place
(issue 15): every file of a checkpoint, of the final model and of an exported shipped model is
fsynced, then its folder, before the rename, and the parent folder after; a failure while writing
leaves the previous output as it was. A SIGKILL test cannot see a missing fsync; these watch the calls."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("peft")

from prmkit.models import _shipped, export_shipped  # noqa: E402
from prmkit.train import _trainer, load_config, train  # noqa: E402

LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"}


def config(marker_files, out, *overrides, **values):
    values.setdefault("train", [str(marker_files["train"])])
    return load_config("tiny", ["progress=false", "precision=fp32", "eval_fraction=0", *overrides],
                       output_dir=str(out), **values)


@pytest.fixture
def calls(fsync_calls):
    return fsync_calls


def assert_flushed_before_rename(calls: list[tuple], folder: Path) -> None:
    """Every file and folder of ``folder`` (now in place) was fsynced before the rename that put it
    (or the folder holding it) there, and the parent of that rename was fsynced after it."""
    for p in [folder, *folder.rglob("*")]:
        ino = p.stat().st_ino
        kind = "dir" if p.is_dir() else "file"
        moved = [i for i, c in enumerate(calls) if c[0] == "replace" and Path(c[2]) in (p, *p.parents)
                 and Path(c[2]).is_relative_to(folder.parent)]
        assert moved, f"{p} was never renamed into place"
        at = moved[-1]
        assert (kind, ino) in calls[:at], f"{p.relative_to(folder.parent)} renamed before an fsync of it"
        parent = Path(calls[at][2]).parent
        assert ("dir", parent.stat().st_ino) in calls[at + 1:], f"{parent} not flushed after the rename"


def test_checkpoints_and_the_final_model_are_flushed_before_their_rename(marker_files, tmp_path, calls):
    out = tmp_path / "run"
    train(config(marker_files, out, "max_steps=2", "save_every=1", "keep_final_checkpoint=true"),
          log=lambda *a: None)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith((".", "checkpoint-"))) == ["checkpoint-2"]
    assert_flushed_before_rename(calls, out / "checkpoint-2")
    for name in ("model.safetensors", "config.json", "prmkit_rm.json", "train_config.yaml", "metrics.jsonl"):
        ino = (out / name).stat().st_ino
        at = max(i for i, c in enumerate(calls) if c[0] == "replace" and c[2] == str(out / name))
        assert ("file", ino) in calls[:at], f"{name} renamed before an fsync of it"
        assert ("dir", out.stat().st_ino) in calls[at + 1:]
    # prmkit_rm.json, what marks the model complete, arrives last
    last = [c[2] for c in calls if c[0] == "replace" and Path(c[2]).parent == out][-1]
    assert last == str(out / "prmkit_rm.json")


def test_a_failing_run_leaves_the_previous_model_as_it_was(marker_files, tmp_path, monkeypatch):
    out = tmp_path / "run"
    train(config(marker_files, out, "max_steps=1"), log=lambda *a: None)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def fail(*a, **k):
        raise OSError("disk full")

    # the last thing written before the move: every earlier file of the new model is already there
    monkeypatch.setattr(_trainer, "_write_config_yaml", fail)
    with pytest.raises(OSError, match="disk full"):
        train(config(marker_files, out, "max_steps=2", "lr=1e-2"), log=lambda *a: None)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_failing_checkpoint_leaves_the_previous_one(marker_files, tmp_path, monkeypatch):
    out = tmp_path / "run"
    train(config(marker_files, out, "max_steps=1", "keep_final_checkpoint=true"), log=lambda *a: None)
    ckpt = out / "checkpoint-1"
    before = {p.name: p.read_bytes() for p in ckpt.rglob("*") if p.is_file()}

    def fail(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(_trainer, "_save_optimizer", fail)
    with pytest.raises(OSError, match="disk full"):  # extended: checkpoint-2 fails halfway
        train(config(marker_files, out, "max_steps=3", "save_every=1", "keep_final_checkpoint=true"),
              log=lambda *a: None)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]
    assert {p.name: p.read_bytes() for p in ckpt.rglob("*") if p.is_file()} == before


@pytest.fixture(scope="module")
def lora_run(marker_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("lora-run") / "prm"
    train(config(marker_files, out, "lr=2e-2", "max_steps=1", lora=LORA), log=lambda *a: None)
    return out


def test_export_shipped_is_flushed_before_its_rename(lora_run, tmp_path, calls):
    asset = tmp_path / "assets" / "prm-test"
    export_shipped(lora_run, asset, note="first")
    assert_flushed_before_rename(calls, asset)


def test_a_failing_export_leaves_the_previous_asset(lora_run, tmp_path, monkeypatch):
    asset = tmp_path / "assets" / "prm-test"
    export_shipped(lora_run, asset, note="first")
    before = {p.name: p.read_bytes() for p in asset.iterdir()}

    def fail(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(_shipped, "_cast_tensors", fail)
    with pytest.raises(OSError, match="disk full"):
        export_shipped(lora_run, asset, note="second", dtype="bfloat16")
    assert {p.name: p.read_bytes() for p in asset.iterdir()} == before
