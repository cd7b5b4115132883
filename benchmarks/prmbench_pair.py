"""PRMBench PRMScore of a PRM against its ORM twin, with paired bootstrap intervals.

    python benchmarks/prmbench_pair.py --prm default-word --orm default-word-orm
    python benchmarks/prmbench_pair.py --prm default-word --orm default-word-orm --only orm  # one side

Both models score every step of PRMBench's phase-1 test files (``--files``: 718 samples in eight error
classes, GPT-4o's edits of PRM800K test solutions; none of their questions is in the phase-1 train files
the word pair trained on): the PRM each step, the ORM read at every step's end (``kind=prm``, as in
``processbench_pair.py``). The scored traces go to ``<out>/prm/prmbench.jsonl`` and
``<out>/orm/prmbench.jsonl``; a file already there is read, not scored again, so ``--only prm`` and
``--only orm`` can run side by side (one core each) and a plain run then only counts. ``prmkit eval
prmbench <out>/prm/prmbench.jsonl`` reads the same file (no model).

The metric is the official one (``prmkit.eval.evaluate_prmbench``): a step is called correct when its
score is at least the threshold (0.5, the official wrappers' rule, not tuned here); PRMScore is the mean of
the F1 of correct steps and the F1 of wrong steps, counts pooled over the steps of every error-class
sample. 95% bootstrap intervals resample the samples within each class, the same draws for both models,
so PRM − ORM is paired. Last lines: the command and the overall PRMScore difference; a record goes to
``benchmarks/results/prmbench_pair.jsonl``.
"""

from __future__ import annotations

import argparse
import glob
import shlex
import sys
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end


