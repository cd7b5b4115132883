"""The torch backend (prmkit's own decode loop over transformers weights) on tiny local models: at
float32 it gives hf's completions and transformers' logits; batches of whole requests, slices of one
request, mixed groups and unsupported architectures; bfloat16 where asked."""

from __future__ import annotations

import os

import pytest

from prmkit.policies import SamplingParams, get_policy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from decode_checks import REQS, req, rows, step_logits_gap, wide_copy  # noqa: E402

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
@pytest.mark.slow
def test_float32_equals_hf(pair, sp):
    hf, fast = pair
    assert fast.describe()["engine"] == "prmkit decode loop"
    a, b = hf.generate(REQS, sp), fast.generate(REQS, sp)
    assert rows(b) == rows(a)
    # Wide weights, temperature 1: the samples are not all alike, so equality says something.
    assert sp.temperature == 0 or len({c.text for row in b for c in row}) > 2


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def _gpt2(tiny_lm, tmp_path):
    """A tiny GPT-2 (an architecture the decode loop does not implement) with the tiny model's tokenizer."""
    tok = transformers.AutoTokenizer.from_pretrained(tiny_lm)
    cfg = transformers.GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=256,
                                  eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
                                  pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "gpt2")
    tok.save_pretrained(tmp_path / "gpt2")
    return str(tmp_path / "gpt2")


def test_unsupported_architecture_uses_generate(tiny_lm, tmp_path):
    folder = _gpt2(tiny_lm, tmp_path)
    fast = get_policy("torch", model=folder, dtype="float32", progress=False)
    assert "gpt2" in decode_support(fast.model)
    assert fast.describe()["engine"] == "transformers generate"
    hf = get_policy("hf", model=folder, progress=False)
    sp = SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=3)
    assert rows(fast.generate(REQS, sp)) == rows(hf.generate(REQS, sp))


def test_auto_dtype_follows_choose_compute(wide_lm, tiny_lm, tmp_path, monkeypatch, capsys):
    """``dtype="auto"`` is :func:`~prmkit.policies.choose_compute`'s choice at the model's shapes
    (the CPU classes forced; tests/policies/test_compute.py has the rule itself), said in
    ``describe()`` and one log line; a model the loop cannot run is never offered int8."""
    from prmkit.policies import _compute
    from prmkit.policies._compute import CpuInfo

    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_compute, "_MEMO", {})
    monkeypatch.setattr(_compute, "_busy", lambda: None)  # the decision is kept, whatever this machine's load
    monkeypatch.setattr("prmkit.policies._base._cpu_int8_problem", lambda: None)
    asked = []

    def probe(shape, dtypes, int8_kernel="int_mm", **kw):
        asked.append((shape, list(dtypes), int8_kernel))
        return {d: {"float32": 10.0, "int8": 4.0, "bfloat16": 3.0}[d] for d in (*dtypes, "float32")}

    monkeypatch.setattr(_compute, "probe", probe)
    cpus = {"AVX2": CpuInfo("test", "AVX2"), "VNNI": CpuInfo("test", "AVX512", vnni=True),
            "BF16": CpuInfo("test", "AVX512", vnni=True, avx512_bf16=True)}
    got = {}
    fbgemm = _compute._int8_fbgemm_kernel(torch)[0] is not None
    for name, cpu in cpus.items():
        monkeypatch.setattr(_compute, "cpu_info", lambda cpu=cpu: cpu)
        pol = get_policy("torch", model=wide_lm, progress=False)
        got[name] = (pol.describe()["dtype"], pol.describe().get("int8_kernel"), str(pol.model.dtype))
    avx2 = ("int8", "fbgemm", "torch.float32") if fbgemm else ("float32", None, "torch.float32")
    assert got == {"AVX2": avx2, "VNNI": ("int8", "int_mm", "torch.float32"),
                   "BF16": ("bfloat16", None, "torch.bfloat16")}
    cfg = pol.model.config
    shape = (64, cfg.hidden_size, cfg.intermediate_size)
    assert asked == [(shape, ["int8"], "fbgemm")] * fbgemm + [(shape, ["int8"], "int_mm"),
                                                              (shape, ["bfloat16", "int8"], "int_mm")]
    err = capsys.readouterr().err
    assert (f"torch policy: dtype int8 (probe at {'x'.join(map(str, shape))}: int8 (fbgemm) 4.00 ms, "
            "float32 10.00 ms; CPU class AVX2)" if fbgemm else "torch policy: dtype float32 (no native bfloat16") in err
    # Without fbgemm an AVX2 CPU has no int8 candidate: float32, no probe.
    monkeypatch.setattr(_compute, "cpu_info", lambda: cpus["AVX2"])
    monkeypatch.setattr(_compute, "_int8_fbgemm_kernel", lambda torch_: (None, None))
    monkeypatch.setattr(_compute, "_MEMO", {})
    asked.clear()
    pol = get_policy("torch", model=wide_lm, progress=False)
    assert pol.describe()["dtype"] == "float32" and not pol._plan.int8 and asked == []
    assert "torch policy: dtype float32 (no native bfloat16 (AVX512-BF16 or AMX); no int8 dot-product " \
           "instructions (VNNI or AMX) and no fbgemm int8 product; CPU class AVX2)" in capsys.readouterr().err
    # Asked for by name: no probe, no choice recorded.
    assert "compute" not in get_policy("torch", model=wide_lm, dtype="float32", progress=False).describe()
    # A model the loop cannot run: int8 is not offered ("auto": generate in float32); "int8" is refused.
    monkeypatch.setattr(_compute, "cpu_info", lambda: cpus["VNNI"])
    folder = _gpt2(tiny_lm, tmp_path)
    pol = get_policy("torch", model=folder, progress=False)
    assert pol.describe()["dtype"] == "float32" and pol.describe()["engine"] == "transformers generate"
    with pytest.raises(ValueError, match="decode loop"):
        get_policy("torch", model=folder, dtype="int8", progress=False)


