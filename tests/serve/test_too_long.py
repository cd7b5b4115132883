"""A problem (an OpenRLHF prompt) longer than the model's ``max_length`` over HTTP: one explicit
answer per endpoint, the same reason everywhere, counted, and never costing the other traces of the
batch their scorer call (issue 16, "Bad input": steps longer than ``max_length``)."""

from __future__ import annotations

import copy
import logging

import pytest

from prmkit.errors import PrmkitError
from prmkit.serve import ServeConfig

httpx = pytest.importorskip("httpx")

MAX_LENGTH = 120
LONG_PROBLEM = "Tom has 3 apples. " * 10 + "How many apples does he have?"  # 209 characters, one token each
SHORT = "What is 2 + 2?"
STEPS = ["2 + 2 = 4.", "The answer is 4."]


@pytest.fixture()
def short_rm(tiny_rm):
    rm = copy.copy(tiny_rm)  # the session's model, reading at most MAX_LENGTH tokens
    rm.max_length = MAX_LENGTH
    return rm


@pytest.fixture()
def served(short_rm, live_server):
    from prmkit.scoring import PrefixCachingScorer

    return live_server(PrefixCachingScorer(short_rm), ServeConfig(unscored_reward=-1.0, max_wait_ms=0))


def metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def local_min(rm, make_traces, problem=SHORT, steps=STEPS) -> float:
    return min(rm.score(make_traces(problem, [steps]))[0])


def test_get_reward_gives_the_unscored_reward_and_says_why(short_rm, make_traces, served):
    with pytest.raises(PrmkitError, match="max_length=120"):  # the model itself cannot score it
        short_rm.score(make_traces(LONG_PROBLEM, [STEPS]))
    r = httpx.post(served.url + "/get_reward", json={
        "query": [LONG_PROBLEM + "\n" + "\n".join(STEPS), SHORT + "\n" + "\n".join(STEPS)],
        "prompts": [LONG_PROBLEM, SHORT]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"][0] == -1.0 and body["scores"][0] == -1.0  # the configured number, never null
    assert body["step_scores"][0] is None
    assert body["unscored"][0].startswith("too long for the model: ") and "max_length=120" in body["unscored"][0]
    assert body["rewards"][1] == pytest.approx(local_min(short_rm, make_traces), abs=1e-5)
    assert body["unscored"][1] is None
    assert body["extra_logs"]["prm_unscored"] == 1.0 and body["extra_logs"]["prm_too_long"] == 1.0
    assert metric(served.url, 'prmkit_unscored_total{reason="too_long"}') == 1


def test_v1_score_reports_null_with_the_reason_and_scores_the_rest(short_rm, make_traces, served):
    traces = [{"id": "long", "problem": LONG_PROBLEM, "steps": STEPS}] + \
             [{"id": f"ok{i}", "problem": SHORT, "steps": STEPS[:i + 1]} for i in range(2)]
    before = metric(served.url, "prmkit_scorer_calls_total")
    res = httpx.post(served.url + "/v1/score", json={"traces": traces}).json()["results"]
    assert res[0]["score"] is None and res[0]["step_scores"] is None
    assert res[0]["unscored"].startswith("too long for the model: ")
    want = short_rm.score(make_traces(SHORT, [STEPS[:1], STEPS]))
    assert [r["step_scores"] for r in res[1:]] == [pytest.approx(w, abs=1e-5) for w in want]
    # One scorer call: the over-long trace costs the others neither their batch nor a retry.
    assert metric(served.url, "prmkit_scorer_calls_total") - before == 1


def test_prmreward_over_http_one_request_and_its_policy(short_rm, make_traces, served, caplog):
    from prmkit.rl import PRMReward

    prompts, completions = [LONG_PROBLEM, SHORT], ["\n".join(STEPS)] * 2
    want = local_min(short_rm, make_traces)
    reward = PRMReward.from_pretrained(served.url)
    requests = metric(served.url, 'prmkit_requests_total{endpoint="/v1/score",status="200"}')
    with caplog.at_level(logging.WARNING, logger="prmkit.rl"):
        got = reward(prompts, completions)
    assert got == [None, pytest.approx(want, abs=1e-5)]  # None: TRL's "no opinion" (advantage 0)
    assert metric(served.url, 'prmkit_requests_total{endpoint="/v1/score",status="200"}') - requests == 1
    assert reward.last_stats["rejected"] == 1 and reward.last_stats["too_long"] == 1
    assert "1 too long for max_length" in caplog.text
    # The same as the local model gives through the same reward function.
    assert PRMReward(short_rm)(prompts, completions) == [None, pytest.approx(want, abs=1e-5)]
    assert PRMReward.from_pretrained(served.url, unscored_reward=0.0)(prompts, completions) == \
        [0.0, pytest.approx(want, abs=1e-5)]
    with pytest.raises(PrmkitError, match="completion 0: not scored: too long for the model: .*max_length=120"):
        PRMReward.from_pretrained(served.url, truncation="error")(prompts, completions)
