"""The load of tests/serve/test_soak.py, run as a process of its own (``python soak_client.py URL
SECONDS OUT``): hostile requests mixed into normal load, three client threads for SECONDS, every
request at least once; writes ``{"hostile": [...], "normal": [...]}`` (each ``[path, status, ok,
text]``) as JSON to the file OUT. A process of its own, so that the clients' Python (building multi-MB bodies, reading answers)
does not share the server's interpreter lock: what the test times is the server's ``/health``, as a
deployment would see it, not the test's own threads."""

from __future__ import annotations

import json
import sys
import threading
import time

import httpx

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


def main(url: str, seconds: float, out: str) -> None:
    stop = threading.Event()
    hostile: list = []
    normal: list = []
    threads = [threading.Thread(target=_load, args=(url, HOSTILE, stop, hostile)),
               threading.Thread(target=_load, args=(url, NORMAL, stop, normal)),
               threading.Thread(target=_load, args=(url, NORMAL[::-1], stop, normal))]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    with open(out, "w") as f:
        json.dump({"hostile": hostile, "normal": normal, "kinds": len(HOSTILE)}, f)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
