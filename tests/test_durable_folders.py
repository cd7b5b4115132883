"""Folders and run files are published as files are (issue 15): written whole under a temporary name,
every file and folder flushed to disk (fsync), renamed into place, the parent flushed after. Covers the
helpers (:func:`publish_folder`, :func:`publish_into`) and the writers that had no fsync: the demo's
stage files and markers, the policy conversion cache and the tiny backbone. A failure while writing
leaves the previous output as it was. (Training and export: ``tests/train/test_durable_outputs.py``.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from prmkit import _jsonio, demo
from prmkit.trace import Problem, Step, Trace, read_traces


@pytest.fixture
def calls(fsync_calls):
    return fsync_calls


def renamed_at(calls: list[tuple], dst: Path) -> int:
    return max(i for i, c in enumerate(calls) if c[0] == "replace" and c[2] == str(dst))


def assert_published(calls: list[tuple], out: Path) -> None:
    """``out`` and everything in it fsynced before the rename to ``out``; the parent after it."""
    at = renamed_at(calls, out)
    for p in [out, *out.rglob("*")]:
        kind = "dir" if p.is_dir() else "file"
        assert (kind, p.stat().st_ino) in calls[:at], f"{p} renamed before an fsync of it"
    if os.name == "posix":
        assert ("dir", out.parent.stat().st_ino) in calls[at + 1:], "the parent was not flushed"


def _folder(path: Path, text: str) -> Path:
    (path / "sub").mkdir(parents=True)
    (path / "a.txt").write_text(text)
    (path / "sub" / "b.txt").write_text(text * 2)
    return path


def test_publish_folder_flushes_every_file_and_folder_then_renames_then_flushes_the_parent(tmp_path, calls):
    tmp = _folder(tmp_path / ".tmp-x", "new")
    assert _jsonio.publish_folder(tmp, tmp_path / "x")
    assert (tmp_path / "x" / "sub" / "b.txt").read_text() == "newnew" and not tmp.exists()
    assert_published(calls, tmp_path / "x")


def test_publish_folder_keeps_a_folder_another_process_published_first(tmp_path):
    _folder(tmp_path / "x", "first")
    tmp = _folder(tmp_path / ".tmp-x", "second")
    assert not _jsonio.publish_folder(tmp, tmp_path / "x")
    assert (tmp_path / "x" / "a.txt").read_text() == "first" and not tmp.exists()


def test_publish_folder_replaces_and_leaves_nothing_aside(tmp_path, calls):
    _folder(tmp_path / "x", "old")
    assert _jsonio.publish_folder(_folder(tmp_path / ".tmp-x", "new"), tmp_path / "x", replace=True)
    assert (tmp_path / "x" / "a.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]
    assert_published(calls, tmp_path / "x")


def test_publish_into_moves_the_marker_last_and_keeps_the_rest(tmp_path, calls):
    out = tmp_path / "run"
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "prmkit_rm.json").write_text("old")
    (out / "model.safetensors").write_text("old")
    stage = out / ".tmp-final"
    (stage / "adapter").mkdir(parents=True)
    for name in ("model.safetensors", "prmkit_rm.json", "adapter/w"):
        (stage / name).write_text("new")
    _jsonio.publish_into(stage, out, last="prmkit_rm.json")
    assert sorted(p.name for p in out.iterdir()) == ["adapter", "checkpoint-1", "model.safetensors",
                                                      "prmkit_rm.json"]
    assert (out / "model.safetensors").read_text() == "new"
    moves = [c[2] for c in calls if c[0] == "replace" and Path(c[2]).parent == out]
    assert moves[-1] == str(out / "prmkit_rm.json")
    for name in ("model.safetensors", "prmkit_rm.json"):
        at = renamed_at(calls, out / name)
        assert ("file", (out / name).stat().st_ino) in calls[:at]
    assert_published(calls, out / "adapter")
    assert ("dir", out.stat().st_ino) in calls[renamed_at(calls, out / "prmkit_rm.json") + 1:]


def _traces(n: int, tag: str) -> list[Trace]:
    return [Trace(id=f"{tag}{i}", problem=Problem("q"), steps=[Step(f"{tag} step {i}")]) for i in range(n)]


def test_demo_stage_files_and_markers_are_flushed_before_their_rename(tmp_path, calls):
    path = tmp_path / "train.jsonl"
    demo._write(_traces(3, "a"), path)
    at = renamed_at(calls, path)
    assert ("file", path.stat().st_ino) in calls[:at]
    assert ("dir", tmp_path.stat().st_ino) in calls[at + 1:]
    cfg = demo.DEMO_PRESETS[next(iter(demo.DEMO_PRESETS))]
    stages = demo._Stages(tmp_path / "run", cfg, overwrite=False)
    stages.mark("label")
    for name in ("demo_settings.json", ".done-label"):
        f = tmp_path / "run" / name
        assert ("file", f.stat().st_ino) in calls[:renamed_at(calls, f)], name


def test_a_failing_demo_stage_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "train.jsonl"
    demo._write(_traces(3, "old"), path)
    before = path.read_bytes()
    import prmkit.trace

    real = prmkit.trace.TraceWriter.write

    def one_then_fail(self, trace):  # the first trace written, then the disk fails
        if self.count:
            raise OSError("disk full")
        real(self, trace)

    monkeypatch.setattr(prmkit.trace.TraceWriter, "write", one_then_fail)
    with pytest.raises(OSError, match="disk full"):
        demo._write(_traces(3, "new"), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.jsonl"]  # no temporary file left
    assert path.read_bytes() == before and [t.id for t in read_traces(path)] == ["old0", "old1", "old2"]


class _SavesConfig:
    """Stands in for a transformers config: ``save_pretrained`` writes ``config.json``."""

    def save_pretrained(self, folder) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "config.json").write_text("{}")


class _Saves:
    """Stands in for a transformers model and tokenizer: ``save_pretrained`` writes a file (or fails)."""

    def __init__(self, name: str, text: str, fail: bool = False) -> None:
        self.name, self.text, self.fail = name, text, fail
        self.config = _SavesConfig()
        self.hf_quantizer = None

    def save_pretrained(self, folder) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / self.name).write_text(self.text)
        if self.fail:
            raise OSError("disk full")


def test_the_policy_conversion_cache_is_flushed_before_its_rename(tmp_path, calls):
    from prmkit.policies import _hf

    entry = tmp_path / "gguf" / "smollm2-0123456789abcdef"
    _hf._save_cache(_Saves("model.safetensors", "w"), _Saves("tokenizer.json", "t"), entry)
    assert sorted(p.name for p in entry.iterdir()) == ["model.safetensors", "tokenizer.json"]
    assert_published(calls, entry)


def test_a_failing_conversion_publishes_nothing(tmp_path):
    from prmkit.policies import _hf

    entry = tmp_path / "gguf" / "smollm2-0123456789abcdef"
    _hf._save_cache(_Saves("model.safetensors", "w"), _Saves("tokenizer.json", "t", fail=True), entry)
    assert not entry.exists()  # a read-only home or a failing save only costs the next load its time


def test_the_tiny_backbone_is_flushed_before_its_rename(tmp_path, calls):
    pytest.importorskip("transformers")
    from prmkit.models import build_tiny_backbone

    path = Path(build_tiny_backbone(tmp_path / "tiny", hidden=16, layers=1))
    assert_published(calls, path)


class _Converter:
    """Stands in for ``ctranslate2.converters.TransformersConverter``: writes a ``model.bin``."""

    def __init__(self, path, trust_remote_code=False) -> None:
        self.path = path

    def convert(self, out, quantization=None, force=False) -> None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "model.bin").write_text("weights")


def test_the_ct2_conversion_cache_is_flushed_before_its_rename(tmp_path, monkeypatch, calls):
    from types import SimpleNamespace

    from prmkit.policies import _ct2

    fake = SimpleNamespace(__version__="0.0-test", converters=SimpleNamespace(TransformersConverter=_Converter))
    monkeypatch.setattr(_ct2, "_ct2", lambda: fake)
    monkeypatch.setattr(_ct2, "load_causal_lm", lambda *a, **k: (
        _Saves("model.safetensors", "w"), _Saves("tokenizer.json", "t"), "stand-in"))
    target = tmp_path / "ct2" / "entry"
    assert _ct2.convert_to_ct2("stand-in", out=target) == target
    assert {"model.bin", "tokenizer.json", "prmkit_ct2.json"} <= {p.name for p in target.iterdir()}
    assert_published(calls, target)
    assert [p.name for p in (tmp_path / "ct2").iterdir()] == ["entry"]  # the work folder is gone
