"""Safe checkpoints: a model folder whose weights are pickle files only is refused before anything is
read, unless ``allow_pickle`` (``--allow-pickle``) says the user trusts it; then it scores exactly as
the safetensors original."""

from __future__ import annotations

import pickle

import pytest
import typer

from prmkit.cli._score import score
from prmkit.errors import PrmkitError
from prmkit.models import RewardModel, check_safe_weights
from prmkit.trace import Problem, Step, Trace, read_traces, write_traces

torch = pytest.importorskip("torch")


class _Payload:
    """Unpickling this runs code: it writes a marker file (what a hostile checkpoint could do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _trace():
    return Trace(id="a", problem=Problem("1 + 1?"), steps=[Step("1 + 1 = 2"), Step("The answer is 2.")])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(safetensors folder, the same weights as pytorch_model.bin only) of a tiny PRM, random head."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PRMKIT_CACHE", str(tmp_path_factory.mktemp("prmkit-cache")))
    torch.set_num_threads(1)
    safe = tmp_path_factory.mktemp("safe")
    RewardModel.from_backbone("tiny", seed=0).save_pretrained(safe)
    pickled = tmp_path_factory.mktemp("pickled")
    from safetensors.torch import load_file

    for f in safe.iterdir():
        if f.suffix != ".safetensors":
            (pickled / f.name).write_bytes(f.read_bytes())
    state = {}
    for f in safe.glob("*.safetensors"):
        state.update(load_file(str(f)))
    torch.save(state, pickled / "pytorch_model.bin")
    yield safe, pickled
    mp.undo()


def test_a_pickle_only_folder_is_refused_before_it_is_read(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(str(marker))))
    with pytest.raises(PrmkitError) as e:
        RewardModel.from_pretrained(str(tmp_path))
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path}: its weights are pickle files only (pytorch_model.bin)")
    assert "--allow-pickle" in msg and "allow_pickle=True" in msg and "safetensors" in msg
    assert not marker.exists()


@pytest.mark.parametrize("names, refused", [
    (["model.ckpt"], True), (["weights.pt", "extra.pth"], True), (["pytorch_model.bin"], True),
    (["model.safetensors", "training_args.bin"], False),  # safetensors present: only those are read
    (["config.json"], False),  # no weights at all: left to the loader's own message
])
def test_which_folders_are_refused(tmp_path, names, refused):
    for n in names:
        (tmp_path / n).write_bytes(b"")
    if refused:
        with pytest.raises(PrmkitError, match="pickle files only"):
            check_safe_weights(tmp_path)
    else:
        check_safe_weights(tmp_path)
    check_safe_weights(tmp_path, allow_pickle=True)  # never refuses


def test_allow_pickle_loads_it_and_it_scores_as_the_safetensors_original(checkpoints):
    safe, pickled = checkpoints
    with pytest.raises(PrmkitError, match="pickle files only"):
        RewardModel.from_pretrained(str(pickled), device="cpu")
    want = RewardModel.from_pretrained(str(safe), device="cpu").score([_trace()])
    got = RewardModel.from_pretrained(str(pickled), device="cpu", allow_pickle=True).score([_trace()])
    assert got == want and len(got[0]) == 2


def test_the_cli_refuses_without_allow_pickle_and_scores_with_it(tmp_path, checkpoints):
    _, pickled = checkpoints
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    app.command("score")(score)
    app.command("unused")(lambda: None)
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces([_trace()], src)
    with pytest.raises(PrmkitError, match="pass --allow-pickle"):
        app(args=["score", "--model", str(pickled), str(src), str(dst)], standalone_mode=False)
    assert not dst.exists()
    app(args=["score", "--model", str(pickled), "--allow-pickle", str(src), str(dst)], standalone_mode=False)
    [t] = read_traces(dst)
    assert len(t.steps[0].scores) == 1 and "prm:min" in t.meta["scores"]