@pytest.mark.slow
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


def _int8_kernel_or_skip():
    from prmkit.policies._torch import _int8_kernel

    linear, pack = _int8_kernel(torch)
    if linear is None:
        pytest.skip("this torch has no working torch._int_mm (the int8 products)")
    return linear, pack


def _fbgemm_kernel():
    from prmkit.policies._int8 import _int8_fbgemm_kernel

    return _int8_fbgemm_kernel(torch)


def test_fbgemm_int8_product_by_hand():
    """fbgemm's product (CPUs without VNNI): input rows to [-127, 127] as with ``_int_mm``, weight
    rows to 7 bits, [-63, 63], by their own largest magnitude; integer sums, scaled back; a row alone
    as in a batch; a kernel name that does not exist is refused."""
    linear, pack = _fbgemm_kernel()
    if linear is None:
        pytest.skip("this torch has no exact fbgemm int8 product")
    w = torch.tensor([[6.3, -1.0, 0.5], [0.0, 4.0, -4.0]])  # scales 6.3/63, 4/63: [63, -10, 5], [0, 63, -63]
    x = torch.tensor([[1.0, -2.0, 4.0], [-4.0, 2.2, 1.0]])  # scale 4/127: [32, -64, 127]; [-127, 70, 32]
    out = linear(x, pack(w), torch.tensor([0.5, -1.0]))
    # row 0: 32*63 + 64*10 + 127*5 = 3291; -64*63 - 127*63 = -12033
    # row 1: -127*63 - 70*10 + 32*5 = -8541; 70*63 - 32*63 = 2394
    sums = torch.tensor([[3291.0, -12033.0], [-8541.0, 2394.0]], dtype=torch.float64)
    want = (sums * torch.tensor([6.3 / 63, 4 / 63], dtype=torch.float64) * 4 / 127
            + torch.tensor([0.5, -1.0], dtype=torch.float64))
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=0)
    assert out.shape == (2, 2) and out.dtype == torch.float32
    assert torch.equal(linear(x[1:], pack(w), torch.tensor([0.5, -1.0]))[0], out[1])
    gen = torch.Generator().manual_seed(0)
    big = torch.randn(3, 4, 200, generator=gen).abs()  # all positive: every input byte near 255
    wb = pack(torch.randn(30, 200, generator=gen))
    together = linear(big, wb)
    assert all(torch.equal(linear(big[b, p][None], wb)[0], together[b, p]) for b in range(3) for p in range(4))
    with pytest.raises(ValueError, match="int8_kernel must be 'auto' or one of int_mm, fbgemm, got 'vnni'"):
        get_policy("torch", model="unused", dtype="int8", int8_kernel="vnni", progress=False)