def _prmscore(c) -> float:
    """PRMScore from pooled counts ``c`` = (tp, fn, fp, tn) arrays (positive = the step is correct)."""
    import numpy as np

    tp, fn, fp, tn = c
    with np.errstate(invalid="ignore", divide="ignore"):
        f1_pos = np.nan_to_num(2 * tp / (2 * tp + fp + fn))
        f1_neg = np.nan_to_num(2 * tn / (2 * tn + fn + fp))
    return 0.5 * f1_pos + 0.5 * f1_neg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prm", required=True, help="PRM: a checkpoint folder, or a shipped name")
    ap.add_argument("--orm", required=True, help="its ORM twin (read at every step's end)")
    ap.add_argument("--files", nargs="+",
                    default=sorted(glob.glob("../shared/data/prmbench/prm800k_test_p1_4o_*.jsonl")))
    ap.add_argument("--out", default="runs/prmbench-pair", help="where the scored samples go")
    ap.add_argument("--only", choices=["prm", "orm"], help="only score this side, then stop")
    ap.add_argument("--limit", type=int, default=None, help="only the first N samples of each file")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--precision", default="auto", choices=["fp32", "bf16", "auto"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not args.files:
        ap.error("no PRMBench files (default: ../shared/data/prmbench/prm800k_test_p1_4o_*.jsonl)")

    import numpy as np

    from prmkit.data import read, write
    from prmkit.errors import PrmkitError
    from prmkit.eval import auroc, bootstrap_summary, evaluate_prmbench
    from prmkit.scoring import load_scorer, score_traces
    from prmkit.trace import binarize, read_traces

    scored: dict[str, list] = {}
    for m in (args.only,) if args.only else ("prm", "orm"):
        path = Path(args.out) / m / "prmbench.jsonl"
        if not path.exists():
            traces = [t for f in args.files for t in list(read(f, "prmbench"))[:args.limit]]
            extra = {"kind": "prm"} if m == "orm" else {}
            scorer = load_scorer("model", getattr(args, m), {"cache": False, "precision": args.precision, **extra},
                                 batch_size=args.batch_size)
            t0 = time.perf_counter()
            score_traces(scorer, traces, "prm")
            path.parent.mkdir(parents=True, exist_ok=True)
            write(traces, str(path))
            print(f"{m}: scored {len(traces)} PRMBench samples in {time.perf_counter() - t0:.0f} s -> {path}")
        scored[m] = list(read_traces(path))
    if args.only:
        return 0
    orm = {t.id: t for t in scored["orm"]}  # the same samples, in the PRM file's order
    scored["prm"] = [t for t in scored["prm"] if t.id in orm]
    scored["orm"] = [orm[t.id] for t in scored["prm"]]

    results = {m: evaluate_prmbench(scored[m], "prm", args.threshold) for m in scored}
    classes = sorted({t.meta["prmbench"]["classification"] for t in scored["prm"]})
    # per sample (tp, fn, fp, tn) of each model, from the same evaluator one sample at a time; samples the
    # evaluator leaves out (error steps past the end) are left out here too
    counts: dict[str, dict[str, list]] = {m: {c: [] for c in classes} for m in scored}
    left_out = 0
    for tp_, to_ in zip(scored["prm"], scored["orm"], strict=True):
        try:
            rows = {m: evaluate_prmbench([t], "prm", args.threshold).overall for m, t in (("prm", tp_), ("orm", to_))}
        except PrmkitError:  # the evaluator leaves this sample out (an error step past its last step)
            rows = {}
        if not rows or any(r["n_traces"] == 0 for r in rows.values()):
            left_out += 1
            continue
        for m, r in rows.items():
            c = r["confusion"]
            counts[m][tp_.meta["prmbench"]["classification"]].append((c["tp"], c["fn"], c["fp"], c["tn"]))
    rng = np.random.default_rng(args.seed)
    draws = {c: rng.integers(0, len(counts["prm"][c]), size=(args.bootstrap, len(counts["prm"][c])))
             for c in classes if counts["prm"][c]}
    reps: dict[str, dict[str, np.ndarray]] = {m: {} for m in scored}
    for m in scored:
        pooled = np.zeros((4, args.bootstrap))
        for c, d in draws.items():
            a = np.array(counts[m][c], dtype=float)  # (n, 4)
            summed = a[d].sum(axis=1).T  # (4, bootstrap)
            reps[m][c] = _prmscore(summed)
            pooled += summed
        reps[m]["overall"] = _prmscore(pooled)

    figures: dict[str, float] = {}
    for name in [*draws, "overall"]:
        cells = [f"{name:22s}"]
        est = {}
        for m in ("prm", "orm"):
            r = results[m].overall if name == "overall" else results[m].classes[name]
            est[m] = 100 * (r["prmscore"] or 0.0)
            _, lo, hi = bootstrap_summary(100 * reps[m][name])
            lo, hi = min(lo, est[m]), max(hi, est[m])
            figures[f"{name}/{m}_prmscore"] = round(est[m], 2)
            cells.append(f"{m.upper()} PRMScore {est[m]:.1f} [{lo:.1f}, {hi:.1f}]")
        d = est["prm"] - est["orm"]
        _, lo, hi = bootstrap_summary(100 * (reps["prm"][name] - reps["orm"][name]))
        lo, hi = min(lo, d), max(hi, d)
        figures[f"{name}/prm_minus_orm"], figures[f"{name}/lo"], figures[f"{name}/hi"] = (
            round(d, 2), round(float(lo), 2), round(float(hi), 2))
        cells.append(f"PRM − ORM {d:+.1f} points [{lo:+.1f}, {hi:+.1f}]")
        print(" | ".join(cells))
    # threshold-free: can the scores tell the wrong steps from the right ones at all (step AUROC over the
    # error-class samples, interval from resampling the samples)
    steps = {m: [[(s.scores["prm"], binarize(s.label()) is True) for s in t.steps if s.scores.get("prm") is not None]
                 for t in scored[m] if t.meta["prmbench"]["classification"] != "correct"] for m in scored}
    idx = rng.integers(0, len(steps["prm"]), size=(max(200, args.bootstrap // 10), len(steps["prm"])))
    cells = [f"{'step AUROC':22s}"]
    for m in ("prm", "orm"):
        flat = [x for t in steps[m] for x in t]
        a = auroc([s for s, _ in flat], [ok for _, ok in flat])
        reps_a = [auroc([s for i in r for s, _ in steps[m][i]], [ok for i in r for _, ok in steps[m][i]]) for r in idx]
        _, lo, hi = bootstrap_summary([x for x in reps_a if x is not None])
        figures[f"step_auroc/{m}"] = round(a, 4)
        cells.append(f"{m.upper()} {a:.3f} [{min(lo, a):.3f}, {max(hi, a):.3f}]")
    print(" | ".join(cells) + "  (threshold-free: wrong steps against right ones)")
    for m in ("prm", "orm"):
        print(f"{m.upper()} groups: " + ", ".join(f"{g} {100 * v['prmscore']:.1f}"
                                                for g, v in results[m].groups.items() if v["prmscore"] is not None))
    print(f"samples: {sum(len(v) for v in counts['prm'].values())} ({left_out} left out by the evaluator: error steps past "
          f"the last step; threshold {args.threshold}, not tuned)")
    print("command: python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]))
    print(f"PRM − ORM overall PRMScore: {figures['overall/prm_minus_orm']:+.1f} points "
          f"[{figures['overall/lo']:+.1f}, {figures['overall/hi']:+.1f}]")
    _record.record("prmbench_pair", figures, None,
                   goal="the PRM above its ORM twin on PRMBench's PRMScore, interval excluding 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
