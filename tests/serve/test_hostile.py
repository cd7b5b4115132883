"""Requests that must not freeze, crash or mislead the server (issue 45, item 2): linear-time
parsing and end-marker stripping, the per-trace caps, dropped work, bounded shutdown, and every
error as JSON. Scripted scorers throughout: what is tested is the server, not a model."""

from __future__ import annotations

import asyncio
import math
import random
import signal
import threading
import time

import pytest

from prmkit.errors import PrmkitError
from prmkit.scoring import ScriptedScorer
from prmkit.serve import END_MARKERS, ServeConfig, create_app, split_query, strip_end_markers

starlette_testclient = pytest.importorskip("starlette.testclient")
httpx = pytest.importorskip("httpx")


def client(scorer=None, **cfg):
    app = create_app(scorer or ScriptedScorer(lambda t: [0.5] * len(t.steps)), ServeConfig(**cfg))
    return starlette_testclient.TestClient(app, raise_server_exceptions=False)


def one(problem: str, steps: list[str]) -> dict:
    return {"traces": [{"problem": problem, "steps": steps}]}


# -- end markers: linear, and the same cut as the pattern ----------------------------------------------
def test_stripping_end_markers_is_linear_in_the_query():
    # The pattern searched from every position took 56 s on 100 KB of spaces (quadratic); 40 KB took
    # about 9 s. Linear, it is a few milliseconds; 0.5 s leaves room for a loaded machine.
    for text in (" " * 40_000, "a" + " \n" * 20_000 + "<|im_end|>", "<|" * 20_000, "</s> " * 10_000):
        start = time.perf_counter()
        split_query("P:", "P:" + text)
        assert time.perf_counter() - start < 0.5, text[:20]


def test_strip_end_markers_cuts_what_the_pattern_matches():
    pieces = ["a", "b.", " ", "\n", "\t", "<|im_end|>", "<|eot_id|>", "</s>", "<eos>", "<end_of_turn>",
              "<|", "|>", "<", ">", "|", "s>", "<|a b|>", "\u00a0"]
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert strip_end_markers(text) == END_MARKERS.sub("", text), repr(text)


# -- per-trace caps ------------------------------------------------------------------------------------
def test_a_trace_with_too_many_steps_is_413_naming_the_cap_and_never_reaches_the_scorer():
    # 20,000 short steps (~190 KB) held the scorer ~15 minutes (issue 45).
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps))
    with client(scorer) as c:
        r = c.post("/v1/score", json={"traces": [{"problem": "q", "steps": ["1 + 1 = 2."]},
                                                 {"problem": "q", "steps": [f"step {i}" for i in range(20_000)]}]})
        ok = c.post("/v1/score", json=one("q", [f"step {i}" for i in range(1024)]))
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "traces.1: 20000 steps; the limit is 1024 steps per trace (--max-steps)"
    assert ok.status_code == 200 and len(ok.json()["results"][0]["step_scores"]) == 1024
    assert [len(call) for call in scorer.calls] == [1]  # only the request within the cap was scored


def test_a_trace_with_too_many_characters_is_413_naming_the_cap():
    with client(max_trace_chars=100) as c:
        r = c.post("/v1/score", json=one("q" * 60, ["s" * 41]))
        ok = c.post("/v1/score", json=one("q" * 60, ["s" * 40]))
    assert r.status_code == 413
    assert "traces.0: 101 characters of problem and steps; the limit is 100 per trace (--max-trace-chars)" \
        == r.json()["error"]
    assert ok.status_code == 200


def test_get_reward_gives_a_query_over_the_caps_the_unscored_reward_and_the_cap():
    """OpenRLHF retries a failed reward request five times and then raises, so a 413 would end a
    training run over one degenerate completion: that query gets the unscored reward and the reason."""
    scorer = ScriptedScorer(lambda t: [0.25] * len(t.steps))
    with client(scorer, unscored_reward=-1.0, max_steps=3) as c:
        r = c.post("/get_reward", json={"query": ["P: a\nb\nc\nd", "P: a\nb"], "prompts": ["P:", "P:"]})
        metrics = c.get("/metrics").text
    body = r.json()
    assert r.status_code == 200 and body["rewards"] == [-1.0, 0.25]
    assert body["unscored"][0] == "over the server's limit: 4 steps; the limit is 3 steps per trace (--max-steps)"
    assert body["step_scores"] == [None, [0.25, 0.25]] and body["extra_logs"]["prm_unscored"] == 1.0
    assert scorer.calls == [[["a", "b"]]]
    assert 'prmkit_unscored_total{reason="over_limit"} 1' in metrics


