"""Load test of ``prmkit serve``: dynamic batching into the prefix-caching scorer vs a naive server.

    python benchmarks/serve_load.py                                   # the shipped SmolLM2 PRM, 64 clients, 60 s each
    python benchmarks/serve_load.py --model tiny --seconds 10         # a seeded tiny PRM (no weights needed)

Both servers run in this process on loopback (uvicorn on a free 127.0.0.1 port, one at a time), serve
the same model and take the same load: ``--clients`` concurrent clients, each sending in a loop one
request with the ``--candidates`` candidate solutions of an arith problem (best-of-N: the reference
solution with one step's result changed per candidate, so candidates share the problem and their first
steps), for ``--seconds`` seconds (requests in flight at the end are awaited and counted).

- **batched**: ``prmkit serve`` as shipped: requests arriving together share one scorer call
  (``max_wait_ms``), and :class:`~prmkit.scoring.PrefixCachingScorer` runs each shared prefix once;
- **naive**: one padded forward pass per request (``RewardModel.score`` with the request's candidates
  as one batch, no cross-request batching, no prefix reuse), as OpenRLHF's ``serve_rm`` does.

Printed per server: requests, steps scored per second, latency p50 / p95 / p99, errors; then a run of
the batched server at half the naive-saturating client count (``--half``) for the p99 / p50 ratio; then
the command line, and last the batched / naive steps/s ratio (the issue's goal: >= 3).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import statistics
import sys
import threading
import time


def candidate_sets(n_problems: int, candidates: int, seed: int = 0) -> list[dict]:
    """Per problem a /v1/score body with ``candidates`` traces."""
    from prmkit.envs import ArithEnv

    rng = random.Random(seed)
    bodies = []
    for p in ArithEnv(steps=3).problems(n_problems):
        steps = p.solution.split("\n")
        traces = []
        for i in range(candidates):
            s = list(steps)
            k = i % (len(s) - 1)
            if i:  # candidate 0 is the reference; the others change one result
                head, _, result = s[k].rpartition("= ")
                s[k] = f"{head}= {int(result.rstrip('.')) + rng.randint(1, 9)}."
            traces.append({"id": f"{i}", "problem": p.text, "steps": s})
        bodies.append({"traces": traces})
    return bodies


def load_model(name: str):
    from prmkit.models import RewardModel

    if name != "tiny":
        return RewardModel.from_pretrained(name)
    import torch
    import transformers

    from prmkit.models import build_char_tokenizer

    torch.manual_seed(0)
    tok = build_char_tokenizer()
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=2048, pad_token_id=tok.pad_token_id, num_labels=2)
    return RewardModel(transformers.LlamaForTokenClassification(cfg).eval(), tok, convention="prmkit",
                       name="tiny")


class Naive:
    """One padded forward pass per request: ``rm.score`` with all of a request's traces as one batch."""

    def __init__(self, rm, batch: int) -> None:
        self.rm, self.kind, self.name, self.batch = rm, rm.kind, rm.name, batch

    def score(self, traces):
        return self.rm.score(traces, batch_size=self.batch)


async def drive(url: str, bodies: list[dict], clients: int, seconds: float) -> dict:
    import httpx

    latencies: list[float] = []
    errors = 0
    steps = 0
    deadline = time.perf_counter() + seconds

    async def client(c: httpx.AsyncClient, k: int) -> None:
        nonlocal errors, steps
        i = k
        while time.perf_counter() < deadline:
            body = bodies[i % len(bodies)]
            i += clients
            t0 = time.perf_counter()
            try:
                r = await c.post(url + "/v1/score", json=body)
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            if not ok:
                errors += 1
                continue
            latencies.append(time.perf_counter() - t0)
            steps += sum(len(t["steps"]) for t in body["traces"])

    start = time.perf_counter()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=600, limits=limits) as c:
        await asyncio.gather(*(client(c, k) for k in range(clients)))
    wall = time.perf_counter() - start
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {"requests": len(latencies), "errors": errors, "steps_per_s": steps / wall, "wall": wall,
            "p50": q[49], "p95": q[94], "p99": q[98]}


def run(scorer, config, bodies, clients, seconds) -> dict:
    from prmkit.serve import make_server

    server = make_server(scorer, config, host="127.0.0.1", port=0, log_level="error")
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        out = asyncio.run(drive(url, bodies, clients, seconds))
        stats = getattr(scorer, "stats", None)
        out["tokens_reused"] = stats.tokens_reused if stats is not None else 0
        return out
    finally:
        server.should_exit = True
        th.join(timeout=60)


def line(name: str, r: dict) -> str:
    return (f"{name:<22} {r['requests']:>5} requests  {r['steps_per_s']:8.1f} steps/s  p50 {r['p50']:.3f}s  "
            f"p95 {r['p95']:.3f}s  p99 {r['p99']:.3f}s  errors {r['errors']}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="checkpoint folder, shipped name, or 'tiny'")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--problems", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass (both servers)")
    ap.add_argument("--max-batch-traces", type=int, default=64)
    ap.add_argument("--max-wait-ms", type=float, default=5.0)
    ap.add_argument("--half", type=int, default=None, help="clients of the half-load run (default clients/2)")
    args = ap.parse_args(argv)
    import torch

    from prmkit.scoring import PrefixCachingScorer
    from prmkit.serve import ServeConfig

    torch.set_num_threads(max(1, torch.get_num_threads()))
    rm = load_model(args.model)
    bodies = candidate_sets(args.problems, args.candidates)
    common = dict(max_traces=max(1024, args.candidates), max_queued_traces=args.clients * args.candidates * 2,
                  request_timeout=600)
    naive = run(Naive(rm, args.batch_size), ServeConfig(max_batch_traces=1, max_wait_ms=0, **common),
                bodies, args.clients, args.seconds)
    print(line("naive (1 pass/request)", naive), flush=True)
    batched = run(PrefixCachingScorer(rm, batch_size=args.batch_size),
                  ServeConfig(max_batch_traces=args.max_batch_traces, max_wait_ms=args.max_wait_ms, **common),
                  bodies, args.clients, args.seconds)
    print(line("batched (prmkit serve)", batched) + f"  tokens reused {batched['tokens_reused']}", flush=True)
    half = args.half or max(1, args.clients // 2)
    light = run(PrefixCachingScorer(rm, batch_size=args.batch_size),
                ServeConfig(max_batch_traces=args.max_batch_traces, max_wait_ms=args.max_wait_ms, **common),
                bodies, half, args.seconds)
    print(line(f"batched, {half} clients", light) + f"  p99/p50 {light['p99'] / light['p50']:.2f}", flush=True)
    print(f"errors: {naive['errors'] + batched['errors'] + light['errors']}")
    print("command: python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]))
    ratio = batched["steps_per_s"] / naive["steps_per_s"]
    print(f"batched / naive steps/s: {ratio:.2f}x (goal >= 3)")


if __name__ == "__main__":
    main()
