"""Best-of-N scoring with and without merging chains of shared prefixes, in one process.

    python benchmarks/prefix_chains.py                     # the shipped SmolLM2 PRM, 12 calls each way
    python benchmarks/prefix_chains.py --model tiny --calls 4   # a seeded tiny PRM: seconds

Each call scores the candidate sets of ``--requests`` arith problems at once (``--candidates`` each,
the bodies of ``benchmarks/serve_load.py``: the reference solution and copies with one step's result
changed, so candidates share the problem, then the first step all but a few keep, then the second),
as one call of ``prmkit serve``'s batcher does under load. A fresh
:class:`~prmkit.scoring.PrefixCachingScorer` per call (no reuse across calls), ``merge_chains`` off
(every shared prefix a pass of its own) and on (a shared prefix with exactly one below it is read from
that one's run), alternating call by call on the same problems. Printed: per side the median seconds
per call and forward passes per call, that the scores agree, the command line, and last the ratio of
the medians (without / with).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_load import Bodies, load_model  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="checkpoint folder, shipped name, or 'tiny'")
    ap.add_argument("--calls", type=int, default=12, help="calls each way")
    ap.add_argument("--requests", type=int, default=4, help="problems per call")
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args(argv)

    from prmkit.scoring import PrefixCachingScorer
    from prmkit.trace import Problem, Step, Trace

    rm = load_model(args.model)
    bodies = Bodies(args.candidates)

    def call_traces() -> list[Trace]:
        return [Trace(id=f"{r}-{t['id']}", problem=Problem(t["problem"]), steps=[Step(x) for x in t["steps"]])
                for r in range(args.requests) for t in bodies.next()["traces"]]

    PrefixCachingScorer(rm, batch_size=args.batch_size).score(call_traces())  # warm-up
    seconds: dict[bool, list[float]] = {False: [], True: []}
    passes = {False: 0, True: 0}
    worst = 0.0
    for c in range(args.calls):
        traces = call_traces()
        got = {}
        for merge in (False, True) if c % 2 == 0 else (True, False):
            scorer = PrefixCachingScorer(rm, batch_size=args.batch_size, merge_chains=merge)
            start = time.perf_counter()
            got[merge] = scorer.score(traces)
            seconds[merge].append(time.perf_counter() - start)
            passes[merge] += scorer.stats.forward_passes
        worst = max(worst, max(abs(a - b) for x, y in zip(got[False], got[True], strict=True)
                               for a, b in zip(x, y, strict=True) if a is not None and b is not None))
    med = {m: statistics.median(v) for m, v in seconds.items()}
    for m, name in ((False, "without merging"), (True, "with merging")):
        print(f"{name:16s} {med[m]:.3f} s per call (median of {args.calls}), "
              f"{passes[m] / args.calls:.1f} forward passes per call")
    print(f"scores: max difference {worst:.2e}")
    print("command: python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]))
    print(f"without / with merging, seconds per call: {med[False] / med[True]:.3f}x")
    _record.record("prefix_chains", {"seconds_without": med[False], "seconds_with": med[True],
                                     "max_score_diff": worst}, med[False] / med[True],
                   goal="merging chains of shared prefixes faster than scoring each link, same scores")


if __name__ == "__main__":
    main()
