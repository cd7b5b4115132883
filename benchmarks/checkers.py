"""How well does each step checker find first errors? Precision and recall on ProcessBench GSM8K and MATH.

    python benchmarks/checkers.py                                   # every checker, both splits
    python benchmarks/checkers.py --splits gsm8k --model default --per-side 40   # the shipped PRM too
    python benchmarks/checkers.py --calibrate                       # false flags on right solutions

A checker's prediction for a solution is its first flagged step (none flagged: -1, "no error"), as
ProcessBench reads a PRM's first step below the threshold. Per split, with 95% bootstrap intervals
(solutions with and without an error resampled apart, ``prmkit.eval.stratified_resamples``):

- **precision** of first errors: of the solutions where the checker flags a step, the share whose
  first flagged step is the labelled first error;
- **recall**: of the solutions with an error, the share whose labelled first error is the first step
  flagged (ProcessBench's "error acc");
- **flag in a wrong one**: of the solutions it flags, the share where the first flagged step is at or
  after the labelled first error (the flag is on a step of a wrong solution, not on a right step);
- ProcessBench's **F1** of the checker alone: the harmonic mean of error acc and correct acc (the share
  of error-free solutions it flags nowhere), as ``prmkit.eval.processbench_split`` computes it with
  each step scored 1.0, or 0.0 where flagged, at the official threshold 0.5.

Checkers: each registered one alone, and all of them together. ``--model DIR`` also scores the split
with that PRM and prints its F1 alone and with each checker (``CheckedScorer``: flagged steps 0), at
the official threshold 0.5; ``--scored DIR`` reads splits a PRM already scored instead
(``benchmarks/processbench_pair.py``'s ``<out>/prm/<split>.jsonl``: step scores under ``prm``; no model
is run). ``--cross-split`` (two splits or more, with either): each split's threshold is chosen on the
other split(s) for the PRM alone and for the PRM with each checker, as
``prmkit eval processbench --cross-split`` chooses it, then held fixed while the solutions are resampled;
each combination's F1 gets an interval, and so does its difference from the PRM alone (paired: the
same draws).

``--calibrate`` prints the share of steps each checker flags on right solutions (GSM8K train's
reference solutions, one step per line; MATH-500's, one per paragraph) and the numbers the
provenance checker finds unexplained there most often: the data its constants were chosen on, so
ProcessBench stays unseen by that choice. Last line: the command that reproduces the run; a record
goes to ``benchmarks/results/checkers.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _first_flagged(flags_per_step: list[list]) -> int:
    return next((i for i, f in enumerate(flags_per_step) if f), -1)


def _prf(rows: list[tuple[int, int]]) -> dict[str, float | None]:
    """``rows``: (label, predicted) per solution -> precision, recall (error acc), correct acc, F1."""
    hits = sum(1 for lab, pred in rows if lab != -1 and pred == lab)
    # a flag at or after the first error is on a step of a wrong solution, not on a right step
    no_false = sum(1 for lab, pred in rows if pred != -1 and lab != -1 and pred >= lab)
    flagged = sum(1 for _, pred in rows if pred != -1)
    n_err = sum(1 for lab, _ in rows if lab != -1)
    n_ok = len(rows) - n_err
    clean = sum(1 for lab, pred in rows if lab == -1 and pred == -1)
    p = hits / flagged if flagged else None
    r = hits / n_err if n_err else None
    c = clean / n_ok if n_ok else None
    f1 = None if r is None or c is None else (0.0 if r + c == 0 else 2 * r * c / (r + c))
    return {"precision": p, "recall": r, "correct_acc": c, "f1": f1, "flagged": flagged,
            "precision_wrong": no_false / flagged if flagged else None}


def _intervals(rows: list[tuple[int, int]], n: int, seed: int = 0) -> dict[str, tuple[float, float]]:
    from prmkit.eval import percentile_interval, stratified_resamples

    groups = [[r for r in rows if r[0] != -1], [r for r in rows if r[0] == -1]]
    reps = stratified_resamples(groups, n, seed=seed)
    out = {}
    point = _prf(rows)
    for key in ("precision", "recall", "f1", "precision_wrong"):
        values = [v for v in (_prf(a + b)[key] for a, b in reps) if v is not None]
        if values and point[key] is not None:
            lo, hi = percentile_interval(values, point[key])
            out[key] = (float(lo), float(hi))
    return out


def _pct(x: float | None) -> str:
    return "  —  " if x is None else f"{100 * x:5.1f}"


def _line(name: str, m: dict, iv: dict) -> str:
    def cell(key):
        if m[key] is None:
            return f"{'—':>20s}"
        lo, hi = iv.get(key, (m[key], m[key]))
        return f"{_pct(m[key])} [{_pct(lo)}, {_pct(hi)}]"
    return (f"  {name:30s} {cell('precision')}  {cell('recall')}  {cell('f1')}  {cell('precision_wrong')}  "
            f"{m['flagged']}")


def _official_f1(traces, preds: list[int]) -> float | None:
    """The checker's F1 through prmkit.eval.processbench_split (steps scored 1.0 / 0.0 at 0.5)."""
    from prmkit.eval import processbench_split

    for t, pred in zip(traces, preds, strict=True):
        for i, s in enumerate(t.steps):
            s.scores["_bench"] = 0.0 if i == pred else 1.0
    f1 = processbench_split(traces, "_bench")["f1"]
    for t in traces:
        for s in t.steps:
            s.scores.pop("_bench", None)
    return f1


