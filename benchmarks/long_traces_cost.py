"""What a longer ``max_length`` costs on CPU: the longest ProcessBench traces scored by the default PRM.

    OMP_NUM_THREADS=2 python benchmarks/long_traces_cost.py
    python benchmarks/long_traces_cost.py --split math --traces 8 --lengths 512,2048,4096 --bound 4096,8192

``benchmarks/long_traces.py`` counts what a ``max_length`` cuts; this one runs the model. The
``--traces`` longest traces (in characters) of a ProcessBench split (``--data``, default ``../shared/data``; skipped
with a message where it is absent) are scored by ``--model`` (the shipped PRM, ``default``) at each
of ``--lengths`` with the default ``long="window"`` (past ``max_length`` every step is scored in a
window of its own), in one batch, fp32, each length in a fresh process: wall time, tokens run, and the
process's peak resident memory above what it held after loading the model. Then, for each of
``--bound``, one synthetic trace exactly that many tokens long (a MATH trace's steps repeated), alone
and ``--batch`` at a time (whole steps: as long as fits in the bound): what the bound itself costs
when traces reach it. The largest absolute
difference between the step scores of each length and those of the longest is printed too (steps
read whole at both lengths score the same in a decoder; windows change the others).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def one(args: argparse.Namespace) -> None:
    """Score in this process and print one JSON line."""
    import torch

    from prmkit.data import read
    from prmkit.models import RewardModel
    from prmkit.trace import Step, Trace

    traces = list(read(args.data / "processbench" / f"{args.split}.json"))
    rm = RewardModel.from_pretrained(args.model, device="cpu", dtype="float32", max_length=args.one)
    loaded = rss_mib()
    whole = RewardModel(None, rm.tokenizer, convention=rm.convention, name="lengths")
    # by characters: tokenizing the whole split in every process would take longer than the scoring
    by_len = sorted(traces, key=lambda t: len(t.problem.text) + sum(len(x.text) for x in t.steps), reverse=True)
    if args.synthetic:
        base = by_len[0]
        steps = list(base.steps)
        while len(whole.encode(Trace(id="s", problem=base.problem, steps=steps))) < args.one:
            steps += base.steps
        while len(whole.encode(Trace(id="s", problem=base.problem, steps=steps))) > args.one:
            steps = steps[:-1]
        t = Trace(id="synthetic", problem=base.problem, steps=[Step(s.text) for s in steps])
        picked = [t] * args.synthetic
    else:
        picked = by_len[:args.traces]
    tokens = sum(len(e) for t in picked for e in rm.encode_all(t))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    start = time.perf_counter()
    scores = rm.score(picked, batch_size=args.batch)
    seconds = time.perf_counter() - start
    print(json.dumps({"max_length": args.one, "traces": len(picked), "longest": len(whole.encode(picked[0])),
                      "tokens": tokens, "seconds": seconds, "loaded_mib": loaded, "peak_mib": rss_mib(),
                      "scores": scores}))


def run(argv: list[str], length: int, synthetic: int = 0) -> dict:
    cmd = [sys.executable, __file__, *argv, "--one", str(length), "--synthetic", str(synthetic)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"max_length {length} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder; default ../shared/data")
    ap.add_argument("--split", default="math", help="ProcessBench split")
    ap.add_argument("--model", default="default")
    ap.add_argument("--traces", type=int, default=8, help="the longest N traces of the split")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lengths", default="512,2048,4096", help="max_length values for the longest traces (empty: none)")
    ap.add_argument("--bound", default="4096", help="synthetic traces exactly this long (empty: none)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--synthetic", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not (args.data / "processbench" / f"{args.split}.json").is_file():
        print(f"skipped: no processbench/{args.split}.json under {args.data}; give the folder with --data")
        return
    if args.one is not None:
        one(args)
        return
    print(f"{args.model} PRM, fp32, {os.environ.get('OMP_NUM_THREADS', '2')} threads, batch {args.batch}; "
          f"peak memory is the process's above what it held after loading the model\n")
    rows = [run(argv, int(m)) for m in args.lengths.split(",") if m]  # --lengths "": the bounds only
    ref = rows[-1]["scores"] if rows else []
    if rows:
        print(f"the {args.traces} longest ProcessBench {args.split} traces in characters "
              f"(the longest {rows[0]['longest']} tokens)")
        print(f"{'max_length':>10} {'tokens run':>10} {'seconds':>8} {'tokens/s':>8} {'peak MiB':>8} "
              f"{'max |score - score at ' + str(rows[-1]['max_length']) + '|':>26}")
    for r in rows:
        diff = max(abs(a - b) for s, t in zip(r["scores"], ref, strict=True) for a, b in zip(s, t, strict=True)
                   if a is not None and b is not None)
        print(f"{r['max_length']:>10} {r['tokens']:>10} {r['seconds']:>8.1f} {r['tokens'] / r['seconds']:>8.0f} "
              f"{r['peak_mib'] - r['loaded_mib']:>8.0f} {diff:>26.4f}")
    bounds = [int(m) for m in args.bound.split(",") if m]
    if bounds:
        print("\none synthetic trace as long as the bound (a MATH trace's steps repeated), alone and a batch of them")
        print(f"{'max_length':>10} {'batch':>5} {'tokens':>7} {'seconds':>8} {'tokens/s':>8} {'peak MiB':>8}")
        for m in bounds:
            for n in (1, args.batch):
                r = run(argv, m, synthetic=n)
                print(f"{m:>10} {n:>5} {r['tokens']:>7} {r['seconds']:>8.1f} {r['tokens'] / r['seconds']:>8.0f} "
                      f"{r['peak_mib'] - r['loaded_mib']:>8.0f}")
    print("\nreproduce: python benchmarks/long_traces_cost.py " + shlex.join(argv))
    _record.record("long_traces_cost", {"rows": [{k: v for k, v in r.items() if k != "scores"} for r in rows]}, None,
                   goal="what reading long traces whole costs in time and memory")


if __name__ == "__main__":
    main()
