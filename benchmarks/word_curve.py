"""Where does a 135M word-problem PRM stop? ProcessBench and held-out injected errors along its training.

    python benchmarks/word_curve.py --model 64=runs/word-s64 --model 128=runs/word-s128 \\
        --model 256=default-word --model 512=runs/word-s512 --model full-256=runs/word-full

Each ``--model LABEL=MODEL`` (a run folder or a shipped name; the label says its budget) is scored on:

- ProcessBench GSM8K (and whatever else ``--splits`` names; a split a model has no scored file for and that
  is not in ``--score-splits`` is left out for it): step AUROC, threshold-free (each erroneous sample's
  first wrong step against every step before a first error), and, for a model scored on two or more
  splits, each split's F1 with its threshold chosen on the others (``evaluate_processbench(cross_split=
  True)``), as ``processbench_pair.py`` reports. (F1 at a fixed 0.5 says more about calibration than about
  seeing errors: the shipped PRM flags 4.8% of GSM8K's erroneous samples at 0.5, and its thresholds chosen
  across splits are 0.74 and 0.76.);
- the held-out injected errors of ``word_verifier.py`` (the first ``--problems`` GSM8K **test** problems,
  a reference and an injected copy each): step AUROC (injected wrong steps against every right step) and
  pair accuracy (reference's minimum step score above its corrupted copy's).

Every model reads traces up to 4096 tokens (``max_length``), as the shipped pair does. Scored traces are
kept under ``<out>/<label>/`` and read instead of scored again, so the script can be run again with one
more model, or after a kill. 95% bootstrap intervals over samples (ProcessBench: erroneous and error-free
resampled apart) and over problems (held-out pairs). Under one epoch (the word corpus has 25,511 traces,
16 a step) a larger step budget is also more of the corpus seen once: 256 steps are 4,096 traces. The
last lines: the command and the change from the first model to the last; a record goes to
``benchmarks/results/word_curve.jsonl``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end
from word_verifier import _pair, _steps, _trace_score  # the held-out pairs' metrics, one definition


def _auroc_of(per: list[list[tuple[float, bool]]], auroc) -> float | None:
    """Step AUROC of (score, is_right) pairs grouped by sample."""
    flat = [x for steps in per for x in steps]
    return auroc([s for s, _ in flat], [ok for _, ok in flat])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", required=True, metavar="LABEL=MODEL",
                    help="a model on the curve: its label (its budget, e.g. 256) = a run folder or shipped name")
    ap.add_argument("--splits", nargs="+", default=["../shared/data/processbench/gsm8k.json",
                                                    "../shared/data/processbench/math.json"])
    ap.add_argument("--score-splits", nargs="+", default=["gsm8k"], metavar="NAME",
                    help="splits to score where no scored file is there yet (the others are read if there)")
    ap.add_argument("--out", default="runs/word/curve", help="where the scored traces go")
    ap.add_argument("--gsm8k", default="../shared/data/gsm8k/test.jsonl", help="held-out GSM8K problems")
    ap.add_argument("--problems", type=int, default=440)
    ap.add_argument("--seed", type=int, default=7, help="seed of the injected errors (as word_verifier.py)")
    ap.add_argument("--limit", type=int, default=None,
                    help="only the first N erroneous and N error-free samples of each ProcessBench split")
    ap.add_argument("--precision", default="auto", choices=["fp32", "bf16", "auto"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args(argv)
    models = []
    for spec in args.model:
        label, sep, model = spec.partition("=")
        if not sep or not label or not model:
            ap.error(f"--model {spec!r}: expected LABEL=MODEL, e.g. 256=default-word")
        models.append((label, model))

    import numpy as np

    from prmkit.data import ERROR_TYPES, gsm8k_derived_traces, read, write
    from prmkit.eval import auroc, bootstrap_summary, evaluate_processbench
    from prmkit.scoring import load_scorer, score_traces
    from prmkit.trace import read_traces

    def heldout():  # made afresh for each model (scoring writes into the traces)
        return gsm8k_derived_traces(args.gsm8k, limit=args.problems, seed=args.seed, corrupt_fraction=1.0,
                                    pairs=True, error_types=ERROR_TYPES)

    names = [Path(f).stem for f in args.splits]
    rng = np.random.default_rng(0)
    figures: dict[str, object] = {}
    rows = []
    def scored(label: str, model: str, name: str, make, held: dict):
        """The traces of ``name`` scored by ``model``: read if kept, else made, scored and kept."""
        path = Path(args.out) / label / f"{name}.jsonl"
        if path.exists():
            return list(read_traces(path))
        traces = make()
        if traces is None:
            return None
        if "scorer" not in held:  # loaded once per model, only when something is to be scored
            held["scorer"] = load_scorer("model", model, {"cache": False, "precision": args.precision,
                                                          "max_length": 4096}, batch_size=args.batch_size)
        t0 = time.perf_counter()
        score_traces(held["scorer"], traces, "prm")
        path.parent.mkdir(parents=True, exist_ok=True)
        write(traces, str(path))
        print(f"{label}: scored {len(traces)} {name} traces in {time.perf_counter() - t0:.0f} s -> {path}")
        return traces

    for label, model in models:
        held: dict = {}

        def processbench(f: str, name: str):
            if name not in args.score_splits:
                return None
            traces = list(read(f, "processbench"))
            if args.limit:
                traces = ([t for t in traces if t.first_error() != -1][:args.limit]
                          + [t for t in traces if t.first_error() == -1][:args.limit])
            return traces

        splits = {n: tr for f, n in zip(args.splits, names, strict=True)
                  if (tr := scored(label, model, n, lambda f=f, n=n: processbench(f, n), held)) is not None}
        pairs_traces = scored(label, model, "heldout", heldout, held)
        row = {"label": label, "model": model}
        cross = evaluate_processbench(splits, cross_split=True) if len(splits) >= 2 else None
        for n, traces in splits.items():
            # threshold-free: each erroneous sample's first wrong step against every step before a first
            # error (error-free samples' steps included); interval from resampling the samples
            per = [[(s.scores["prm"], i < fe or fe == -1) for i, s in enumerate(t.steps)
                    if s.scores.get("prm") is not None and (fe == -1 or i <= fe)]
                   for t in traces for fe in (t.first_error(),)]
            a = _auroc_of(per, auroc)
            reps = [_auroc_of([per[i] for i in r], auroc) for r in rng.integers(0, len(per), size=(200, len(per)))]
            _, lo, hi = bootstrap_summary([x for x in reps if x is not None])
            row[f"{n}_step_auroc"] = (round(a, 3), round(min(lo, a), 3), round(max(hi, a), 3))
            if cross is not None:
                row[f"{n}_f1_cross"] = round(100 * (cross.splits[n]["f1"] or 0.0), 1)
        by_problem: dict[str, dict] = {}
        for t in pairs_traces:
            d = t.meta["derived"]
            by_problem.setdefault(d["from"], {})["ref" if d["kind"] == "correct" else "bad"] = t
        pairs = [(p["ref"], p["bad"]) for p in by_problem.values() if "ref" in p and "bad" in p]
        right = [s for ref, bad in pairs for t in (ref, bad) for s, ok in _steps(t, "prm") if ok]
        per = [[s for s, ok in _steps(bad, "prm") if not ok] for _, bad in pairs]
        wrong = [s for w in per for s in w]
        a = auroc([*right, *wrong], [True] * len(right) + [False] * len(wrong))
        reps = []
        for r in rng.integers(0, len(pairs), size=(200, len(pairs))):
            w = [s for i in r for s in per[i]]
            reps.append(auroc([*right, *w], [True] * len(right) + [False] * len(w)))
        _, lo, hi = bootstrap_summary([x for x in reps if x is not None])
        row["step_auroc"] = (round(a, 3), round(min(lo, a), 3), round(max(hi, a), 3))
        pa = np.array([p for ref, bad in pairs
                       if (p := _pair(_trace_score(ref, "prm", "min"), _trace_score(bad, "prm", "min"))) is not None])
        _, lo, hi = bootstrap_summary(100 * pa[rng.integers(0, len(pa), size=(args.bootstrap, len(pa)))].mean(axis=1))
        row["pair_accuracy"] = (round(100 * pa.mean(), 1), round(min(lo, 100 * pa.mean()), 1),
                                round(max(hi, 100 * pa.mean()), 1))
        rows.append(row)
        figures[label] = {"model": model}  # scalars only (benchmarks/render.py shows those)
        for k, v in row.items():
            if isinstance(v, tuple):
                figures[label].update({k: v[0], f"{k}_lo": v[1], f"{k}_hi": v[2]})
            elif k not in ("label", "model"):
                figures[label][k] = v

    def cell(v) -> str:
        return "—" if v is None else f"{v[0]} [{v[1]}, {v[2]}]" if isinstance(v, tuple) else str(v)

    cols = ["step_auroc", "pair_accuracy", *[f"{n}_step_auroc" for n in names], *[f"{n}_f1_cross" for n in names]]
    cols = [c for c in cols if any(c in r for r in rows)]
    print(f"{'model':10s} | " + " | ".join(cols))
    for r in rows:
        print(f"{r['label']:10s} | " + " | ".join(cell(r.get(c)) for c in cols) + f"   ({r['model']})")
    print("command: python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]))
    first, last = rows[0], rows[-1]
    print(f"from {first['label']} to {last['label']}: held-out step AUROC {first['step_auroc'][0]} -> "
          f"{last['step_auroc'][0]}, pair accuracy {first['pair_accuracy'][0]}% -> {last['pair_accuracy'][0]}%"
          + (f", ProcessBench GSM8K step AUROC {first['gsm8k_step_auroc'][0]} -> {last['gsm8k_step_auroc'][0]}"
             if "gsm8k_step_auroc" in first and "gsm8k_step_auroc" in last else ""))
    _record.record("word_curve", {**figures, "problems": args.problems}, None,
                   goal="where a 135M word-problem PRM stops: held-out and ProcessBench metrics along its budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
