"""What label quality is worth: PRMs trained on the same traces with different step labels.

One PRM per label source — ``symbolic`` (the arith checker: ground truth), ``mc_hard`` and ``mc_soft``
(Math-Shepherd Monte Carlo labels), ``binary_search`` (OmegaPRM-style first error) — trained on the
same real SmolLM2 traces with the same recipe and budget, plus one trained on ``synthetic`` traces
(errors injected by rule into the reference solutions of the same problems, labels by construction).
Each is evaluated the same way on held-out samples: best-of-N against majority vote with paired
bootstrap intervals, step AUROC against the symbolic labels, within-problem AUROC.

Make the labelled traces first (each command resumable; the README gives the subset)::

    prmkit label --method mc -k 4 --seed 7 --max-new-tokens 96 subset.jsonl subset.mc.jsonl
    prmkit label --method binary -k 4 --max-rollouts 16 --seed 7 --max-new-tokens 96 subset.jsonl \
        subset.binary.jsonl
    prmkit data derive subset.jsonl subset.synthetic.jsonl --per-problem 3 --correct-fraction 1 --seed 11

then (the two label runs' labels are merged by trace id)::

    python benchmarks/label_sources.py --traces subset.mc.jsonl --traces subset.binary.jsonl \
        --synthetic subset.synthetic.jsonl --heldout runs/verifier/heldout-v2.jsonl

Each trained model is kept under ``--out`` and reused on a rerun (delete a folder to retrain it). The
last line is the gap between the best label source and ``mc_hard``, the labels the field automates.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

SOURCES = ("symbolic", "mc_hard", "mc_soft", "binary_search", "synthetic")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _pts(d: dict) -> str:
    return f"{100 * d['diff']:+.1f} [{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}]"


def merge_labels(runs):
    """The traces of ``runs[0]`` with, on each step, the labels of every run (same trace ids, same
    steps; a source already on the step is not added twice)."""
    by_id = [{t.id: t for t in run} for run in runs[1:]]
    for t in runs[0]:
        for other in by_id:
            o = other.get(t.id)
            if o is None:
                raise SystemExit(f"trace {t.id!r} is missing from one of the --traces files")
            if [s.text for s in o.steps] != [s.text for s in t.steps]:
                raise SystemExit(f"trace {t.id!r}: its steps differ between the --traces files")
            for step, ostep in zip(t.steps, o.steps, strict=True):
                have = {lb.source for lb in step.labels}
                step.labels.extend(lb for lb in ostep.labels if lb.source not in have)
    return runs[0]


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", required=True, action="append",
                    help="real traces carrying symbolic, mc_hard, mc_soft and binary_search step labels; "
                         "repeat it for the same traces labelled by several runs (labels merged by trace id)")
    ap.add_argument("--synthetic", default=None, help="injected-error traces of the same problems")
    ap.add_argument("--heldout", required=True, help="held-out samples (arith, symbolic labels)")
    ap.add_argument("--problems", type=int, default=0, help="use the first N held-out problems (0: all)")
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--out", default="runs/label-sources")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--steps", type=int, default=64, help="optimizer steps per PRM")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--lora-r", type=int, default=16, help="LoRA rank (0: train every weight)")
    ap.add_argument("--causal", action="store_true", help="encoder backbones: attend to earlier tokens only")
    ap.add_argument("--score-batch-size", type=int, default=16)
    ap.add_argument("--precision", default="auto", choices=["fp32", "bf16", "auto"])
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from prmkit.eval import BonMethod, bon_curves, label_agreement, step_metrics_for, within_problem_auroc
    from prmkit.scoring import load_scorer, score_traces
    from prmkit.trace import read_traces, write_traces
    from prmkit.train import load_config, train

    t0 = time.perf_counter()
    out_dir = Path(args.out)
    sources = [s for s in args.sources.split(",") if s]
    real = merge_labels([list(read_traces(f)) for f in args.traces])
    merged = out_dir / "train-labels.jsonl"  # what every real-trace PRM trains on
    out_dir.mkdir(parents=True, exist_ok=True)
    write_traces(real, merged)
    present = {lb.source for t in real for s in t.steps for lb in s.labels}
    quality = {}
    for s in sources:
        if s != "synthetic" and s in present:
            agr = label_agreement(real, "symbolic", s)
            pair = agr["pairs"][0]
            quality[s] = {"agreement": pair["agreement"], "kappa": pair["kappa"],
                          "first_error_agreement": agr["first_error_agreement"], "steps": pair["steps"],
                          "wrong_steps": pair["b_wrong"], "symbolic_wrong_steps": pair["a_wrong"]}
    heldout = list(read_traces(args.heldout))
    if args.problems:
        keep = set(list(dict.fromkeys(t.problem.id for t in heldout))[:args.problems])
        heldout = [t for t in heldout if t.problem.id in keep]
    print(f"training traces: {len(real)} ({args.traces}); held-out: {len(heldout)} traces of "
          f"{len({t.problem.id for t in heldout})} problems ({args.heldout})")

    rows = {}
    for src in sources:
        if src == "synthetic":
            if not args.synthetic:
                print("synthetic: skipped (no --synthetic file)")
                continue
            files, label_source = [args.synthetic], "synthetic"
        elif src not in present:
            print(f"{src}: skipped (no {src!r} labels in {args.traces})")
            continue
        else:
            files, label_source = [str(merged)], src
        folder = out_dir / src
        if not (folder / "prmkit_rm.json").exists():
            cfg = load_config(None, [], kind="prm", model=args.model, train=files, label_source=label_source,
                              soft_labels=src == "mc_soft",
                              lora={"r": args.lora_r, "alpha": 2 * args.lora_r, "dropout": 0.0,
                                    "target_modules": "all-linear"} if args.lora_r else None,
                              causal=args.causal,
                              max_length=512, batch_size=args.batch_size, lr=args.lr, warmup_ratio=0.05,
                              epochs=100, max_steps=args.steps, save_every=16, seed=args.seed,
                              output_dir=str(folder))
            ts = time.perf_counter()
            train(cfg)
            print(f"{src}: trained in {time.perf_counter() - ts:.0f} s -> {folder}")
        ts = time.perf_counter()
        # The held-out step scores are kept beside the model, so a rerun that adds a source rescores nothing.
        cache = folder / f"scores-{Path(args.heldout).stem}-{args.problems or 'all'}-{args.precision}.json"
        if cache.exists():
            saved = json.loads(cache.read_text())
            for t in heldout:
                for step, v in zip(t.steps, saved[t.id], strict=True):
                    if v is not None:
                        step.scores[src] = v
        else:
            prm = load_scorer("model", str(folder), {"cache": False, "precision": args.precision},
                              batch_size=args.score_batch_size)
            score_traces(prm, heldout, src, aggregate="min")
            tmp = cache.with_suffix(".tmp")
            tmp.write_text(json.dumps({t.id: [s.scores.get(src) for s in t.steps] for t in heldout}))
            tmp.replace(cache)
        sm = step_metrics_for(heldout, key=src, label_source="symbolic").to_dict()
        rows[src] = {"auroc": sm["auroc"], "f1_error": sm["f1_error"], **quality.get(src, {})}
        print(f"{src}: scored in {time.perf_counter() - ts:.0f} s; step AUROC {sm['auroc']:.3f}")

    methods = [BonMethod("majority", "majority")] + [BonMethod(s, "bon", s, "min") for s in rows]
    pairs = [(s, "majority") for s in rows] + [(s, "mc_hard") for s in rows if s != "mc_hard" and "mc_hard" in rows]
    curves = bon_curves(heldout, methods, bootstrap=args.bootstrap, seed=args.seed, comparisons=pairs)
    n = curves.ns[-1]
    j = curves.ns.index(n)
    within = {s: within_problem_auroc(heldout, s)[0] for s in rows}
    print(f"\nbest-of-{n} on {curves.problems} held-out problems; majority vote "
          f"{_pct(curves.acc['majority'][j])}; {args.model}, {args.steps} steps × {args.batch_size} traces per PRM")
    print("| labels | step agreement with symbolic | kappa | first-error agreement | wrong steps (symbolic) "
          f"| step AUROC | within-problem AUROC | best-of-{n} | vs majority (points) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s, r in rows.items():
        gap = curves.compare(s, "majority", n)
        rows[s].update(bon=curves.acc[s][j], vs_majority=gap, within=within[s])
        q = (f"{r['agreement']:.3f} | {r['kappa']:.3f} | {r['first_error_agreement']:.3f} | "
             f"{r['wrong_steps']} ({r['symbolic_wrong_steps']})" if r.get("agreement") is not None
             else "by construction | — | — | —")
        print(f"| {s} | {q} | {r['auroc']:.3f} | {_f(within[s])} | {_pct(curves.acc[s][j])} | {_pts(gap)} |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str) + "\n")
    print(f"\n({time.perf_counter() - t0:.0f} s)  python benchmarks/label_sources.py "
          + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    others = [s for s in rows if s != "mc_hard"]
    if "mc_hard" in rows and others:
        best = max(others, key=lambda s: curves.acc[s][j])
        print(f"best-of-{n}: {best} − mc_hard: {_pts(curves.compare(best, 'mc_hard', n))} points")
    _record.record("label_sources", {"n": n, "problems": curves.problems, "rows": rows}, (
        curves.compare(best, "mc_hard", n) or {}).get("diff") if "mc_hard" in rows and others else None,
        goal="better labels give a better best-of-N pick than Monte Carlo's (points over mc_hard)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
