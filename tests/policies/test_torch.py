"""The torch backend (prmkit's own decode loop over transformers weights) on tiny local models: at
float32 it gives hf's completions and transformers' logits; batches of whole requests, slices of one
request, mixed groups and unsupported architectures; bfloat16 where asked."""

from __future__ import annotations

import pytest

from prmkit.policies import SamplingParams, get_policy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from decode_checks import REQS, req, rows, step_logits_gap, wide_copy  # noqa: E402

from prmkit.policies import native_bf16  # noqa: E402
from prmkit.policies._torch import decode_support  # noqa: E402


@pytest.fixture(scope="module")
def wide_lm(tiny_lm, tmp_path_factory):
    return wide_copy(tiny_lm, tmp_path_factory.mktemp("wide_llama"), transformers.LlamaForCausalLM,
                 transformers.LlamaConfig)


@pytest.fixture(scope="module")
def pair(wide_lm):
    hf = get_policy("hf", model=wide_lm, batch_size=4, progress=False)
    fast = get_policy("torch", model=wide_lm, batch_size=4, dtype="float32", progress=False)
    return hf, fast


@pytest.mark.parametrize("sp", [
    SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=7),
    SamplingParams(n=2, max_new_tokens=10, temperature=0),
    SamplingParams(n=3, max_new_tokens=16, temperature=0.7, top_p=0.9, seed=3),
    SamplingParams(n=1, max_new_tokens=8, temperature=1.0, seed=11),
], ids=["sampled", "greedy", "top_p", "one_sample"])
def test_float32_equals_hf(pair, sp):
    hf, fast = pair
    assert fast.describe()["engine"] == "prmkit decode loop"
    a, b = hf.generate(REQS, sp), fast.generate(REQS, sp)
    assert rows(b) == rows(a)
    # Wide weights, temperature 1: the samples are not all alike, so equality says something.
    assert sp.temperature == 0 or len({c.text for row in b for c in row}) > 2


def test_stop_strings_equal_hf(pair):
    hf, fast = pair
    free = fast.generate(REQS[:1], SamplingParams(n=4, max_new_tokens=30, temperature=1.0, seed=5))[0]
    stop = next((ch for c in free for ch in c.text[2:] if ch.isascii() and ch.isalnum()), None)
    assert stop is not None
    sp = SamplingParams(n=4, max_new_tokens=30, temperature=1.0, seed=5, stop=(stop,))
    cut = fast.generate(REQS, sp)
    assert [[c.text for c in row] for row in cut] == [[c.text for c in row] for row in hf.generate(REQS, sp)]
    for f, c in zip(free, cut[0], strict=True):
        assert stop not in c.text
        if stop in f.text:
            assert c.text == f.text[: f.text.index(stop)] and c.finish_reason == "stop"


def test_logits_equal_transformers_forward(wide_lm):
    """Each decode step's logits equal a plain forward pass over the prompt and the tokens so far."""
    fast = get_policy("torch", model=wide_lm, batch_size=6, dtype="float32", progress=False)
    worst, compared, steps = step_logits_gap(fast, REQS)
    assert compared == 6 * steps and steps >= 2 and worst < 1e-4


def test_batched_equals_one_at_a_time(pair):
    _, fast = pair
    sp = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=9)
    together = fast.generate(REQS, sp)
    alone = [fast.generate([r], sp)[0] for r in reversed(REQS)][::-1]
    assert rows(together) == rows(alone)


def test_batches_are_whole_requests_or_slices_of_one(wide_lm, pair):
    hf, _ = pair
    small = get_policy("torch", model=wide_lm, batch_size=2, dtype="float32", progress=False)
    rows_ = [(r, [1], 0, None) for r in range(3) for _ in range(5)]  # 3 requests x 5 samples
    chunks = small._chunks(rows_, 5)
    assert [len(c) for c in chunks] == [2, 2, 1] * 3
    assert all(len({r for r, *_ in c}) == 1 for c in chunks)
    small.batch_size = 11
    assert [len(c) for c in small._chunks(rows_, 5)] == [10, 5]
    # n larger than the batch: slices of one request, still hf's completions.
    sp = SamplingParams(n=5, max_new_tokens=8, temperature=1.0, seed=4)
    small.batch_size = 2
    assert rows(small.generate(REQS, sp)) == rows(hf.generate(REQS, sp))


def test_mixed_groups_fall_back_to_a_group_per_row(pair):
    """A batch whose requests have unequal numbers of rows (not made by ``_chunks``) still decodes."""
    hf, fast = pair
    chunk = []
    for r, (q, k) in enumerate(zip(REQS, (1, 3, 2), strict=True)):
        ids, shared = fast._encode(q)
        chunk += [(r, ids, shared, 100 * r + j) for j in range(k)]
    sp = SamplingParams(n=1, max_new_tokens=8, temperature=1.0, seed=0)
    assert fast._decode(chunk, sp, torch) == hf._decode(chunk, sp, torch)


def test_qwen2_with_biases_equals_hf(tiny_lm, tmp_path):
    folder = wide_copy(tiny_lm, tmp_path / "qwen2", transformers.Qwen2ForCausalLM, transformers.Qwen2Config)
    hf = get_policy("hf", model=folder, batch_size=4, progress=False)
    fast = get_policy("torch", model=folder, batch_size=4, dtype="float32", progress=False)
    assert fast.model.model.layers[0].self_attn.q_proj.bias is not None
    assert fast.describe()["engine"] == "prmkit decode loop"
    sp = SamplingParams(n=2, max_new_tokens=10, temperature=1.0, seed=1)
    assert rows(fast.generate(REQS, sp)) == rows(hf.generate(REQS, sp))


