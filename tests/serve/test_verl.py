"""The verl custom reward function scores through a live ``prmkit serve``."""

from __future__ import annotations

import pytest

from prmkit.scoring import ScriptedScorer


def test_compute_score_through_the_server(live_server, monkeypatch):
    import prmkit.rl._verl as verl_reward

    server = live_server(ScriptedScorer({"3 + 5 = 8.": 0.75, "The answer is 8.": 0.5}))
    monkeypatch.setenv("PRMKIT_REWARD_URL", server.url)
    monkeypatch.setattr(verl_reward, "_REWARD", None)
    got = verl_reward.compute_score("arith", "3 + 5 = 8.\nThe answer is 8.", "8",
                                    {"question": "What is 3 + 5?", "index": 0})
    assert got == {"score": 0.5, "prm_unscored": 0.0, "prm_no_problem": 0.0}
    assert verl_reward.compute_score("arith", "   ", "8", None) == {"score": 0.0, "prm_unscored": 1.0,
                                                                  "prm_no_problem": 1.0}
    assert verl_reward.reward_function().stats["no_steps"] == 1


def test_no_url_says_what_to_set(monkeypatch):
    import prmkit.rl._verl as verl_reward
    from prmkit.errors import PrmkitError

    monkeypatch.delenv("PRMKIT_REWARD_URL", raising=False)
    monkeypatch.setattr(verl_reward, "_REWARD", None)
    with pytest.raises(PrmkitError, match="PRMKIT_REWARD_URL"):
        verl_reward.compute_score("x", "a", "b", {})
