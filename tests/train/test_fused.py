"""Compiled elementwise parts for int8 training (:mod:`prmkit.train._fused`): the same loss and
gradients as the model's own eager code, the right modules switched, everything restored after the
context (even on an error), an MLP that computes something else left alone, and a failing compiler
falling back to eager with a warning."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama

from prmkit.train import _fused
from prmkit.train._fused import fused_elementwise


def _tiny(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).float()


def _loss_and_grads(model, ids):
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.slow
def test_same_loss_and_gradients_as_the_models_own_code(compiled):
    model = _tiny()
    ids = torch.randint(0, 50, (3, 11), generator=torch.Generator().manual_seed(1))
    want_loss, want = _loss_and_grads(model, ids)
    rotary = modeling_llama.apply_rotary_pos_emb
    with fused_elementwise(model.model, compiled=compiled) as counts:
        assert counts == {"mlp": 2, "norm": 5, "rotary": 1}  # 2 layers x 2 norms + the final one
        assert (modeling_llama.apply_rotary_pos_emb is rotary) == (not compiled)
        assert all("forward" in vars(layer.mlp) for layer in model.model.layers)
        for length in (11, 7):  # a second length: the compiled functions take any size
            got_loss, got = _loss_and_grads(model, ids[:, :length])
            if length == 11:
                assert torch.allclose(got_loss, want_loss, rtol=1e-5, atol=1e-6)
                for n, g in want.items():
                    assert torch.allclose(got[n], g, rtol=1e-4, atol=1e-6), n
        with torch.no_grad():  # without gradients: the model's own eager code, bit for bit
            inside = model(input_ids=ids).logits
    with_loss, _ = _loss_and_grads(model, ids[:, :7])
    assert torch.allclose(got_loss, with_loss, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        assert torch.equal(inside, model(input_ids=ids).logits)


def test_everything_is_restored_even_on_an_error():
    model = _tiny()
    rotary = modeling_llama.apply_rotary_pos_emb
    with pytest.raises(RuntimeError, match="inside"):
        with fused_elementwise(model.model) as counts:
            assert sum(counts.values()) == 8
            assert modeling_llama.apply_rotary_pos_emb is not rotary
            raise RuntimeError("inside")
    assert modeling_llama.apply_rotary_pos_emb is rotary
    assert not any("forward" in vars(m) for m in model.modules())
    with fused_elementwise(model.model, enabled=False) as counts:
        assert counts == {}
        assert modeling_llama.apply_rotary_pos_emb is rotary


class _SwappedMLP(modeling_llama.LlamaMLP):
    """gate and up the other way round: ``down(act(up(x)) * gate(x))``."""

    def forward(self, x):
        return self.down_proj(self.act_fn(self.up_proj(x)) * self.gate_proj(x))


def test_an_mlp_computing_something_else_is_left_alone():
    model = _tiny()
    layer = model.model.layers[0]
    swapped = _SwappedMLP(model.config)
    swapped.load_state_dict(layer.mlp.state_dict())
    layer.mlp = swapped
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(2))
    want_loss, _ = _loss_and_grads(model, ids)
    with fused_elementwise(model.model, compiled=False) as counts:
        assert counts["mlp"] == 1
        assert "forward" not in vars(swapped)
        got_loss, _ = _loss_and_grads(model, ids)
    assert torch.allclose(got_loss, want_loss, rtol=1e-5, atol=1e-6)


def test_a_failing_compiler_falls_back_to_eager_with_a_warning(monkeypatch):
    def broken(fn, **kwargs):
        def run(*args):
            raise RuntimeError("no C++ compiler")
        return run

    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setattr(_fused, "_fell_back", [])
    for cached in (_fused._act_mul, _fused._norm, _fused._rotary):
        cached.cache_clear()
    model = _tiny()
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(3))
    want_loss, _ = _loss_and_grads(model, ids)
    try:
        with pytest.warns(UserWarning, match=r"failed \(RuntimeError: no C\+\+ compiler\); running them eagerly"), fused_elementwise(model.model):
            got_loss, _ = _loss_and_grads(model, ids)
    finally:
        for cached in (_fused._act_mul, _fused._norm, _fused._rotary):
            cached.cache_clear()
    assert torch.allclose(got_loss, want_loss, rtol=1e-5, atol=1e-6)


def test_a_lora_model_in_training_mode_is_switched():
    # The probe runs the MLP without dropout: a LoRA layer's dropout must not make its forward look
    # like something else.
    peft = pytest.importorskip("peft")
    model = _tiny()
    cfg = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.5, target_modules=["gate_proj", "up_proj"])
    model = peft.get_peft_model(model, cfg)
    model.train()
    with fused_elementwise(model, compiled=False) as counts:
        assert counts["mlp"] == 2
        assert all(m.training for m in model.modules())
