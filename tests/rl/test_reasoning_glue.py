"""One problem and one set of steps for a reasoning model's sample, whichever way it arrives: through
``prmkit serve``'s ``/get_reward`` (OpenRLHF: the templated prompt and the decoded query) or through
:class:`~prmkit.rl.PRMReward` (TRL: the prompt and the completion). Issue 48: the server took the whole
templated prompt as the problem, ``</think>`` became a step, DeepSeek-R1's end token stayed in the last
step, and the two paths disagreed.

The templated prompts below are written out as each model's chat template renders a system prompt
(where it has one) and a user turn with ``add_generation_prompt=True``.
"""

from __future__ import annotations

import types

import pytest

from prmkit.rl import DenseStepReward, PRMReward, prompt_text
from prmkit.search import ScriptedScorer
from prmkit.serve import ReasoningSplitter, end_markers_of, problem_from, query_trace

Q = "What is 2 + 2?"
R1_END = "<\uff5cend\u2581of\u2581sentence\uff5c>"
TEMPLATED = {
    "qwen": (f"<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nWhat is 1 + 1?<|im_end|>\n"
             f"<|im_start|>assistant\n1 + 1 = 2<|im_end|>\n<|im_start|>user\n{Q}<|im_end|>\n<|im_start|>assistant\n"),
    "smollm2": ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                f"<|im_start|>user\n{Q}<|im_end|>\n<|im_start|>assistant\n"),
    "llama3": ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
               "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
               f"{Q}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
    "deepseek_r1": f"<\uff5cbegin\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>{Q}<\uff5cAssistant\uff5c><think>\n",
    "gemma": f"<bos><start_of_turn>user\n{Q}<end_of_turn>\n<start_of_turn>model\n",
}
# A reasoning model's completion: the think block's close, a blank line, the answer, the end token.
COMPLETION = f"2 and 2 make 4.\n</think>\n\nThe answer is 4.{R1_END}"
SCORES = {"2 and 2 make 4.": 0.9, "The answer is 4.": 0.6}


@pytest.mark.parametrize("template", sorted(TEMPLATED))
def test_the_problem_is_the_last_user_turn(template):
    assert problem_from(TEMPLATED[template]) == Q
    assert problem_from(TEMPLATED[template], "whole") == TEMPLATED[template]
    assert prompt_text(TEMPLATED[template]) == Q  # PRMReward's rule is the server's


def test_a_plain_prompt_is_the_problem_as_it_is():
    assert problem_from("Q: 2+2?\nA:") == "Q: 2+2?\nA:"
    with pytest.raises(Exception, match="problem_from must be one of last-user, whole"):
        problem_from("x", "first-user")


@pytest.mark.parametrize("template", sorted(TEMPLATED))
def test_server_and_reward_function_make_the_same_trace(template):
    prompt = TEMPLATED[template]
    served, found = query_trace(prompt, prompt + COMPLETION, "q0")
    reward = PRMReward(ScriptedScorer(SCORES))
    trl = reward.traces([prompt], [COMPLETION])[0]
    assert found
    assert served.problem.text == trl.problem.text == Q
    assert [s.text for s in served.steps] == [s.text for s in trl.steps] == ["2 and 2 make 4.", "The answer is 4."]
    assert reward([prompt], [COMPLETION]) == [0.6]  # min over the two steps, by hand


def test_think_tags_and_end_markers_are_never_steps_and_spans_stay_in_place():
    text = "<think>\nLet me add.\n2 + 2 = 4</think>\nThe answer is 4.<|im_end|>\n<|endoftext|>"
    split = ReasoningSplitter("newline")
    steps = split.split(text)
    assert [s.text for s in steps] == ["Let me add.", "2 + 2 = 4", "The answer is 4."]
    assert [text[a:b] for a, b in (s.span for s in steps)] == [s.text for s in steps]  # spans into the original
    assert [s.text for s in ReasoningSplitter("newline", think="answer").split(text)] == ["The answer is 4."]
    # DeepSeek-R1's end token (full-width bars) is cut as <|im_end|> is.
    assert [s.text for s in ReasoningSplitter().split(COMPLETION)] == ["2 and 2 make 4.", "The answer is 4."]


def test_end_markers_come_from_the_policy_tokenizer():
    tok = types.SimpleNamespace(all_special_tokens=["<answer_done>", "|", "A"], eos_token="<answer_done>")
    assert end_markers_of(tok) == ("<answer_done>",)  # one character is never blanked
    text = "2 + 2 = 4\nThe answer is 4.<answer_done>"
    assert [s.text for s in ReasoningSplitter().split(text)][-1] == "The answer is 4.<answer_done>"
    reward = PRMReward(ScriptedScorer(SCORES, default=0.0), tokenizer=tok)
    assert [s.text for s in reward.traces(["q"], [text])[0].steps] == ["2 + 2 = 4", "The answer is 4."]


def test_dense_rewards_skip_the_think_tags_on_the_policy_tokens(char_tokenizer):
    # The character tokenizer: one token per character, so token k is character k of the completion.
    text = "<think>\nab\n</think>\ncd"
    dense = DenseStepReward(ScriptedScorer({"ab": 0.25, "cd": 0.5}), char_tokenizer)
    (rewards,) = dense(["q"], [text])
    assert [(k, r) for k, r in enumerate(rewards) if r] == [(9, 0.25), (21, 0.5)]
    assert (text[9], text[21]) == ("b", "d")
