"""Does active learning pay here? A simulated annotator labels ``arith`` steps under each queue strategy.

    python benchmarks/annotate_al.py --jobs 2 --threads 1  # the recorded run (minilm PRM, 3 seeds; 16 min on 2 cores)
    python benchmarks/annotate_al.py --error-rate 0.1     # an annotator wrong on 10% of the steps
    python benchmarks/annotate_al.py --quick              # the tiny PRM, 1 seed, small sets: the machinery

Per seed (each seed has its own problems, samples, seed set, label order and PRM initialisation):

1. Traces: ``--pool-problems`` train problems x ``--pool-n`` samples (the pool to label) and
   ``--heldout-problems`` held-out problems x 16 samples, from the built-in ``arith`` environment
   (``--steps`` operations), through prmkit's own generate path (``prmkit.generate.generate_file``:
   prompts, step splitting, answer checks, symbolic step labels) with a small scripted policy: it
   writes each operation as the reference does and, with probability ``--p-error`` per operation,
   makes one of the mistakes small policies make — a slip in the result, an operation applied to the
   wrong number (the one before last), or the wrong operation — and carries the mistake on. Nothing is
   downloaded; no language model runs.
2. The annotator is :func:`prmkit.annotate.simulate`: it takes traces from the labeling database's
   queue as a person would and answers each step with its symbolic label (the checker's verdict), wrong
   on purpose at ``--error-rate``. Every label it gives is counted against the budget.
3. Seed set (as in Lightman et al. 2023, whose active learning scored the pool with a PRM trained on
   labels gathered before): the first ``--seed-labels`` step labels are taken in a random order and
   are shared by every strategy. A PRM trained on them scores the pool (``seed_prm`` step scores);
   ``uncertainty``, ``convincing_wrong`` (aggregate ``min``) and ``disagreement`` order the rest of
   the pool by those scores, ``random`` goes on in its random order. ``disagreement`` compares the seed
   PRM with each step's *outcome* label (+1 on every step of a trace whose final answer is right, -1
   otherwise): the label every trace has for free (its answer checked against the reference),
   which is what a Monte Carlo label estimates when errors are carried on to the answer.
4. For each strategy and budget B in ``--budgets`` (the labels of a strategy grow: B = 200 holds the
   labels of B = 100): the labels are exported (:func:`prmkit.annotate.export_labels`, partly labelled
   traces included), a PRM is trained on them (the same backbone, optimizer steps and batch for every
   arm: ``--model``, ``--train-steps``), it scores the held-out traces, and the arm gets
   best-of-16 accuracy (PRM ``min`` aggregate) and step AUROC against the symbolic labels.
5. Intervals: the held-out problems of all seeds are pooled (each seed's problems are its own), and
   :func:`prmkit.eval.bon_curves` gives each arm's best-of-16 accuracy with its 95% bootstrap
   interval over those problems, and paired differences against ``random`` at 400; step AUROC
   (:func:`prmkit.eval.auroc`) gets a bootstrap interval from
   :func:`prmkit.eval.stratified_resamples` over the pooled steps (right and wrong steps resampled
   apart). Accuracy per seed is printed too.
6. The ratio, printed last: the labels the best strategy needs to reach ``random``'s best-of-16 accuracy
   at B = 400, divided by 400 (:func:`labels_to_match`: linear interpolation of the strategy's mean
   accuracy between the budgets it was measured at; a strategy already at the target at its smallest
   budget needs at most that budget, one that never reaches it within 400 has no ratio). The goal
   (issue 50): at most 0.40.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shlex
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

STRATEGIES = ("random", "uncertainty", "convincing_wrong", "disagreement")
SEED_KEY = "seed_prm"
OUTCOME = "outcome"


# -- the interpolation rule ---------------------------------------------------------------------------
def labels_to_match(curve: Mapping[int, float], target: float) -> float | None:
    """The labels a strategy needs to reach ``target`` accuracy, from its accuracy at the budgets
    measured (``{budget: accuracy}``): the smallest budget at or above the target when it is the
    first one measured (the curve says nothing below it: an upper bound), else the budget where the
    straight line between two consecutive measured budgets first reaches the target; None when no
    measured budget reaches it.

    >>> labels_to_match({100: 0.5, 200: 0.7, 400: 0.8}, 0.6)
    150.0
    >>> labels_to_match({100: 0.9, 200: 0.7}, 0.6), labels_to_match({100: 0.5, 400: 0.55}, 0.6)
    (100.0, None)
    """
    points = sorted(curve.items())
    if not points:
        return None
    b0, a0 = points[0]
    if a0 >= target:
        return float(b0)
    for (b1, a1), (b2, a2) in zip(points, points[1:], strict=False):
        if a2 >= target > a1:
            return b1 + (target - a1) / (a2 - a1) * (b2 - b1)
    return None


def best_ratio(curves: Mapping[str, Mapping[int, float]], baseline: str = "random", at: int = 400
               ) -> tuple[str | None, float | None, float | None]:
    """``(strategy, labels, labels / at)`` for the strategy other than ``baseline`` that reaches
    ``baseline``'s accuracy at ``at`` with the fewest labels (:func:`labels_to_match`); Nones when none
    does."""
    target = curves[baseline][at]
    found = [(need, name) for name, c in curves.items() if name != baseline
             if (need := labels_to_match(c, target)) is not None]
    if not found:
        return None, None, None
    need, name = min(found)
    return name, need, need / at


# -- the scripted policy ------------------------------------------------------------------------------
def _apply(op: str, before: int, operand: int) -> int:
    return {"+": before + operand, "-": before - operand, "*": before * operand}.get(
        op, before // operand if operand else before)


# Wordings of one operation (``varied``): the description and the equation in other orders and words.
# The equation is written the same way in each, so the symbolic checker reads every step alike.
_STEP_WORDINGS = ("{desc}: {eq}.", "{desc}, so {eq}.", "Next, {eq} ({low}).", "{eq}, because {low}.",
                  "We compute {eq}.", "{desc}. That gives {eq}.")
_ANSWER_WORDINGS = ("The answer is {v}.", "So the answer is {v}.", "Therefore, the answer is {v}.")


def sample_solution(problem: Any, rng: random.Random, p_error: float, wording: str = "reference") -> str:
    """One solution of an ``arith`` problem, each operation wrong with probability ``p_error`` (a slip
    in the result, the operation applied to the value before last, or another operation), the mistake
    carried on to the answer. ``wording="reference"`` writes every step as the reference does, so right
    samples of a problem are one text; ``"varied"`` draws each step's and the answer line's wording
    from a few (independently of any mistake), so right samples differ as a real policy's do."""
    if wording not in ("reference", "varied"):
        raise ValueError(f"wording must be 'reference' or 'varied', not {wording!r}")
    ref = (problem.solution or "").splitlines()
    ops = problem.meta["arith"]["ops"]
    value, previous = problem.meta["arith"]["start"], problem.meta["arith"]["start"]
    lines = []
    for line, o in zip(ref, ops, strict=False):
        desc, op, operand, before = line.split(":")[0], o["op"], o["operand"], value
        kind = rng.choice(("slip", "copy", "op")) if rng.random() < p_error else None
        if kind == "copy" and previous != value:
            before = previous
        elif kind == "op":
            op = rng.choice([x for x in "+-*" if x != op])
        after = _apply(op, before, operand)
        if kind == "slip":
            after += rng.choice([-10, -2, -1, 1, 2, 10])
        eq = f"{before} {op} {operand} = {after}"
        if wording == "varied":
            form = rng.choice(_STEP_WORDINGS)
            lines.append(form.format(desc=desc, eq=eq, low=desc[:1].lower() + desc[1:]))
        else:
            lines.append(f"{desc}: {eq}.")
        previous, value = value, after
    answer = rng.choice(_ANSWER_WORDINGS) if wording == "varied" else _ANSWER_WORDINGS[0]
    lines.append(answer.format(v=value))
    return "\n".join(lines)