def test_unsupported_architecture_uses_generate(tiny_lm, tmp_path):
    tok = transformers.AutoTokenizer.from_pretrained(tiny_lm)
    cfg = transformers.GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=256,
                                  eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
                                  pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "gpt2")
    tok.save_pretrained(tmp_path / "gpt2")
    folder = str(tmp_path / "gpt2")
    fast = get_policy("torch", model=folder, dtype="float32", progress=False)
    assert "gpt2" in decode_support(fast.model)
    assert fast.describe()["engine"] == "transformers generate"
    hf = get_policy("hf", model=folder, progress=False)
    sp = SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=3)
    assert rows(fast.generate(REQS, sp)) == rows(hf.generate(REQS, sp))


def test_auto_dtype_follows_the_hardware(wide_lm):
    pol = get_policy("torch", model=wide_lm, progress=False)
    assert pol.describe()["dtype"] == ("bfloat16" if native_bf16("cpu") else "float32")


def test_bfloat16_decodes_and_repeats(wide_lm):
    pol = get_policy("torch", model=wide_lm, dtype="bfloat16", batch_size=4, progress=False)
    sp = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=7)
    a, b = pol.generate(REQS, sp), pol.generate(REQS, sp)
    assert rows(a) == rows(b)
    assert all(c.num_tokens > 0 and c.finish_reason in ("stop", "length") for row in a for c in row)
    assert pol.describe()["dtype"] == "bfloat16"
    # Batch-invariant in bfloat16 too (here; it holds up to rounding ties, which this model has none of).
    alone = [pol.generate([r], sp)[0] for r in reversed(REQS)][::-1]
    assert rows(alone) == rows(a)


def test_prepacked_bfloat16_products_equal_plain_ones(wide_lm, monkeypatch):
    """On a CPU with oneDNN the bfloat16 loop multiplies by weights reordered once; its logits and
    completions are bit for bit those of the same loop over plain ``F.linear``."""
    from prmkit.policies import _torch

    pol = get_policy("torch", model=wide_lm, dtype="bfloat16", batch_size=4, progress=False)
    if not pol._plan.packed:
        pytest.skip("this torch has no oneDNN prepacked linear (the loop uses F.linear)")
    monkeypatch.setattr(_torch, "_linear_kernel", lambda w, torch: (torch.nn.functional.linear, None))
    plain = get_policy("torch", model=wide_lm, dtype="bfloat16", batch_size=4, progress=False)
    assert not plain._plan.packed
    sp = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=7)
    assert rows(pol.generate(REQS, sp)) == rows(plain.generate(REQS, sp))
    tokens, positions = torch.tensor([5, 9, 11]), torch.tensor([3, 3, 3])
    logits = []
    for p in (pol, plain):
        parts = [(p._prefill([1, 2, 3], 0, torch), 3, 0)]
        kv = _torch._KV(parts, 3, 3, 4, p._plan.kvh, p._plan.hd, torch.device("cpu"), torch)
        with torch.no_grad():
            logits.append(p._plan.step(tokens, positions, kv, 0, torch))
    assert torch.equal(logits[0], logits[1])


def test_prepacked_prompts_equal_transformers(wide_lm):
    """With prepacked bfloat16 weights the prompt after the shared prefix runs through the loop's
    products: its KV cache is bit for bit the one transformers' forward pass fills, with a shared
    prefix and without."""
    from prmkit.policies._hf import HFPolicy

    pol = get_policy("torch", model=wide_lm, dtype="bfloat16", batch_size=4, progress=False)
    if not pol._plan.packed:
        pytest.skip("this torch has no oneDNN prepacked linear (prompts run through transformers)")
    ids = [1, 7, 3, 9, 4, 4, 12, 5, 8, 2]
    for shared in (0, 4):
        ours, theirs = pol._prefill(ids, shared, torch), HFPolicy._prefill(pol, ids, shared, torch)
        assert len(ours.layers) == len(theirs.layers)
        for a, b in zip(ours.layers, theirs.layers, strict=True):
            assert a.keys.shape == (1, pol._plan.kvh, len(ids), pol._plan.hd)
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_finished_groups_leave_the_batch(pair, monkeypatch):
    """Rows that end early (stop strings here) leave the batch by whole groups; the rest decode on
    and every completion is still hf's."""
    from prmkit.policies import _torch

    hf, fast = pair
    calls = []
    keep = _torch._KV.keep

    def spy(self, groups, torch_):
        calls.append(len(groups))
        return keep(self, groups, torch_)

    monkeypatch.setattr(_torch._KV, "keep", spy)
    many = [req(f"Tom has {k} apples and {k + 2} pears.", f"k{k}") for k in range(8)]
    free = fast.generate(many, SamplingParams(n=1, max_new_tokens=24, temperature=1.0, seed=6))
    stop = max("aeiou", key=lambda ch: sum(ch in row[0].text for row in free))
    sp = SamplingParams(n=1, max_new_tokens=24, temperature=1.0, seed=6, stop=(stop,))
    fast.batch_size = 8
    try:
        got = fast.generate(many, sp)
    finally:
        fast.batch_size = 4
    assert calls and calls == sorted(calls, reverse=True) and calls[-1] < 8
    assert rows(got) == rows(hf.generate(many, sp))
    assert len({c.num_tokens for row in got for c in row}) > 2  # rows really ended at different steps
