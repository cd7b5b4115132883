"""The server's endpoints and what it does with bad input, through Starlette's test client (the app
in this process, lifespan run) over a scripted scorer whose scores are known by hand."""

from __future__ import annotations

import json

import pytest

from prmkit.scoring import ScriptedScorer
from prmkit.serve import ServeConfig, create_app

starlette_testclient = pytest.importorskip("starlette.testclient")

SCORES = {"2 + 2 = 4": 0.9, "The answer is 4.": 0.8, "2 + 2 = 5": 0.2, "The answer is 5.": 0.3}


def client(scorer=None, **cfg):
    app = create_app(scorer or ScriptedScorer(SCORES, default=0.5), ServeConfig(**cfg))
    return starlette_testclient.TestClient(app, raise_server_exceptions=False)


def test_get_reward_openrlhf_shape_and_values():
    with client() as c:
        r = c.post("/get_reward", json={
            "query": ["Q: 2+2?\nA: 2 + 2 = 4\nThe answer is 4.<|im_end|>", "Q: 2+2?\nA: 2 + 2 = 5\nThe answer is 5."],
            "prompts": ["Q: 2+2?\nA:", "Q: 2+2?\nA:"], "labels": ["4", "4"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == [0.8, 0.2]  # min of the steps, worked by hand from SCORES
    assert body["scores"] == body["rewards"]
    assert body["step_scores"] == [[0.9, 0.8], [0.2, 0.3]]
    assert body["unscored"] == [None, None]
    assert body["extra_logs"] == {"prm_unscored": 0.0, "prm_too_long": 0.0, "prm_prompt_not_found": 0.0,
                                  "prm_steps": 4.0}


def test_get_reward_aggregate_and_no_prompts():
    with client(aggregate="last") as c:
        r = c.post("/get_reward", json={"query": ["2 + 2 = 5\nThe answer is 5."]})
    assert r.json()["rewards"] == [0.3]


def test_get_reward_unscorable_query_gets_a_number_and_a_reason():
    scorer = ScriptedScorer(SCORES, default=0.5)
    with client(scorer, unscored_reward=-1.0) as c:
        r = c.post("/get_reward", json={"query": ["P:   \n<|im_end|>", "P: 2 + 2 = 4"], "prompts": ["P:", "P:"]})
    body = r.json()
    assert body["rewards"] == [-1.0, 0.9]  # OpenRLHF makes a tensor of rewards: never null
    assert body["unscored"] == ["no steps", None]
    assert body["extra_logs"]["prm_unscored"] == 1.0
    assert scorer.calls == [[["2 + 2 = 4"]]]  # the empty completion never reached the scorer


def test_v1_score_prm_and_trace_records():
    with client() as c:
        r = c.post("/v1/score", json={"traces": [
            {"id": "a", "problem": "2+2?", "steps": ["2 + 2 = 4", "The answer is 4."]},
            {"problem": {"text": "2+2?"}, "steps": [{"text": "2 + 2 = 5"}, {"text": "The answer is 5.", "labels": []}]},
        ], "aggregate": "mean"})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["id"] for x in res] == ["a", "t1"]
    assert res[0]["step_scores"] == [0.9, 0.8] and res[0]["score"] == pytest.approx(0.85)
    assert res[1]["score"] == pytest.approx(0.25)


def test_v1_score_orm():
    with client(ScriptedScorer({"The answer is 4.": 0.7}, kind="orm")) as c:
        r = c.post("/v1/score", json={"traces": [{"problem": "q", "steps": ["x", "The answer is 4."]}]})
    assert r.json()["results"][0] == {"id": "t0", "step_scores": None, "score": 0.7, "unscored": None}


def test_health_and_metrics():
    with client() as c:
        c.post("/v1/score", json={"traces": [{"problem": "q", "steps": ["2 + 2 = 4", "zzz"]}]})
        h = c.get("/health").json()
        m = c.get("/metrics")
    assert h["status"] == "ok" and h["kind"] == "prm" and h["model"] == "scripted"
    assert m.headers["content-type"].startswith("text/plain")
    text = m.text
    assert 'prmkit_requests_total{endpoint="/v1/score",status="200"} 1' in text
    assert "prmkit_traces_total 1" in text and "prmkit_steps_total 2" in text
    assert 'prmkit_batch_traces_bucket{le="1"} 1' in text
    assert 'prmkit_request_seconds_count{endpoint="/v1/score"} 1' in text


# -- bad input: a clear 4xx each, and the server keeps serving --------------------------------------------
@pytest.mark.parametrize("body, status, words", [
    (b"{not json", 422, "body: not valid JSON"),
    (json.dumps({"query": "one string"}).encode(), 422, "query"),
    (json.dumps({"query": ["a", 3]}).encode(), 422, "query.1"),
    (json.dumps({"query": ["a"], "prompts": ["a", "b"]}).encode(), 422, "prompts: 2 items for 1 queries"),
])
def test_get_reward_bad_input(body, status, words):
    with client() as c:
        r = c.post("/get_reward", content=body, headers={"content-type": "application/json"})
        assert r.status_code == status and words in r.json()["error"], r.text
        assert "Traceback" not in r.text
        assert c.post("/get_reward", json={"query": ["2 + 2 = 4"]}).status_code == 200


def test_get_reward_empty_query_list_answers_no_rewards():
    # OpenRLHF with two reward URLs splits its batch between them and may send one ``{"query": []}``;
    # a 422 there loses every reward of the batch.
    scorer = ScriptedScorer(SCORES, default=0.5)
    with client(scorer) as c:
        r = c.post("/get_reward", json={"query": [], "prompts": [], "labels": []})
        assert r.status_code == 200, r.text
        assert r.json()["rewards"] == [] and r.json()["scores"] == []
        assert c.post("/get_reward", json={"query": []}).json()["rewards"] == []
    assert scorer.calls == []  # nothing reached the scorer


@pytest.mark.parametrize("payload, words", [
    ({"traces": [{"problem": "q", "steps": ["a", 7]}]}, "traces.0.steps.1"),
    ({"traces": [{"steps": ["a"]}]}, "traces.0.problem"),
    ({"traces": [{"problem": "q", "steps": ["a"]}], "aggregate": "median"}, "aggregate: unknown aggregator"),
    ({"traces": [], "extra": 1}, "traces"),
])
def test_v1_score_422_names_the_field(payload, words):
    with client() as c:
        r = c.post("/v1/score", json=payload)
    assert r.status_code == 422 and words in r.json()["error"], r.text


def test_limits_413_say_the_limit():
    with client(max_body_bytes=10_000, max_traces=100) as c:
        big = c.post("/get_reward", json={"query": ["x" * 20_000]})
        many = c.post("/get_reward", json={"query": ["a"] * 101})
        ok = c.post("/get_reward", json={"query": ["2 + 2 = 4"]})
    assert big.status_code == 413 and "the limit is 10000 bytes" in big.json()["error"]
    assert many.status_code == 413 and "the limit is 100" in many.json()["error"]
    assert ok.status_code == 200


def test_ten_megabyte_body_and_ten_thousand_traces_default_limits():
    with client() as c:
        big = c.post("/get_reward", content=b"{" + b" " * (10 * 1024 * 1024) + b"}",
                     headers={"content-type": "application/json"})
        many = c.post("/v1/score", json={"traces": [{"problem": "q", "steps": ["a"]}] * 10_000})
    assert big.status_code == 413 and many.status_code == 413
    assert "limit is 1024" in many.json()["error"]


def test_bearer_token():
    with client(token="s3cret") as c:
        none = c.post("/get_reward", json={"query": ["a"]})
        wrong = c.post("/get_reward", json={"query": ["a"]}, headers={"Authorization": "Bearer nope"})
        right = c.post("/get_reward", json={"query": ["a"]}, headers={"Authorization": "Bearer s3cret"})
        metrics = c.get("/metrics")
        health = c.get("/health")
    assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401 and "wrong" in wrong.json()["error"]
    assert right.status_code == 200
    assert metrics.status_code == 401 and health.status_code == 200
    assert "s3cret" not in none.text + wrong.text


def test_a_scorer_bug_is_a_500_without_traceback_and_the_server_goes_on():
    calls = []

    def flaky(trace):
        calls.append(trace.id)
        if len(calls) == 1:
            raise RuntimeError("boom at /secret/path.py line 3")
        return [0.5] * len(trace.steps)

    with client(ScriptedScorer(flaky)) as c:
        bad = c.post("/v1/score", json={"traces": [{"problem": "q", "steps": ["a"]}]})
        good = c.post("/v1/score", json={"traces": [{"problem": "q", "steps": ["a"]}]})
    assert bad.status_code == 500 and bad.json() == {"error": "internal error (see the server log)"}
    assert good.status_code == 200 and good.json()["results"][0]["score"] == 0.5


def test_draining_answers_503():
    with client() as c:
        c.app.state.draining = True
        r = c.post("/get_reward", json={"query": ["a"]})
        h = c.get("/health")
    assert r.status_code == 503 and r.headers["retry-after"] == "5"
    assert h.json()["status"] == "draining"


def test_non_loopback_bind_needs_a_token():
    from prmkit.errors import PrmkitError
    from prmkit.serve import check_bind

    with pytest.raises(PrmkitError, match="without a token"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", "t")
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
