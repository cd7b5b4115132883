"""Policies read safetensors (or GGUF) weights only: a ``model`` or LoRA ``adapter`` folder whose weights
are pickle files only is refused before anything is read, by the hf and ct2 backends alike, unless
``allow_pickle`` (``-p allow_pickle=true``) says the user trusts it (issue 15, item 5)."""

from __future__ import annotations

import pickle
import shutil

import pytest

from prmkit.cli import main
from prmkit.errors import PrmkitError
from prmkit.policies._hf import HFPolicy

torch = pytest.importorskip("torch")


class _Payload:
    """Unpickling this runs code: it writes a marker file (what a hostile checkpoint could do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def hostile(tmp_path):
    """A model folder whose only weights are a pickle that runs code when read."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(str(tmp_path / "ran"))))
    return folder


@pytest.fixture(scope="module")
def pickled_lm(tiny_lm, tmp_path_factory):
    """``tiny_lm`` with its weights as pytorch_model.bin only."""
    from safetensors.torch import load_file

    folder = tmp_path_factory.mktemp("pickled_lm")
    state = {}
    for f in sorted(shutil.os.scandir(tiny_lm), key=lambda e: e.name):
        if f.name.endswith(".safetensors"):
            state.update(load_file(f.path))
        else:
            shutil.copy(f.path, folder / f.name)
    torch.save(state, folder / "pytorch_model.bin")
    return folder


def _refusal(e: BaseException, folder, name="pytorch_model.bin") -> None:
    text = str(e)
    assert text.startswith(f"{folder}: its weights are pickle files only ({name})"), text
    assert "pass -p allow_pickle=true (allow_pickle=True in Python)." in text


def test_hf_refuses_a_pickle_only_model_before_reading_it(hostile, tmp_path):
    with pytest.raises(PrmkitError) as e:
        HFPolicy(model=str(hostile), adapter=None)
    _refusal(e.value, hostile)
    assert not (tmp_path / "ran").exists()


def test_hf_refuses_a_pickle_only_adapter_before_the_model_loads(tiny_lm, tmp_path, monkeypatch):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.bin").write_bytes(pickle.dumps(_Payload(str(tmp_path / "ran"))))
    import prmkit.policies._hf as hf

    monkeypatch.setattr(hf, "load_causal_lm", lambda *a, **k: pytest.fail("the model loaded first"))
    with pytest.raises(PrmkitError) as e:
        HFPolicy(model=tiny_lm, adapter=str(adapter))
    _refusal(e.value, adapter, "adapter_model.bin")
    assert not (tmp_path / "ran").exists()


def test_allow_pickle_loads_the_same_weights(tiny_lm, pickled_lm):
    with pytest.raises(PrmkitError):
        HFPolicy(model=str(pickled_lm), adapter=None, progress=False)
    trusted = HFPolicy(model=str(pickled_lm), adapter=None, allow_pickle=True, progress=False)
    safe = HFPolicy(model=tiny_lm, adapter=None, progress=False)
    a, b = trusted.model.state_dict(), safe.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_ct2_refuses_a_pickle_only_model_before_converting_it(hostile, tmp_path, monkeypatch):
    pytest.importorskip("ctranslate2")
    from prmkit.policies._ct2 import CT2Policy

    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(PrmkitError) as e:
        CT2Policy(model=str(hostile), adapter=None, progress=False)
    _refusal(e.value, hostile)
    assert not (tmp_path / "ran").exists() and not (tmp_path / "cache" / "ct2").exists()


def test_the_command_line_refuses_in_one_line(hostile, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["generate", "--env", "arith", "--problems", "1", "-n", "1", "--policy", "hf",
              "-p", f"model={hostile}", "-p", "adapter=none", "-o", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.startswith(f"error: {hostile}: its weights are pickle files only")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "ran").exists()
