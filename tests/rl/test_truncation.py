"""What PRMReward / DenseStepReward could not score is counted, logged and handled as
``truncation=`` says, never silent (issue 16)."""

from __future__ import annotations

import copy
import logging

import pytest

from prmkit.errors import PrmkitError
from prmkit.rl import DenseStepReward, PRMReward
from prmkit.search import ScriptedScorer


def partial_scorer():
    """Step 'far' is past max_length (None); a completion with 'huge' is rejected outright."""
    def fn(trace):
        texts = [s.text for s in trace.steps]
        if "huge" in texts:
            raise PrmkitError("the problem alone is longer than max_length")
        return [None if t == "far" else 0.5 if t == "a" else 0.25 for t in texts]
    return ScriptedScorer(fn)


COMPLETIONS = ["a\nb", "a\nfar", "", "huge\na", "far"]


@pytest.mark.parametrize("policy, want", [
    ("score_prefix", [0.25, 0.5, None, None, None]),  # min over the scored steps; all-unscored -> None
    ("none", [0.25, None, None, None, None]),
])
def test_policies_and_counts(policy, want, caplog):
    reward = PRMReward(partial_scorer(), truncation=policy)
    metrics = {}
    with caplog.at_level(logging.WARNING, logger="prmkit.rl"):
        got = reward(["q"] * 5, COMPLETIONS, log_metric=lambda k, v: metrics.__setitem__(k, v))
    assert got == want
    assert dict(reward.last_stats) == {"completions": 5, "scored": 2 if policy == "score_prefix" else 1,
                                       "no_steps": 1, "rejected": 1, "too_long": 1, "partial": 2,
                                       "unscored_steps": 2}
    assert metrics == {"prm_min/unscored_frac": 2 / 5, "prm_min/partial_frac": 2 / 5}
    assert "1 without steps, 1 rejected by the scorer, 2 scored on only some steps" in caplog.text
    reward(["q"], ["a"])
    assert reward.stats["completions"] == 6 and reward.last_stats["completions"] == 1


def test_error_policy_raises_naming_the_completion():
    with pytest.raises(PrmkitError, match="completion 1: 1 of 2 steps not scored"):
        PRMReward(partial_scorer(), truncation="error")(["q"] * 2, ["a\nb", "a\nfar"])
    with pytest.raises(PrmkitError, match="completion 0: not scored: the problem alone"):
        PRMReward(partial_scorer(), truncation="error")(["q"], ["huge\na"])
    with pytest.raises(PrmkitError, match="truncation must be one of"):
        PRMReward(partial_scorer(), truncation="drop")


def test_nothing_logged_when_everything_is_scored(caplog):
    with caplog.at_level(logging.WARNING, logger="prmkit.rl"):
        assert PRMReward(partial_scorer())(["q"], ["a\nb"]) == [0.25]
    assert caplog.text == ""


def test_a_real_prm_past_max_length(tiny_prm):
    rm = copy.copy(tiny_prm)  # the session's model, with a short max_length that cuts steps
    rm.max_length, rm.long = 40, "truncate"
    long_completion = "3 + 5 = 8.\n" + "\n".join(f"then {i} more" for i in range(6)) + "\nThe answer is 8."
    reward = PRMReward(rm)
    assert reward(["What is 3 + 5?"], [long_completion]) == [0.5]  # zeroed head: each step 0.5
    assert reward.last_stats["partial"] == 1 and reward.last_stats["unscored_steps"] > 0
    assert PRMReward(rm, truncation="none")(["What is 3 + 5?"], [long_completion]) == [None]


def test_dense_reward_counts_too(char_tokenizer):
    dense = DenseStepReward(partial_scorer(), char_tokenizer, truncation="none")
    out = dense(["q"] * 2, ["a\nb", "a\nfar"])
    assert out[0] is not None and out[1] is None
    assert dense.last_stats["partial"] == 1 and dense.stats["completions"] == 2
