"""The head applied only at the label positions (``position_logits``' default) gives the same logits,
loss and gradients as the model's own forward pass with the head at every position, in float32, on
every tiny architecture; models whose forward is not backbone -> dropout -> head take the full path.

"The same" is to float32 rounding: the head's matrix product over N label rows and over every
position round differently (measured differences up to 1e-7); a wrong row or column is off by ~0.1."""

from __future__ import annotations

import pytest

from prmkit.models import RewardModel
from prmkit.trace import Problem, Step, Trace
from prmkit.train import position_loss

torch = pytest.importorskip("torch")


def trace(id, problem, *steps):
    return Trace(id=id, problem=Problem(problem), steps=[Step(s) for s in steps])


TRACES = [
    trace("a", "What is 2 + 3?", "2 + 3 = 5.", "The answer is 5."),
    trace("b", "Tom has 3 apples and buys 4 more. How many?", "3 + 4 = 7", "So he has 7 apples.",
          "The answer is 7."),
    trace("c", "12 - 4?", "12 - 4 = 8"),
]

#: Tiny model (conftest.TINY) -> its convention here.
MODELS = {"prmkit": "prmkit", "qwen2.5-math-prm": "qwen2.5-math-prm", "skywork-prm": "skywork-prm",
          "math-shepherd": "math-shepherd", "rlhflow": "rlhflow"}


def loss_and_grads(rm, batch, targets, **kw):
    params = [p for p in rm.model.parameters() if p.requires_grad]
    logits = rm.position_logits(batch["input_ids"], batch["attention_mask"], batch["rows"], batch["cols"], **kw)
    loss, n = position_loss(logits, targets)
    grads = torch.autograd.grad(loss / n, params, allow_unused=True)
    return logits.detach(), loss.detach(), grads


@pytest.mark.parametrize("name", sorted(MODELS))
def test_head_at_label_positions_equals_the_full_head(tiny_model, name):
    model, tok = tiny_model(name)
    rm = RewardModel(model, tok, convention=MODELS[name])
    # a classifier whose structure is recognised is gathered; lm_token conventions always are
    assert (rm._classifier_parts() is not None) == (rm.verdict_ids is None)
    batch = rm.collate([rm.encode(t) for t in TRACES])  # right-padded: three lengths
    n = len(batch["rows"])
    targets = torch.tensor([1.0, 0.0, float("nan"), 0.25, 1.0, 0.0][:n] + [1.0] * max(0, n - 6))
    fast = loss_and_grads(rm, batch, targets)
    if rm.verdict_ids is None:
        full = loss_and_grads(rm, batch, targets, gather_first=False)
    else:  # the reference: the LM head at every position, the two verdict columns read afterwards
        out = model(input_ids=batch["input_ids"]).logits
        logits = out[batch["rows"], batch["cols"]][:, list(rm.verdict_ids)]
        loss, count = position_loss(logits, targets)
        params = [p for p in model.parameters() if p.requires_grad]
        full = logits.detach(), loss.detach(), torch.autograd.grad(loss / count, params, allow_unused=True)
    assert torch.allclose(fast[0], full[0], rtol=0, atol=1e-6)
    assert torch.allclose(fast[1], full[1], rtol=0, atol=1e-6)
    assert len(fast[2]) == len(full[2])
    for a, b in zip(fast[2], full[2], strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
    assert any(g is not None and g.abs().sum() > 0 for g in fast[2])


def test_a_classifier_with_other_layers_takes_the_full_path(tiny_model):
    model, tok = tiny_model("qwen2.5-math-prm")
    rm = RewardModel(model, tok, convention="qwen2.5-math-prm")
    assert rm._classifier_parts() is not None
    model.add_module("extra", torch.nn.Identity())  # a forward prmkit does not know
    try:
        assert rm._classifier_parts() is None
        batch = rm.collate([rm.encode(t) for t in TRACES])
        with torch.no_grad():
            got = rm.position_logits(batch["input_ids"], batch["attention_mask"], batch["rows"], batch["cols"])
            want = model(input_ids=batch["input_ids"]).logits[batch["rows"], batch["cols"]]
        assert torch.equal(got, want)
    finally:
        del model.extra
