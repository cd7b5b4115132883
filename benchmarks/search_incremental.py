"""Step-level beam search: incremental scoring (PrefixCachingScorer) against re-scoring whole prefixes.

    python benchmarks/search_incremental.py                        # 1 arith problem, depth 7, beam 2 x 4
    python benchmarks/search_incremental.py --beam 4 --expand 4    # wider

1. PRM: as in ``benchmarks/score_bon.py``: SmolLM2-135M-Instruct with a seeded random 2-class head,
   float32 on the CPU, Qwen2.5-Math-PRM's input convention (``--convention``).
2. Search: ``--problems`` problems of the built-in ``arith`` environment with 6 operations each, so a
   solution has 7 steps (6 operations and "The answer is X."): beam search of depth 7. At every depth
   each of the ``--beam`` beams is extended by ``--expand`` scripted next steps (no policy model, so
   only scoring is timed): the right next operation from the beam's own running value in the
   reference wording or another one, or a slip (a wrong result that later steps carry on from); at
   the last depth, the beam's answer or a wrong one. Candidates are ranked by the ``--aggregate`` of
   their step scores (ties by candidate order) and the best ``--beam`` are kept.
3. Methods, each running the whole search on the same candidates:
   - ``rescore``: ``RewardModel.score`` on every candidate at every depth (whole prefixes, batched);
   - ``incremental``: one ``PrefixCachingScorer`` for the whole search: a candidate runs only its new
     step on top of its beam's cached KV.
   The beams each method keeps must be identical at every depth (checked; scores differ by float
   rounding only, max difference printed).
4. Printed: seconds and tokens run per method, the command line, and last the speed-up.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from collections.abc import Callable, Sequence

import _record  # benchmarks/_record.py: notes the load average now; record() at the end
from score_bon import apply, load_prm, operations, step_text  # benchmarks/ is on sys.path as a script

from prmkit.envs import ArithConfig, ArithEnv
from prmkit.models import RewardModel
from prmkit.scoring import PrefixCachingScorer, StepScorer, get_aggregator
from prmkit.trace import Problem, Step, Trace

Beam = tuple[tuple[str, ...], int]  # (steps so far, the running value they reached)


def propose(problem: Problem, beam: Beam, depth: int, expand: int, seed: int) -> list[Beam]:
    """``expand`` scripted next steps for ``beam`` (a pure function of its arguments)."""
    steps, value = beam
    rng = random.Random(f"{seed}:{problem.id}:{depth}:{'|'.join(steps)}")
    ops = operations(problem)
    if depth == len(ops):
        answers = [value, value + 1, value - 1, value + 10, value * 2, value - 10]
        return [(steps + (f"The answer is {a}.",), a) for a in answers[:expand]]
    desc, op, operand = ops[depth]
    right = apply(op, value, operand)
    slips = [right + d for d in rng.sample([-10, -2, -1, 1, 2, 10], 3)]
    variants = [(0, right), (1, right), (2, right), (0, slips[0]), (1, slips[1]), (2, slips[2])]
    rng.shuffle(variants)
    return [(steps + (step_text(desc, op, value, operand, after, style),), after)
            for style, after in variants[:expand]]


def beam_search(scorer: StepScorer, problem: Problem, *, beam: int, expand: int, seed: int,
                aggregate: Callable[[Sequence[float | None]], float | None]
                ) -> tuple[list[list[tuple[str, ...]]], list[list[float | None]]]:
    """The beams kept at every depth, and every candidate's step scores (in order)."""
    beams: list[Beam] = [((), problem.meta["arith"]["start"])]
    kept: list[list[tuple[str, ...]]] = []
    all_scores: list[list[float | None]] = []
    for depth in range(len(operations(problem)) + 1):
        cands = [c for b in beams for c in propose(problem, b, depth, expand, seed)]
        traces = [Trace(id=f"{problem.id}-d{depth}-{i}", problem=problem, steps=[Step(s) for s in c[0]])
                  for i, c in enumerate(cands)]
        scores = scorer.score(traces)
        all_scores += scores
        value = [aggregate(s) for s in scores]
        order = sorted(range(len(cands)), key=lambda i: (-(value[i] if value[i] is not None else -1), i))
        beams = [cands[i] for i in order[:beam]]
        kept.append([b[0] for b in beams])
    return kept, all_scores


