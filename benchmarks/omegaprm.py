"""OmegaPRM tree labels against binary search and linear Monte Carlo, on the same traces and rollouts.

    python benchmarks/omegaprm.py                         # SmolLM2 (the default policy), 12 problems x 4, k=4
    python benchmarks/omegaprm.py --problems 32 --k 8     # bigger
    python benchmarks/omegaprm.py --quick                 # a fake policy, seconds, no model

1. Traces: ``--problems`` problems of the built-in ``arith`` environment (``--steps`` operations),
   ``--per-problem`` sampled solutions each from the policy (``prmkit generate``'s sampling, seeded;
   symbolic labels with ``strict_path=True`` are the ground truth). The solutions of one problem are
   siblings in ``omegaprm``'s tree.
2. ``mc`` labels them first (``k`` rollouts from every step prefix) into a label store; ``binary`` and
   ``omegaprm`` then label copies of the same traces with the same policy, ``k`` and seed against the
   same store. Rollout ``r`` of prefix ``p`` of trace ``T`` has one seed whatever the labeler, so they
   read the very rollouts they would have generated (a subset of ``mc``'s): the three compare on
   identical samples, and the run pays only ``mc``'s generation. Each method's rollouts are those its
   labels used (``LabelReport.rollouts``), whether generated or read back.
3. Each is compared with the symbolic labels: first-error accuracy (the first step labelled wrong, or
   "none", equals the symbolic one) with its 95% Wilson interval, rollouts per trace, and how often
   ``omegaprm`` and ``binary`` disagree (paired, same traces). The ratio of ``omegaprm``'s rollouts per
   trace to ``mc``'s is printed last, after the command that reproduces the run. Two variants of
   ``omegaprm`` run on the same rollouts too: without sibling traces, and with ``search=descend``.

``--quick`` uses ``label_cost.py``'s fake policy (continues a prefix correctly with probability 0.7
when every step is right, 0.05 otherwise, writing only the answer: nothing is shared) on reference
solutions with one corrupted step in about 60% of them: it checks the machinery, not SmolLM2.
"""

from __future__ import annotations

import argparse
import copy
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _record  # benchmarks/_record.py: notes the load average now; record() at the end
from label_cost import FakeArithPolicy, evaluate, quick_traces

from prmkit.envs import ArithConfig, ArithEnv, PromptBuilder
from prmkit.eval import wilson_interval
from prmkit.generate import sample_traces
from prmkit.labelers import LabelStore, get_labeler
from prmkit.policies import SamplingParams, default_backend, get_policy
from prmkit.trace import read_traces


