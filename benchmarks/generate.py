"""Generation throughput on the embedded default (SmolLM2-135M-Instruct, this machine's CPU).

    python benchmarks/generate.py                    # hf batched vs batch 1, then llama.cpp server
    python benchmarks/generate.py --skip-server      # hf only

1. ``hf`` backend: the same requests (arith problems with the default 2-shot prompt, N samples each)
   with ``batch_size=16`` against ``batch_size=1``. Sampling is seeded per sample and batch-invariant,
   so both runs produce the same text and the same number of tokens: only the time differs.
2. llama.cpp server (``openai_compat`` backend): 8 requests one at a time against 8 in parallel (see
   ``benchmarks/generate_server.py``; llama-cpp-python's server decodes one request at a time).

Each mode's tokens/s is the median over ``--repeats`` runs, alternating the two modes so a change in
machine load hits both. The ratios are printed last.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prmkit.envs import ArithConfig, ArithEnv  # noqa: E402
from prmkit.envs._prompts import PromptBuilder  # noqa: E402
from prmkit.policies import SamplingParams, get_policy  # noqa: E402


def bench_hf(problems: int, n: int, max_tokens: int, repeats: int) -> float:
    cfg = ArithConfig()
    prompts = PromptBuilder("arith", shots=2, config=cfg)
    requests = [prompts.request(p) for p in ArithEnv(cfg).problems(problems)]
    params = SamplingParams(n=n, max_new_tokens=max_tokens, temperature=0.7, seed=0)
    policy = get_policy("hf", progress=False)
    policy.generate(requests[:1], SamplingParams(n=1, max_new_tokens=4))  # warm-up, caches
    rates: dict[int, list[float]] = {16: [], 1: []}
    texts: dict[int, list[str]] = {}
    print(f"hf: {policy.model_id}, {problems} problems x {n} samples x <= {max_tokens} new tokens, "
          f"2-shot arith prompt")
    for r in range(repeats):
        for bs in (16, 1):
            policy.batch_size = bs
            t0 = time.perf_counter()
            out = policy.generate(requests, params)
            seconds = time.perf_counter() - t0
            tokens = sum(c.num_tokens for row in out for c in row)
            texts[bs] = [c.text for row in out for c in row]
            rates[bs].append(tokens / seconds)
            print(f"  repeat {r + 1} batch {bs:>2}: {tokens} tokens in {seconds:.1f} s = "
                  f"{tokens / seconds:.1f} tokens/s")
    if texts[16] != texts[1]:
        print("  warning: batched and batch-1 texts differ (floating-point ties)")
    batched, single = statistics.median(rates[16]), statistics.median(rates[1])
    print(f"hf batch 16: {batched:.1f} tokens/s; batch 1: {single:.1f} tokens/s")
    return batched / single


def bench_server(requests: int, max_tokens: int, repeats: int) -> float:
    import generate_server as gs

    from prmkit.policies import GenerationRequest
    from prmkit.policies._openai_compat import OpenAICompatPolicy

    proc, base_url, log = gs.start_server(os.cpu_count() or 1, 2048)
    try:
        reqs = [GenerationRequest([{"role": "user", "content": f"Tell a short story about {t}."}],
                                  key=f"story-{i}") for i, t in enumerate(gs.TOPICS)][:requests]
        params = SamplingParams(max_new_tokens=max_tokens, temperature=0.7, seed=0)
        seq = OpenAICompatPolicy(base_url, "smollm2", max_concurrency=1, timeout=600, progress=False)
        par = OpenAICompatPolicy(base_url, "smollm2", max_concurrency=requests, timeout=600,
                                 progress=False)
        gs.run(seq, reqs[:1], SamplingParams(max_new_tokens=8, seed=0))
        rates: dict[str, list[float]] = {"sequential": [], "parallel": []}
        print(f"llama.cpp server: {requests} requests x {max_tokens} new tokens")
        for r in range(repeats):
            for mode, pol in (("sequential", seq), ("parallel", par)):
                tokens, seconds = gs.run(pol, reqs, params)
                rates[mode].append(tokens / seconds)
                print(f"  repeat {r + 1} {mode:>10}: {tokens / seconds:.1f} tokens/s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.unlink(log)
    s, p = statistics.median(rates["sequential"]), statistics.median(rates["parallel"])
    print(f"server sequential: {s:.1f} tokens/s; parallel: {p:.1f} tokens/s")
    return p / s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=2)
    ap.add_argument("-n", type=int, default=8, help="samples per problem (hf)")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-server", action="store_true")
    args = ap.parse_args()
    command = shlex.join(["python", "benchmarks/generate.py", *sys.argv[1:]])
    hf_ratio = bench_hf(args.problems, args.n, args.max_tokens, args.repeats)
    server_ratio = None if args.skip_server else bench_server(8, 64, args.repeats)
    print(f"reproduce: {command}")
    print(f"ratio hf batched/batch-1: {hf_ratio:.2f}")
    if server_ratio is not None:
        print(f"ratio server parallel/sequential: {server_ratio:.2f}")


if __name__ == "__main__":
    main()
