"""Which natural-language errors does a word-problem PRM see, and does it beat its ORM twin there?

    python benchmarks/word_verifier.py --prm default-word --orm default-word-orm          # the shipped pair
    python benchmarks/word_verifier.py --prm runs/default-word --orm runs/default-word-orm --problems 60

Held-out traces with labels by construction: the first ``--problems`` GSM8K **test** problems (never
trained on), each as its reference solution and as one copy with an injected error
(``prmkit.data.gsm8k_derived_traces(pairs=True)``: one type drawn per problem among all of them, another
where it does not apply; the later steps continue from the wrong value; labels "synthetic": the steps
before the error right, the error's step wrong, later steps unlabelled).
The PRM scores every step; the ORM is read at every step's position too (``kind=prm``: a causal ORM's
head at a step's end sees only that prefix, so it gives a prefix score as a value model would; its
last score is its trace score). Per error type, with 95% bootstrap intervals over problems:

- **step AUROC**: the injected wrong steps of that type against every right step of the held-out set
  (reference steps and the steps before an error): can the scores tell the wrong step from right ones;
- **pair accuracy**: the share of problems where the reference solution's trace score (PRM: the
  minimum step score; ORM: its last score) is above its corrupted copy's (ties count half): what a
  reranker needs, within a problem. PRM − ORM, paired over the same problems.

A type whose step AUROC interval reaches 0.5 is one the model cannot see (named in the output). Last
lines: the command line and the overall PRM − ORM pair-accuracy difference; a record goes to
``benchmarks/results/word_verifier.jsonl``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections import defaultdict

import _record  # benchmarks/_record.py: notes the load average now; record() at the end


def _steps(trace, key: str):
    """(score, is_right) of the labelled steps of ``trace`` under ``key``."""
    out = []
    for step in trace.steps:
        if step.labels and step.scores.get(key) is not None:
            out.append((step.scores[key], step.labels[0].value > 0))
    return out


def _trace_score(trace, key: str, reduce: str) -> float | None:
    values = [s.scores[key] for s in trace.steps if s.scores.get(key) is not None]
    if not values:
        return None
    return min(values) if reduce == "min" else values[-1]


def _pair(ok: float | None, bad: float | None) -> float | None:
    if ok is None or bad is None:
        return None
    return 1.0 if ok > bad else 0.5 if ok == bad else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prm", required=True, help="PRM: a checkpoint folder, or a shipped name (default-word)")
    ap.add_argument("--orm", required=True, help="its ORM twin: a folder, or default-word-orm")
    ap.add_argument("--gsm8k", default="../shared/data/gsm8k/test.jsonl", help="held-out GSM8K problems")
    ap.add_argument("--problems", type=int, default=440, help="the first N problems (about 40 per error type at 440)")
    ap.add_argument("--seed", type=int, default=7, help="seed of the injected errors")
    ap.add_argument("--precision", default="auto", choices=["fp32", "bf16", "auto"])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args(argv)

    import numpy as np

    from prmkit.data import ERROR_TYPES, gsm8k_derived_traces
    from prmkit.eval import auroc, bootstrap_summary
    from prmkit.scoring import load_scorer, score_traces

    t0 = time.perf_counter()
    traces = gsm8k_derived_traces(args.gsm8k, limit=args.problems, seed=args.seed, corrupt_fraction=1.0,
                                  pairs=True, error_types=ERROR_TYPES)
    by_problem: dict[str, dict[str, object]] = defaultdict(dict)
    for t in traces:
        d = t.meta["derived"]
        by_problem[d["from"]]["ref" if d["kind"] == "correct" else "bad"] = t
    pairs = [(p["ref"], p["bad"]) for p in by_problem.values() if "ref" in p and "bad" in p]
    print(f"held-out: {len(pairs)} GSM8K test problems with a reference and an injected copy "
          f"({len(traces)} traces, {args.gsm8k}, first {args.problems}, seed {args.seed})")

    flat = [t for pair in pairs for t in pair]
    score_traces(load_scorer("model", args.prm, {"cache": False, "precision": args.precision},
                             batch_size=args.batch_size), flat, "prm")
    score_traces(load_scorer("model", args.orm, {"cache": False, "precision": args.precision, "kind": "prm"},
                             batch_size=args.batch_size), flat, "orm")
    scored_s = time.perf_counter() - t0

    right = {k: [s for t in flat for s, ok in _steps(t, k) if ok] for k in ("prm", "orm")}
    types = sorted({bad.meta["derived"]["error_type"] for _, bad in pairs}, key=ERROR_TYPES.index)
    rng = np.random.default_rng(args.seed)
    figures: dict[str, float] = {}
    blind = []

    def summarise(rows, label: str) -> None:
        """rows: the (ref, bad) pairs of one type (or all)."""
        wrong = {k: [s for _, bad in rows for s, ok in _steps(bad, k) if not ok] for k in ("prm", "orm")}
        both = [(p, o) for ref, bad in rows  # problems both models scored, so the difference is paired
                if (p := _pair(_trace_score(ref, "prm", "min"), _trace_score(bad, "prm", "min"))) is not None
                and (o := _pair(_trace_score(ref, "orm", "last"), _trace_score(bad, "orm", "last"))) is not None]
        pa = {"prm": np.array([p for p, _ in both]), "orm": np.array([o for _, o in both])}
        n = len(rows)
        idx = rng.integers(0, n, size=(args.bootstrap, n))
        cells = [f"{label:24s} n={n:3d}"]
        for k in ("prm", "orm"):
            a = auroc([*right[k], *wrong[k]], [True] * len(right[k]) + [False] * len(wrong[k]))
            # bootstrap the wrong steps by problem (the right steps: all, fixed)
            per = [[s for s, ok in _steps(bad, k) if not ok] for _, bad in rows]
            reps = []
            for r in idx[: max(200, args.bootstrap // 10)]:
                w = [s for i in r for s in per[i]]
                if w:
                    reps.append(auroc([*right[k], *w], [True] * len(right[k]) + [False] * len(w)))
            _, lo, hi = bootstrap_summary([x for x in reps if x is not None])
            lo, hi = min(lo, a), max(hi, a)
            figures[f"{label}/{k}/step_auroc"] = round(a, 4)
            cells.append(f"{k.upper()} step AUROC {a:.3f} [{lo:.3f}, {hi:.3f}]")
            if k == "prm" and lo <= 0.5 and label != "all":
                blind.append(label)
        m = len(both)
        diffs = pa["prm"] - pa["orm"]
        for k in ("prm", "orm"):
            v = pa[k]
            _, lo, hi = bootstrap_summary(v[rng.integers(0, len(v), size=(args.bootstrap, len(v)))].mean(axis=1))
            figures[f"{label}/{k}/pair_accuracy"] = round(float(v.mean()), 4)
            cells.append(f"{k.upper()} pair acc {100 * v.mean():.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]")
        _, lo, hi = bootstrap_summary(diffs[rng.integers(0, m, size=(args.bootstrap, m))].mean(axis=1))
        figures[f"{label}/prm_minus_orm"] = round(float(diffs.mean()), 4)
        figures[f"{label}/prm_minus_orm_lo"], figures[f"{label}/prm_minus_orm_hi"] = round(float(lo), 4), round(float(hi), 4)
        cells.append(f"PRM − ORM {100 * diffs.mean():+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        print(" | ".join(cells))

    for et in types:
        summarise([(r, b) for r, b in pairs if b.meta["derived"]["error_type"] == et], et)
    summarise(pairs, "all")
    print(f"error types the PRM cannot see (step AUROC interval reaches 0.5): {', '.join(blind) or 'none'}")
    print(f"scoring {scored_s:.0f} s, in all {time.perf_counter() - t0:.0f} s")
    print("command: python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]))
    diff = figures["all/prm_minus_orm"]
    print(f"PRM − ORM pair accuracy (all types): {100 * diff:+.1f} points "
          f"[{100 * figures['all/prm_minus_orm_lo']:+.1f}, {100 * figures['all/prm_minus_orm_hi']:+.1f}]")
    _record.record("word_verifier", {**figures, "problems": len(pairs), "blind_types": blind,
                                     "scoring_s": round(scored_s, 1)}, None,
                   goal="the word-problem PRM above its ORM twin on held-out injected errors, per type")
    return 0


if __name__ == "__main__":
    sys.exit(main())
