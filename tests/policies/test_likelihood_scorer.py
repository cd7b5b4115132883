"""The ``likelihood`` scorer on the tiny seeded LM: its numbers re-derived from transformers' own loss,
batching invariance, spans vs joined steps, and the registry path."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from prmkit.errors import PrmkitError  # noqa: E402
from prmkit.labelers import rollout_messages  # noqa: E402
from prmkit.policies import GenerationRequest, get_policy  # noqa: E402
from prmkit.scoring import SCORERS, LikelihoodScorer, load_scorer  # noqa: E402
from prmkit.trace import Problem, Step, Trace  # noqa: E402


@pytest.fixture(scope="module")
def policy(tiny_lm):
    return get_policy("hf", model=tiny_lm, adapter=None, progress=False)


def _logs(scores: list[float | None]) -> list[float]:
    return [math.log(x) for x in scores]  # type: ignore[arg-type]


def _trace(i: int, steps: list[str], spans: bool = False) -> Trace:
    p = Problem(f"Tom has {i} apples and buys 5 more. How many?", answer=str(i + 5), id=f"p{i}")
    text = "\n".join(steps)
    out, pos = [], 0
    for s in steps:
        out.append(Step(s, span=(pos, pos + len(s)) if spans else None))
        pos += len(s) + 1
    return Trace(id=f"t{i}", problem=p, steps=out, text=text if spans else None)


def test_one_step_mean_is_the_sequence_probability_transformers_gives(policy):
    # For a one-step trace the mean-reduced score to the power of the step's token count is
    # P(step | prompt): the same number transformers' own cross-entropy gives with the prompt masked.
    tr = _trace(3, ["3 + 5 = 8. The answer is 8."])
    (score,), = LikelihoodScorer(policy=policy, reduce="mean").score([tr])
    tok, lm = policy.tokenizer, policy.model
    prompt = policy.render(GenerationRequest(rollout_messages(tr, None, policy.prompt_shots)))
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    ids = tok(prompt + tr.steps[0].text, add_special_tokens=False)["input_ids"]
    assert ids[:len(p_ids)] == p_ids  # the prompt's tokens are a prefix: the body's tokens are its own
    n = len(ids) - len(p_ids)
    labels = [-100] * len(p_ids) + ids[len(p_ids):]
    with torch.inference_mode():
        loss = lm(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss.item()
    assert n * math.log(score) == pytest.approx(-loss * n, abs=1e-4)
    (low,), = LikelihoodScorer(policy=policy, reduce="min").score([tr])
    assert 0 < low <= score <= 1  # the least likely token is at most the geometric mean


def test_batched_equals_one_at_a_time_and_spans_equal_joined_steps(policy):
    traces = [_trace(i, ["She gives away 4: 12 - 4 = 8.", "The answer is 8."][: 1 + i % 2])
              for i in range(5)]
    one = [LikelihoodScorer(policy=policy, batch_size=1).score([t])[0] for t in traces]
    batched = LikelihoodScorer(policy=policy, batch_size=4).score(traces)
    spanned = LikelihoodScorer(policy=policy).score(
        [_trace(i, [s.text for s in t.steps], spans=True) for i, t in enumerate(traces)])
    # The tiny LM is near uniform (scores ~1/vocab), so compare log-probabilities.
    for a, b, c in zip(one, batched, spanned, strict=True):
        assert len(a) == len(b) == len(c)
        assert _logs(a) == pytest.approx(_logs(b), abs=1e-5)
        assert _logs(c) == pytest.approx(_logs(b), abs=1e-5)


def test_a_changed_result_changes_only_its_own_step_and_later(policy):
    # Causal reading: editing step 2 cannot change step 1's score.
    a = _trace(1, ["Step 1: 2 * 3 = 6", "Step 2: 6 + 1 = 7", "The answer is 7."])
    b = _trace(1, ["Step 1: 2 * 3 = 6", "Step 2: 6 + 1 = 9", "The answer is 9."])
    sa, sb = (_logs(s) for s in LikelihoodScorer(policy=policy, reduce="mean").score([a, b]))
    assert sa[0] == pytest.approx(sb[0], abs=1e-6)
    assert abs(sa[1] - sb[1]) > 1e-4


RESULT_TRACE = ["3 + 15 = 18, so 12.", "Nothing to check here.", "The answer is 18."]


def _by_hand(policy, tr: Trace, reduce: str):
    """``f(c)``: the per-token number ``reduce`` reads for the token holding body character ``c``
    (read at the token before it), from the LM's own logits; and where the two "18"s start."""
    tok, lm = policy.tokenizer, policy.model
    prompt = policy.render(GenerationRequest(rollout_messages(tr, None, policy.prompt_shots)))
    body = "\n".join(s.text for s in tr.steps)
    enc = tok(prompt + body, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    with torch.inference_mode():
        logits = lm(input_ids=torch.tensor([ids])).logits[0].float()
    ref = logits.max(-1).values if reduce == "margin" else torch.logsumexp(logits, -1)

    def per_token(c: int) -> float:
        i = next(k for k, (a, b) in enumerate(offsets) if a <= c < b)
        return (logits[i - 1, ids[i]] - ref[i - 1]).item()

    return per_token, len(prompt) + body.index("= 18") + 2, len(prompt) + body.rindex("18")


def test_result_reads_only_the_claimed_values(policy):
    # reduce="result": the least likely token of the numbers after "=" or "answer is"; "12" claims nothing
    tr = _trace(3, RESULT_TRACE)
    got = LikelihoodScorer(policy=policy, reduce="result").score([tr])[0]
    assert got[1] is None  # no claimed value: no evidence either way
    char_lp, first, last = _by_hand(policy, tr, "result")  # log-probs
    assert math.log(got[0]) == pytest.approx(min(char_lp(first), char_lp(first + 1)), abs=1e-5)
    assert math.log(got[2]) == pytest.approx(min(char_lp(last), char_lp(last + 1)), abs=1e-5)
    # a subset of the step's tokens: never below the step's own minimum, and "12" is not read
    low = LikelihoodScorer(policy=policy, reduce="min").score([tr])[0]
    assert got[0] >= low[0] and got[2] >= low[2]
    # "12" is read by mean but not by result: changing it moves mean's score of the step, not result's
    other = _trace(3, ["3 + 15 = 18, so 97.", "Nothing to check here.", "The answer is 18."])
    assert math.log(LikelihoodScorer(policy=policy, reduce="result").score([other])[0][0]) == \
        pytest.approx(math.log(got[0]), abs=1e-6)
    mean = LikelihoodScorer(policy=policy, reduce="mean")
    assert mean.score([other])[0][0] != pytest.approx(mean.score([tr])[0][0], rel=1e-6)


def test_margin_is_the_written_results_distance_from_the_lms_first_choice(policy):
    # reduce="margin" reads the tokens "result" reads, each as log p(written) - log p(most likely):
    # 0 (a score of 1.0) where the LM would have written the token itself.
    tr = _trace(3, RESULT_TRACE)
    got = LikelihoodScorer(policy=policy, reduce="margin").score([tr])[0]
    assert got[1] is None
    char_margin, first, last = _by_hand(policy, tr, "margin")
    assert math.log(got[0]) == pytest.approx(min(char_margin(first), char_margin(first + 1)), abs=1e-5)
    assert math.log(got[2]) == pytest.approx(min(char_margin(last), char_margin(last + 1)), abs=1e-5)
    # p(written) / p(first choice) is at least p(written): never below the result reduction's score
    res = LikelihoodScorer(policy=policy, reduce="result").score([tr])[0]
    assert got[0] >= res[0] and got[2] >= res[2] and max(got[0], got[2]) <= 1.0


def test_registry_and_bad_options(policy, tiny_lm):
    assert "likelihood" in SCORERS
    s = load_scorer("likelihood", None, {"model": tiny_lm, "adapter": "none", "reduce": "mean"})
    tr = _trace(2, ["2 + 5 = 7.", "The answer is 7."])
    assert s.kind == "prm" and s.name.endswith(":mean")
    assert _logs(s.score([tr])[0]) == pytest.approx(
        _logs(LikelihoodScorer(policy=policy, reduce="mean").score([tr])[0]), abs=1e-5)
    with pytest.raises(PrmkitError, match="reduce must be one of min, mean, result, margin"):
        LikelihoodScorer(policy=policy, reduce="max")
    with pytest.raises(PrmkitError, match="needs a local transformers policy"):
        LikelihoodScorer(policy=object())
