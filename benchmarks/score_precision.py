"""Scoring in bf16 against fp32: speed and the largest step-score difference, same PRM, same traces.

    python benchmarks/score_precision.py                       # SmolLM2 PRM, 32 PRMBench traces
    python benchmarks/score_precision.py --model runs/prm      # a trained PRM (prmkit train)
    python benchmarks/score_precision.py --backbone tiny       # a quick check of the script

1. PRM: ``--model`` (a trained checkpoint), else SmolLM2-135M-Instruct with a 2-class head drawn at
   random with a fixed seed (as ``score_bon.py`` does), so that step scores differ from step to step
   and a difference between the precisions shows; the spread of the fp32 scores is printed with it.
2. Traces: the first ``--traces`` of a PRMBench test file (real solutions, a few hundred tokens each).
3. Each path runs in fp32 and in bf16 (bfloat16 autocast; the weights stay float32), the two
   alternating ``--repeats`` times after one warm-up of each, so load from elsewhere hits both alike:
   - ``RewardModel.score`` (length-sorted padded batches of ``--batch-size``);
   - ``PrefixCachingScorer.score`` (a new scorer per run: shared prefixes within the call only).
4. Printed: per path and precision the median seconds and steps/s; the largest and the mean absolute
   difference of step scores bf16 vs fp32 (and cached vs plain, per precision); the command line; last,
   the speed ratio bf16 / fp32 of ``RewardModel.score``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.data import read
from prmkit.models import RewardModel, bf16_problem
from prmkit.scoring import PrefixCachingScorer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "prmbench" / "prm800k_test_p1_4o_circular.jsonl"


def load_prm(args) -> RewardModel:
    import torch

    if args.model:
        return RewardModel.from_pretrained(args.model, device="cpu", dtype="float32")
    rm = RewardModel.from_backbone(args.backbone, convention=args.convention, device="cpu", dtype="float32")
    torch.manual_seed(args.seed)
    with torch.no_grad():
        rm.model.score.weight.normal_(0.0, 0.02)
        rm.model.score.bias.zero_()
    return rm


def diffs(a: Sequence[Sequence[float | None]], b: Sequence[Sequence[float | None]]) -> list[float]:
    return [abs(x - y) for s, t in zip(a, b, strict=True) for x, y in zip(s, t, strict=True)
            if x is not None and y is not None]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a trained PRM folder (default: --backbone + random head)")
    ap.add_argument("--backbone", default="smollm2")
    ap.add_argument("--convention", default="prmkit")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--traces", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    problem = bf16_problem(torch.device("cpu"))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, bf16 on this CPU: {problem or 'native'}")
    if problem:
        raise SystemExit("no native bf16 on this CPU: bf16 scoring would run in fp32; nothing to compare")
    traces = [t for t in read(args.data) if t.steps][:args.traces]
    rm = load_prm(args)
    rm.max_length = args.max_length
    tokens = sum(len(rm.encode(t)) for t in traces)
    steps = sum(len(t.steps) for t in traces)
    what = args.model or f"{args.backbone} + random 2-class head (seed {args.seed})"
    print(f"PRM: {what}, convention {rm.convention.name}; {len(traces)} traces, {steps} steps, {tokens} tokens "
          f"from {args.data}")

    def plain(precision: str):
        rm.precision = precision
        return rm.score(traces, batch_size=args.batch_size)

    def cached(precision: str):
        return PrefixCachingScorer(rm, batch_size=args.batch_size, precision=precision).score(traces)

    times: dict[tuple[str, str], list[float]] = {}
    scores: dict[tuple[str, str], list] = {}
    for rep in range(args.repeats + 1):  # the first round warms up and is not timed
        for path, fn in (("RewardModel.score", plain), ("PrefixCachingScorer", cached)):
            for precision in ("fp32", "bf16"):
                t0 = time.perf_counter()
                out = fn(precision)
                dt = time.perf_counter() - t0
                scores[(path, precision)] = out
                if rep:
                    times.setdefault((path, precision), []).append(dt)
    rm.precision = "fp32"

    fp32 = [v for s in scores[("RewardModel.score", "fp32")] for v in s if v is not None]
    print(f"fp32 step scores: mean {statistics.mean(fp32):.3f}, sd {statistics.pstdev(fp32):.3f}, "
          f"range {min(fp32):.3f}..{max(fp32):.3f}")
    print(f"\n{'path':22s} {'precision':>9s} {'median s':>9s} {'steps/s':>8s} {'tokens/s':>9s}")
    for (path, precision), ts in times.items():
        med = statistics.median(ts)
        print(f"{path:22s} {precision:>9s} {med:9.2f} {steps / med:8.1f} {tokens / med:9.0f}")
    print()
    for path in ("RewardModel.score", "PrefixCachingScorer"):
        d = diffs(scores[(path, "bf16")], scores[(path, "fp32")])
        print(f"{path}: bf16 vs fp32 step scores: max |diff| {max(d):.4f}, mean |diff| {statistics.mean(d):.5f}")
    for precision in ("fp32", "bf16"):
        d = diffs(scores[("PrefixCachingScorer", precision)], scores[("RewardModel.score", precision)])
        print(f"{precision}: PrefixCachingScorer vs RewardModel.score: max |diff| {max(d):.2e}")
    ratio = {path: statistics.median(times[(path, "fp32")]) / statistics.median(times[(path, "bf16")])
             for path in ("RewardModel.score", "PrefixCachingScorer")}
    print(f"speed ratio bf16 / fp32, PrefixCachingScorer: {ratio['PrefixCachingScorer']:.2f}")
    print("command: " + " ".join([os.path.relpath(sys.executable), *map(shlex.quote, sys.argv)]))
    print(f"speed ratio bf16 / fp32, RewardModel.score: {ratio['RewardModel.score']:.2f}")
    _record.record("score_precision", {"speed_ratio": ratio, "steps": steps}, ratio["RewardModel.score"],
                   goal="what bf16 scoring buys over fp32, and how far it moves the scores")


if __name__ == "__main__":
    main()
