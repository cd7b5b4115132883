"""The hf backend on a tiny local model: seeded, batch-invariant sampling, stops, prefixes."""

from __future__ import annotations

import pytest

from prmkit.policies import GenerationRequest, SamplingParams, get_policy

torch = pytest.importorskip("torch")


def req(text, key, prefix=""):
    return GenerationRequest([{"role": "user", "content": text}], prefix=prefix, key=key)


REQS = [req("Tom has 3 apples.", "a"), req("She gives away 4: 12 - 4 =", "b", prefix="Step 1:"),
        req("2 * 3", "c")]


@pytest.fixture(scope="module")
def policy(tiny_lm):
    return get_policy("hf", model=tiny_lm, batch_size=4, progress=False)


def test_batched_equals_one_at_a_time(policy):
    sp = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=7)
    together = policy.generate(REQS, sp)
    alone = [policy.generate([r], sp)[0] for r in reversed(REQS)][::-1]
    assert [[c.text for c in row] for row in together] == [[c.text for c in row] for row in alone]
    # 3 requests x 3 samples of a random model: not all the same text.
    assert len({c.text for row in together for c in row}) > 3


def test_seed_controls_sampling(policy):
    a = policy.generate(REQS[:1], SamplingParams(n=4, max_new_tokens=10, temperature=1.0, seed=1))
    b = policy.generate(REQS[:1], SamplingParams(n=4, max_new_tokens=10, temperature=1.0, seed=1))
    c = policy.generate(REQS[:1], SamplingParams(n=4, max_new_tokens=10, temperature=1.0, seed=2))
    assert [x.text for x in a[0]] == [x.text for x in b[0]]
    assert [x.text for x in a[0]] != [x.text for x in c[0]]


def test_temperature_zero_is_greedy(policy):
    out = policy.generate(REQS[:1], SamplingParams(n=2, max_new_tokens=8, temperature=0))
    tok, model = policy.tokenizer, policy.model
    ids = tok(policy.render(REQS[0]), return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        ref = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id)
    expect = tok.decode(ref[0, ids.shape[1]:], skip_special_tokens=True)
    assert out[0][0].text == out[0][1].text == expect


def test_length_and_token_counts(policy):
    out = policy.generate(REQS, SamplingParams(n=1, max_new_tokens=5, temperature=1.0, seed=3))
    for row, r in zip(out, REQS, strict=True):
        c = row[0]
        assert c.num_tokens <= 5
        assert c.finish_reason in ("stop", "length")
        assert c.finish_reason == "stop" or c.num_tokens == 5
        assert c.prompt_tokens == len(policy.tokenizer(policy.render(r), add_special_tokens=False)
                                      ["input_ids"])


def test_stop_strings_cut_text(policy):
    sp = SamplingParams(n=4, max_new_tokens=30, temperature=1.0, seed=5)
    free = policy.generate(REQS[:1], sp)[0]
    stop = next((ch for c in free for ch in c.text if ch.strip()), None)
    assert stop is not None
    cut = policy.generate(REQS[:1], SamplingParams(n=4, max_new_tokens=30, temperature=1.0, seed=5,
                                                    stop=(stop,)))[0]
    for f, c in zip(free, cut, strict=True):
        assert stop not in c.text
        if stop in f.text:
            assert c.text == f.text[: f.text.index(stop)] and c.finish_reason == "stop"


def test_prefix_is_continued(policy):
    r = REQS[1]
    assert policy.render(r).endswith("<|im_start|>assistant\nStep 1:")
    # Continuing a prefix equals generating after the same text given as part of the prompt.
    out = policy.generate([r], SamplingParams(n=1, max_new_tokens=6, temperature=0))[0][0]
    ids = policy.tokenizer(policy.render(r), return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        ref = policy.model.generate(ids, max_new_tokens=6, do_sample=False,
                                    pad_token_id=policy.tokenizer.pad_token_id)
    assert out.text == policy.tokenizer.decode(ref[0, ids.shape[1]:], skip_special_tokens=True)


def test_describe_names_the_model(policy, tiny_lm):
    d = policy.describe()
    assert d["backend"] == "hf" and d["model"] == tiny_lm and d["device"] == "cpu"
