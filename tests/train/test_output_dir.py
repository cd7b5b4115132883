"""Where ``prmkit train`` writes, when it cannot (issue 45): a full disk leaves ``output_dir`` as it was
and says so in one line; a folder that cannot be written is refused before any model loads; the help
shows its examples whole."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prmkit.cli import app, main
from prmkit.errors import PrmkitError
from prmkit.models import RewardModel
from prmkit.train import _trainer, launch, load_config, train


def full_disk() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def config(marker_files, out, *overrides):
    return load_config("tiny", [f"train=[{marker_files['four']}]", "batch_size=2", "progress=false",
                                "precision=fp32", "eval_fraction=0", *overrides], output_dir=str(out))


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder``, hidden ones and folders too (None), with each file's bytes."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in folder.rglob("*")}


@pytest.fixture
def fill_the_disk(monkeypatch):
    """Call it, and the disk fills while the model is saved: its files are written, then a write fails."""
    real = RewardModel.save_pretrained

    def save_pretrained(self, path, *args, **kwargs):
        real(self, path, *args, **kwargs)
        raise full_disk()

    return lambda: monkeypatch.setattr(RewardModel, "save_pretrained", save_pretrained)


def test_a_full_disk_leaves_the_previous_model_as_it_was(marker_files, tmp_path, fill_the_disk, capsys):
    out = tmp_path / "run"
    train(config(marker_files, out, "max_steps=1"), log=lambda *a: None)
    before = snapshot(out)
    fill_the_disk()
    with pytest.raises(SystemExit) as info:
        main(["train", "prm", "--config", "tiny", f"train=[{marker_files['four']}]", f"output_dir={out}",
              "max_steps=2", "lr=1e-2", "batch_size=2", "progress=false", "eval_fraction=0", "precision=fp32", "--overwrite"])
    assert info.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: no space left on device writing {out} (nothing written; the old OUT is intact)")
    assert snapshot(out) == before  # no .tmp-final, nothing half-replaced


def test_a_full_disk_on_a_first_run_leaves_no_folder(marker_files, tmp_path, fill_the_disk):
    out = tmp_path / "runs" / "first"
    fill_the_disk()
    with pytest.raises(PrmkitError, match=r"^no space left on device writing .*first \(nothing written; no OUT "
                                          r"was made\)$"):
        train(config(marker_files, out, "max_steps=1"), log=lambda *a: None)
    assert list(tmp_path.iterdir()) == []  # neither the run's folder nor the one made for it


def test_a_full_disk_at_a_checkpoint_leaves_the_earlier_ones(marker_files, tmp_path, monkeypatch):
    out = tmp_path / "run"
    train(config(marker_files, out, "max_steps=1", "keep_final_checkpoint=true"), log=lambda *a: None)
    before = snapshot(out)
    real = _trainer._save_optimizer

    def save_optimizer(optimizer, path):
        real(optimizer, path)
        raise full_disk()

    monkeypatch.setattr(_trainer, "_save_optimizer", save_optimizer)
    with pytest.raises(PrmkitError, match="^no space left on device writing .*run"):  # extended: step 2 fails
        train(config(marker_files, out, "max_steps=3", "save_every=1", "keep_final_checkpoint=true"),
              log=lambda *a: None)
    assert snapshot(out) == before


# -- a folder that cannot be written ---------------------------------------------------------------------

@pytest.fixture(params=["chmod", "refused"])
def read_only(request, tmp_path, monkeypatch) -> Path:
    """A folder nothing can be created in: its permissions (where the tests do not run as root, whom
    they do not stop), or every creation in it refused as a read-only file system would."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if request.param == "chmod":
        if os.geteuid() == 0:
            pytest.skip("root writes whatever the permissions say")
        folder.chmod(0o555)
        request.addfinalizer(lambda: folder.chmod(0o755))
    else:
        real_open = os.open

        def refusing_open(path, flags, *args, **kwargs):
            p = Path(os.fsdecode(path)).absolute()
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and (p == folder or folder in p.parents):
                raise OSError(errno.EROFS, "Read-only file system", str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", refusing_open)
    return folder


@pytest.fixture
def no_model_loads(monkeypatch):
    def load(*args, **kwargs):
        raise AssertionError("a model was loaded before the output folder was checked")

    monkeypatch.setattr(RewardModel, "from_backbone", load)
    monkeypatch.setattr(RewardModel, "from_pretrained", load)


def test_a_read_only_output_dir_is_refused_before_any_model_loads(marker_files, read_only, no_model_loads,
                                                                 capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "prm", "--config", "tiny", f"train=[{marker_files['four']}]",
              f"output_dir={read_only}", "progress=false"])
    assert info.value.code == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: output_dir {read_only}: cannot write in it (")
    assert line.endswith("); choose another output_dir or make the folder writable")

    with pytest.raises(PrmkitError, match=f"output_dir {read_only / 'run'}: cannot create it in {read_only} "):
        train(config(marker_files, read_only / "run", "max_steps=1"), log=lambda *a: None)
    assert list(read_only.iterdir()) == []


def test_several_processes_are_not_started_for_a_read_only_output_dir(marker_files, read_only, monkeypatch):
    def run(args):
        raise AssertionError("the processes were started")

    monkeypatch.setattr("torch.distributed.run.run", run)
    with pytest.raises(PrmkitError, match="cannot create it in"):
        launch(config(marker_files, read_only / "run", "max_steps=1"), 2)


def test_the_help_shows_the_examples_whole():
    runner = CliRunner()
    # as one line: the help wraps at the terminal's width
    prm = " ".join(runner.invoke(app, ["train", "prm", "--help"]).output.split())
    orm = " ".join(runner.invoke(app, ["train", "orm", "--help"]).output.split())
    assert "prmkit train prm --config tiny train=[traces.jsonl] output_dir=runs/prm" in prm
    assert "--num-processes 2 --config tiny train=[traces.jsonl]" in prm
    assert "--config qwen2.5-math-7b-gpu train=[traces.jsonl]" in prm
    assert "prmkit train orm --config tiny train=[traces.jsonl] output_dir=runs/orm" in orm
    assert "\\[" not in prm + orm