def make_policy(problems: Sequence[Any], p_error: float, seed: int, wording: str = "reference") -> Any:
    """A ``scripted`` policy writing :func:`sample_solution` (seeded by seed, problem and sample)."""
    from prmkit.policies import ScriptedPolicy, derive_seed

    by_id = {p.id: p for p in problems}

    def write(request: Any, index: int) -> str:
        return sample_solution(by_id[request.key], random.Random(derive_seed(seed, request.key, index)), p_error,
                               wording)

    return ScriptedPolicy(write, model_id=f"arith-sample-like(p_error={p_error}, wording={wording})")


def make_traces(problems: Sequence[Any], n: int, args: argparse.Namespace, seed: int, out: Path) -> list[Any]:
    from prmkit.generate import generate_file
    from prmkit.policies import SamplingParams
    from prmkit.trace import read_traces

    generate_file(out, list(problems), make_policy(problems, args.p_error, seed, args.wording),
                  params=SamplingParams(n=n, seed=seed, max_new_tokens=200), arith_config=args.env,
                  problems_per_call=16, progress=False)
    return list(read_traces(out))


def add_outcome_labels(traces: Sequence[Any]) -> None:
    """Every step gets the trace's outcome (+1 right final answer, -1 wrong) as a label ``outcome``."""
    from prmkit.trace import StepLabel
    from prmkit.trace_queries import is_correct

    for t in traces:
        value = 1 if is_correct(t) else -1
        for s in t.steps:
            s.labels.append(StepLabel(value, source=OUTCOME, kind="hard", labeler="reference answer"))


