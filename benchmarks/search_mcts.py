"""MCTS against best-of-N and beam search at about the same generated-token budget, on ``arith``.

    python benchmarks/search_mcts.py                          # 5 problems, MCTS 8 simulations x 3
    python benchmarks/search_mcts.py --problems 20 --simulations 16

1. Policy: the default local backend (``load_policy()``: SmolLM2-135M-Instruct, prmkit's torch decode
   loop), prompts as ``prmkit search`` builds them. Verifier: the shipped PRM (``--model default``,
   a :class:`~prmkit.scoring.PrefixCachingScorer`), as ``prmkit search --model default`` loads it,
   loaded afresh for each method so no method's scored tokens profit from another's cache.
2. Problems: ``--problems`` problems of the built-in ``arith`` environment (``prmkit search --env
   arith`` defaults: 3 steps, ``+-*``, operands ≤ 20, env seed 0).
3. Methods, all in this process with the same policy and scorer:
   - ``mcts``: ``prmkit.search.mcts`` with ``--simulations`` × ``--expansions``;
   - ``bon``: best-of-N by the PRM (aggregate ``last``, as the searches): whole solutions sampled one
     at a time, per problem, until their generated tokens reach what MCTS generated on that problem
     (so at least MCTS's budget, by at most one solution);
   - ``beam``: beam search ``--beam-width`` × ``--expansions`` (its budget is what it is; printed).
4. Printed: accuracy (right / judged) with a 95 % Wilson interval, generated and scored tokens per
   problem, seconds; the command; last the ratio MCTS accuracy / best-of-N accuracy (None when
   best-of-N got none right). With a handful of problems the intervals are wide: read the ratio with
   them.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.envs import PromptBuilder
from prmkit.eval import wilson_interval
from prmkit.generate import load_problems
from prmkit.policies import SamplingParams, load_policy
from prmkit.scoring import load_scorer, trace_score
from prmkit.search import beam_search, mcts
from prmkit.search._common import ComputeMeter, finish_trace
from prmkit.trace_queries import is_correct, problem_key


def best_of_n(problem, policy, scorer, prompts, budget: int, args) -> tuple[bool | None, dict[str, int]]:
    meter = ComputeMeter(policy, scorer)
    pid = problem_key(problem)
    params = SamplingParams(n=1, max_new_tokens=args.max_depth * args.step_tokens,
                            temperature=args.temperature, seed=args.seed)
    traces = []
    while meter.generated_tokens < budget or not traces:
        [[c]] = meter.generate([prompts.request(problem, key=f"{pid}/bon/{len(traces)}")], params)
        traces.append(finish_trace(problem, c.text, trace_id=f"{pid}/bon/{len(traces)}",
                                   source=policy.model_id, tokens=c.num_tokens))
    scored = [t for t in traces if t.steps]
    values = [trace_score(s, "last") for s in meter.score(scored)] if scored else []
    best = max(range(len(scored)), key=lambda i: -1.0 if values[i] is None else values[i]) if scored else None
    ok = None if best is None else is_correct(scored[best])
    return ok, {**meter.to_dict(), "samples": len(traces)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=5)
    ap.add_argument("--simulations", type=int, default=8)
    ap.add_argument("--expansions", type=int, default=3)
    ap.add_argument("--c-puct", type=float, default=1.0)
    ap.add_argument("--beam-width", type=int, default=2)
    ap.add_argument("--max-depth", type=int, default=6)
    ap.add_argument("--step-tokens", type=int, default=48)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    problems, cfg = load_problems(env="arith", n=args.problems)
    policy = load_policy()
    prompts = PromptBuilder.for_policy(policy, config=cfg)
    common = {"max_depth": args.max_depth, "step_tokens": args.step_tokens,
              "temperature": args.temperature, "seed": args.seed}
    rows: dict[str, dict[str, float]] = {}
    budgets = []
    for name in ("mcts", "bon", "beam"):
        # A fresh scorer per method: a PrefixCachingScorer's cache would let later methods reuse what
        # earlier ones ran (the rendered problems), counting fewer scored tokens than they cost.
        scorer = load_scorer("model", "default")
        right = judged = gen = scored = 0
        t0 = time.perf_counter()
        for i, p in enumerate(problems):
            if name == "mcts":
                r = mcts(p, policy, scorer, prompts, simulations=args.simulations,
                         expansions=args.expansions, c_puct=args.c_puct, **common)
                ok, compute = is_correct(r.trace), r.compute
                budgets.append(r.generated_tokens)
            elif name == "beam":
                r = beam_search(p, policy, scorer, prompts, beam_width=args.beam_width,
                                expansions=args.expansions, **common)
                ok, compute = is_correct(r.trace), r.compute
            else:
                ok, compute = best_of_n(p, policy, scorer, prompts, budgets[i], args)
            judged += ok is not None
            right += bool(ok)
            gen += compute["generated_tokens"]
            scored += compute["scored_tokens"]
        secs = time.perf_counter() - t0
        k = max(1, len(problems))
        lo, hi = wilson_interval(right, judged)
        rows[name] = {"right": right, "judged": judged, "accuracy": right / judged if judged else None,
                      "ci_low": lo, "ci_high": hi, "generated_per_problem": gen / k,
                      "scored_per_problem": scored / k, "seconds": secs}
        acc = f"{right}/{judged}" + (f" = {right / judged:.0%}" if judged else "")
        print(f"{name:5s} accuracy {acc} (95% Wilson {lo:.0%}-{hi:.0%}); per problem {gen / k:.0f} "
              f"generated, {scored / k:.0f} scored tokens; {secs:.0f} s", flush=True)
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    m, b = rows["mcts"]["accuracy"], rows["bon"]["accuracy"]
    ratio = m / b if m is not None and b else None
    print(f"mcts / best-of-N accuracy at about equal generated tokens: "
          f"{'n/a' if ratio is None else f'{ratio:.2f}'}")
    _record.record("search_mcts", {**{f"{n}_{k}": v for n, r in rows.items() for k, v in r.items()},
                                   "problems": len(problems)}, ratio,
                   goal="MCTS accuracy >= best-of-N's at the same generated-token budget")


if __name__ == "__main__":
    main()
