"""Labeling cost: binary search for the first error against linear Monte Carlo, on the same traces.

    python benchmarks/label_cost.py                       # SmolLM2 (the default policy), 8 traces, k=4
    python benchmarks/label_cost.py --traces 32 --k 8     # bigger
    python benchmarks/label_cost.py --quick               # a fake policy, seconds, no model
    python benchmarks/label_cost.py --compare-backends    # Monte Carlo rollouts/s: ct2, torch against hf

1. Traces: ``--traces`` problems of the built-in ``arith`` environment (``--steps`` operations), one
   sampled solution each from the policy (``prmkit generate``'s sampling: seeded, steps one per line,
   symbolic labels with ``strict_path=True`` — the ground truth here).
2. The same traces are labelled by ``binary`` (first error by binary search, at most
   ``--max-rollouts`` rollouts per trace) and by ``mc`` (Math-Shepherd, ``k`` rollouts from every step
   prefix), each with a fresh label store, the same policy, ``k`` and seed.
3. Each is compared with the symbolic labels: first-error accuracy (the first step labelled wrong, or
   "none", equals the symbolic one), step agreement (labelled steps whose verdict equals the symbolic
   verdict; ``mc`` uses ``mc_hard``), coverage (steps labelled), rollouts and tokens per trace, and wall
   time. The ratio of rollouts is printed last, after the command that reproduces the run.

``--compare-backends`` instead labels the same SmolLM2 traces with ``mc`` once per local backend
(``hf``, ``ct2``, ``torch``; fresh stores, same ``k``, seed and token limit), each after an untimed
warm-up (two of the traces, another seed: what a process pays once, torch.compile's graphs among it),
prints rollouts/s and the labels' agreement with the symbolic ones for each, and the ratios of
rollouts/s to ``hf`` last (also with the warm-up counted), the default backend's on the last line.

``--quick`` replaces the model with a fake policy that continues a prefix correctly with probability
0.7 when every step so far is right (by the symbolic checker) and 0.05 otherwise, on reference
solutions with one corrupted step in about 60% of them: it checks the machinery, not SmolLM2.
"""

from __future__ import annotations

import argparse
import copy
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.envs import ArithConfig, ArithEnv, PromptBuilder, SymbolicChecker
from prmkit.generate import completion_to_trace, sample_traces
from prmkit.labelers import LabelStore, PolicySpec, get_labeler
from prmkit.policies import (
    Completion,
    GenerationRequest,
    SamplingParams,
    default_backend,
    derive_seed,
    get_policy,
)
from prmkit.trace import Problem, Trace, binarize, read_traces


class FakeArithPolicy:
    """``--quick``: continues a prefix of an ``arith`` problem to the right answer with probability
    ``p_right`` when the symbolic checker finds every step of the prefix right, else ``p_lucky``."""

    name = "fake_arith"
    model_id = "fake-arith-oracle"

    def __init__(self, problems: Sequence[Problem], p_right: float = 0.7, p_lucky: float = 0.05):
        self.by_text = {p.text: p for p in problems}
        self.p_right, self.p_lucky = p_right, p_lucky

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        out = []
        for req in requests:
            problem = self.by_text[req.messages[-1]["content"]]
            steps = [s for s in req.prefix.splitlines() if s.strip()]
            checks = SymbolicChecker.for_problem(problem, strict_path=True).check_steps(steps)
            p = self.p_right if all(c.ok for c in checks) else self.p_lucky
            row = []
            for r in range(params.n):
                u = derive_seed(params.seed, req.key, r) / 2**32
                answer = problem.answer if u < p else str(int(problem.answer) + 1)
                text = f"The answer is {answer}."
                row.append(Completion(text, num_tokens=len(text.split()), prompt_tokens=50))
            out.append(row)
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model_id, "p_right": self.p_right,
                "p_lucky": self.p_lucky}


def quick_traces(problems: Sequence[Problem], seed: int) -> list[Trace]:
    """Reference solutions, one step corrupted (result + 1, answer + 1) in about 60% of them."""
    rng = random.Random(seed)
    out = []
    for p in problems:
        lines = (p.solution or "").splitlines()
        if rng.random() < 0.6:
            j = rng.randrange(len(lines) - 1)
            after = p.meta["arith"]["ops"][j]["after"]
            lines[j] = lines[j].replace(f"= {after}.", f"= {after + 1}.")
            lines[-1] = f"The answer is {int(p.answer) + 1}."
        t = completion_to_trace(p, Completion("\n".join(lines)), trace_id=f"{p.id}#0",
                                source="quick", meta={"problem_id": p.id})
        out.append(t)
    return out


