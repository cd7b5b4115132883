"""Shipped reward models by name: a LoRA run exported to an asset folder (adapter + head + record)
loads as ``--model default`` with the same scores as the trained folder, merged and cached once."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from prmkit.errors import PrmkitError  # noqa: E402
from prmkit.models import (  # noqa: E402
    RewardModel,
    _shipped,  # noqa: E402
    export_shipped,
)
from prmkit.trace import read_traces  # noqa: E402
from prmkit.train import load_config, train  # noqa: E402

LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"}


def config(marker_files, out, *overrides, **values):
    values.setdefault("train", [str(marker_files["train"])])
    return load_config("tiny", ["progress=false", "precision=fp32", "eval_fraction=0", *overrides],
                       output_dir=str(out), **values)


@pytest.fixture(scope="module")
def trained(marker_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("lora-run") / "prm"
    train(config(marker_files, out, "lr=2e-2", "max_steps=3", lora=LORA), log=lambda *a: None)
    return out


@pytest.fixture()
def shipped(trained, tmp_path, monkeypatch):
    assets = tmp_path / "assets"
    export_shipped(trained, assets / "prm-test", note="a test export")
    monkeypatch.setattr(_shipped, "ASSETS", assets)
    monkeypatch.setitem(_shipped.SHIPPED_MODELS, "default", "prm-test")
    return assets / "prm-test"


def test_export_is_small_and_complete(trained, shipped):
    import json

    record = (trained / "prmkit_rm.json").read_text()
    assert str(trained) in record  # the run's own record names where it was trained ...
    assert str(trained.parent) not in (shipped / "prmkit_rm.json").read_text()  # ... the shipped one does not
    assert json.loads((shipped / "prmkit_rm.json").read_text())["train_config"]["output_dir"] == "prm"
    names = {p.name for p in shipped.iterdir()}
    assert names == {"adapter_config.json", "adapter_model.safetensors", "prmkit_rm.json", "README.md"}
    adapter = (shipped / "adapter_model.safetensors").stat().st_size
    merged = (trained / "model.safetensors").stat().st_size
    assert adapter < merged / 2  # the adapter and head, not the weights


def test_default_scores_like_the_trained_folder(trained, shipped, marker_files):
    held = list(read_traces(marker_files["eval"]))[:6]
    want = RewardModel.from_pretrained(str(trained)).score(held)
    rm = RewardModel.from_pretrained("default")
    assert rm.kind == "prm"
    assert rm.folder == str(_shipped.merged_cache_folder("default"))  # the merged cache, not the name
    for a, b in zip(rm.score(held), want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    # Merged once: the cached folder is reused (not rewritten) by the next load.
    folder = _shipped.merged_cache_folder("default")
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    RewardModel.from_pretrained("default")
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp


def test_bfloat16_export_is_half_the_bytes_and_scores_close(trained, marker_files, tmp_path, monkeypatch):
    full = export_shipped(trained, tmp_path / "assets" / "prm-full")
    half = export_shipped(trained, tmp_path / "assets" / "prm-half", dtype="bfloat16")
    a = (full / "adapter_model.safetensors").stat().st_size
    b = (half / "adapter_model.safetensors").stat().st_size
    assert b < 0.6 * a  # every adapter tensor is float: 2 bytes a number instead of 4 (plus the header)
    monkeypatch.setattr(_shipped, "ASSETS", tmp_path / "assets")
    monkeypatch.setitem(_shipped.SHIPPED_MODELS, "default", "prm-half")
    held = list(read_traces(marker_files["eval"]))[:6]
    want = RewardModel.from_pretrained(str(trained)).score(held)
    for x, y in zip(RewardModel.from_pretrained("default").score(held), want, strict=True):
        assert x == pytest.approx(y, abs=2e-2)  # bf16 keeps 8 bits of mantissa: close, not equal
    with pytest.raises(PrmkitError, match="dtype must be bfloat16 or float16"):
        export_shipped(trained, tmp_path / "assets" / "bad", dtype="int8")


def test_cli_scores_with_the_shipped_name(shipped, marker_files, tmp_path):
    from typer.testing import CliRunner

    from prmkit.cli import app

    out = tmp_path / "scored.jsonl"
    r = CliRunner().invoke(app, ["score", "--model", "default", str(marker_files["four"]), str(out)])
    assert r.exit_code == 0, r.output
    scored = list(read_traces(out))
    assert len(scored) == 4 and all("prm" in s.scores for t in scored for s in t.steps)


def test_training_goes_on_from_a_shipped_model(trained, shipped, marker_files, tmp_path):
    held = list(read_traces(marker_files["eval"]))[:6]
    want = RewardModel.from_pretrained(str(trained)).score(held)
    # as a backbone, the shipped name gives its merged weights and its trained head (a fresh head would
    # score near 0.5 and differ from the trained folder's scores)
    start = RewardModel.from_backbone("default", seed=123)
    for a, b in zip(start.score(held), want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    out = tmp_path / "more"
    train(config(marker_files, out, "lr=2e-2", "max_steps=1", model="default", lora=LORA), log=lambda *a: None)
    import json

    assert json.loads((out / "prmkit_rm.json").read_text())["train_config"]["model"] == "default"
    moved = RewardModel.from_pretrained(str(out)).score(held)
    assert any(abs(x - y) > 1e-6 for m, w in zip(moved, want, strict=True) for x, y in zip(m, w, strict=True))


def test_missing_or_unknown_names_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(_shipped, "ASSETS", tmp_path)
    with pytest.raises(PrmkitError, match="not in this installation"):
        RewardModel.from_pretrained("default")
    with pytest.raises(PrmkitError, match="unknown shipped model"):
        _shipped.shipped_asset("nope")


def test_export_refuses_a_run_without_an_adapter(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(PrmkitError, match="no LoRA adapter"):
        export_shipped(tmp_path / "run", tmp_path / "asset")


def test_export_sets_the_shipped_max_length(trained, marker_files, tmp_path, monkeypatch):
    import json

    trained_len = json.loads((trained / "prmkit_rm.json").read_text())["max_length"]
    longer = export_shipped(trained, tmp_path / "assets" / "prm-long", max_length=trained_len // 2 + 1)
    assert json.loads((longer / "prmkit_rm.json").read_text())["max_length"] == trained_len // 2 + 1
    as_trained = export_shipped(trained, tmp_path / "assets" / "prm-same")
    assert json.loads((as_trained / "prmkit_rm.json").read_text())["max_length"] == trained_len
    monkeypatch.setattr(_shipped, "ASSETS", tmp_path / "assets")
    monkeypatch.setitem(_shipped.SHIPPED_MODELS, "default", "prm-long")
    rm = RewardModel.from_pretrained("default")
    assert rm.max_length == trained_len // 2 + 1
    held = list(read_traces(marker_files["eval"]))[:6]  # short traces: the same scores at either length
    for a, b in zip(rm.score(held), RewardModel.from_pretrained(str(trained)).score(held), strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    with pytest.raises(PrmkitError, match="max_length must be a positive"):
        export_shipped(trained, tmp_path / "assets" / "bad", max_length=0)


@pytest.mark.parametrize("name", sorted(_shipped.SHIPPED_MODELS))
def test_every_shipped_name_is_installed_with_its_kind(name):
    import json

    asset = _shipped.shipped_asset(name)  # raises where the folder is incomplete
    info = json.loads((asset / "prmkit_rm.json").read_text())
    assert info["kind"] == ("orm" if name.endswith("-orm") else "prm")
    assert info["train_config"]["model"] == "smollm2" and info["max_length"] == 4096
    assert info["train_config"]["lora"]["r"] == 16