def test_int8_product_by_hand():
    """W8A8: weight rows and input rows quantized symmetrically to [-127, 127] by their own largest
    magnitude (rounding half to even), integer sums, scaled back."""
    linear, pack = _int8_kernel_or_skip()
    w = torch.tensor([[2.0, -1.0, 0.5], [0.0, 4.0, -4.0]])  # scales 2/127, 4/127: [127, -64, 32], [0, 127, -127]
    x = torch.tensor([[1.0, -2.0, 4.0]])  # scale 4/127: [32, -64, 127] (31.75 -> 32, -63.5 -> -64)
    out = linear(x, pack(w), torch.tensor([0.5, -1.0]))
    # 32*127 + 64*64 + 127*32 = 12224; -64*127 - 127*127 = -24257 (exact: 6 and -24, before the bias)
    want = torch.tensor([[12224 * 4 * 2 / 127**2 + 0.5, -24257 * 4 * 4 / 127**2 - 1.0]], dtype=torch.float64)
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=0)
    assert out.shape == (1, 2) and out.dtype == torch.float32


def test_int8_rows_do_not_depend_on_their_batch():
    """Every scale belongs to one input row or one weight row and the sums are integers, so a row's
    product is bit for bit the same alone as among others, in any (batch, positions, features) shape."""
    linear, pack = _int8_kernel_or_skip()
    gen = torch.Generator().manual_seed(0)
    w, bias = pack(torch.randn(40, 24, generator=gen)), torch.randn(40, generator=gen)
    x = torch.randn(3, 5, 24, generator=gen) * torch.tensor([0.01, 1.0, 30.0])[:, None, None]
    together = linear(x, w, bias)
    assert together.shape == (3, 5, 40)
    for b in range(3):
        for p in range(5):
            assert torch.equal(linear(x[b, p][None], w, bias)[0], together[b, p])
    assert torch.equal(linear(torch.zeros(2, 24), w)[0], torch.zeros(40))  # no division by zero


@pytest.mark.parametrize("kernel", ["int_mm", "fbgemm"])
@pytest.mark.slow
def test_int8_decodes_close_to_float32_and_batch_invariant(wide_lm, kernel):
    """``dtype="int8"``: the loop's products in int8 (attention, norms, cache and sampling in
    float32), through either kernel. Each step's logits stay near the float32 model's forward pass;
    completions repeat run to run and do not depend on the rest of the batch; prompts run through
    the same products."""
    _int8_kernel_or_skip()
    if kernel == "fbgemm" and _fbgemm_kernel()[0] is None:
        pytest.skip("this torch has no exact fbgemm int8 product")
    pol = get_policy("torch", model=wide_lm, dtype="int8", int8_kernel=kernel, batch_size=6, progress=False)
    assert pol.describe()["dtype"] == "int8" and pol.describe()["engine"] == "prmkit decode loop"
    assert pol.describe()["int8_kernel"] == kernel
    assert pol._plan.int8 and pol._plan.packed
    fp32 = get_policy("torch", model=wide_lm, dtype="float32", batch_size=6, progress=False)
    worst, compared, steps = step_logits_gap(pol, REQS)
    exact, _, _ = step_logits_gap(fp32, REQS)
    spread = fp32.model(torch.tensor([[1, 5, 9, 2]])).logits.std().item()
    assert compared == 6 * steps and steps >= 2
    assert exact < 1e-4 < worst < 0.5 * spread  # int8 rounds (coarsely at hidden size 32), not far
    sp = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=9)
    a = pol.generate(REQS, sp)
    assert rows(a) == rows(pol.generate(REQS, sp))
    alone = [pol.generate([r], sp)[0] for r in reversed(REQS)][::-1]
    assert rows(alone) == rows(a)
    assert rows(a) != rows(fp32.generate(REQS, sp))  # another arithmetic: other samples


def test_int8_prompts_run_through_the_int8_products(wide_lm):
    """A prompt's cache with int8 products: the shared prefix and the rest both through
    :meth:`_Plan.prefill`, equal (to float rounding of attention) to the whole prompt at once."""
    _int8_kernel_or_skip()
    pol = get_policy("torch", model=wide_lm, dtype="int8", batch_size=4, progress=False)
    ids = [1, 7, 3, 9, 4, 4, 12, 5, 8, 2]
    with torch.no_grad():
        whole = pol._plan.prefill(torch.tensor([ids]), None, torch)
        plain = get_policy("torch", model=wide_lm, dtype="float32", batch_size=4, progress=False)
        ref = plain._prefill(ids, 0, torch)
    for shared in (0, 4):
        cache = pol._prefill(ids, shared, torch)
        for (k, v), layer, fl in zip(whole, cache.layers, ref.layers, strict=True):
            assert torch.allclose(layer.keys, k, atol=1e-5) and torch.allclose(layer.values, v, atol=1e-5)
            assert not torch.allclose(layer.values, fl.values, atol=1e-5)  # not float32's cache