def first_error_hits(traces, source: str) -> list[bool]:
    out = []
    for t in traces:
        labs = [s.label(source) for s in t.steps]
        first = next((i for i, lab in enumerate(labs) if lab is not None and lab.positive is False), -1)
        out.append(first == t.first_error("symbolic"))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=None, help="arith problems (12; quick 40)")
    ap.add_argument("--per-problem", type=int, default=None,
                    help="sampled traces per problem, siblings in one tree (4; quick 1)")
    ap.add_argument("--k", type=int, default=4, help="rollouts per prefix (samples per decided prefix)")
    ap.add_argument("--steps", type=int, default=3, help="arith operations per problem")
    ap.add_argument("--max-new-tokens", type=int, default=96, help="longest trace and rollout")
    ap.add_argument("--max-rollouts", type=int, default=64, help="binary, omegaprm: rollouts per trace, at most")
    ap.add_argument("--seed", type=int, default=0, help="sampling and rollout seed")
    ap.add_argument("--env-seed", type=int, default=0, help="which arith problems")
    ap.add_argument("--quick", action="store_true", help="a fake policy instead of SmolLM2")
    ap.add_argument("--policy", default=None, help="backend (default: prmkit.policies.default_backend())")
    ap.add_argument("--work", type=Path, default=None,
                    help="working folder (default: a new temporary one); a rerun with the same folder resumes "
                    "the sampling and reads the rollouts stored there")
    args = ap.parse_args(argv)
    n_problems = args.problems or (40 if args.quick else 12)
    per = args.per_problem or (1 if args.quick else 4)
    cfg = ArithConfig(steps=args.steps, seed=args.env_seed)
    problems = ArithEnv(cfg).problems(n_problems)
    tmp = args.work or Path(tempfile.mkdtemp(prefix="prmkit-omegaprm-"))
    tmp.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    if args.quick:
        policy: Any = FakeArithPolicy(problems)
        traces = [t for r in range(per) for t in quick_traces(problems, args.seed + r)]
        for i, t in enumerate(traces):  # siblings of one problem get distinct ids
            t.id = f"{t.id}.{i // len(problems)}"
    else:
        policy = get_policy(args.policy or default_backend(), progress=False)
        shots = policy.prompt_shots if policy.prompt_shots is not None else 2
        sample_traces(problems, policy, tmp / "traces.jsonl", prompts=PromptBuilder("arith", shots, config=cfg),
                      params=SamplingParams(n=per, max_new_tokens=args.max_new_tokens, temperature=0.7,
                                            seed=args.seed), progress=False)
        traces = list(read_traces(tmp / "traces.jsonl"))
    sample_s = time.perf_counter() - t0
    wrong = sum(t.first_error("symbolic") != -1 for t in traces)
    model = getattr(policy, "model_id", None) or getattr(policy, "name", "?")
    print(f"policy {model}; {len(traces)} traces of arith ({len(problems)} problems x {per}, {args.steps} steps, "
          f"seed {args.env_seed}), "
          f"{sum(len(t.steps) for t in traces)} steps, {wrong} with a symbolic error; "
          f"{'built' if args.quick else 'sampled'} in {sample_s:.1f} s", flush=True)

    common = {"k": args.k, "seed": args.seed, "max_new_tokens": args.max_new_tokens}
    budget = {"max_rollouts": args.max_rollouts}
    # (row name, labeler, label source, arguments); the omegaprm default is the row the ratio is of
    methods = [("mc", "mc", "mc_hard", {}), ("binary", "binary", "binary_search", budget),
               ("omegaprm", "omegaprm", "binary_search", budget),
               ("omegaprm no siblings", "omegaprm", "binary_search", {**budget, "siblings": False}),
               ("omegaprm descend", "omegaprm", "binary_search", {**budget, "search": "descend"})]
    rows, hits = [], {}
    with LabelStore(tmp / "rollouts.sqlite") as store:
        for method, name, source, extra in methods:
            labelled = copy.deepcopy(traces)
            with get_labeler(name, policy=policy, **common, **extra) as labeler:
                report = labeler.label(labelled, store=store)
            hits[method] = first_error_hits(labelled, source)
            ok = sum(hits[method])
            lo, hi = wilson_interval(ok, len(traces))
            q = evaluate(labelled, source)
            rows.append({"method": method, "first_error_acc": ok / len(traces), "interval": [lo, hi],
                         "agreement": q["agreement"], "coverage": q["coverage"],
                         "rollouts": report.rollouts / len(traces), "generated": report.generated,
                         "tokens": report.tokens / len(traces), "seconds": report.wall_seconds,
                         "counts": dict(report.counts)})
            print(f"{method}: {report.summary()}", flush=True)

    print(f"\n{'method':<20} {'first-error acc':>15} {'95% interval':>15} {'step agreement':>14} "
          f"{'coverage':>8} {'rollouts/trace':>14} {'tokens/trace':>12}")
    for r in rows:
        interval = "[{:.3f}, {:.3f}]".format(*r["interval"])
        print(f"{r['method']:<20} {r['first_error_acc']:>15.3f} {interval:>15} "
              f"{r['agreement']:>14.3f} {r['coverage']:>8.3f} {r['rollouts']:>14.2f} {r['tokens']:>12.1f}")
    mc, binary, omega = rows[:3]
    only_omega = sum(o and not b for o, b in zip(hits["omegaprm"], hits["binary"], strict=True))
    only_binary = sum(b and not o for o, b in zip(hits["omegaprm"], hits["binary"], strict=True))
    shared = omega["counts"].get("shared_decisions", 0)
    print(f"\nomegaprm vs binary, same traces: {only_omega} first errors right only by omegaprm, "
          f"{only_binary} only by binary; {shared} prefixes decided by shared rollouts alone")
    binary_ratio = binary["rollouts"] / mc["rollouts"] if mc["rollouts"] else float("nan")
    ratio = omega["rollouts"] / mc["rollouts"] if mc["rollouts"] else float("nan")
    goal_met = ratio <= 0.25 and omega["first_error_acc"] >= binary["first_error_acc"]
    print(f"goal (accuracy >= binary's at <= 0.25x mc's rollouts): {'met' if goal_met else 'NOT met'}")
    print(f"\nreproduce: {shlex.join(['python', 'benchmarks/omegaprm.py', *sys.argv[1:]])}")
    print(f"ratio rollouts binary/linear MC: {binary_ratio:.3f}")
    print(f"ratio rollouts omegaprm/linear MC: {ratio:.3f}")
    _record.record("omegaprm", {"rows": rows, "traces": len(traces), "problems": len(problems),
                                "per_problem": per, "wrong_traces": wrong, "k": args.k,
                                "steps": args.steps, "quick": args.quick, "model": model,
                                "only_omegaprm_right": only_omega, "only_binary_right": only_binary,
                                "binary_ratio": binary_ratio, "goal_met": goal_met}, ratio,
                   goal="omegaprm first-error accuracy >= binary's at <= 0.25x linear Monte Carlo's rollouts")


if __name__ == "__main__":
    main()