# -- one arm: export, train, score --------------------------------------------------------------------
def train_prm(labels: Path, out: Path, args: argparse.Namespace, seed: int) -> Any:
    from prmkit.models import RewardModel
    from prmkit.train import TrainConfig, train

    train(TrainConfig(kind="prm", model=args.model, train=[str(labels)], label_source="human",
                      neutral="positive", causal=True, max_length=256, batch_size=args.batch_size,
                      lr=args.lr, warmup_ratio=0.1, epochs=1, max_steps=args.train_steps,
                      output_dir=str(out), log_every=1000, seed=seed, progress=False),
          log=lambda *a, **k: None)
    return RewardModel.from_pretrained(str(out))


def score(model: Any, traces: Sequence[Any], key: str) -> None:
    from prmkit.scoring import score_traces_or_skip

    skipped = score_traces_or_skip(model, list(traces), key, aggregate="min")
    if skipped:
        raise SystemExit(f"{len(skipped)} traces not scored by {key} (first: {skipped[0]})")


def copy_db(src: Path, dst: Path) -> None:
    """A copy of a labeling database (SQLite's backup: the WAL's pages included)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def arm_key(strategy: str, budget: int) -> str:
    return f"{strategy}@{budget}"


def run_seed(seed: int, args: argparse.Namespace, tmp: Path, say: Any) -> tuple[list[Any], dict[str, Any]]:
    """One seed: the pool and held-out traces, the seed set and its PRM, every arm. Returns the
    held-out traces with every arm's step scores (``strategy@B``) and what was spent."""
    from prmkit.annotate import export_labels, queue_file, simulate
    from prmkit.data import write
    from prmkit.envs import ArithEnv

    d = tmp / f"seed{seed}"
    d.mkdir()
    env_cfg = dataclasses.replace(args.env, seed=100 + seed)
    problems = ArithEnv(env_cfg).problems(args.pool_problems + args.heldout_problems)
    for p in problems:
        p.id = f"s{seed}-{p.id}"  # each seed's problems are its own units in the pooled bootstrap
    pool = make_traces(problems[:args.pool_problems], args.pool_n, args, seed, d / "pool.jsonl")
    heldout = make_traces(problems[args.pool_problems:], 16, args, seed + 1000, d / "heldout.jsonl")
    add_outcome_labels(pool)
    pool_file = d / "pool-outcome.jsonl"
    write(pool, pool_file, "prmkit")
    info: dict[str, Any] = {"pool_traces": len(pool), "pool_steps": sum(len(t.steps) for t in pool),
                            "pool_wrong_steps": sum(s.label("symbolic").value < 0 for t in pool for s in t.steps),
                            "heldout_traces": len(heldout), "seconds": {}}

    # the seed set: random order, shared by every strategy
    t0 = time.perf_counter()
    seed_db = d / "seed.sqlite"
    queue_file(pool_file, seed_db, strategy="random", seed=seed)
    simulate(seed_db, source="symbolic", budget=args.seed_labels, error_rate=args.error_rate, seed=seed)
    export_labels(seed_db, d / "seed-labels.jsonl", include_unfinished=True)
    seed_prm = train_prm(d / "seed-labels.jsonl", d / "prm-seed", args, seed)
    score(seed_prm, pool, SEED_KEY)
    del seed_prm
    shutil.rmtree(d / "prm-seed")  # a minilm checkpoint is 90 MB: 39 of them would fill the disk
    scored_file = d / "pool-scored.jsonl"
    write(pool, scored_file, "prmkit")
    info["seconds"]["seed_prm"] = time.perf_counter() - t0

    for strategy in args.strategies:
        t0 = time.perf_counter()
        db = d / f"{strategy}.sqlite"
        copy_db(seed_db, db)
        queue_file(scored_file, db, strategy=strategy, seed=seed, score_key=SEED_KEY,
                   against=OUTCOME if strategy == "disagreement" else None)
        spent = args.seed_labels
        for budget in args.budgets:
            got = simulate(db, source="symbolic", budget=budget - spent, error_rate=args.error_rate,
                           seed=seed * 100_000 + budget)
            spent += got.labels
            labels = d / f"{strategy}-{budget}.jsonl"
            exported = export_labels(db, labels, include_unfinished=True)
            prm = train_prm(labels, d / f"prm-{strategy}-{budget}", args, seed)
            score(prm, heldout, arm_key(strategy, budget))
            del prm
            shutil.rmtree(d / f"prm-{strategy}-{budget}")
            info.setdefault("labels", {})[arm_key(strategy, budget)] = exported.labels
            info.setdefault("traces", {})[arm_key(strategy, budget)] = exported.traces
        info["seconds"][strategy] = time.perf_counter() - t0
        say(f"  seed {seed} {strategy}: {info['seconds'][strategy]:.0f} s")
    return heldout, info