def test_int8_is_refused_where_it_cannot_run(wide_lm):
    with pytest.raises(ValueError, match="int8.*CPU"):
        get_policy("torch", model=wide_lm, dtype="int8", device="cuda", progress=False)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_int8_smoothing_leaves_the_float_model_unchanged(tiny_lm, wide_lm, tmp_path, monkeypatch, arch):
    """SmoothQuant's factors are folded into the norms, the value rows (one factor per value
    channel, shared by the query heads that read it: 4 query heads on 2 here), the up rows and
    the head: with float products in place of the int8 ones, the smoothed loop's logits are the
    float32 model's; with random q/k/v biases too."""
    from prmkit.policies import _torch

    monkeypatch.setattr(_torch, "_int8_kernel", lambda torch_: (torch.nn.functional.linear, torch.clone))
    monkeypatch.setattr(_torch, "_int8_head_kernel", lambda torch_: (None, None))  # the head as the layers
    folder = wide_lm if arch == "llama" else wide_copy(
        tiny_lm, tmp_path / "qwen2", transformers.Qwen2ForCausalLM, transformers.Qwen2Config)
    pol = get_policy("torch", model=folder, dtype="int8", int8_kernel="int_mm", batch_size=6, progress=False)
    if arch == "qwen2":
        gen = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for layer in pol.model.model.layers:
                for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen))
        pol._plan = _torch._Plan(pol.model, torch, int8=True, calibration=pol._calibration_ids())
    plan = pol._plan
    assert plan.smoothed and pol.model.config.num_key_value_heads < pol.model.config.num_attention_heads
    model_n1 = pol.model.model.layers[0].input_layernorm.weight
    ratio = plan.layers[0][0] / model_n1
    assert ratio.max() > 1.2 * ratio.min()  # the factors differ across channels
    worst, compared, steps = step_logits_gap(pol, REQS)
    assert compared == 6 * steps and steps >= 2 and worst < 1e-4


def test_int8_head_product_is_the_int8_product_in_another_order():
    """The LM head's int8 product through oneDNN's u8 x s8 linear: the same integer sums as
    ``torch._int_mm``, scaled per channel then per row; each row alone as in a batch; the int8
    decode uses it for the head where it is available."""
    from prmkit.policies._torch import _int8_head_kernel

    linear, pack = _int8_kernel_or_skip()
    hlinear, hpack = _int8_head_kernel(torch)
    if hlinear is None:
        pytest.skip("this torch has no exact oneDNN int8 linear (torch.ops.onednn.qlinear_pointwise)")
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(300, 48, generator=gen)
    x = torch.randn(2, 7, 48, generator=gen) * torch.tensor([0.02, 20.0])[:, None, None]
    got = hlinear(x, hpack(w))
    assert got.shape == (2, 7, 300) and got.dtype == torch.float32
    # By hand from the integers: round(w / w_scale), round(x / x_scale), exact sums.
    ws = w.abs().amax(dim=1) / 127
    xs = x.abs().amax(dim=-1, keepdim=True) / 127
    qw = torch.round(w / ws[:, None]).long()
    qx = torch.round(x / xs).long()
    sums = (qx @ qw.t()).double()
    assert torch.equal(got, (sums.float() * ws).mul_(xs))
    assert torch.allclose(got, linear(x, pack(w)), rtol=1e-6, atol=1e-6)  # _int_mm's order: (sums * xs) * ws
    for b in range(2):
        for p in range(7):
            assert torch.equal(hlinear(x[b, p][None], hpack(w))[0], got[b, p])
    bias = torch.randn(300, generator=gen)
    assert torch.equal(hlinear(x, hpack(w), bias), got + bias)
    assert torch.equal(hlinear(torch.zeros(1, 48), hpack(w)), torch.zeros(1, 300))


