"""A short soak (issue 45, item 2): hostile requests mixed into normal load against a live server
(uvicorn on a free loopback port, a scripted scorer), while ``/health`` is polled: it must answer
within a second throughout, and each request get its own answer. Small enough for CI on 2 cores:
``SECONDS`` of load, a few hundred requests.

Before the fix, the first hostile request alone (100 KB of spaces to ``/get_reward``) blocked the
event loop for 56 s, and the 20,000-step trace held the scorer ~15 minutes.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from prmkit.scoring import ScriptedScorer
from prmkit.serve import ServeConfig

httpx = pytest.importorskip("httpx")

SECONDS = 4.0
HEALTH_EVERY = 0.05

# (path, body, the statuses it may get)
HOSTILE = [
    ("/get_reward", json.dumps({"query": [" " * 100_000]}).encode(), {200}),  # the 56 s
    ("/get_reward", json.dumps({"query": ["P:" + " \n" * 1_000_000 + "<|im_end|>"], "prompts": ["P:"]}).encode(),
     {200}),  # 2 MB of blank lines, then an end marker
    ("/get_reward", json.dumps({"query": ["x" * 3_000_000]}).encode(), {200}),  # over --max-trace-chars
    ("/v1/score", json.dumps({"traces": [{"problem": "q", "steps": ["s"] * 20_000}]}).encode(), {413}),
    ("/get_reward", b'{"query": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", {422}),
    ("/v1/score", b'{"traces": [{"id": "\\ud800", "problem": "q", "steps": ["a"]}]}', {422}),
    ("/get_reward", b'{"query": ["a"], "labels": ["\\udfff"]}', {422}),
    ("/get_reward", b"{" + b" " * (5 * 1024 * 1024) + b"}", {413}),
]
NORMAL = [
    ("/get_reward", json.dumps({"query": ["Q: 2+2?\nA: 2 + 2 = 4\nThe answer is 4.<|im_end|>"],
                                "prompts": ["Q: 2+2?\nA:"]}).encode(), {200}),
    ("/v1/score", json.dumps({"traces": [{"problem": "q", "steps": [f"step {i}", "done"]} for i in range(4)]}).encode(),
     {200}),
]


def _load(url: str, requests: list, stop: threading.Event, out: list) -> None:
    with httpx.Client(timeout=30) as c:
        i = 0
        while not stop.is_set() or i < len(requests):  # every request at least once
            path, body, ok = requests[i % len(requests)]
            try:
                r = c.post(url + path, content=body, headers={"content-type": "application/json"})
                out.append((path, r.status_code, r.status_code in ok, r.text[:200]))
            except httpx.HTTPError as e:  # reported by the test, not lost with the thread
                out.append((path, None, False, repr(e)))
            i += 1


def test_health_answers_within_a_second_under_hostile_load(live_server):
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps), delay=0.001)
    server = live_server(scorer, ServeConfig(max_wait_ms=2, request_timeout=20))
    stop = threading.Event()
    hostile: list = []
    normal: list = []
    threads = [threading.Thread(target=_load, args=(server.url, HOSTILE, stop, hostile)),
               threading.Thread(target=_load, args=(server.url, NORMAL, stop, normal)),
               threading.Thread(target=_load, args=(server.url, NORMAL[::-1], stop, normal))]
    latencies = []
    start = time.monotonic()
    for t in threads:
        t.start()
    with httpx.Client(timeout=30) as c:
        while time.monotonic() - start < SECONDS:
            t0 = time.perf_counter()
            assert c.get(server.url + "/health").status_code == 200
            latencies.append(time.perf_counter() - t0)
            time.sleep(HEALTH_EVERY)
        stop.set()
        while any(t.is_alive() for t in threads):  # the last requests still in flight: keep measuring
            t0 = time.perf_counter()
            c.get(server.url + "/health")
            latencies.append(time.perf_counter() - t0)
            time.sleep(HEALTH_EVERY)
    for t in threads:
        t.join()
    latencies.sort()
    print(f"\nsoak {time.monotonic() - start:.1f}s: {len(hostile)} hostile + {len(normal)} normal requests; "
          f"/health x{len(latencies)}: p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, "
          f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    assert [h for h in hostile if not h[2]] == [] and len(hostile) >= len(HOSTILE)
    assert [n for n in normal if not n[2]] == [] and len(normal) >= 20
    assert latencies[-1] < 1.0
    metrics = httpx.get(server.url + "/metrics").text
    assert 'prmkit_unscored_total{reason="over_limit"}' in metrics  # the 3 MB line, never scored