def evaluate(traces: Sequence[Trace], source: str, threshold: float = 0.5) -> dict[str, float]:
    """First-error accuracy, step agreement and coverage of ``source`` against ``symbolic``
    (soft labels count as right at ``threshold`` or above; advantages use 0)."""
    first_ok = agree = labelled = steps = 0
    for t in traces:
        verdicts = [binarize(s.label(source), threshold=threshold) for s in t.steps]
        first = next((i for i, v in enumerate(verdicts) if v is False), -1)
        first_ok += first == t.first_error("symbolic")
        for s, v in zip(t.steps, verdicts, strict=True):
            steps += 1
            if v is not None:
                labelled += 1
                agree += v == binarize(s.label("symbolic"))
    return {"first_error_acc": first_ok / len(traces), "agreement": agree / max(1, labelled),
            "coverage": labelled / max(1, steps)}


def compare_backends(traces: Sequence[Trace], args: argparse.Namespace, tmp: Path) -> None:
    """Monte Carlo labels of the same traces with each local backend: rollouts/s, agreement."""
    rates, first = {}, {}
    for backend in ("hf", "ct2", "torch"):
        policy = get_policy(backend, progress=False)
        # Warm-up, not timed: two traces labelled into a store of their own. It pays what a process
        # pays once (caches, and torch.compile's graphs where the torch loop compiles); the rate
        # that includes it is printed too.
        with LabelStore(tmp / f"warm-{backend}.sqlite") as store, \
                get_labeler("mc", policy=policy, k=args.k, seed=args.seed + 1,
                            max_new_tokens=args.max_new_tokens) as labeler:
            t0 = time.perf_counter()
            warm = labeler.label(copy.deepcopy(traces[:2]), store=store)
            warm_s = time.perf_counter() - t0
        labelled = copy.deepcopy(traces)
        with LabelStore(tmp / f"speed-{backend}.sqlite") as store, \
                get_labeler("mc", policy=policy, k=args.k, seed=args.seed,
                            max_new_tokens=args.max_new_tokens) as labeler:
            t0 = time.perf_counter()
            report = labeler.label(labelled, store=store)
            seconds = time.perf_counter() - t0
        q = evaluate(labelled, "mc_hard")
        rates[backend] = report.rollouts / seconds
        first[backend] = (report.rollouts + warm.rollouts) / (seconds + warm_s)
        print(f"{backend:>4}: {report.rollouts} rollouts, {report.tokens} tokens in {seconds:.1f} s = "
              f"{rates[backend]:.2f} rollouts/s, {report.tokens / seconds:.1f} tokens/s; mc_hard vs symbolic: "
              f"step agreement {q['agreement']:.3f}, first-error acc {q['first_error_acc']:.3f}; "
              f"warm-up {warm.rollouts} rollouts in {warm_s:.1f} s (with it: {first[backend]:.2f} rollouts/s)",
              flush=True)
        del policy
    print(f"\nreproduce: {shlex.join(['python', 'benchmarks/label_cost.py', *sys.argv[1:]])}")
    for backend in ("ct2", "torch"):
        print(f"rollouts/s {backend}/hf: {rates[backend] / rates['hf']:.2f} "
              f"(the warm-up counted: {first[backend] / first['hf']:.2f})")
    default = default_backend()
    print(f"ratio rollouts/s default ({default})/hf: {rates[default] / rates['hf']:.2f}")
    _record.record("label_cost_backends", {"rollouts_per_s": rates, "with_warmup": first, "default_backend": default,
                                           "traces": len(traces), "k": args.k}, rates[default] / rates["hf"],
                   goal="Monte Carlo rollouts/s of the default backend against hf's, same labels' quality")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=None, help="problems, one trace each (8; quick 40)")
    ap.add_argument("--k", type=int, default=4, help="rollouts per visited prefix")
    ap.add_argument("--steps", type=int, default=3, help="arith operations per problem")
    ap.add_argument("--max-new-tokens", type=int, default=96, help="longest trace and rollout")
    ap.add_argument("--max-rollouts", type=int, default=64, help="binary: rollouts per trace, at most")
    ap.add_argument("--seed", type=int, default=0, help="sampling and rollout seed")
    ap.add_argument("--env-seed", type=int, default=0, help="which arith problems")
    ap.add_argument("--workers", type=int, default=0,
                    help="hf: generate in N worker processes (each loads the model); 0 = here")
    ap.add_argument("--quick", action="store_true", help="a fake policy instead of SmolLM2")
    ap.add_argument("--compare-backends", action="store_true",
                    help="Monte Carlo rollouts/s of the ct2 and torch backends against hf on the same traces")
    ap.add_argument("--policy", default=None, help="backend for sampling and labeling (default: "
                    "prmkit.policies.default_backend())")
    ap.add_argument("--all", action="store_true",
                    help="also advantage, judge (the policy as its own judge) and consensus, for the quality table")
    args = ap.parse_args(argv)
    n_traces = args.traces or (40 if args.quick else 8)
    cfg = ArithConfig(steps=args.steps, seed=args.env_seed)
    problems = ArithEnv(cfg).problems(n_traces)
    tmp = Path(tempfile.mkdtemp(prefix="prmkit-label-cost-"))

    t0 = time.perf_counter()
    if args.quick:
        policy: Any = FakeArithPolicy(problems)
        traces = quick_traces(problems, args.seed)
    else:
        policy = get_policy(args.policy or default_backend(), progress=False)
        shots = policy.prompt_shots if policy.prompt_shots is not None else 2
        sample_traces(problems, policy, tmp / "traces.jsonl", prompts=PromptBuilder("arith", shots, config=cfg),
                      params=SamplingParams(n=1, max_new_tokens=args.max_new_tokens, temperature=0.7,
                                            seed=args.seed), progress=False)
        traces = list(read_traces(tmp / "traces.jsonl"))
        if args.workers:
            del policy  # workers load their own copy
            policy = PolicySpec(args.policy or default_backend(), {"progress": False})
    sample_s = time.perf_counter() - t0
    if args.compare_backends:
        del policy
        return compare_backends(traces, args, tmp)
    wrong = sum(t.first_error("symbolic") != -1 for t in traces)
    model = getattr(policy, "model_id", "hf")
    print(f"policy {model}; {len(traces)} traces of arith ({args.steps} steps, seed {args.env_seed}), "
          f"{sum(len(t.steps) for t in traces)} steps, {wrong} with a symbolic error; "
          f"{'built' if args.quick else 'sampled'} in {sample_s:.1f} s")

    rows = []
    common = {"k": args.k, "seed": args.seed, "max_new_tokens": args.max_new_tokens,
              "workers": args.workers}
    methods = [("binary", "binary_search", {"max_rollouts": args.max_rollouts}, 0.5),
               ("mc", "mc_hard", {}, 0.5)]
    if args.all and not args.quick:
        judge = {"seed": args.seed, "workers": args.workers}
        methods += [("advantage", "advantage", {}, 0.0), ("judge", "judge", {"_common": judge}, 0.5),
                    ("consensus", "consensus", {}, 0.5)]
    for method, source, extra, threshold in methods:
        labelled = copy.deepcopy(traces)
        kwargs = extra.pop("_common") if "_common" in extra else common
        # advantage and consensus reuse the Monte Carlo rollouts (same policy, k, seed: same store keys)
        store_name = "mc" if method in ("advantage", "consensus") else method
        with LabelStore(tmp / f"{store_name}.sqlite") as store, \
                get_labeler(method, policy=policy, **kwargs, **extra) as labeler:
            report = labeler.label(labelled, store=store)
        rows.append({"method": method, **evaluate(labelled, source, threshold),
                     "rollouts": report.rollouts / len(traces), "tokens": report.tokens / len(traces),
                     "seconds": report.wall_seconds, "budget_exhausted": report.counts["budget_exhausted"]})

    print(f"\n{'method':<8} {'first-error acc':>15} {'step agreement':>14} {'coverage':>8} "
          f"{'rollouts/trace':>14} {'tokens/trace':>12} {'wall s':>7}")
    for r in rows:
        print(f"{r['method']:<8} {r['first_error_acc']:>15.3f} {r['agreement']:>14.3f} "
              f"{r['coverage']:>8.3f} {r['rollouts']:>14.2f} {r['tokens']:>12.1f} {r['seconds']:>7.1f}")
    if rows[0]["budget_exhausted"]:
        print(f"(binary: {rows[0]['budget_exhausted']} searches stopped by --max-rollouts)")
    binary, mc = rows[:2]
    ratio = binary["rollouts"] / mc["rollouts"] if mc["rollouts"] else float("nan")
    print(f"\nreproduce: {shlex.join(['python', 'benchmarks/label_cost.py', *sys.argv[1:]])}")
    print(f"ratio rollouts binary/linear MC: {ratio:.3f}")
    _record.record("label_cost", {"rows": rows, "traces": len(traces), "k": args.k, "quick": args.quick},
                   ratio, goal="binary search at most 0.5× linear Monte Carlo's rollouts, same first-error accuracy")


if __name__ == "__main__":
    main()
