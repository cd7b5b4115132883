"""``prmkit cache info | clear`` on a temporary ``PRMKIT_CACHE``, and the content key of the GGUF cache."""

from __future__ import annotations

import json
import os

import pytest

from prmkit.cli import main
from prmkit.policies import cache_entries, clear_cache, gguf_cache_dir


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("PRMKIT_CACHE", str(root))
    for rel, size in [("gguf/SmolLM2-135M-Instruct.Q4_1-0123456789abcdef/model.safetensors", 3000),
                      ("gguf/SmolLM2-135M-Instruct.Q4_1-98362432-1795684476/model.safetensors", 2000),
                      ("ct2/SmolLM2-135M-Instruct.Q4_1-int8-fedcba9876543210/model.bin", 1500),
                      ("ct2/.tmp-ct2-x1y2/model.bin", 10),
                      ("models/prm-smollm2-arith-04192d6294cba26b/model.safetensors", 1200),
                      ("backbones/tiny-llama-char-v2/config.json", 5),
                      ("notes.txt", 7)]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    return root


def _run(capsys, *argv):
    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_info_lists_every_entry_with_its_size_key_and_kind(cache, capsys):
    code, out, _ = _run(capsys, "cache", "info")
    assert code == 0
    assert out.splitlines()[0] == f"cache: {cache} (PRMKIT_CACHE)"
    assert "total 0.0 MB in 7 entries: gguf 0.0 MB (2), ct2 0.0 MB (2), models 0.0 MB (1)" in out
    assert "an older key (size, modification time): never read" in out
    assert "an interrupted conversion: never read" in out
    code, out, _ = _run(capsys, "cache", "info", "--json")
    entries = {e["name"]: e for e in json.loads(out)["entries"]}
    assert entries["SmolLM2-135M-Instruct.Q4_1-0123456789abcdef"]["bytes"] == 3000
    assert entries["SmolLM2-135M-Instruct.Q4_1-0123456789abcdef"]["key"] == "0123456789abcdef"
    assert entries["SmolLM2-135M-Instruct.Q4_1-int8-fedcba9876543210"]["kind"] == "ct2"
    assert entries["notes.txt"]["kind"] == "other"


def test_clear_one_kind_then_all_leaves_the_rest(cache, capsys):
    code, out, _ = _run(capsys, "cache", "clear", "--what", "gguf", "--yes")
    assert code == 0 and "removed 2 entries" in out
    assert not any((cache / "gguf").iterdir()) and (cache / "ct2").is_dir()
    code, out, _ = _run(capsys, "cache", "clear", "--yes")
    assert code == 0 and "removed 4 entries" in out  # ct2 (2), models, backbones
    assert cache_entries() == [e for e in cache_entries() if e.kind == "other"]
    assert (cache / "notes.txt").read_bytes() == b"x" * 7  # not prmkit's: left alone
    code, out, _ = _run(capsys, "cache", "clear", "--yes")
    assert code == 0 and out.startswith("nothing to remove")


def test_clear_asks_first_and_refuses_unknown_kinds(cache, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    code, _, err = _run(capsys, "cache", "clear", "--what", "ct2")
    assert code == 1 and "Pass --yes" in err and "remove 2 entries" in err
    assert len(list((cache / "ct2").iterdir())) == 2  # nothing removed
    code, _, err = _run(capsys, "cache", "clear", "--what", "weights", "--yes")
    assert code == 1 and "unknown cache kind 'weights'" in err and "\n" not in err.strip()
    with pytest.raises(Exception, match="unknown cache kind"):
        clear_cache(["weights"])


def test_gguf_cache_is_keyed_by_content_not_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    a, b = tmp_path / "venv1", tmp_path / "venv2"
    for folder, when in ((a, 1_000_000), (b, 2_000_000)):
        folder.mkdir()
        (folder / "m.gguf").write_bytes(b"GGUF weights")
        os.utime(folder / "m.gguf", (when, when))
    same = gguf_cache_dir(str(a), "m.gguf")
    assert same == gguf_cache_dir(str(b), "m.gguf")  # a new venv with the same file reuses it
    assert same.parent == tmp_path / "cache" / "gguf" and same.name.startswith("m-")
    (b / "m.gguf").write_bytes(b"other weights")
    assert gguf_cache_dir(str(b), "m.gguf") != same
