"""Dynamic batching across concurrent requests, back-pressure, timeouts, disconnects and graceful
shutdown, on a live server in this process (uvicorn on a free loopback port)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from prmkit.scoring import ScriptedScorer
from prmkit.serve import ServeConfig

httpx = pytest.importorskip("httpx")


def one(problem: str, steps: list[str]) -> dict:
    return {"traces": [{"problem": problem, "steps": steps}]}


async def _concurrently(url: str, bodies: list[dict], path: str = "/v1/score") -> list:
    async with httpx.AsyncClient(timeout=30) as c:
        return await asyncio.gather(*(c.post(url + path, json=b) for b in bodies))


def test_concurrent_requests_share_one_scorer_call(live_server):
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps))
    server = live_server(scorer, ServeConfig(max_wait_ms=300))
    replies = asyncio.run(_concurrently(server.url, [one("q", [f"step {i}"]) for i in range(8)]))
    assert [r.status_code for r in replies] == [200] * 8
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 8  # eight requests, one call
    assert 'prmkit_batch_traces_bucket{le="8"} 1' in httpx.get(server.url + "/metrics").text


def test_max_batch_traces_bounds_a_call(live_server):
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps))
    server = live_server(scorer, ServeConfig(max_wait_ms=300, max_batch_traces=3))
    asyncio.run(_concurrently(server.url, [one("q", [f"step {i}"]) for i in range(8)]))
    assert sorted(len(c) for c in scorer.calls) == [2, 3, 3]


def test_every_scorer_call_runs_on_one_thread_of_its_own(live_server):
    """Back-to-back calls (one trace each, eight queued at once) all run on the batcher's own thread,
    not the event loop's, nor on whichever worker of asyncio's shared pool is free (each new thread
    driving torch brings its own OpenMP team)."""
    seen: list[tuple[int, str]] = []

    def score(t):
        seen.append((threading.get_ident(), threading.current_thread().name))
        return [0.5] * len(t.steps)

    server = live_server(ScriptedScorer(score), ServeConfig(max_wait_ms=0, max_batch_traces=1))
    replies = asyncio.run(_concurrently(server.url, [one("q", [f"step {i}"]) for i in range(8)]))
    assert [r.status_code for r in replies] == [200] * 8
    assert len(seen) == 8 and len({ident for ident, _ in seen}) == 1
    assert seen[0][1].startswith("prmkit-scorer") and seen[0][0] != server.thread.ident


def test_n_candidates_as_n_requests_share_the_problem_prefix(tiny_rm, make_traces, live_server):
    from prmkit.scoring import PrefixCachingScorer

    scorer = PrefixCachingScorer(tiny_rm, max_cached_tokens=0)  # no cross-call store: sharing within a call
    server = live_server(scorer, ServeConfig(max_wait_ms=300))
    traces = make_traces()
    bodies = [one(t.problem.text, [s.text for s in t.steps]) for t in traces]
    replies = asyncio.run(_concurrently(server.url, bodies))
    assert scorer.stats.calls == 1
    # The problem (64 characters, one token each) runs once, not four times.
    assert scorer.stats.tokens_reused >= 3 * len(traces[0].problem.text)
    for r, want in zip(replies, tiny_rm.score(traces), strict=True):
        assert r.json()["results"][0]["step_scores"] == pytest.approx(want, abs=1e-5)


def test_a_full_queue_answers_503_with_retry_after(live_server):
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps), delay=0.4)
    server = live_server(scorer, ServeConfig(max_wait_ms=0, max_batch_traces=1, max_queued_traces=2))

    async def run():
        async with httpx.AsyncClient(timeout=30) as c:
            first = asyncio.create_task(c.post(server.url + "/v1/score", json=one("q", ["a"])))
            await asyncio.sleep(0.2)  # the first is being scored: the queue is empty again
            second = asyncio.create_task(c.post(server.url + "/v1/score", json={
                "traces": [{"problem": "q", "steps": ["b"]}, {"problem": "q", "steps": ["c"]}]}))
            await asyncio.sleep(0.1)  # two traces queued: the limit
            third = await c.post(server.url + "/v1/score", json=one("q", ["d"]))
            return await first, await second, third

    first, second, third = asyncio.run(run())
    assert (first.status_code, second.status_code) == (200, 200)
    assert third.status_code == 503 and third.headers["retry-after"] == "1"
    assert "2 traces queued (limit 2)" in third.json()["error"]
    assert "prmkit_queue_full_total 1" in httpx.get(server.url + "/metrics").text


def test_request_timeout_is_504_and_a_disconnect_costs_nothing(live_server):
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps), delay=0.5)
    server = live_server(scorer, ServeConfig(request_timeout=0.1, max_wait_ms=0))
    r = httpx.post(server.url + "/v1/score", json=one("q", ["a"]))
    assert r.status_code == 504 and "within 0.1s" in r.json()["error"]
    with pytest.raises(httpx.TimeoutException):  # a client that gives up mid-request
        httpx.post(server.url + "/v1/score", json=one("q", ["b"]), timeout=0.05)
    time.sleep(1.2)
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    server.app.state.batcher.scorer.delay = 0.0
    assert httpx.post(server.url + "/v1/score", json=one("q", ["c"])).json()["results"][0]["score"] == 0.5


def test_graceful_shutdown_finishes_requests_in_flight(live_server):
    import signal

    scorer = ScriptedScorer(lambda t: [0.25] * len(t.steps), delay=0.6)
    server = live_server(scorer, ServeConfig(max_wait_ms=0))
    got = {}

    def call():
        got["r"] = httpx.post(server.url + "/v1/score", json=one("q", ["a"]), timeout=30)

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.2)  # the request is being scored
    server.server.handle_exit(signal.SIGTERM, None)
    assert server.app.state.draining
    t.join(timeout=30)
    assert got["r"].status_code == 200 and got["r"].json()["results"][0]["score"] == 0.25
    server.thread.join(timeout=30)
    assert not server.thread.is_alive()  # the server exited after finishing it
    with pytest.raises(httpx.ConnectError):
        httpx.post(server.url + "/v1/score", json=one("q", ["b"]), timeout=5)


def test_sixty_four_concurrent_clients_all_get_their_own_scores(tiny_rm, make_traces, live_server):
    """The issue's load shape in small: 64 clients at once, each with its own best-of-2 set, through
    the batcher into the prefix-caching scorer; every answer is that client's, equal to local scoring."""
    from prmkit.scoring import PrefixCachingScorer

    scorer = PrefixCachingScorer(tiny_rm)
    server = live_server(scorer, ServeConfig(max_wait_ms=20, max_batch_traces=64))
    sets = [make_traces(f"Ann has {k} pens and gets {k % 7 + 2} more. How many now?",
                        [[f"{k} + {k % 7 + 2} = {k + k % 7 + 2}.", f"The answer is {k + k % 7 + 2}."],
                         [f"{k} + {k % 7 + 2} = {k + 1}.", f"The answer is {k + 1}."]], prefix=f"k{k}-")
            for k in range(64)]
    bodies = [{"traces": [{"id": t.id, "problem": t.problem.text, "steps": [s.text for s in t.steps]} for t in ts]}
              for ts in sets]
    replies = asyncio.run(_concurrently(server.url, bodies))
    assert [r.status_code for r in replies] == [200] * 64
    want = tiny_rm.score([t for ts in sets for t in ts])
    got = [res for r in replies for res in r.json()["results"]]
    assert [g["id"] for g in got] == [t.id for ts in sets for t in ts]
    for g, w in zip(got, want, strict=True):
        assert g["step_scores"] == pytest.approx(w, abs=1e-5) and g["unscored"] is None
    assert scorer.stats.calls < 64  # batched across requests
    metrics = httpx.get(server.url + "/metrics").text
    assert 'prmkit_requests_total{endpoint="/v1/score",status="200"} 64' in metrics