def _calibrate(args) -> dict:
    from prmkit.scoring import ProvenanceChecker, get_checkers
    from prmkit.scoring._provenance import numbers_in

    sets = {}
    gsm = [json.loads(line) for line in (args.data / "gsm8k" / "train.jsonl").open()][: args.calibrate_n]
    sets["gsm8k-train"] = [(r["question"], [s for s in r["answer"].split("\n") if s and not s.startswith("####")])
                           for r in gsm]
    m500 = [json.loads(line) for line in (args.data / "math500" / "test.jsonl").open()][: args.calibrate_n]
    sets["math500"] = [(r["problem"], [s for s in r["solution"].split("\n\n") if s.strip()]) for r in m500]
    checkers = [(c.name, c) for c in get_checkers(args.checkers)] + [
        ("provenance, no one-operation", ProvenanceChecker(one_operation=False)),
        ("provenance, constants 0 1 2 10 100", ProvenanceChecker(constants=(0, 1, 2, 10, 100))),
        ("provenance, neither", ProvenanceChecker(constants=(0, 1, 2, 10, 100), one_operation=False))]
    out = {}
    for name, items in sets.items():
        steps = sum(len(s) for _, s in items)
        print(f"\n{name}: {len(items)} right solutions, {steps} steps; share of steps flagged:")
        per: dict = {}
        for label, c in checkers:
            flagged = sum(bool(c.check(q, s[:i], st)) for q, s in items for i, st in enumerate(s))
            per[label] = flagged / steps
            print(f"  {label:36s} {100 * flagged / steps:5.2f}%  ({flagged} steps)")
        bare = ProvenanceChecker(constants=(), one_operation=False)
        prov = ProvenanceChecker(constants=(), one_operation=True)
        missing: Counter = Counter()
        for q, s in items:
            for i, st in enumerate(s):
                known = bare.known(q, s[:i])
                if prov.check(q, s[:i], st):
                    missing.update(str(x) for x in set(numbers_in(st)) - known)
        print("  numbers unexplained most often without constants (one operation allowed): "
              + ", ".join(f"{k} ({v})" for k, v in missing.most_common(25)))
        out[name] = {"flag_rate": per, "unexplained": dict(missing.most_common(25))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder (processbench/ in it)")
    ap.add_argument("--splits", default="gsm8k,math")
    ap.add_argument("--checkers", default="calculator,sympy,provenance")
    ap.add_argument("--limit", type=int, default=None, help="the first N solutions of each split")
    ap.add_argument("--per-side", type=int, default=None,
                    help="the first N solutions with an error and the first N without, of each split "
                         "(ProcessBench lists the erroneous ones first, so --limit alone takes no error-free one)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--model", default=None, help="a PRM (folder or shipped name) to score with each checker")
    ap.add_argument("--scored", type=Path, default=None,
                    help="instead of --model: splits a PRM already scored (<split>.jsonl, scores under 'prm')")
    ap.add_argument("--cross-split", action="store_true",
                    help="with --model or --scored: thresholds chosen across splits, PRM alone and with each checker")
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--calibrate-n", type=int, default=1000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    if not (args.data / "processbench").is_dir():
        sys.exit(f"no ProcessBench data at {args.data / 'processbench'} (see ../shared/data/INDEX.md)")

    from prmkit.data import read
    from prmkit.scoring import check_trace, get_checkers

    figures: dict = {}
    if args.calibrate:
        figures["calibrate"] = _calibrate(args)
    checkers = get_checkers(args.checkers)
    combos = [[c] for c in checkers] + ([checkers] if len(checkers) > 1 else [])
    names = [s.strip() for s in args.splits.split(",") if s.strip()]
    if args.cross_split and (len(names) < 2 or not (args.model or args.scored)):
        sys.exit("--cross-split needs two splits or more and a PRM (--model or --scored)")
    crossed: dict = {}
    for split in names:
        if args.scored is not None:
            if not (args.scored / f"{split}.jsonl").is_file():
                sys.exit(f"--scored {args.scored}: no {split}.jsonl there")
            traces = list(read(args.scored / f"{split}.jsonl"))[: args.limit]
        else:
            traces = list(read(args.data / "processbench" / f"{split}.json", "processbench"))[: args.limit]
        if args.per_side is not None:
            traces = ([t for t in traces if t.first_error() != -1][: args.per_side]
                      + [t for t in traces if t.first_error() == -1][: args.per_side])
        labels = [t.first_error() for t in traces]
        flags = {c.name: [check_trace(t, [c]) for t in traces] for c in checkers}
        print(f"\nProcessBench {split}: {len(traces)} solutions ({sum(lab != -1 for lab in labels)} with an "
              f"error); first errors, 95% bootstrap intervals ({args.bootstrap} resamples)")
        print(f"  {'checker':30s} {'precision':>20s}  {'recall':>20s}  {'F1 (alone)':>20s}  "
              f"{'flag in a wrong one':>20s}  flagged")
        figures[split] = {}
        preds_by = {}
        for combo in combos:
            name = "+".join(c.name for c in combo)
            preds = [_first_flagged([[f for c in combo for f in flags[c.name][k][i]]
                                     for i in range(len(t.steps))]) for k, t in enumerate(traces)]
            preds_by[name] = preds
            rows = list(zip(labels, preds, strict=True))
            m, iv = _prf(rows), _intervals(rows, args.bootstrap)
            official = _official_f1(traces, preds)
            assert official is None or m["f1"] is None or abs(official - m["f1"]) < 1e-12, (official, m)
            print(_line(name, m, iv))
            figures[split][name] = {**m, "intervals": iv}
        if args.model or args.scored:
            figures[split]["model"] = _with_model(args, traces, labels, preds_by)
            crossed[split] = (traces, labels, preds_by)
    if args.cross_split:
        figures["cross_split"] = _cross_split(crossed, args.bootstrap)
    took = time.perf_counter() - t0
    print(f"\n({took:.0f} s)  python benchmarks/checkers.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    _record.record("checkers", figures, None, goal="checkers flag first errors with high precision",
                   note="precision/recall of each checker's first flagged step against ProcessBench labels")


def _with_model(args, traces, labels, preds_by) -> dict:
    """The PRM's F1 alone and with each checker (flagged steps 0), at the official 0.5."""
    from prmkit.eval import predict_first_error
    from prmkit.scoring import load_scorer, score_traces

    if args.scored is None:
        t = time.perf_counter()
        score_traces(load_scorer("model", args.model), traces, "prm")
        print(f"  scored with {args.model} in {time.perf_counter() - t:.0f} s")
    prm = [predict_first_error(tr, "prm", 0.5) for tr in traces]
    out = {}
    for name, preds in [("PRM alone", None)] + [(f"PRM + {k}", v) for k, v in preds_by.items()]:
        combined = prm if preds is None else [_combined(p, c) for p, c in zip(prm, preds, strict=True)]
        rows = list(zip(labels, combined, strict=True))
        m, iv = _prf(rows), _intervals(rows, args.bootstrap)
        print(_line(name, m, iv))
        out[name] = {**m, "intervals": iv}
    return out


def _combined(prm: int, flag: int) -> int:
    """The first error predicted by a PRM with a checker: the earlier of the two (-1: none)."""
    return prm if flag == -1 else (flag if prm == -1 else min(prm, flag))


def _cross_split(crossed: dict, bootstrap: int) -> dict:
    """PRM alone and with each checker, each split's threshold chosen on the other splits; F1 with an
    interval, and its difference from the PRM alone with a paired one."""
    from prmkit.eval import (
        evaluate_processbench,
        percentile_interval,
        predict_first_error,
        stratified_resamples,
    )

    any_preds = next(iter(crossed.values()))[2]
    combos = ["PRM alone"] + [f"PRM + {name}" for name in any_preds]
    key = "_checked"
    preds: dict = {}  # (combo, split) -> first error predicted per solution, at that split's threshold
    out: dict = {}
    print("\nthresholds chosen across splits (each split's on the others); F1 [95%], and its difference "
          "from the PRM alone [paired 95%]")
    for combo in combos:
        for traces, _, preds_by in crossed.values():
            flags = [-1] * len(traces) if combo == "PRM alone" else preds_by[combo.removeprefix("PRM + ")]
            for t, flag in zip(traces, flags, strict=True):
                for i, step in enumerate(t.steps):
                    if "prm" in step.scores:  # a flagged step scores 0 (CheckedScorer); earlier ones decide
                        step.scores[key] = 0.0 if i == flag else step.scores["prm"]
        result = evaluate_processbench({s: v[0] for s, v in crossed.items()}, key=key, cross_split=True)
        out[combo] = {}
        for split, (traces, _, _) in crossed.items():
            thr = result.splits[split]["threshold"]
            preds[combo, split] = [predict_first_error(t, key, thr) for t in traces]
            out[combo][split] = {"f1": result.splits[split]["f1"], "threshold": thr,
                                 "error_acc": result.splits[split]["error_acc"],
                                 "correct_acc": result.splits[split]["correct_acc"]}
        out[combo]["mean_f1"] = result.average_f1
        for t in (t for v in crossed.values() for t in v[0]):
            for step in t.steps:
                step.scores.pop(key, None)
    for split, (_, labels, _) in crossed.items():
        rows = [(lab, *(preds[c, split][k] for c in combos)) for k, lab in enumerate(labels)]
        reps = stratified_resamples([[r for r in rows if r[0] != -1], [r for r in rows if r[0] == -1]], bootstrap)
        print(f"  {split}:")
        for j, combo in enumerate(combos, start=1):
            f1 = [_prf([(r[0], r[j]) for r in a + b])["f1"] or 0.0 for a, b in reps]
            diff = [f - (_prf([(r[0], r[1]) for r in a + b])["f1"] or 0.0) for f, (a, b) in zip(f1, reps, strict=True)]
            m = out[combo][split]
            est = m["f1"] or 0.0
            lo, hi = percentile_interval(f1, est)
            d_est = est - (out["PRM alone"][split]["f1"] or 0.0)
            dlo, dhi = percentile_interval(diff, d_est)
            m.update(interval=(float(lo), float(hi)), minus_alone=d_est,
                     minus_alone_interval=(float(dlo), float(dhi)))
            print(f"    {combo:36s} F1 {100 * est:5.1f} [{100 * lo:5.1f}, {100 * hi:5.1f}]"
                  f"  threshold {m['threshold']:.3f}  error acc {100 * (m['error_acc'] or 0):5.1f}  correct acc {100 * (m['correct_acc'] or 0):5.1f}"
                  + ("" if j == 1 else f"  vs alone {100 * d_est:+5.1f} [{100 * dlo:+5.1f}, {100 * dhi:+5.1f}]"))
    for combo in combos:
        mean = out[combo]["mean_f1"]
        print(f"  mean F1 {combo:36s} {'—' if mean is None else f'{100 * mean:.1f}'}")
    return out


if __name__ == "__main__":
    main()
