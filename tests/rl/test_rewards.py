"""The TRL reward contract: one float or None per completion, strings or chat messages, a __name__."""

from __future__ import annotations

from prmkit.errors import PrmkitError
from prmkit.rl import PRMReward
from prmkit.search import ScriptedScorer

SCORES = {"3 + 5 = 8.": 0.75, "The answer is 8.": 0.5, "3 + 5 = 9.": 0.125, "The answer is 9.": 0.25}


def test_one_reward_per_completion_none_when_unscorable():
    reward = PRMReward(ScriptedScorer(SCORES))
    out = reward(prompts=["What is 3 + 5?"] * 4,
                 completions=["3 + 5 = 8.\nThe answer is 8.", "", "3 + 5 = 9.\nThe answer is 9.", "\n \n"],
                 completion_ids=[[1], [], [2], [3]], trainer_state=None, answer=["8"] * 4)
    # min of the step scores; no step -> None
    assert out == [0.5, None, 0.125, None]
    assert reward.__name__ == "prm_min"


def test_chat_messages_and_the_problem_the_scorer_sees():
    seen = []

    def fn(trace):
        seen.append((trace.problem.text, [s.text for s in trace.steps]))
        return [0.5] * len(trace.steps)

    reward = PRMReward(ScriptedScorer(fn), aggregate="last", name="my_prm")
    prompt = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "2 + 2?"},
              {"role": "assistant", "content": "4"}, {"role": "user", "content": "3 + 5?"}]
    completion = [{"role": "assistant", "content": [{"type": "text", "text": "3 + 5 = 8.\nThe answer is 8."}]}]
    assert reward(prompts=[prompt], completions=[completion]) == [0.5]
    assert seen == [("3 + 5?", ["3 + 5 = 8.", "The answer is 8."])]
    assert reward.__name__ == "my_prm"


def test_a_trace_the_scorer_rejects_costs_only_its_own_reward():
    def fn(trace):
        if len(trace.steps) > 2:
            raise PrmkitError("too long")
        return [0.5] * len(trace.steps)

    reward = PRMReward(ScriptedScorer(fn), scale=2.0, shift=-1.0)
    assert reward(["q", "q"], ["a\nb\nc", "a\nb"]) == [None, 0.0]


def test_an_orm_reward_is_its_trace_score():
    reward = PRMReward(ScriptedScorer({"The answer is 8.": 0.875}, kind="orm"))
    assert reward(["q"], ["3 + 5 = 8.\nThe answer is 8."]) == [0.875] and reward.__name__ == "orm"


def test_a_real_prm_scores_completions(tiny_prm):
    # the tiny PRM's head is zeroed: P(correct) = softmax(0, 0)[1] = 0.5 for every step
    reward = PRMReward(tiny_prm)
    assert reward(["What is 3 + 5?"] * 2, ["3 + 5 = 8.\nThe answer is 8.", ""]) == [0.5, None]
