"""Traces longer than ``max_length`` (``RewardModel(long="window")``, the default): every step gets a
score; a step in the first ``max_length`` tokens scores as without any limit, a step past it as the
trace made of the problem and its window's steps (the longest run of steps right before it that fits);
traces that fit score bit for bit as with ``long="truncate"`` (the old behaviour), in any company;
batched equals one at a time; PrefixCachingScorer gives the same scores; an ORM still refuses."""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.models import AlignmentError
from prmkit.scoring import PrefixCachingScorer

torch = pytest.importorskip("torch")

DECODERS = ["qwen2.5-math-prm", "skywork-prm", "prmkit", "math-shepherd", "rlhflow"]
TOL = 1e-5

PROBLEM = "Tom has 3 apples and buys 5 more. How many apples does he have?"
STEPS = ["Tom starts with 3 apples.", "He buys 5 more apples.", "So 3 + 5 = 8.", "Check: 8 - 5 = 3.",
         "That matches the start.", "Step 6: 8 apples in all.", "No apples were eaten.", "The answer is 8."]


@pytest.fixture()
def long_trace(make_trace):
    return make_trace("long", PROBLEM, STEPS)


def cut_at(make_rm, name, t, keep):
    """A max_length that keeps exactly ``keep`` steps of ``t`` in its first input (the token after
    the last kept step's label position and verdict)."""
    e = make_rm(name).encode(t)
    verdict = 1 if name == "rlhflow" else 0
    return e.positions[keep - 1] + 1 + verdict


@pytest.mark.parametrize("name", [*DECODERS, "bert"])
def test_every_step_of_a_long_trace_is_scored(name, make_rm, long_trace):
    m = cut_at(make_rm, name, long_trace, 3)
    cut = make_rm(name, max_length=m, long="truncate").score([long_trace])[0]
    assert cut[3:] == [None] * 5 and None not in cut[:3]  # what max_length cut before
    got = make_rm(name, max_length=m).score([long_trace])[0]
    assert len(got) == len(STEPS) and all(0 < p < 1 for p in got)
    assert all(len(e) <= m for e in make_rm(name, max_length=m).encode_all(long_trace))


@pytest.mark.parametrize("name", DECODERS)
def test_steps_with_the_whole_prefix_score_as_unwindowed(name, make_rm, long_trace):
    """A decoder: a step whose input holds the problem and every earlier step (the first max_length
    tokens) scores exactly as with no limit at all (the reference: max_length=None)."""
    m = cut_at(make_rm, name, long_trace, 3)
    rm = make_rm(name, max_length=m)
    parts = rm.encode_all(long_trace)
    assert (parts[0].first_step, parts[0].window_from, len(parts[0].positions)) == (0, None, 3)
    assert all(e.is_window and e.window_from > 0 for e in parts[1:])  # the rest left steps out
    got = rm.score([long_trace])[0]
    want = make_rm(name).score([long_trace])[0]
    assert got[:3] == pytest.approx(want[:3], abs=TOL)


@pytest.mark.parametrize("name", DECODERS)
def test_a_window_scores_as_its_own_trace_and_is_as_long_as_fits(name, make_rm, make_trace, long_trace):
    """Step k past max_length: the score of the trace (problem, steps j..k) read whole, where j is
    the earliest step that still fits (one more earlier step would not)."""
    m = cut_at(make_rm, name, long_trace, 3)
    rm = make_rm(name, max_length=m)
    got = rm.score([long_trace])[0]
    truncating = make_rm(name, max_length=m, long="truncate")
    windows = rm.encode_all(long_trace)[1:]
    assert [w.first_step for w in windows] == [3, 4, 5, 6, 7]
    for w in windows:
        k, j = w.first_step, w.window_from
        own = make_trace(f"w{k}", PROBLEM, STEPS[j:k + 1])
        assert got[k] == pytest.approx(make_rm(name).score([own])[0][-1], abs=TOL)
        assert truncating.encode(own).dropped == 0
        wider = make_trace(f"v{k}", PROBLEM, STEPS[j - 1:k + 1])
        assert truncating.encode(wider).dropped > 0


def test_windows_by_hand(make_rm, make_trace):
    """The character tokenizer (one token per character, no special tokens): "P?\\n" is 3 tokens and
    each "sN\\n" 3 more, so step i is labelled at 5 + 3i. max_length=10 keeps steps 0 and 1 (5, 8);
    step 2's window holds 3 + 3 * 2 = 9 tokens (steps 1, 2), step 3's too (steps 2, 3)."""
    rm = make_rm("prmkit", max_length=10)
    t = make_trace("h", "P?", ["s0", "s1", "s2", "s3"])
    got = [(e.first_step, e.window_from, e.positions, len(e)) for e in rm.encode_all(t)]
    assert got == [(0, None, [5, 8], 9), (2, 1, [8], 9), (3, 2, [8], 9)]


