"""The ct2 backend (CTranslate2) on a tiny local model converted once: determinism for the same batch
plan, batch invariance when asked, prefix continuation equal to hf, stops, resume, conversion cache."""

from __future__ import annotations

import json
import os

import pytest

from prmkit._durable import BUILD_LOCK_SUFFIX
from prmkit.envs import ArithConfig, ArithEnv
from prmkit.envs._prompts import PromptBuilder
from prmkit.generate import sample_traces
from prmkit.policies import GenerationRequest, SamplingParams, default_backend, get_policy

pytest.importorskip("torch")
pytest.importorskip("ctranslate2")


def req(text, key, prefix=""):
    return GenerationRequest([{"role": "user", "content": text}], prefix=prefix, key=key)


REQS = [req("Tom has 3 apples.", "a"), req("She gives away 4: 12 - 4 =", "b", prefix="Step 1:"),
        req("2 * 3", "c")]
SP = SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=7)


def texts(out):
    return [[c.text for c in row] for row in out]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    old = os.environ.get("PRMKIT_CACHE")
    os.environ["PRMKIT_CACHE"] = str(tmp_path_factory.mktemp("prmkit_cache"))
    yield os.environ["PRMKIT_CACHE"]
    if old is None:
        os.environ.pop("PRMKIT_CACHE")
    else:
        os.environ["PRMKIT_CACHE"] = old


@pytest.fixture(scope="module")
def policy(tiny_lm, cache):
    return get_policy("ct2", model=tiny_lm, compute_type="float32", batch_size=4, progress=False)


def entries(cache):
    """The ct2 cache's entries (each beside the zero-byte lock file its conversion held)."""
    names = os.listdir(os.path.join(cache, "ct2"))
    locks = {n for n in names if n.endswith(BUILD_LOCK_SUFFIX)}
    assert locks == {f".{n}{BUILD_LOCK_SUFFIX}" for n in names if n not in locks}
    return sorted(set(names) - locks)


def test_conversion_is_cached_by_content(tiny_lm, policy, cache):
    folders = entries(cache)
    assert len(folders) == 1 and not folders[0].startswith(".tmp")
    again = get_policy("ct2", model=tiny_lm, compute_type="float32", progress=False)
    assert again.folder == policy.folder
    meta = json.loads(open(os.path.join(policy.folder, "prmkit_ct2.json")).read())
    assert meta["quantization"] == "float32"
    # An int8 model is another conversion (another key), not the float32 one reused.
    q = get_policy("ct2", model=tiny_lm, compute_type="int8", progress=False)
    assert q.folder != policy.folder and len(entries(cache)) == 2


def test_conversion_of_the_loaded_model_equals_ctranslate2s_own(tiny_lm, policy, tmp_path):
    # convert_to_ct2 hands CTranslate2 the model it loaded; CTranslate2 converting the saved folder
    # itself must give the same bytes.
    import ctranslate2

    own = tmp_path / "own"
    ctranslate2.converters.TransformersConverter(tiny_lm).convert(str(own), quantization="float32")
    for name in ("model.bin", "config.json", "vocabulary.json"):
        with open(os.path.join(policy.folder, name), "rb") as f:
            assert (own / name).read_bytes() == f.read(), name


def test_same_batch_plan_same_completions(policy):
    a, b = policy.generate(REQS, SP), policy.generate(REQS, SP)
    assert texts(a) == texts(b)
    # A random model sampled at temperature 1: not all the same text.
    assert len({c.text for row in a for c in row}) > 3


def test_seed_changes_completions(policy):
    a = policy.generate(REQS, SP)
    c = policy.generate(REQS, SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=8))
    assert texts(a) != texts(c)


def test_batch_invariant_mode_equals_one_at_a_time(tiny_lm, cache):
    pol = get_policy("ct2", model=tiny_lm, compute_type="float32", batch_invariant=True, progress=False)
    together = pol.generate(REQS, SP)
    alone = [pol.generate([r], SP)[0] for r in reversed(REQS)][::-1]
    assert texts(together) == texts(alone)


def test_greedy_prefix_continuation_equals_hf(policy, tiny_lm):
    """At float32 and temperature 0, ct2 continues each prompt + prefix exactly as transformers does."""
    hf = get_policy("hf", model=tiny_lm, batch_size=4, progress=False)
    sp = SamplingParams(n=2, max_new_tokens=10, temperature=0)
    ours, theirs = policy.generate(REQS, sp), hf.generate(REQS, sp)
    assert texts(ours) == texts(theirs)
    assert [[c.num_tokens for c in r] for r in ours] == [[c.num_tokens for c in r] for r in theirs]
    assert policy.render(REQS[1]).endswith("Step 1:")
    assert ours[1][0].prompt_tokens == len(policy.tokenizer(policy.render(REQS[1]),
                                                            add_special_tokens=False)["input_ids"])


def test_stop_strings_and_lengths(policy):
    sp = SamplingParams(n=3, max_new_tokens=20, temperature=1.0, seed=3, stop=(" ",))
    for row in policy.generate(REQS, sp):
        for c in row:
            assert " " not in c.text
            assert c.finish_reason in ("stop", "length") and c.num_tokens <= 20
    out = policy.generate(REQS[:1], SamplingParams(n=2, max_new_tokens=5, temperature=1.0, seed=1))
    for c in out[0]:
        assert c.num_tokens <= 5 and (c.finish_reason == "stop" or c.num_tokens == 5)