def test_int8_decode_uses_the_onednn_head_where_exact(wide_lm, monkeypatch):
    """Where the oneDNN head is exact the plan uses it; where it is not (patched away), the head
    falls back to the layers' ``_int_mm`` product and the decode still runs."""
    import prmkit.policies._torch as T

    _int8_kernel_or_skip()
    sp = SamplingParams(n=2, max_new_tokens=6, temperature=1.0, seed=3)
    pol = get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="int_mm", batch_size=4, progress=False)
    if T._int8_head_kernel(torch)[0] is None:
        pytest.skip("no exact oneDNN int8 linear here")
    assert pol._plan.head_linear is not pol._plan.linear
    assert rows(pol.generate(REQS, sp)) == rows(pol.generate(REQS, sp))
    monkeypatch.setattr(T, "_int8_head_kernel", lambda torch: (None, None))
    plain = get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="int_mm", batch_size=4, progress=False)
    assert plain._plan.head_linear is plain._plan.linear
    assert all(c.num_tokens for row in plain.generate(REQS, sp) for c in row)
    x = torch.randn(3, pol.model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    a, b = pol._plan.head_linear(x, pol._plan.lm_head), plain._plan.linear(x, plain._plan.lm_head)
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)  # the same sums: rounding order only


@pytest.mark.slow
def test_compiled_int8_decode_repeats_and_is_batch_invariant(wide_lm):
    """``compile=True``: from a decode's second step on, the layers run through ``torch.compile``,
    several a call (inductor fuses the int8 loop's small operations). Its logits stay as near the float32 model's
    forward pass as the eager int8 loop's (inductor sums the norms in another order, which can move
    an int8 rounding); completions repeat run to run, a request's do not depend on the rest of its
    batch, and one sample per request (one row per group, a graph of its own) decodes too."""
    _int8_kernel_or_skip()
    pol = get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="int_mm", batch_size=6, compile=True,
                     progress=False)
    plan = pol._plan
    assert pol.describe()["compiled"] is True and plan.compiled is not None
    calls = []
    compiled = plan.compiled

    def counted(*args):
        calls.append(args[0].shape[0])
        return compiled(*args)

    plan.compiled = counted
    worst, compared, steps = step_logits_gap(pol, REQS)
    assert plan.compiled is counted, "the compiled step failed and fell back to eager"
    # steps t >= 1, the layers in calls of layers_per_call (here both of the model's 2 in one)
    k = plan.layers_per_call
    assert steps > 2 and k == 2 == len(plan.layers)
    from prmkit.policies._torch import COMPILE_OPTIONS  # each an inductor option of this torch (none dropped)

    assert all(hasattr(torch._inductor.config, name) for name in COMPILE_OPTIONS)
    assert len(calls) == (steps - 1) * len(plan.layers) // k
    fp32 = get_policy("torch", model=wide_lm, dtype="float32", batch_size=6, progress=False)
    spread = fp32.model(torch.tensor([[1, 5, 9, 2]])).logits.std().item()
    assert compared == 6 * steps and worst < 0.5 * spread
    sp = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=9)
    a = pol.generate(REQS, sp)
    assert rows(a) == rows(pol.generate(REQS, sp))
    assert rows([pol.generate([r], sp)[0] for r in REQS]) == rows(a)
    one = SamplingParams(n=1, max_new_tokens=10, temperature=0)
    assert rows(pol.generate(REQS, one)) == rows([pol.generate([r], one)[0] for r in REQS])
    assert plan.compiled is counted


def test_each_model_size_compiles_under_a_code_object_of_its_own():
    """Dynamo keeps graphs per code object: models of other sizes must not share one, or the second
    model's size guards fail against the first's graphs, automatic dynamic shapes compile its hidden
    size and heads as symbols (slower kernels, no on-disk cache hit; 99 s instead of 40 s for the test
    above after a SmolLM2 decode), and the recompile limit is shared. One layer function (one set of
    sizes) keeps one compiled function."""
    from prmkit.policies._torch import _compiled_layers

    def small(x, cos, sin, *args):
        return x

    def large(x, cos, sin, *args):
        return x

    a, b = _compiled_layers(small, torch), _compiled_layers(large, torch)
    assert _compiled_layers(small, torch) is a
    code_a, code_b = (f._torchdynamo_orig_callable.__code__ for f in (a, b))
    assert code_a is not code_b and code_a.co_name != code_b.co_name
    x = torch.ones(2, 3)
    assert torch.equal(a(x, x, x, torch.empty(0, 1), ((),)), x)  # the renamed function still runs


def test_torch_compile_disable_keeps_the_loop_eager_and_says_so(wide_lm):
    """Under torch's own switch (``TORCH_COMPILE_DISABLE=1``, here its config) a compiled function runs
    eagerly: the plan does not compile, even asked to, and ``describe()`` says why."""
    _int8_kernel_or_skip()
    with torch._dynamo.config.patch(disable=True):
        pol = get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="int_mm", batch_size=6, compile=True,
                         progress=False)
    assert pol._plan.compiled is None
    assert pol.describe()["compiled"] is False and pol.describe()["compiled_off"] == "TORCH_COMPILE_DISABLE=1"
    on = get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="int_mm", batch_size=6, compile=True,
                    progress=False)
    assert on._plan.compiled is not None and "compiled_off" not in on.describe()