# -- 422, not 500 --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, body, words", [
    ("/get_reward", b'{"query": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body: JSON nested too deeply"),
    ("/v1/score", b'{"traces": [{"id": "\\ud800", "problem": "q", "steps": ["a"]}]}', "traces.0.id: not valid Unicode"),
    ("/get_reward", b'{"query": ["ok", "a\\udfff"]}', "query.1: not valid Unicode"),
    ("/get_reward", b'{"query": ["a"], "labels": [{"\\ud83d": 1}]}', "labels.0.\\ud83d: not valid Unicode"),
    ("/get_reward", b'{"query": ["a\xed\xa0\x80"]}', "body: not valid UTF-8"),
])
def test_malformed_text_and_deep_nesting_are_422(path, body, words):
    with client() as c:
        r = c.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422 and words in r.json()["error"], r.text
        assert c.post("/get_reward", json={"query": ["a"]}).status_code == 200


def test_a_paired_surrogate_escape_is_text_not_an_error():
    with client() as c:
        r = c.post("/v1/score", content=b'{"traces": [{"id": "\\ud83d\\ude00", "problem": "q", "steps": ["a"]}]}',
                   headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["results"][0]["id"] == "\U0001f600"


def test_nesting_within_the_parsers_depth_is_accepted_where_any_value_is():
    with client() as c:
        r = c.post("/get_reward", content=b'{"query": ["a"], "labels": [' + b"[" * 500 + b"]" * 500 + b"]}",
                   headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text


# -- every error is JSON -------------------------------------------------------------------------------
def test_404_and_405_are_json_like_every_other_error():
    with client() as c:
        missing = c.get("/nope")
        wrong_method = c.get("/get_reward")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
    assert missing.json()["error"].startswith("no endpoint /nope (endpoints: POST /get_reward")
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    assert wrong_method.json()["error"].startswith("GET not allowed on /get_reward")


# -- options that would refuse every request are refused at startup ------------------------------------
@pytest.mark.parametrize("kw, words", [
    ({"max_traces": 0}, "--max-traces must be >= 1, got 0"),
    ({"max_body_bytes": -2**20}, "--max-body-mb must be > 0, got -1"),
    ({"request_timeout": 0}, "--request-timeout must be > 0 seconds, got 0"),
    ({"max_steps": 0}, "--max-steps must be >= 1, got 0"),
    ({"max_trace_chars": -5}, "--max-trace-chars must be >= 1, got -5"),
    ({"shutdown_timeout": -1.0}, "--shutdown-timeout must be >= 0, got -1"),
    ({"unscored_reward": math.nan}, "--unscored-reward must be a finite number, got nan"),
])
def test_serve_config_refuses_values_that_refuse_every_request(kw, words):
    with pytest.raises(PrmkitError) as e:
        ServeConfig(**kw)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("args, words", [
    (["--max-traces", "0"], "error: --max-traces must be >= 1, got 0"),
    (["--max-body-mb", "-1"], "error: --max-body-mb must be > 0, got -1"),
    (["--request-timeout", "0"], "error: --request-timeout must be > 0 seconds, got 0"),
    (["--unscored-reward", "nan"], "error: --unscored-reward must be a finite number, got nan"),
    (["--port", "70000"], "error: --port must be between 0 and 65535 (0: any free port), got 70000"),
    (["--max-steps", "0", "--shutdown-timeout", "-1"],
     "error: --max-steps must be >= 1, got 0; --shutdown-timeout must be >= 0, got -1"),
])
def test_prmkit_serve_refuses_them_in_one_line_before_loading_the_model(args, words, capsys, monkeypatch):
    import prmkit.scoring
    from prmkit.cli import main

    loaded = []
    monkeypatch.setattr(prmkit.scoring, "load_scorer", lambda *a, **k: loaded.append(a))
    with pytest.raises(SystemExit) as e:
        main(["serve", "--scorer", "scripted", "-s", "scores=[[0.5]]", *args])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.startswith(words) and err.count("\n") == 1, err
    assert loaded == []


def test_the_new_options_reach_the_server(monkeypatch):
    import prmkit.serve._server as server_mod
    from prmkit.cli import main

    made = {}

    class Fake:
        def run(self):
            pass

    monkeypatch.setattr(server_mod, "make_server", lambda scorer, config, **kw: made.update(config=config) or Fake())
    main(["serve", "--scorer", "scripted", "-s", "scores=[[0.5]]", "--max-steps", "7", "--max-trace-chars", "99",
          "--max-batch-steps", "5", "--shutdown-timeout", "2.5", "--max-body-mb", "1"])
    cfg = made["config"]
    assert (cfg.max_steps, cfg.max_trace_chars, cfg.max_batch_steps, cfg.shutdown_timeout, cfg.max_body_bytes) == (
        7, 99, 5, 2.5, 2**20)
    assert type(cfg.max_body_bytes) is int


# -- dropped work ----------------------------------------------------------------------------------------
def test_a_request_that_timed_out_frees_its_queue_slots(live_server):
    gate = threading.Event()

    def score(t):
        if t.steps[0].text == "hold":
            gate.wait(10)
        return [0.5] * len(t.steps)

    server = live_server(ScriptedScorer(score), ServeConfig(max_wait_ms=0, max_batch_traces=1, max_queued_traces=2,
                                                            request_timeout=1.0))

    async def run():
        async with httpx.AsyncClient(timeout=30) as c:
            first = asyncio.create_task(c.post(server.url + "/v1/score", json=one("q", ["hold"])))
            await asyncio.sleep(0.1)  # "hold" is in the scorer
            second = await c.post(server.url + "/v1/score", json={
                "traces": [{"problem": "q", "steps": ["b"]}, {"problem": "q", "steps": ["c"]}]})
            third = asyncio.create_task(c.post(server.url + "/v1/score", json=one("q", ["d"])))
            await asyncio.sleep(0.05)
            gate.set()
            return await first, second, await third

    first, second, third = asyncio.run(run())
    assert (first.status_code, second.status_code) == (504, 504)
    # The timed-out request's two traces left the queue with it: there is room for this one.
    assert third.status_code == 200, third.text
    assert ["b"] not in [steps for call in server.app.state.batcher.scorer.calls for steps in call]


def test_the_rest_of_a_timed_out_request_is_not_scored(live_server):
    starts: list[float] = []

    class Recording(ScriptedScorer):
        def score(self, traces):
            starts.append(time.monotonic())
            return super().score(traces)

    scorer = Recording(lambda t: [0.5] * len(t.steps), delay=0.2)
    server = live_server(scorer, ServeConfig(max_wait_ms=0, max_batch_steps=2, request_timeout=0.5))
    r = httpx.post(server.url + "/v1/score", json={"traces": [{"problem": "q", "steps": [f"s{i}"]}
                                                              for i in range(8)]})
    answered = time.monotonic()
    assert r.status_code == 504
    time.sleep(1.2)  # long enough for all 8 traces (1.6 s from the start) had they been scored
    # Calls of 2 traces (--max-batch-steps 2), 0.4 s each: the one running at the 504 ends, no call
    # starts after it, and the traces left are never scored (before: one call of all 8).
    assert starts and all(s < answered for s in starts), (starts, answered)
    assert sum(len(c) for c in scorer.calls) < 8, scorer.calls


# -- bounded shutdown ------------------------------------------------------------------------------------
def test_shutdown_waits_shutdown_timeout_then_answers_503(live_server):
    gate = threading.Event()
    scorer = ScriptedScorer(lambda t: gate.wait(30) and [0.5] * len(t.steps))
    server = live_server(scorer, ServeConfig(max_wait_ms=0, max_batch_traces=1, shutdown_timeout=0.5))
    got = {}

    def call(key, steps):
        got[key] = httpx.post(server.url + "/v1/score", json=one("q", steps), timeout=30)

    def wait_until(ready, what):  # the server's own state, not a sleep: on 2 busy cores 0.2 s was not enough
        deadline = time.monotonic() + 10
        while not ready():
            assert time.monotonic() < deadline, f"the server never had {what}"
            time.sleep(0.02)

    threads = [threading.Thread(target=call, args=(k, [k])) for k in ("scoring", "queued")]
    threads[0].start()
    wait_until(lambda: scorer.calls, "the first request in its scorer")
    threads[1].start()
    wait_until(lambda: httpx.get(server.url + "/health").json()["queued_traces"] >= 1, "the second one queued")
    start = time.monotonic()
    server.server.handle_exit(signal.SIGTERM, None)
    try:
        for t in threads:
            t.join(timeout=10)
        answered = time.monotonic() - start
        server.thread.join(timeout=10)
        exited = time.monotonic() - start
    finally:
        gate.set()  # the scorer call the server did not wait for
    for key in ("scoring", "queued"):
        assert got[key].status_code == 503 and got[key].headers["retry-after"] == "5", got[key].text
        assert "shutting down" in got[key].json()["error"]
    assert 0.4 < answered < 3.0 and not server.thread.is_alive() and exited < 6.0, (answered, exited)


def test_remote_scorer_reports_a_trace_over_the_servers_caps_and_sends_the_rest(live_server):
    from prmkit.serve import RemoteScorer
    from prmkit.trace import Problem, Step, Trace

    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps))
    server = live_server(scorer, ServeConfig(max_steps=2))
    traces = [Trace(id=f"t{n}", problem=Problem("q"), steps=[Step(f"s{i}") for i in range(n)]) for n in (3, 1)]
    got = RemoteScorer(server.url).score_each(traces)
    assert got == [(None, "over the server's limit: 3 steps; the limit is 2 steps per trace (--max-steps)"),
                   ([0.5], None)]
    assert scorer.calls == [[["s0"]]]  # one request, the trace within the caps
