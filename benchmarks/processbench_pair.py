"""ProcessBench F1 of a PRM against its ORM twin, with paired bootstrap intervals.

    python benchmarks/processbench_pair.py --prm default-word --orm default-word-orm
    python benchmarks/processbench_pair.py --prm default-word --orm default-word-orm --only orm  # one side

Both models score every sample of each split (``--splits``, default ProcessBench GSM8K and MATH): the PRM
each step, the ORM read at every step's end (``kind=prm``: a causal ORM's head at a step's newline
sees only that prefix). The scored traces go to ``<out>/prm/<split>.jsonl`` and ``<out>/orm/<split>.jsonl``;
a file already there is read, not scored again, so ``--only prm`` and ``--only orm`` can run side by
side (one core each) and a plain run then only counts. ``prmkit eval processbench <out>/prm/gsm8k.jsonl
<out>/prm/math.jsonl --cross-split --by-generator`` reads the same files (no model).

Per model, each split's threshold is chosen on the other split(s)
(``prmkit.eval.evaluate_processbench(cross_split=True)``, what ``prmkit eval processbench --cross-split``
reports), then held fixed while the samples are resampled: 95% bootstrap intervals (erroneous and
error-free samples resampled apart, the same draws for both models, so the difference is paired) of
each model's F1 and of PRM − ORM, per split and for the mean over splits. Last lines: the command
and the mean-F1 difference; a record goes to ``benchmarks/results/processbench_pair.jsonl``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prm", required=True, help="PRM: a checkpoint folder, or a shipped name")
    ap.add_argument("--orm", required=True, help="its ORM twin (read at every step's end)")
    ap.add_argument("--splits", nargs="+", default=["../shared/data/processbench/gsm8k.json",
                                                    "../shared/data/processbench/math.json"])
    ap.add_argument("--out", default="runs/processbench-pair", help="where the scored splits go")
    ap.add_argument("--only", choices=["prm", "orm"], help="only score this side, then stop")
    ap.add_argument("--limit", type=int, default=None,
                    help="only the first N erroneous and the first N error-free samples of each split")
    ap.add_argument("--precision", default="auto", choices=["fp32", "bf16", "auto"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import numpy as np

    from prmkit.data import read, write
    from prmkit.eval import bootstrap_summary, evaluate_processbench, predict_first_error
    from prmkit.scoring import load_scorer, score_traces
    from prmkit.trace import read_traces

    names = [Path(f).stem for f in args.splits]
    splits: dict[str, dict[str, list]] = {"prm": {}, "orm": {}}
    for m in (args.only,) if args.only else ("prm", "orm"):
        scorer = None
        for f, name in zip(args.splits, names, strict=True):
            path = Path(args.out) / m / f"{name}.jsonl"
            if not path.exists():
                traces = list(read(f, "processbench"))
                if args.limit:
                    traces = ([t for t in traces if t.first_error() != -1][:args.limit]
                              + [t for t in traces if t.first_error() == -1][:args.limit])
                if scorer is None:
                    extra = {"kind": "prm"} if m == "orm" else {}
                    scorer = load_scorer("model", getattr(args, m), {"cache": False, "precision": args.precision,
                                                                    **extra}, batch_size=args.batch_size)
                t0 = time.perf_counter()
                score_traces(scorer, traces, "prm")
                path.parent.mkdir(parents=True, exist_ok=True)
                write(traces, str(path))
                print(f"{m}: scored {len(traces)} {name} samples in {time.perf_counter() - t0:.0f} s -> {path}")
            splits[m][name] = list(read_traces(path))
    if args.only:
        return 0
    for name in names:  # the same samples, in the PRM file's order
        orm = {t.id: t for t in splits["orm"][name]}
        splits["prm"][name] = [t for t in splits["prm"][name] if t.id in orm]
        splits["orm"][name] = [orm[t.id] for t in splits["prm"][name]]
    keys = {"prm": "prm", "orm": "prm"}
    results = {m: evaluate_processbench(splits[m], key=keys[m], cross_split=True) for m in keys}

    rng = np.random.default_rng(args.seed)
    figures: dict[str, float] = {}
    reps: dict[str, dict[str, np.ndarray]] = {m: {} for m in keys}
    for name in names:
        labels = [t.first_error() for t in splits["prm"][name]]
        err = np.array([i for i, lab in enumerate(labels) if lab != -1])
        ok = np.array([i for i, lab in enumerate(labels) if lab == -1])
        draws_e = rng.integers(0, len(err), size=(args.bootstrap, len(err)))
        draws_c = rng.integers(0, len(ok), size=(args.bootstrap, len(ok)))
        for m in keys:
            thr = results[m].splits[name]["threshold"]
            hit = np.array([predict_first_error(t, keys[m], thr) == lab
                            for t, lab in zip(splits[m][name], labels, strict=True)], dtype=float)
            ea, ca = hit[err][draws_e].mean(axis=1), hit[ok][draws_c].mean(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                reps[m][name] = np.nan_to_num(2 * ea * ca / (ea + ca))
    for name in [*names, "mean"]:
        cells = [f"{name:6s}"]
        for m in keys:
            r = reps[m][name] if name != "mean" else np.mean([reps[m][n] for n in names], axis=0)
            est = (results[m].splits[name]["f1"] if name != "mean" else results[m].average_f1) or 0.0
            _, lo, hi = bootstrap_summary(r)
            lo, hi = min(lo, est), max(hi, est)
            figures[f"{name}/{m}_f1"] = round(100 * est, 2)
            thr = f", threshold {results[m].splits[name]['threshold']:.3f}" if name != "mean" else ""
            cells.append(f"{m.upper()} F1 {100 * est:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]{thr}")
        d = (reps["prm"][name] if name != "mean" else np.mean([reps["prm"][n] for n in names], axis=0)) - (
            reps["orm"][name] if name != "mean" else np.mean([reps["orm"][n] for n in names], axis=0))
        est = figures[f"{name}/prm_f1"] - figures[f"{name}/orm_f1"]
        _, lo, hi = bootstrap_summary(100 * d)
        lo, hi = min(lo, est), max(hi, est)
        figures[f"{name}/prm_minus_orm"], figures[f"{name}/lo"], figures[f"{name}/hi"] = (
            round(est, 2), round(float(lo), 2), round(float(hi), 2))
        cells.append(f"PRM − ORM {est:+.1f} points [{lo:+.1f}, {hi:+.1f}]")
        print(" | ".join(cells))
    print("command: python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]))
    print(f"PRM − ORM mean ProcessBench F1: {figures['mean/prm_minus_orm']:+.1f} points "
          f"[{figures['mean/lo']:+.1f}, {figures['mean/hi']:+.1f}]")
    _record.record("processbench_pair", figures, None,
                   goal="the PRM above its ORM twin on ProcessBench's first-error metric, interval excluding 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