def say(message: str) -> None:
    print(message, flush=True)


def run_seed_job(seed: int, args: argparse.Namespace, tmp: str) -> tuple[list[Any], dict[str, Any]]:
    """:func:`run_seed` in a worker process of ``--jobs`` (its own torch threads)."""
    import torch

    torch.set_num_threads(args.threads)
    return run_seed(seed, args, Path(tmp), lambda m: say(f"[seed {seed}] {m.strip()}"))


# -- metrics ------------------------------------------------------------------------------------------
def labelled_scores(traces: Sequence[Any], keys: Sequence[str]
                    ) -> tuple[list[tuple[float, ...]], list[tuple[float, ...]]]:
    """The steps with a symbolic label and a score under every key in ``keys``: their scores (one
    tuple a step), right steps first list, wrong steps second."""
    from prmkit.trace import binarize

    pos: list[tuple[float, ...]] = []
    neg: list[tuple[float, ...]] = []
    for t in traces:
        for s in t.steps:
            lab, scores = s.label("symbolic"), tuple(s.scores.get(k) for k in keys)
            if lab is not None and None not in scores:
                (pos if binarize(lab) else neg).append(scores)
    return pos, neg


def step_auroc(traces: Sequence[Any], key: str, bootstrap: int, seed: int) -> tuple[float | None, float, float]:
    """AUROC of ``key``'s step scores for the symbolic labels (right steps positive), with a 95%
    bootstrap interval (right and wrong steps resampled apart)."""
    from prmkit.eval import auroc, percentile_interval, stratified_resamples

    pos, neg = labelled_scores(traces, (key,))
    pos, neg = [p for (p,) in pos], [p for (p,) in neg]
    est = auroc(pos + neg, [True] * len(pos) + [False] * len(neg))
    reps = [auroc(a + b, [True] * len(a) + [False] * len(b))
            for a, b in stratified_resamples([pos, neg], bootstrap, seed=seed)]
    reps = [r for r in reps if r is not None]
    if est is None or not reps:
        return est, float("nan"), float("nan")
    lo, hi = percentile_interval(reps, est)
    return est, float(lo), float(hi)


