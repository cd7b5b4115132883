"""Published checkpoints whose head is not a transformers token-classification head."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from prmkit.errors import PrmkitError  # noqa: E402
from prmkit.models import RewardModel, build_tiny_backbone  # noqa: E402
from prmkit.trace import Problem, Step, Trace  # noqa: E402


def _trace() -> Trace:
    return Trace("t", Problem("Tom has 3 apples and buys 5."), [Step("3 + 5 = 8"), Step("The answer is 8.")])


def test_skywork_value_head_is_loaded_and_read_with_a_sigmoid(tmp_path):
    torch.set_num_threads(1)
    folder = tmp_path / "skywork-like"
    build_tiny_backbone(folder, seed=3, hidden=32)
    weights = load_file(str(folder / "model.safetensors"))
    g = torch.Generator().manual_seed(7)
    w, b = torch.randn(1, 32, generator=g), torch.randn(1, generator=g)
    weights["v_head.summary.weight"], weights["v_head.summary.bias"] = w, b
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})

    rm = RewardModel.from_pretrained(str(folder), convention="skywork-prm")
    assert torch.equal(rm.model.score.weight, w) and torch.equal(rm.model.score.bias, b)
    got = rm.score([_trace()])[0]

    # By hand: hidden states of the base model at the step newlines, then sigmoid(h . w + b).
    enc = rm.encode(_trace())
    with torch.no_grad():
        h = rm.model.model(input_ids=torch.tensor([enc.input_ids])).last_hidden_state[0]
    want = [torch.sigmoid(h[p] @ w[0] + b[0]).item() for p in enc.positions]
    assert got == pytest.approx(want, abs=1e-5)
    assert rm.tokenizer.decode(enc.input_ids[0]) == "<s>"  # Skywork starts with BOS


def test_a_backbone_without_any_head_is_refused(tmp_path):
    folder = tmp_path / "backbone"
    build_tiny_backbone(folder, hidden=32)
    with pytest.raises(PrmkitError, match="no trained score head"):
        RewardModel.from_pretrained(str(folder))
    # ... but it is a fine starting point, and a new head starts at zero (every step 0.5).
    rm = RewardModel.from_backbone(str(folder), head_init="zero")
    assert rm.score([_trace()])[0] == pytest.approx([0.5, 0.5])