@pytest.mark.parametrize("name", ["prmkit", "rlhflow", "bert"])
def test_traces_that_fit_are_bit_identical_to_truncating(name, make_rm, mixed_traces, long_trace):
    m = cut_at(make_rm, name, long_trace, 3)
    fit = [t for t in mixed_traces if make_rm(name, max_length=m).encode(t).dropped == 0]
    assert len(fit) >= 8
    window, truncate = make_rm(name, max_length=m), make_rm(name, max_length=m, long="truncate")
    assert window.score(fit) == truncate.score(fit)
    together = fit + [long_trace]
    got, old = window.score(together, batch_size=4), truncate.score(together, batch_size=4)
    assert got[:-1] == old[:-1]  # with a long trace in the same call: the same batches as before
    assert got[-1][:3] == old[-1][:3]  # the long trace's first steps too


@pytest.mark.parametrize("name", ["prmkit", "math-shepherd", "bert"])
def test_batched_equals_one_at_a_time(name, make_rm, make_trace, mixed_traces, long_trace):
    m = cut_at(make_rm, name, long_trace, 3)
    rm = make_rm(name, max_length=m)
    other = make_trace("long2", PROBLEM, STEPS[::-1])
    traces = [long_trace, *mixed_traces[:5], other]
    alone = [rm.score([t])[0] for t in traces]
    assert all(None not in s for s in alone)
    for bs in (1, 3, 8):
        got = rm.score(traces, batch_size=bs)
        for g, a in zip(got, alone, strict=True):
            assert g == pytest.approx(a, abs=TOL)


@pytest.mark.parametrize("name", DECODERS)
def test_prefix_caching_scorer_reads_windows_too(name, make_rm, make_trace, mixed_traces, long_trace):
    m = cut_at(make_rm, name, long_trace, 3)
    rm = make_rm(name, max_length=m)
    traces = [long_trace, make_trace("long2", PROBLEM, STEPS[:6]), *mixed_traces[:4]]
    scorer = PrefixCachingScorer(rm, batch_size=3, min_saved_tokens=2)
    assert scorer.supported
    got = scorer.score(traces)
    for g, t in zip(got, traces, strict=True):
        assert g == pytest.approx(rm.score([t])[0], abs=1e-4)
    assert None not in got[0]
    assert scorer.stats.tokens_reused > 0  # the windows share the rendered problem
    cut = PrefixCachingScorer(make_rm(name, max_length=m, long="truncate")).score([long_trace])[0]
    assert cut[3:] == [None] * 5


def test_a_step_too_long_for_any_window_is_clipped_from_its_start(make_rm, make_trace):
    """prmkit on the character tokenizer, max_length=10: "P?\n" leaves 7 tokens, so a 20-character
    first step keeps its last 6 characters (label at 3 + 6 = 9); a step with words is cut at a word
    ("ab cd efgh" keeps "efgh": label at 3 + 4 = 7). Before, the whole trace was rejected."""
    t = make_trace("f", "P?", ["x" * 20, "s1", "s2"])
    with pytest.raises(AlignmentError, match="not even the first step"):
        make_rm("prmkit", max_length=10, long="truncate").score([t])
    rm = make_rm("prmkit", max_length=10)
    got = [(e.first_step, e.window_from, e.clipped, e.positions) for e in rm.encode_all(t)]
    assert got == [(0, 0, 14, [9]), (1, 1, 0, [5]), (2, 1, 0, [8])]
    scores = rm.score([t])[0]
    assert None not in scores
    assert scores[0] == pytest.approx(make_rm("prmkit").score([make_trace("t", "P?", ["x" * 6])])[0][0], abs=TOL)
    words = make_trace("w", "P?", ["s0", "ab cd efgh"])
    assert [(e.first_step, e.window_from, e.clipped, e.positions) for e in rm.encode_all(words)] == [
        (0, None, 0, [5]), (1, 1, 6, [7])]
    with pytest.raises(AlignmentError, match="not even the first step"):
        rm.score([make_trace("g", "P" * 12, ["s0", "s1"])])  # the problem leaves no room: rejected as before


@pytest.mark.parametrize("name", ["prmkit", "rlhflow"])
def test_an_orm_still_refuses_a_trace_it_cannot_read_whole(name, make_rm, long_trace):
    m = cut_at(make_rm, name, long_trace, 3)
    with pytest.raises(AlignmentError, match="an ORM needs the whole trace"):
        make_rm(name, kind="orm", max_length=m).score([long_trace])
    assert make_rm(name, kind="orm", max_length=m).long == "window"  # refused all the same


def test_long_must_be_known(make_rm):
    with pytest.raises(PrmkitError, match="long must be one of window, truncate"):
        make_rm("prmkit", long="slide")
