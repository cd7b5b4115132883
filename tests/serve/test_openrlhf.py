"""``/get_reward`` answers the request OpenRLHF sends, byte for byte.

OpenRLHF's request function cannot be imported here: ``pip install --no-deps openrlhf`` (0.11.2, tried)
installs, but ``from openrlhf.utils.agent import SingleTurnAgentExecutor`` fails, since
``openrlhf/utils/__init__.py`` imports ``math_utils`` (``pylatexenc``, ``sympy``) and ``agent.py`` needs
``aiohttp``, none of them prmkit dependencies. The request is therefore copied from its source,
OpenRLHF/OpenRLHF at commit 3c3be6234e0cb353e76bb8019947db9dfe99fca7, ``openrlhf/utils/agent.py``
(0.11.2's file builds the same payload, at lines 288 and 342-351):

- ``SingleTurnAgentExecutor.execute`` (line 283): ``query = hf_tokenizer.decode(output["observation_tokens"],
  skip_special_tokens=False)`` (prompt + response, special tokens kept), then
  ``self._fetch_rewards_via_http([query], [prompt], [label])``;
- ``_fetch_rewards_via_http`` (lines 322-345): ``payload = {"query": ..., "prompts": ..., "labels": ...}``
  and ``session.post(url, json=data)`` with aiohttp, whose ``json=`` body is ``json.dumps(data)``
  encoded as UTF-8 with ``Content-Type: application/json``;
- the answer is read (lines 290-296) as ``rewards_info.get("scores")`` (falling back to ``"rewards"``),
  ``rewards_info.get("rewards")`` and ``rewards_info.get("extra_logs") or {}``, and then
  (``trainer/ppo_utils/samples_generator.py``, ``_process_response_into_experience``) made into
  ``torch.tensor([reward])``, ``torch.tensor([score])`` and ``torch.tensor([value])`` per extra log.
"""

from __future__ import annotations

import json

import pytest

from prmkit.serve import ServeConfig

# The user turn of PROMPT: the problem /get_reward scores (conftest's PROBLEM).
PROBLEM = "Tom has 3 apples and buys 5 more. How many apples does he have?"

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

# A Qwen-style chat prompt as OpenRLHF's dataset applies it, and a decoded response with its end token.
PROMPT = ("<|im_start|>user\nTom has 3 apples and buys 5 more. How many apples does he have?<|im_end|>\n"
          "<|im_start|>assistant\n")
RESPONSE = "3 + 5 = 8.\nThe answer is 8.<|im_end|>"


def openrlhf_request_bytes(query: str, prompt: str, label) -> bytes:
    """The body ``_fetch_rewards_via_http([query], [prompt], [label])`` posts (one server)."""
    payload = {"query": [query], "prompts": [prompt], "labels": [label]}
    return json.dumps(payload).encode("utf-8")


def test_get_reward_answers_openrlhfs_request(tiny_rm, make_traces, live_server):
    from prmkit.scoring import PrefixCachingScorer

    server = live_server(PrefixCachingScorer(tiny_rm), ServeConfig(aggregate="min"))
    body = openrlhf_request_bytes(PROMPT + RESPONSE, PROMPT, "8")
    assert body.startswith(b'{"query": ["<|im_start|>user\\nTom has 3')  # json.dumps' separators, as aiohttp sends
    r = httpx.post(server.url + "/get_reward", content=body, headers={"Content-Type": "application/json"})
    r.raise_for_status()
    rewards_info = r.json()

    # The reward is the PRM's min over the response's two lines, scored with the prompt's last user turn
    # as the problem (not the chat template around it: issue 48).
    expected = tiny_rm.score(make_traces(PROBLEM, [["3 + 5 = 8.", "The answer is 8."]]))[0]
    assert rewards_info["step_scores"][0] == pytest.approx(expected, abs=1e-5)
    assert rewards_info["rewards"] == [pytest.approx(min(expected), abs=1e-5)]

    # What OpenRLHF does with the answer works: scores first, rewards, extra logs as scalars.
    score = rewards_info.get("scores")
    score = rewards_info.get("rewards") if score is None else score
    reward = rewards_info.get("rewards")
    assert torch.tensor([reward]).shape == (1, 1) and torch.tensor([score]).shape == (1, 1)
    for value in (rewards_info.get("extra_logs") or {}).values():
        torch.tensor([value])


def test_a_query_that_does_not_start_with_its_prompt(tiny_rm, live_server):
    from prmkit.serve import split_query

    # A decode that adds a BOS in front: the prompt is still found, the completion is what follows it.
    assert split_query(PROMPT, "<s>" + PROMPT + RESPONSE) == (PROMPT, "3 + 5 = 8.\nThe answer is 8.", True)
    # No prompt at all in the query: the whole query is the completion, the problem is empty.
    assert split_query("elsewhere", "a\nb</s>") == ("", "a\nb", False)
    assert split_query(None, "a\nb <|eot_id|><|end_of_text|>\n") == ("", "a\nb", False)


def test_problem_from_whole_scores_the_templated_prompt_as_sent(tiny_rm, make_traces):
    from prmkit.scoring import PrefixCachingScorer
    from prmkit.serve import create_app

    testclient = pytest.importorskip("starlette.testclient")
    body = openrlhf_request_bytes(PROMPT + RESPONSE, PROMPT, "8")
    steps = [["3 + 5 = 8.", "The answer is 8."]]
    for rule, problem in (("whole", PROMPT), ("last-user", PROBLEM)):
        app = create_app(PrefixCachingScorer(tiny_rm), ServeConfig(problem_from=rule))
        with testclient.TestClient(app) as c:
            got = c.post("/get_reward", content=body, headers={"Content-Type": "application/json"}).json()
        expected = tiny_rm.score(make_traces(problem, steps))[0]
        assert got["step_scores"][0] == pytest.approx(expected, abs=1e-5), rule
