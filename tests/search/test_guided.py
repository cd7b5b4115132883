"""Reject, rerank and revise with a scripted policy and scorer: they stop within budget and say why.

The policies replay their list in turn across calls (``order="served"``): a script of what the
sampler returns one attempt after another.
"""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.policies import ScriptedPolicy
from prmkit.search import ScriptedScorer, reject, rerank, revise
from prmkit.trace import Problem

PROBLEM = Problem("Tom has 2 apples and buys 1. How many?", answer="3", id="tom")
BAD = "Tom has 2 apples.\nHe buys 1: 2 + 1 = 4.\nThe answer is 4."
GOOD = "Tom has 2 apples.\nHe buys 1: 2 + 1 = 3.\nThe answer is 3."
SCORES = {"Tom has 2 apples.": 0.9, "He buys 1: 2 + 1 = 4.": 0.2, "The answer is 4.": 0.3,
          "He buys 1: 2 + 1 = 3.": 0.875, "The answer is 3.": 0.75}


def test_reject_resamples_until_a_trace_passes(prompts):
    policy = ScriptedPolicy([BAD, BAD, GOOD, BAD], order="served")
    r = reject(PROBLEM, policy, ScriptedScorer(SCORES), prompts, threshold=0.5, budget=5)
    assert r.accepted and r.trace.final_answer == "3" and policy.served == 3
    assert [(a.score, a.accepted, a.reason) for a in r.attempts] == [
        (0.2, False, "score 0.2 < 0.5"), (0.2, False, "score 0.2 < 0.5"),
        (0.75, True, "score 0.75 >= 0.5")]
    assert len(r.rejected) == 2
    assert r.reason == "sample 3 of at most 5 passed (score 0.75 >= 0.5)"
    assert [q.key for q in policy.requests] == ["tom/reject/0", "tom/reject/1", "tom/reject/2"]
    assert r.trace.meta["guided"]["accepted"] is True
    assert [s.scores["scripted"] for s in r.trace.steps] == [0.9, 0.875, 0.75]


def test_reject_stops_at_the_budget_and_returns_the_best(prompts):
    policy = ScriptedPolicy([BAD, "Tom has 2 apples.\nThe answer is 4."], order="served")
    r = reject(PROBLEM, policy, ScriptedScorer(SCORES), prompts, threshold=0.5, budget=3, batch=2)
    # two calls: 2 samples, then the 1 the budget leaves
    assert policy.served == 3 and [q.key for q in policy.requests] == ["tom/reject/0", "tom/reject/1"]
    assert not r.accepted and [a.score for a in r.attempts] == [0.2, 0.3, 0.2]
    assert r.trace is r.attempts[1].trace
    assert r.reason == ("no sample reached 0.5 within the budget of 3; returning the best "
                        "(sample 2, score 0.3)")
    # generated tokens: words of BAD (4 + 8 + 4) + the short one (4 + 4) + BAD (16)
    assert r.compute["generated_tokens"] == 40


def test_rerank_samples_n_once_and_picks_by_the_scorer(prompts):
    policy = ScriptedPolicy([BAD, GOOD, BAD], order="served")
    r = rerank(PROBLEM, policy, ScriptedScorer(SCORES), prompts, n=3)
    assert [(q.key, q.prefix) for q in policy.requests] == [("tom", "")]  # prmkit generate's key
    assert r.trace.final_answer == "3" and r.attempts[1].accepted
    assert [a.reason for a in r.rejected] == ["ranked below the choice (score 0.2)"] * 2
    assert r.reason == "trace 1 has the highest score (0.75)"


def test_revise_cuts_at_the_first_low_step_and_regenerates(prompts):
    def write(request, index):
        # from scratch: the faulty solution; from a prefix: the right continuation
        return BAD if not request.prefix else "He buys 1: 2 + 1 = 3.\nThe answer is 3."

    policy = ScriptedPolicy(write)
    r = revise(PROBLEM, policy, ScriptedScorer(SCORES), prompts, threshold=0.5, rounds=2)
    assert r.accepted and r.trace.text == GOOD and r.trace.outcome == "correct"
    first = r.attempts[0]
    assert (first.cut, first.cut_text, first.cut_score) == (1, "He buys 1: 2 + 1 = 4.", 0.2)
    assert first.reason == "step 1 scores 0.2 < 0.5"
    assert [q.prefix for q in policy.requests] == ["", "Tom has 2 apples.\n"]
    assert r.reason == "version 2: no step scores below 0.5"
    assert r.trace.meta["guided"]["attempts"][0]["cut"] == 1


def test_revise_stops_after_the_allowed_rounds(prompts):
    policy = ScriptedPolicy(lambda request, index: BAD if not request.prefix
                            else "He buys 1: 2 + 1 = 4.\nThe answer is 4.")
    r = revise(PROBLEM, policy, ScriptedScorer(SCORES), prompts, threshold=0.5, rounds=2)
    assert not r.accepted and policy.served == 3 and len(r.attempts) == 3
    assert all(a.cut == 1 for a in r.attempts)
    assert r.trace is r.attempts[-1].trace
    assert r.reason == "still step 1 scores 0.2 < 0.5 after 2 revision(s)"


def test_revise_needs_a_prm(prompts):
    with pytest.raises(PrmkitError, match="needs a PRM"):
        revise(PROBLEM, ScriptedPolicy([GOOD]), ScriptedScorer({}, kind="orm"), prompts)
