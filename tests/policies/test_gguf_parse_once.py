"""Loading a GGUF model parses the file's header once (issue 43: the first run on a fresh machine).

transformers builds a ``gguf.GGUFReader`` three times per load and a tensor-name map per submodule;
``_parse_gguf_once`` hands out one of each inside its block and puts ``gguf`` back afterwards."""

from __future__ import annotations

import pytest

gguf = pytest.importorskip("gguf")

from prmkit.policies._hf import _parse_gguf_once  # noqa: E402


def test_one_reader_per_path_and_one_name_map_per_arch_inside_the_block_only(monkeypatch, tmp_path):
    built: list[tuple[str, str]] = []
    maps: list[tuple[str, int]] = []

    class Reader:
        def __init__(self, path, mode="r"):
            built.append((str(path), mode))

    monkeypatch.setattr(gguf, "GGUFReader", Reader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", lambda arch, n: maps.append((arch, n)) or object())
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    with _parse_gguf_once():
        first = gguf.GGUFReader(a)
        assert gguf.GGUFReader(str(a)) is first  # the same file by another spelling of its path
        assert gguf.GGUFReader(b) is not first
        m = gguf.get_tensor_name_map("llama", 30)
        assert gguf.get_tensor_name_map("llama", 30) is m
        assert gguf.get_tensor_name_map("llama", 2) is not m
    assert built == [(str(a), "r"), (str(b), "r")]
    assert maps == [("llama", 30), ("llama", 2)]
    assert gguf.GGUFReader is Reader  # put back: a later load builds its own
    gguf.GGUFReader(a)
    assert len(built) == 3


def test_gguf_is_put_back_when_the_load_fails(monkeypatch):
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with pytest.raises(OSError), _parse_gguf_once():
        assert gguf.GGUFReader is not reader
        raise OSError("cannot load")
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is name_map