@pytest.mark.slow
def test_compile_failure_decodes_eagerly_with_a_warning(wide_lm):
    """A compiler that fails (no C++ compiler, say) costs a warning, not the decode: the step that
    failed and every later one run eagerly, giving the eager loop's completions."""
    _int8_kernel_or_skip()
    eager = get_policy("torch", model=wide_lm, dtype="int8", batch_size=6, compile=False, progress=False)
    pol = get_policy("torch", model=wide_lm, dtype="int8", batch_size=6, compile=False, progress=False)
    assert pol.describe()["compiled"] is False

    def broken(*args):
        raise RuntimeError("no working C++ compiler\nmore lines")

    pol._plan.compiled = broken
    sp = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=4)
    with pytest.warns(UserWarning, match="torch.compile of the decode loop failed .RuntimeError: no working C"):
        got = pol.generate(REQS, sp)
    assert pol._plan.compiled is None and pol.describe()["compiled"] is False
    assert rows(got) == rows(eager.generate(REQS, sp))


def test_compile_auto_is_for_int8_models_of_some_size(wide_lm, monkeypatch):
    """``compile="auto"`` (the default) compiles the int8 loop, and the float32 loop on a CPU, of a
    model of at least ``COMPILE_MIN_PARAMETERS`` parameters (compiling costs seconds a process, which
    a tiny model never repays); never the bfloat16 one; ``-p compile=...`` strings are read; anything
    else is refused."""
    from prmkit.policies import _torch as T

    _int8_kernel_or_skip()
    assert get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="int_mm", progress=False)._plan.compiled is None
    monkeypatch.setattr(T, "COMPILE_MIN_PARAMETERS", 1)
    assert get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="int_mm",
                      progress=False)._plan.compiled is not None
    if _fbgemm_kernel()[0] is not None:  # fbgemm's products stay eager: its ops break inductor's graphs
        assert get_policy("torch", model=wide_lm, dtype="int8", int8_kernel="fbgemm",
                          progress=False)._plan.compiled is None
    assert get_policy("torch", model=wide_lm, dtype="float32", progress=False)._plan.compiled is not None
    assert get_policy("torch", model=wide_lm, dtype="bfloat16", progress=False)._plan.compiled is None
    assert get_policy("torch", model=wide_lm, dtype="int8", compile="false", progress=False)._plan.compiled is None
    with pytest.raises(ValueError, match="compile must be true, false or 'auto', got 'sometimes'"):
        get_policy("torch", model=wide_lm, dtype="int8", compile="sometimes", progress=False)


def test_torch_s_own_default_inductor_folder_counts_as_not_chosen(tmp_path, monkeypatch):
    """Importing torch._dynamo sets TORCHINDUCTOR_CACHE_DIR to torch's default folder (under /tmp):
    that value is replaced by prmkit's cache; one the user set is kept."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from prmkit.policies import inductor_cache_dir, use_inductor_cache

    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(default_cache_dir()))
    assert use_inductor_cache() == str(inductor_cache_dir()) == os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert str(tmp_path / "cache") in os.environ["TORCHINDUCTOR_CACHE_DIR"]
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert use_inductor_cache() == str(tmp_path / "mine")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    assert use_inductor_cache() == str(inductor_cache_dir())


def test_compiled_kernels_are_kept_in_prmkit_s_cache(wide_lm, tmp_path, monkeypatch):
    """Compiling points inductor's cache at ``$PRMKIT_CACHE/inductor/torch-<version>`` (one cache
    entry per torch version, listed and cleared with the others) unless the user set
    ``TORCHINDUCTOR_CACHE_DIR``, which is left as it is."""
    from prmkit.policies import cache_entries, inductor_cache_dir

    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    pol = get_policy("torch", model=wide_lm, dtype="float32", compile=False, progress=False)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    pol._plan.compile()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    pol._plan.compile()
    version = torch.__version__.split("+")[0]
    want = tmp_path / "cache" / "inductor" / f"torch-{version}"
    assert inductor_cache_dir() == want and os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(want)
    want.mkdir(parents=True)
    (want / "fxgraph").mkdir()
    [entry] = cache_entries(["inductor"])
    assert (entry.kind, entry.name, entry.key, entry.note) == ("inductor", f"torch-{version}", version, "")
