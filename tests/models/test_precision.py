"""Resolving ``precision`` (fp32 / bf16 / auto, with the fallback where bf16 is not native) and the
float32-attention switch used by bf16 training on a CPU, and the grouped-query attention switch of
prefix-caching scoring."""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.models import (
    FP32_SDPA,
    GQA_SDPA,
    Precision,
    RewardModel,
    _precision,
    fp32_attention,
    gqa_attention,
    resolve_precision,
)
from prmkit.trace import Problem, Step, Trace

torch = pytest.importorskip("torch")
CPU = torch.device("cpu")
T = Trace(id="a", problem=Problem("What is 2 + 3?"), steps=[Step("2 + 3 = 5."), Step("The answer is 5.")])


def test_resolution_with_and_without_native_bf16(monkeypatch):
    assert resolve_precision("fp32", CPU, auto="bf16") == Precision("fp32", "fp32")
    assert resolve_precision("auto", CPU, auto="fp32") == Precision("auto", "fp32")
    monkeypatch.setattr(_precision, "bf16_problem", lambda device: None)
    # "auto" also asks choose_compute whether bf16 is faster here (tests/policies/test_compute.py):
    # this CPU is made to say it is.
    from prmkit import policies
    from prmkit.policies import ComputeChoice

    monkeypatch.setattr(policies, "choose_compute",
                        lambda *a, **k: ComputeChoice("bfloat16", "probe: faster", "cpu", "AMX"))
    assert resolve_precision("bf16", CPU, auto="fp32") == Precision("bf16", "bf16")
    assert resolve_precision("auto", CPU, auto="bf16") == Precision("auto", "bf16")
    monkeypatch.setattr(_precision, "bf16_problem", lambda device: "no bf16")
    assert resolve_precision("bf16", CPU, auto="fp32") == Precision("bf16", "fp32", "no bf16")
    assert resolve_precision("auto", CPU, auto="bf16") == Precision("auto", "fp32", "no bf16")
    assert resolve_precision("auto", CPU, auto="bf16").describe() == "fp32 (auto requested: no bf16)"
    with pytest.raises(PrmkitError, match="precision must be one of auto, fp32, bf16, got 'half'"):
        resolve_precision("half", CPU, auto="bf16")


def test_autocast_context():
    x = torch.ones(2, 4)
    with Precision("fp32", "fp32").autocast(CPU):
        assert (x @ x.T).dtype == torch.float32
    with Precision("bf16", "bf16").autocast(CPU):
        assert (x @ x.T).dtype == torch.bfloat16


def test_fp32_attention_switches_and_restores(tiny_model, tmp_path):
    model, tok = tiny_model("qwen2.5-math-prm")
    rm = RewardModel(model, tok, convention="qwen2.5-math-prm")
    assert model.config._attn_implementation == "sdpa"
    e = rm.encode(T)
    ids = torch.tensor([e.input_ids])
    with torch.no_grad():
        plain = model(input_ids=ids).logits
        with fp32_attention(model) as on:
            assert on and model.config._attn_implementation == FP32_SDPA
            same = model(input_ids=ids).logits  # float32 already: the same kernel on the same inputs
            with torch.autocast("cpu", dtype=torch.bfloat16):
                mixed = model(input_ids=ids).logits
            model.save_pretrained(tmp_path)  # nothing of the switch is saved
        assert model.config._attn_implementation == "sdpa"
    assert torch.equal(plain, same)
    assert torch.allclose(mixed.float(), plain, atol=0.05)
    assert FP32_SDPA not in (tmp_path / "config.json").read_text()
    with fp32_attention(model, enabled=False) as on:
        assert not on and model.config._attn_implementation == "sdpa"



@pytest.mark.parametrize("name", ["rlhflow", "qwen2.5-math-prm"])
def test_gqa_attention_gives_the_plain_numbers_with_masks_and_a_past(tiny_model, tmp_path, name):
    """Grouped heads (4 query over 2 key/value heads) inside the kernel: the same outputs as transformers'
    repeated heads, for a padded batch (a mask) and a pass over a KV past (a mask, queries after keys)."""
    model, tok = tiny_model(name)
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    rm = RewardModel(model, tok, convention=name)
    a, b = rm.encode(T).input_ids, rm.encode(Trace(id="b", problem=T.problem, steps=T.steps[:1])).input_ids
    ids = torch.tensor([a, b + [0] * (len(a) - len(b))])
    mask = torch.tensor([[1] * len(a), [1] * len(b) + [0] * (len(a) - len(b))])
    k = 5

    backbone = getattr(model, model.base_model_prefix)

    def run():
        full = backbone(input_ids=ids, attention_mask=mask).last_hidden_state
        past = backbone(input_ids=ids[:, :k], use_cache=True).past_key_values
        rest = backbone(input_ids=ids[:, k:], attention_mask=mask, cache=past).last_hidden_state
        return full, rest

    with torch.no_grad():
        plain = run()
        with gqa_attention(model) as on:
            assert on and model.config._attn_implementation == GQA_SDPA
            grouped = run()
            model.save_pretrained(tmp_path)  # nothing of the switch is saved
        assert model.config._attn_implementation == "sdpa"
    for p, g in zip(plain, grouped, strict=True):
        assert p.shape == g.shape
        assert torch.allclose(p, g, atol=1e-6, rtol=0)
    assert torch.allclose(plain[0][:, k:][0], plain[1][0], atol=1e-5)  # the past path is the full one's
    assert GQA_SDPA not in (tmp_path / "config.json").read_text()


def test_gqa_attention_switches_only_where_it_applies(tiny_model, monkeypatch):
    model, _ = tiny_model("rlhflow")
    with gqa_attention(model, enabled=False) as on:
        assert not on and model.config._attn_implementation == "sdpa"
    with monkeypatch.context() as m:  # a torch whose kernel has no enable_gqa (before 2.5)
        m.setattr(_precision, "_sdpa_takes_gqa", lambda: False)
        with gqa_attention(model) as on:
            assert not on and model.config._attn_implementation == "sdpa"
    with pytest.raises(RuntimeError, match="boom"), gqa_attention(model) as on:
        assert on
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"  # restored after an error
    bert, _ = tiny_model("prmkit")  # no grouped heads
    with gqa_attention(bert) as on:
        assert not on
    model.set_attn_implementation("eager")
    try:
        with gqa_attention(model) as on:
            assert not on and model.config._attn_implementation == "eager"
    finally:
        model.set_attn_implementation("sdpa")


def test_inference_context_keeps_bf16_weight_casts_and_the_same_numbers():
    """Scoring's context: inference mode in fp32; in bf16, no_grad + autocast (autocast caches a
    weight's bfloat16 copy only outside inference mode), with the numbers of inference mode."""
    from torch.profiler import profile

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 4))
    x = torch.randn(5, 16)
    with Precision("fp32", "fp32").inference(CPU):
        assert torch.is_inference_mode_enabled()
    bf16 = Precision("bf16", "bf16")
    with torch.inference_mode(), bf16.autocast(CPU):
        before = [net(x) for _ in range(3)]
    with bf16.inference(CPU), profile() as prof:
        assert not torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        after = [net(x) for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    # The 2 weights and 2 biases are cast once, the float32 input x on each of the 3 calls (the second
    # product's input is already bfloat16); inside inference mode the weights would be cast every call
    # (4 x 3 + 3 = 15).
    casts = sum(e.count for e in prof.key_averages() if e.key == "aten::_to_copy")
    assert casts == 4 + 3, casts