def paired_auroc_diff(traces: Sequence[Any], a: str, b: str, bootstrap: int, seed: int
                      ) -> tuple[float, float, float] | None:
    """Step AUROC of ``a`` minus that of ``b`` on the same steps (the symbolic labels, right steps
    positive), with a 95% paired bootstrap interval: the same stratified draws of steps for both."""
    from prmkit.eval import auroc, percentile_interval, stratified_resamples

    pos, neg = labelled_scores(traces, (a, b))

    def diff(p: Sequence[tuple[float, float]], n: Sequence[tuple[float, float]]) -> float | None:
        truth = [True] * len(p) + [False] * len(n)
        x, y = auroc([u for u, _ in p] + [u for u, _ in n], truth), auroc([v for _, v in p] + [v for _, v in n], truth)
        return None if x is None or y is None else x - y

    est = diff(pos, neg)
    reps = [d for p, n in stratified_resamples([pos, neg], bootstrap, seed=seed) if (d := diff(p, n)) is not None]
    if est is None or not reps:
        return None
    lo, hi = percentile_interval(reps, est)
    return est, float(lo), float(hi)


def per_seed_accuracy(traces: Sequence[Any], key: str) -> float:
    """Best-of-16 accuracy (PRM ``min``, as :func:`prmkit.eval.bon_choices` picks) over the problems of
    ``traces``."""
    from prmkit.eval import BonMethod, bon_choices
    from prmkit.trace_queries import is_correct, problem_key

    by_problem: dict[str, list[Any]] = {}
    for t in traces:
        by_problem.setdefault(problem_key(t.problem), []).append(t)
    picks = bon_choices(traces, [BonMethod("prm", "bon", key=key, aggregate="min")])["prm"]
    right = [i is not None and is_correct(by_problem[k][i]) is True for k, i in picks.items()]
    return sum(right) / len(right) if right else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budgets", default="100,200,400", help="step labels, comma-separated, increasing")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--seed-labels", type=int, default=60, help="random step labels before a strategy takes over")
    ap.add_argument("--pool-problems", type=int, default=48)
    ap.add_argument("--pool-n", type=int, default=8, help="samples per pool problem")
    ap.add_argument("--heldout-problems", type=int, default=24, help="held-out problems per seed (16 samples each)")
    ap.add_argument("--steps", default="3", help="operations per problem, N or MIN-MAX")
    ap.add_argument("--p-error", type=float, default=0.12, help="the policy's chance of a mistake per operation")
    ap.add_argument("--wording", default="varied", choices=["varied", "reference"],
                    help="the policy's wording: varied (right samples differ) or reference (right samples are one text)")
    ap.add_argument("--error-rate", type=float, default=0.0, help="the annotator's chance of a wrong label")
    ap.add_argument("--model", default="minilm", help="PRM backbone (minilm, tiny, ...)")
    ap.add_argument("--train-steps", type=int, default=100, help="optimizer steps of every PRM")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (per job)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="seeds run at once, each in its own process (on 2 cores: --jobs 2 --threads 1)")
    ap.add_argument("--quick", action="store_true", help="tiny PRM, 1 seed, small sets: checks the machinery")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.model, args.pool_problems, args.heldout_problems = 1, "tiny", 12, 6
        args.train_steps, args.lr, args.bootstrap = 4, 1e-3, 100
    args.budgets = sorted(int(b) for b in args.budgets.split(","))
    args.strategies = [s for s in args.strategies.split(",") if s]
    if "random" not in args.strategies or args.budgets[-1] != 400 and not args.quick:
        print("note: the ratio needs the random strategy and the budget 400", file=sys.stderr)
    if not 0 < args.seed_labels < args.budgets[0]:
        raise SystemExit(f"--seed-labels must be between 1 and the smallest budget, got {args.seed_labels}")

    import torch

    from prmkit.envs import ArithConfig
    from prmkit.eval import BonMethod, bon_curves
    from prmkit.generate import parse_steps

    torch.set_num_threads(args.threads)
    args.env = ArithConfig(steps=parse_steps(args.steps))
    _record.start()
    start = time.perf_counter()
    heldout: list[Any] = []
    infos = []
    with tempfile.TemporaryDirectory(prefix="annotate_al.") as tmp:
        if args.jobs > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(min(args.jobs, args.seeds), mp_context=mp.get_context("spawn")) as ex:
                done = list(ex.map(run_seed_job, range(args.seeds), [args] * args.seeds, [tmp] * args.seeds))
        else:
            done = (run_seed(seed, args, Path(tmp), say) for seed in range(args.seeds))
        for seed, (traces, info) in enumerate(done):  # in seed order either way: the pooled result is the same
            heldout += traces
            infos.append(info)
            print(f"seed {seed}: pool {info['pool_traces']} traces, {info['pool_steps']} steps "
                  f"({info['pool_wrong_steps']} wrong); labels spent {info['labels']}", flush=True)
    wall = time.perf_counter() - start

    arms = [arm_key(s, b) for s in args.strategies for b in args.budgets]
    top = args.budgets[-1]
    methods = [BonMethod(a, "bon", key=a, aggregate="min") for a in arms] + [BonMethod("random pick", "random")]
    comps = [(a, arm_key("random", top)) for a in arms if a != arm_key("random", top)] if "random" in args.strategies else []
    curves = bon_curves(heldout, methods, ns=[16], bootstrap=args.bootstrap, seed=0, comparisons=comps)

    rows, figures, acc_curves, auroc_curves = [], {}, {}, {}
    for s in args.strategies:
        for b in args.budgets:
            a = arm_key(s, b)
            acc, lo, hi = curves.acc[a][0], curves.lo[a][0], curves.hi[a][0]
            au, alo, ahi = step_auroc(heldout, a, args.bootstrap, seed=0)
            seeds = [per_seed_accuracy([t for t in heldout if t.problem.id.startswith(f"s{k}-")], a)
                     for k in range(args.seeds)]
            acc_curves.setdefault(s, {})[b] = acc
            if au is not None:
                auroc_curves.setdefault(s, {})[b] = au
            figures[a] = {"bo16": acc, "bo16_lo": lo, "bo16_hi": hi, "auroc": au, "auroc_lo": alo,
                          "auroc_hi": ahi, "bo16_per_seed": seeds,
                          "labels": [i["labels"][a] for i in infos]}
            rows.append((s, b, acc, lo, hi, au, alo, ahi, seeds))
    rp = curves.acc["random pick"][0]
    print(f"\n{len(heldout) // 16} held-out problems ({args.seeds} seeds x {args.heldout_problems}), 16 samples "
          f"each; random pick {rp:.3f}; PRM {args.model}, {args.train_steps} steps x batch {args.batch_size}; "
          f"seed set {args.seed_labels} labels; annotator error rate {args.error_rate}")
    print(f"{'strategy':<17} {'B':>4}  {'best-of-16 [95%]':<24} {'step AUROC [95%]':<24} per seed")
    for s, b, acc, lo, hi, au, alo, ahi, seeds in rows:
        aus = "n/a" if au is None else f"{au:.3f} [{alo:.3f}, {ahi:.3f}]"
        print(f"{s:<17} {b:>4}  {acc:.3f} [{lo:.3f}, {hi:.3f}]     {aus:<24} "
              + " ".join(f"{x:.3f}" for x in seeds))
    diffs = {}
    for c in curves.comparisons:
        diffs[f"{c['a']} - {c['b']}"] = c
    if diffs:
        print(f"\npaired differences against {arm_key('random', top)} (best-of-16, 95% bootstrap):")
        for name, d in diffs.items():
            print(f"  {name}: {d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]")
    auroc_diffs = {}
    if "random" in args.strategies:
        print(f"\npaired differences against {arm_key('random', top)} (step AUROC, 95% bootstrap over steps):")
        for a in arms:
            if a != arm_key("random", top) and (d := paired_auroc_diff(heldout, a, arm_key("random", top),
                                                                       args.bootstrap, seed=0)) is not None:
                auroc_diffs[f"{a} - {arm_key('random', top)}"] = {"diff": d[0], "lo": d[1], "hi": d[2]}
                print(f"  {a} - {arm_key('random', top)}: {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]")
    print(f"\nwall time {wall:.0f} s ({wall / 60:.1f} min)")
    cmd = shlex.join(["python", "benchmarks/annotate_al.py", *(sys.argv[1:] if argv is None else argv)])
    print(f"command: {cmd}")

    ratio = None
    learnt = [figures[a]["auroc_lo"] for a in arms if figures[a]["auroc_lo"] == figures[a]["auroc_lo"]]
    if not learnt or max(learnt) <= 0.5:
        print("warning: no arm's step AUROC interval lies above 0.5: the PRM learnt next to nothing from these "
              "labels, so both ratios below compare noise" + (" (try --model minilm)" if args.model == "tiny" else ""))
    elif max(figures[a]["bo16"] for a in arms) <= rp:
        print(f"warning: the PRMs rank steps (step AUROC above 0.5) but no arm's best-of-16 pick beats picking at "
              f"random ({rp:.3f}), so the best-of-16 ratio below compares picks worse than chance; read the step "
              "AUROC line")
    auroc_match = None
    if "random" in args.strategies and top == 400 and 400 in auroc_curves.get("random", {}):
        # the same rule on step AUROC (threshold-free, and its intervals are tighter than best-of-16's)
        name, need, r = best_ratio(auroc_curves)
        auroc_match = {"strategy": name, "labels": need, "ratio": r, "target": auroc_curves["random"][400]}
        print("step AUROC: " + (f"{name} reaches random@400's {auroc_match['target']:.3f} at about {need:.0f} "
                                 f"labels (ratio {r:.2f})" if name else
                                 f"no strategy reaches random@400's {auroc_match['target']:.3f} within 400 labels"))
    if "random" in args.strategies and top == 400:
        name, need, ratio = best_ratio(acc_curves)
        target = acc_curves["random"][400]
        if name is None:
            print(f"no strategy reached random@400's best-of-16 accuracy ({target:.3f}) within 400 labels")
            print("ratio labels(best strategy to match random@400) / 400: not reached (> 1)")
        else:
            print(f"{name} reaches random@400's best-of-16 accuracy ({target:.3f}) at about {need:.0f} labels "
                  "(linear interpolation between measured budgets)")
            print(f"ratio labels(best strategy to match random@400) / 400: {ratio:.2f}")
    if not args.quick:
        _record.record("annotate_al", {"arms": figures, "random_pick": rp, "wall_s": wall,
                                       "sizes": {"seeds": args.seeds, "pool_problems": args.pool_problems,
                                                 "pool_n": args.pool_n, "heldout_problems": args.heldout_problems,
                                                 "seed_labels": args.seed_labels, "model": args.model,
                                                 "train_steps": args.train_steps, "error_rate": args.error_rate,
                                                 "p_error": args.p_error, "wording": args.wording},
                                       "differences": diffs, "auroc_differences": auroc_diffs,
                                       "auroc_match": auroc_match}, ratio,
                       goal="some strategy reaches random's best-of-16 accuracy at B=400 with <= 40% of the labels "
                            "(ratio <= 0.40)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