class Rescore:
    """``RewardModel.score`` as a StepScorer that counts the tokens it runs."""

    def __init__(self, rm: RewardModel, batch_size: int) -> None:
        self.rm, self.batch_size = rm, batch_size
        self.kind, self.name = rm.kind, rm.name
        self.tokens = 0

    def score(self, traces: Sequence[Trace]) -> list[list[float | None]]:
        self.tokens += sum(len(self.rm.encode(t)) for t in traces)
        return self.rm.score(traces, batch_size=self.batch_size)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=1)
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--expand", type=int, default=4, help="next steps per beam (at most 6)")
    ap.add_argument("--aggregate", default="min")
    ap.add_argument("--convention", default="qwen2.5-math-prm")
    ap.add_argument("--backbone", default="smollm2", help="tiny: check the script in seconds")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on a shared machine, more threads wait on each other)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    problems = ArithEnv(ArithConfig(steps=6, seed=args.seed)).problems(args.problems)
    rm = load_prm(args.convention, "random", args.seed, args.backbone)
    agg = get_aggregator(args.aggregate)
    depth = len(operations(problems[0])) + 1
    print(f"PRM: {args.backbone} + random 2-class head, convention {args.convention}, float32, "
          f"{torch.get_num_threads()} threads")
    print(f"beam search: {args.problems} problem(s), depth {depth}, beam {args.beam} x {args.expand} "
          f"next steps = {args.beam * args.expand} candidates per depth, ranked by {args.aggregate}")
    with torch.inference_mode():  # warm-up: first-call allocations and kernel selection
        rm.model(input_ids=torch.tensor([[rm.tokenizer.pad_token_id] * 16]))

    rescore = Rescore(rm, args.batch_size)
    incremental = PrefixCachingScorer(rm, batch_size=args.batch_size)
    times, kept, scores = {}, {}, {}
    for name, scorer in (("rescore", rescore), ("incremental", incremental)):
        t0 = time.perf_counter()
        kept[name], scores[name] = [], []
        for p in problems:
            k, s = beam_search(scorer, p, beam=args.beam, expand=args.expand, seed=args.seed, aggregate=agg)
            kept[name].append(k)
            scores[name] += s
        times[name] = time.perf_counter() - t0

    diff = max(abs(a - b) for x, y in zip(scores["rescore"], scores["incremental"], strict=True)
               for a, b in zip(x, y, strict=True) if a is not None and b is not None)
    st = incremental.stats
    print(f"{'method':<12} {'seconds':>8} {'tokens run':>10}")
    print(f"{'rescore':<12} {times['rescore']:8.2f} {rescore.tokens:10d}")
    print(f"{'incremental':<12} {times['incremental']:8.2f} {st.tokens_computed:10d}")
    print(f"incremental: {st.forward_passes} forward passes, {st.tokens_reused} of {st.tokens_requested} "
          f"tokens reused ({st.tokens_reused / st.tokens_requested:.0%}), {st.cache_hits} cache hits, "
          f"{incremental.cached_tokens} tokens cached at the end")
    same = kept["rescore"] == kept["incremental"]
    print(f"chosen beams identical at every depth: {'yes' if same else 'NO'}; "
          f"max score difference {diff:.2e}")
    best = kept["incremental"][0][-1][0]
    print("best final beam (problem 1):", " | ".join(best))
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"speed-up of incremental over re-scoring whole prefixes: "
          f"{times['rescore'] / times['incremental']:.2f}x")
    _record.record("search_incremental", {"seconds": times, "same_beams": same, "max_score_diff": diff},
                   times["rescore"] / times["incremental"], goal="incremental scoring faster than re-scoring, same beams")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