def test_greedy_stop_strings_cut_where_hf_cuts(policy, tiny_lm):
    """At temperature 0, a completion with stop strings is the one without, cut at the first stop
    string (hf's rule), with the row's tokens ending where the stop string is complete."""
    hf = get_policy("hf", model=tiny_lm, batch_size=4, progress=False)
    free = policy.generate(REQS, SamplingParams(n=2, max_new_tokens=16, temperature=0))
    hits = 0
    for stop in ((" ",), ("e", "="), ("\n",)):
        sp = SamplingParams(n=2, max_new_tokens=16, temperature=0, stop=stop)
        ours = policy.generate(REQS, sp)
        assert texts(ours) == texts(hf.generate(REQS, sp))
        for row, whole in zip(ours, free, strict=True):
            for c, w in zip(row, whole, strict=True):
                cut = min((i for s in stop if (i := w.text.find(s)) >= 0), default=-1)
                assert c.text == (w.text[:cut] if cut >= 0 else w.text)
                hits += cut >= 0
                assert c.finish_reason == ("stop" if cut >= 0 else w.finish_reason)
                assert c.num_tokens <= w.num_tokens
    assert hits >= 4  # the stop strings do cut some completions


def test_sampled_stop_strings_end_each_row_alone(policy):
    """With stop strings the n rows of a request are hypotheses of one example that share its
    prompt: a stop ends that row only, the others go on; the same batch plan gives the same rows."""
    sp = SamplingParams(n=6, max_new_tokens=20, temperature=1.0, seed=5, stop=(" ",))
    a, b = policy.generate(REQS, sp), policy.generate(REQS, sp)
    assert texts(a) == texts(b)
    assert [[c.num_tokens for c in r] for r in a] == [[c.num_tokens for c in r] for r in b]
    lengths = [c.num_tokens for row in a for c in row]
    assert any(c.finish_reason == "stop" and c.num_tokens < 20 for row in a for c in row)
    assert len(set(lengths)) > 2  # rows of one example are not cut together
    for row in a:
        for c in row:
            assert " " not in c.text and c.num_tokens <= 20


def test_resumed_file_equals_uninterrupted(tmp_path, policy):
    """ct2 is deterministic per call, not batch invariant: sample_traces keeps the calls of a resumed
    run the same as an uninterrupted one's, so the files are equal."""
    cfg = ArithConfig(steps=2, ops=("+", "-"), seed=3)
    problems = ArithEnv(cfg).problems(5)
    kw = dict(params=SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=11),
              prompts=PromptBuilder("arith", shots=1, config=cfg), progress=False, problems_per_call=2)
    full, part = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    sample_traces(problems, policy, full, **kw)
    sample_traces(problems[:3], policy, part, **kw)  # "interrupted" mid-chunk: problem 3 not done
    lines = part.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:-2]))  # and problem 2 only partly written
    sample_traces(problems, policy, part, **kw)

    def strip(path):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        for r in rows:
            r.pop("provenance")
        return sorted(rows, key=lambda r: r["id"])

    assert strip(part) == strip(full)


def test_default_backend_is_torch_then_ct2_then_hf(monkeypatch):
    import importlib.util

    assert default_backend() == "torch"  # torch, transformers and ctranslate2 are installed here
    find = importlib.util.find_spec
    for missing, want in (({"torch"}, "ct2"), ({"transformers"}, "ct2"), ({"torch", "ctranslate2"}, "hf")):
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a, _m=missing: None if name in _m else find(name, *a))
        assert default_backend() == want


def test_bad_compute_type_is_refused(tiny_lm, cache):
    from prmkit.errors import PrmkitError

    with pytest.raises(PrmkitError, match="compute_type"):
        get_policy("ct2", model=tiny_lm, compute_type="int3")


def _mc_traces():
    from prmkit.trace import Problem, Step, Trace

    out = []
    for i, body in enumerate([["3 + 5 = 8", "8 * 2 = 16"], ["12 - 4 = 8", "8 + 1 = 10"]]):
        steps, at = [], 0
        for s in body:
            steps.append(Step(s, span=(at, at + len(s))))
            at += len(s) + 1
        out.append(Trace(id=f"t{i}", problem=Problem(f"Problem {i}: compute.", answer="16", id=f"p{i}"),
                         steps=steps, final_answer=None))
    return out


def _labels(traces):
    return [[(lab.source, lab.value) for s in t.steps for lab in s.labels] for t in traces]


def test_mc_labels_batched_equal_one_at_a_time_when_batch_invariant(tiny_lm, cache):
    """Monte Carlo rollouts through ct2: with batch_invariant=True the inline executor's batching
    (16 requests per call) gives the labels one request per call gives; packed, the same run twice
    gives the same labels."""
    from prmkit.labelers import get_labeler

    pol = get_policy("ct2", model=tiny_lm, compute_type="float32", batch_invariant=True, progress=False)
    batched, single = _mc_traces(), _mc_traces()
    get_labeler("mc", policy=pol, k=3, seed=2, max_new_tokens=8).label(batched)
    pol.request_batch = 1
    get_labeler("mc", policy=pol, k=3, seed=2, max_new_tokens=8).label(single)
    assert _labels(batched) == _labels(single)
    assert all(lab for t in _labels(batched) for lab in t)

    packed = get_policy("ct2", model=tiny_lm, compute_type="float32", progress=False)
    a, b = _mc_traces(), _mc_traces()
    get_labeler("mc", policy=packed, k=3, seed=2, max_new_tokens=8).label(a)
    get_labeler("mc", policy=packed, k=3, seed=2, max_new_tokens=8).label(b)
    assert _labels(a) == _labels(b)
