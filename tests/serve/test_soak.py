"""A short soak (issue 45, item 2): hostile requests mixed into normal load against a live server
(uvicorn on a free loopback port, a scripted scorer), while ``/health`` is polled: it must answer
within a second throughout, and each request get its own answer. Small enough for CI on 2 cores:
``SECONDS`` of load, a few hundred requests. The load runs in a process of its own
(``soak_client.py``), so what is timed is the server's interpreter, not the test's client threads (a
max of 1.10 s was once seen with the clients in this process, on 2 busy cores).

Before the fix, the first hostile request alone (100 KB of spaces to ``/get_reward``) blocked the
event loop for 56 s, and the 20,000-step trace held the scorer ~15 minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prmkit.scoring import ScriptedScorer
from prmkit.serve import ServeConfig

httpx = pytest.importorskip("httpx")

SECONDS = 4.0
HEALTH_EVERY = 0.05
#: the load (hostile and normal requests, three client threads) runs in a process of its own
CLIENT = Path(__file__).with_name("soak_client.py")


def test_health_answers_within_a_second_under_hostile_load(live_server, tmp_path):
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps), delay=0.001)
    server = live_server(scorer, ServeConfig(max_wait_ms=2, request_timeout=20))
    latencies = []
    start = time.monotonic()
    answers = tmp_path / "answers.json"
    load = subprocess.Popen([sys.executable, str(CLIENT), server.url, str(SECONDS), str(answers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with httpx.Client(timeout=30) as c:
        while load.poll() is None:  # through the load, and its last requests still in flight
            t0 = time.perf_counter()
            assert c.get(server.url + "/health").status_code == 200
            latencies.append(time.perf_counter() - t0)
            time.sleep(HEALTH_EVERY)
    _, err = load.communicate()
    assert load.returncode == 0, err[-2000:]
    result = json.loads(answers.read_text())
    hostile, normal = result["hostile"], result["normal"]
    latencies.sort()
    print(f"\nsoak {time.monotonic() - start:.1f}s: {len(hostile)} hostile + {len(normal)} normal requests; "
          f"/health x{len(latencies)}: p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, "
          f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    assert [h for h in hostile if not h[2]] == [] and len(hostile) >= result["kinds"]
    assert [n for n in normal if not n[2]] == [] and len(normal) >= 20
    assert latencies[-1] < 1.0
    metrics = httpx.get(server.url + "/metrics").text
    assert 'prmkit_unscored_total{reason="over_limit"}' in metrics  # the 3 MB line, never scored
