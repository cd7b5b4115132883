"""Load test of ``prmkit serve``: dynamic batching into the prefix-caching scorer vs a naive server.

    python benchmarks/serve_load.py                                   # the shipped SmolLM2 PRM, 64 clients, 60 s each
    python benchmarks/serve_load.py --model tiny --seconds 10         # a seeded tiny PRM (no weights needed)
    python benchmarks/serve_load.py --clients 16 --soak 600           # soak: the batched server alone, 10 min
    python benchmarks/serve_load.py --rounds 2 --half 0               # naive and batched twice, A B B A

Both servers run in this process on loopback (uvicorn on a free 127.0.0.1 port, one at a time), serve
the same model and take the same load: ``--clients`` concurrent clients, each sending in a loop one
request with the ``--candidates`` candidate solutions of an arith problem (best-of-N: the reference
solution with one step's result changed per candidate, so candidates share the problem and their first
steps; a new problem per request, :class:`Bodies`), for ``--seconds`` seconds after one untimed
request (requests in flight at the end are awaited and counted).

- **batched**: ``prmkit serve`` as shipped: requests arriving together share one scorer call
  (``max_wait_ms``), and :class:`~prmkit.scoring.PrefixCachingScorer` runs each shared prefix once;
- **naive**: one padded forward pass per request (``RewardModel.score`` with the request's candidates
  as one batch, no cross-request batching, no prefix reuse), as OpenRLHF's ``serve_rm`` does.

Printed per server: requests, steps scored per second, latency p50 / p95 / p99, errors; then a run of
the batched server at half the naive-saturating client count (``--half``) for the p99 / p50 ratio; then
the command line, and last the batched / naive steps/s ratio (the issue's goal: >= 3). ``--rounds R``
runs naive and batched R times each, alternating (A B B A ...), prints each round's ratio, and last the
ratio of the steps/s over all rounds: this 2-core machine's speed drifts by about 20% within minutes,
which one naive run followed by one batched run cannot tell from a difference between the servers.

``--soak SECONDS`` runs the batched server alone under ``--clients`` for that long and prints, every
``--every`` seconds, throughput, latency percentiles, errors and this process's RSS, then the RSS
growth after the first window (the issue's goal: < 5% over 10 minutes at moderate load).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import random
import shlex
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import _record  # benchmarks/_record.py: notes the load average now; record() at the end


class Bodies:
    """/v1/score bodies, one per request: the ``candidates`` candidate solutions of arith problem 0,
    1, 2, ... (best-of-N: the reference solution, and copies with one step's result changed, so
    candidates share the problem and their first steps). Each request brings a problem not seen
    before, as an RL trainer's do, so no server answers from what it cached of an earlier request;
    ``cycle`` > 0 sends problems 0 .. cycle-1 over and over instead (a repeated load)."""

    def __init__(self, candidates: int, cycle: int = 0, seed: int = 0) -> None:
        from prmkit.envs import ArithEnv

        self.env = ArithEnv(steps=3)
        self.candidates = candidates
        self.cycle = cycle
        self.rng = random.Random(seed)
        self.sent = 0

    def next(self) -> dict:
        index = self.sent % self.cycle if self.cycle else self.sent
        self.sent += 1
        p = self.env.problem(index)
        steps = p.solution.split("\n")
        traces = []
        for i in range(self.candidates):
            s = list(steps)
            k = i % (len(s) - 1)
            if i:  # candidate 0 is the reference; the others change one result
                head, _, result = s[k].rpartition("= ")
                s[k] = f"{head}= {int(result.rstrip('.')) + self.rng.randint(1, 9)}."
            traces.append({"id": f"{i}", "problem": p.text, "steps": s})
        return {"traces": traces}


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


@dataclass
class Record:
    """What a load run saw, each entry stamped with seconds since its start: per answered request
    ``(t, latency, steps)``, per failed one ``(t, what)`` (an HTTP status or an exception's name), and
    ``(t, RSS MiB)`` samples of the server's process."""

    start: float = 0.0  # time.monotonic() at the start (the same clock in the client process)
    done: list[tuple[float, float, int]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)
    wall: float = 0.0
    scorer_calls: int = 0
    scorer_seconds: float = 0.0  # inside scorer calls: scorer_seconds / wall is how busy the model was

    def window(self, t0: float = 0.0, t1: float | None = None) -> dict:
        """Requests, steps/s, p50 / p95 / p99 latency and errors of the requests that ended in [t0, t1)."""
        t1 = self.wall if t1 is None else t1
        lat = [x for t, x, _ in self.done if t0 <= t < t1]
        steps = sum(n for t, _, n in self.done if t0 <= t < t1)
        q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [float("nan")] * 99
        return {"requests": len(lat), "errors": sum(t0 <= t < t1 for t, _ in self.errors),
                "steps_per_s": steps / max(t1 - t0, 1e-9), "p50": q[49], "p95": q[94], "p99": q[98]}


def rss_mib() -> float:
    """Resident memory of this process now (Linux /proc; elsewhere the peak, from getrusage)."""
    try:
        with open("/proc/self/status") as f:
            for row in f:
                if row.startswith("VmRSS:"):
                    return int(row.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def one_client(c, url: str, bodies: Bodies, deadline: float, rec: Record) -> None:
    """Send the next body, await the answer, again, until ``deadline``."""
    import httpx

    while time.monotonic() < deadline:
        body = bodies.next()
        t0 = time.monotonic()
        try:
            r = await c.post(url + "/v1/score", json=body)
            what = None if r.status_code == 200 else f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            what = type(e).__name__
        t1 = time.monotonic()
        if what is not None:
            rec.errors.append((t1 - rec.start, what))
        else:
            rec.done.append((t1 - rec.start, t1 - t0, sum(len(t["steps"]) for t in body["traces"])))


async def drive(url: str, bodies: Bodies, clients: int, seconds: float) -> Record:
    """``clients`` clients in a loop for ``seconds`` (requests in flight then are awaited and counted)."""
    import httpx

    rec = Record(start=time.monotonic())
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=600, limits=limits) as c:
        await asyncio.gather(*(one_client(c, url, bodies, rec.start + seconds, rec) for _ in range(clients)))
    rec.wall = time.monotonic() - rec.start
    return rec


def load(url: str, candidates: int, cycle: int, clients: int, seconds: float) -> Record:
    """The clients' side of a run, in a process of its own (:func:`run`)."""
    return asyncio.run(drive(url, Bodies(candidates, cycle), clients, seconds))


def sample_rss(samples: list[tuple[float, float]], stop: threading.Event, every: float) -> None:
    while True:
        samples.append((time.monotonic(), rss_mib()))
        if stop.wait(every):
            samples.append((time.monotonic(), rss_mib()))
            return


def run(scorer, config, bodies: Bodies, clients: int, seconds: float, rss_every: float = 1.0) -> Record:
    """Serve ``scorer`` on a free loopback port in this process, put the load on it from a child
    process (64 clients' HTTP and JSON work in this one would hold the GIL the scorer thread needs,
    which real clients on other machines do not), stop it; the :class:`Record`, with the server's RSS
    and how busy its scorer was. One untimed request first: a first call's one-off costs."""
    import httpx

    from prmkit.serve import make_server

    server = make_server(scorer, config, host="127.0.0.1", port=0, log_level="error")
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    metrics = server.app.state.metrics
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    try:
        httpx.post(url + "/v1/score", json=Bodies(bodies.candidates, seed=-1).next(), timeout=600).raise_for_status()
        calls, busy = metrics.scorer_calls, metrics.scorer_seconds
        sampler = threading.Thread(target=sample_rss, args=(samples, stop, rss_every), daemon=True)
        sampler.start()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            rec = pool.submit(load, url, bodies.candidates, bodies.cycle, clients, seconds).result()
        stop.set()
        sampler.join()
        rec.rss = [(t - rec.start, m) for t, m in samples if t >= rec.start - rss_every]
        rec.scorer_calls, rec.scorer_seconds = metrics.scorer_calls - calls, metrics.scorer_seconds - busy
        return rec
    finally:
        stop.set()
        server.should_exit = True
        th.join(timeout=60)


def line(name: str, r: dict) -> str:
    return (f"{name:<24} {r['requests']:>5} requests  {r['steps_per_s']:8.1f} steps/s  p50 {r['p50']:.3f}s  "
            f"p95 {r['p95']:.3f}s  p99 {r['p99']:.3f}s  errors {r['errors']}")


def busy(rec: Record) -> str:
    """How much of the run the model spent scoring, and the mean call."""
    per = rec.scorer_seconds / max(rec.scorer_calls, 1)
    return f"scorer busy {100 * rec.scorer_seconds / rec.wall:.0f}% ({rec.scorer_calls} calls, {per:.3f}s each)"


def error_kinds(*recs: Record) -> str:
    kinds = Counter(what for rec in recs for _, what in rec.errors)
    return ", ".join(f"{k} x{n}" for k, n in kinds.most_common()) or "none"


def soak(rm, args, config) -> None:
    """The batched server alone for ``--soak`` seconds: a line per ``--every`` seconds (throughput,
    latency percentiles, errors, RSS), then the RSS growth from the end of the first window (the
    warm-up: allocator pools, the prefix cache filling to its bound) to the end."""
    from prmkit.scoring import PrefixCachingScorer

    scorer = PrefixCachingScorer(rm, batch_size=args.batch_size)
    rec = run(scorer, config, Bodies(args.candidates, args.cycle), args.clients, args.soak,
              rss_every=min(1.0, args.every))
    print(f"soak: {args.clients} clients x {args.candidates} candidates for {args.soak:g}s "
          f"(RSS of the server's process; the clients run in another)")
    edges = [*range(0, int(rec.wall), max(1, int(args.every))), rec.wall]
    if len(edges) > 2 and edges[-1] - edges[-2] < 0.5 * args.every:
        del edges[-2]  # the requests awaited after the deadline join the last window
    for t0, t1 in itertools.pairwise(edges):
        rss = ([m for t, m in rec.rss if t <= t1] or [float("nan")])[-1]
        print(line(f"  {t0:>4.0f}-{t1:<4.0f}s", rec.window(t0, t1)) + f"  RSS {rss:.0f} MiB", flush=True)
    print(line("  whole soak", rec.window()))
    first = [m for t, m in rec.rss if t <= min(args.every, rec.wall)][-1]
    last = rec.rss[-1][1]
    print(f"RSS: start {rec.rss[0][1]:.0f} MiB, after the first {args.every:g}s {first:.0f} MiB, end {last:.0f} MiB: "
          f"growth after warm-up {100 * (last - first) / first:+.1f}% (goal < 5%)")
    print(f"errors: {len(rec.errors)} ({error_kinds(rec)}); {busy(rec)}; tokens reused by the prefix cache "
          f"{scorer.stats.tokens_reused}")


def main(argv: list[str] | None = None) -> None:
    from prmkit.serve import ServeConfig

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="checkpoint folder, shipped name, or 'tiny'")
    ap.add_argument("--clients", type=int, default=64, help="concurrent clients (the issue's shape: 64)")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds per run (naive, batched, half load)")
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--cycle", type=int, default=0, metavar="N",
                    help="send problems 0..N-1 over and over (default 0: a new problem per request)")
    ap.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass (both servers)")
    ap.add_argument("--max-batch-traces", type=int, default=ServeConfig.max_batch_traces,
                    help="most traces per scorer call (default: prmkit serve's)")
    ap.add_argument("--max-wait-ms", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=1,
                    help="naive and batched runs, alternating A B B A ... (the ratio over all of them; "
                         "this 2-core machine's speed drifts by 20%% within minutes)")
    ap.add_argument("--half", type=int, default=None, help="clients of the half-load run (default clients/2; 0: no such run)")
    ap.add_argument("--soak", type=float, default=None, metavar="SECONDS",
                    help="instead: the batched server alone for SECONDS (the issue's soak: 600 at moderate "
                         "load, e.g. --clients 16), reporting each --every seconds")
    ap.add_argument("--every", type=float, default=10.0, help="soak report interval, seconds")
    args = ap.parse_args(argv)
    import torch

    from prmkit.scoring import PrefixCachingScorer

    torch.set_num_threads(max(1, torch.get_num_threads()))
    rm = load_model(args.model)
    common = dict(max_traces=max(1024, args.candidates), max_queued_traces=args.clients * args.candidates * 2,
                  request_timeout=600)
    batched_cfg = ServeConfig(max_batch_traces=args.max_batch_traces, max_wait_ms=args.max_wait_ms, **common)
    command = "command: python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    print(f"torch threads {torch.get_num_threads()}, cores {os.cpu_count()}, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    if args.soak:
        soak(rm, args, batched_cfg)
        print(command)
        return
    naive_cfg = ServeConfig(max_batch_traces=1, max_wait_ms=0, **common)
    naives, batcheds = [], []
    for r in range(args.rounds):  # A B, then B A, ...: a drift of the machine's speed hits both sides
        for side in ("naive", "batched") if r % 2 == 0 else ("batched", "naive"):
            tag = f" [round {r + 1}]" if args.rounds > 1 else ""
            if side == "naive":
                naive = run(Naive(rm, args.batch_size), naive_cfg, Bodies(args.candidates, args.cycle),
                            args.clients, args.seconds)
                naives.append(naive)
                print(line("naive (1 pass/request)", naive.window()) + "  " + busy(naive) + tag, flush=True)
            else:
                scorer = PrefixCachingScorer(rm, batch_size=args.batch_size)
                batched = run(scorer, batched_cfg, Bodies(args.candidates, args.cycle), args.clients,
                              args.seconds)
                batcheds.append(batched)
                st = scorer.stats
                print(line("batched (prmkit serve)", batched.window()) + "  " + busy(batched)
                      + f"  tokens computed {st.tokens_computed} of {st.tokens_requested} "
                        f"({st.tokens_requested / max(st.tokens_computed, 1):.2f}x fewer)" + tag, flush=True)
    half = max(1, args.clients // 2) if args.half is None else args.half
    light = None if half == 0 else run(PrefixCachingScorer(rm, batch_size=args.batch_size), batched_cfg, Bodies(args.candidates, args.cycle),
                half, args.seconds)
    runs = [*naives, *batcheds]
    if light is not None:
        lw = light.window()
        print(line(f"batched, {half} clients", lw) + f"  p99/p50 {lw['p99'] / lw['p50']:.2f}  " + busy(light),
              flush=True)
        runs.append(light)
    print(f"errors: {sum(len(r.errors) for r in runs)} ({error_kinds(*runs)})")
    print(command)
    if args.rounds > 1:
        each = [b.window()["steps_per_s"] / n.window()["steps_per_s"] for n, b in zip(naives, batcheds, strict=True)]
        print(f"batched / naive steps/s, round by round: {', '.join(f'{x:.2f}' for x in each)}")

    def steps_per_s(recs: list[Record]) -> float:  # over all rounds: steps / seconds, summed
        return sum(n for r in recs for _, _, n in r.done) / sum(r.wall for r in recs)

    ratio = steps_per_s(batcheds) / steps_per_s(naives)
    print(f"batched / naive steps/s: {ratio:.2f}x (goal >= 3)")
    _record.record("serve_load", {"naive_steps_per_s": steps_per_s(naives), "batched_steps_per_s": steps_per_s(batcheds),
                                  "errors": sum(len(r.errors) for r in runs), "clients": args.clients}, ratio,
                   goal="prmkit serve at least ×3 the naive server's steps/s")


if __name__ == "__main__":
    main()
