"""Do derived traces give their label away by their surface? A classifier on surface features only,
for ``prmkit data derive`` as it was and with ``--hard-negatives``.

    python benchmarks/derive_cues.py                        # the first 1,000 GSM8K train problems
    python benchmarks/derive_cues.py --problems 200         # a quick check of the script

1. Traces: :func:`prmkit.data.inject_errors` on the first ``--problems`` problems of GSM8K train
   (``$PRMKIT_SHARED_DATA``, else ``../shared/data``), every error type, one wrong trace per problem
   and its correct one with probability 0.5, ``--seed``; once as before (``hard_negatives=False``), once
   with ``hard_negatives=True``. GSM8K test and MATH-500 are not read.
2. Features of each trace that need no reading of its steps: step count, characters, characters per
   step, whether a ``<<a*b=c>>`` annotation is left, the answer line's form (``The answer is N.``,
   ``#### N``, other), numbers with thousands separators, numbers with decimals, whether the final
   answer is whole, its size (log10), whether it is negative.
3. A logistic regression on the standardised features (numpy, 300 steps of gradient descent), trained
   on half of the problems and scored on the other half, both ways round (problem-disjoint folds);
   its AUROC for "wrong trace" over the held-out scores, with a 95% percentile interval over 1,000
   bootstrap resamplings of problems, and the mean AUROC within a problem (problems with both a
   right and a wrong trace). Each feature's own AUROC is printed as well (0.5 is no cue; below 0.5
   is a cue the other way), and that of one wording cue the classifier is not given: a line that
   restates an equation ("So 36-8 = 28."), which ``--hard-negatives`` writes into correct traces only.
4. Printed last: the ratio of the leaks, |AUROC − 0.5| with hard negatives over without (lower is
   better; the goal: the surface classifier within 0.05 of chance with hard negatives).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
from itertools import islice
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end
import numpy as np

from prmkit.data import inject_errors, read
from prmkit.eval import auroc, percentile_interval
from prmkit.trace import Trace

SHARED = Path(os.environ.get("PRMKIT_SHARED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")
FEATURES = ("steps", "chars", "chars_per_step", "annotation", "answer_is_form", "answer_hash_form",
            "answer_other_form", "thousands", "decimals", "answer_whole", "answer_log10", "answer_negative")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# A wording cue, measured apart from the classifier: the lines that --hard-negatives writes into
# correct traces only ("So 36-8 = 28.", "That is, ...", "Check: ...", or one ending a merged line).
_RESTATED = re.compile(r"(?:^|\. )(?:So|That is,|Check:) [^=]*= [^ ]+\.$")


def features(t: Trace) -> list[float]:
    last = t.steps[-1].text.strip() if t.steps else ""
    numbers = _NUMBER.findall(t.text or "")
    try:
        answer = float((t.final_answer or "").replace(",", "").replace("$", ""))
    except ValueError:
        answer = math.nan
    chars = sum(len(s.text) for s in t.steps)
    return [len(t.steps), chars, chars / max(len(t.steps), 1), float("<<" in (t.text or "")),
            float(bool(re.fullmatch(r"The answer is .*\.?", last))), float(last.startswith("####")),
            float(not re.fullmatch(r"The answer is .*\.?", last) and not last.startswith("####")),
            sum("," in n for n in numbers), sum("." in n for n in numbers),
            float(not math.isnan(answer) and answer == int(answer)),
            math.log10(abs(answer) + 1) if not math.isnan(answer) else 0.0,
            float(not math.isnan(answer) and answer < 0)]


def wrong(t: Trace) -> bool:
    return any(lab is not None and lab.value == -1 for lab in t.labels())


def fit_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-9
    a, b = (x_train - mu) / sd, (x_test - mu) / sd
    w, c = np.zeros(a.shape[1]), 0.0
    for _ in range(300):
        p = 1 / (1 + np.exp(-(a @ w + c)))
        w -= 0.5 * (a.T @ (p - y_train) / len(y_train) + 1e-3 * w)
        c -= 0.5 * float(np.mean(p - y_train))
    return b @ w + c


def measure(traces: list[Trace], bootstrap: int, seed: int) -> dict:
    x = np.array([features(t) for t in traces], dtype=float)
    y = np.array([wrong(t) for t in traces], dtype=float)
    problem = [t.meta["derived"]["from"] for t in traces]
    ids = sorted(set(problem))
    fold = {p: i % 2 for i, p in enumerate(np.random.default_rng(seed).permutation(ids))}
    f = np.array([fold[p] for p in problem])
    score = np.zeros(len(traces))
    for k in (0, 1):
        score[f == k] = fit_predict(x[f != k], y[f != k], x[f == k])
    overall = auroc(score.tolist(), (y == 1).tolist())
    by_problem: dict[str, list[int]] = {}
    for i, p in enumerate(problem):
        by_problem.setdefault(p, []).append(i)
    within = [a for rows in by_problem.values()
              if (a := auroc(score[rows].tolist(), (y[rows] == 1).tolist())) is not None]
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(bootstrap):
        rows = [i for p in rng.choice(ids, len(ids)) for i in by_problem[p]]
        a = auroc(score[rows].tolist(), (y[rows] == 1).tolist())
        if a is not None:
            reps.append(a)
    lo, hi = percentile_interval(reps, overall)
    per_feature = {name: auroc(x[:, j].tolist(), (y == 1).tolist()) for j, name in enumerate(FEATURES)}
    restated = [float(any(_RESTATED.search(s.text) for s in t.steps)) for t in traces]
    per_feature["restating_line"] = auroc(restated, (y == 1).tolist())
    return {"auroc": overall, "lo": float(lo), "hi": float(hi), "within_problem": float(np.mean(within)),
            "within_problems": len(within), "traces": len(traces), "wrong": int(y.sum()),
            "per_feature": per_feature}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(SHARED / "gsm8k" / "train.jsonl"))
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args(argv)
    if not Path(args.data).exists():
        sys.exit(f"{args.data}: no such file (set PRMKIT_SHARED_DATA to the folder that holds gsm8k/)")
    refs = list(islice(read(args.data, "gsm8k"), args.problems))
    out = {}
    for name, hard in (("before", False), ("after", True)):
        traces = list(inject_errors(refs, per_problem=1, correct_fraction=0.5, seed=args.seed, hard_negatives=hard))
        out[name] = m = measure(traces, args.bootstrap, args.seed)
        print(f"{name:6s} ({'--hard-negatives' if hard else 'as before'}): {m['traces']} traces, {m['wrong']} wrong; "
              f"surface-cue AUROC {m['auroc']:.3f} [{m['lo']:.3f}, {m['hi']:.3f}], "
              f"within a problem {m['within_problem']:.3f} ({m['within_problems']} problems)")
    print(f"{'feature':18s} {'before':>7s} {'after':>7s}")
    for name in (*FEATURES, "restating_line"):
        cells = [out[k]["per_feature"][name] for k in ("before", "after")]
        print(f"{name:18s} " + " ".join(f"{c:7.3f}" if c is not None else "      -" for c in cells))
    print("(restating_line: a wording cue, not given to the classifier)")
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    leak = {k: abs(out[k]["auroc"] - 0.5) for k in out}
    ratio = leak["after"] / leak["before"] if leak["before"] else float("nan")
    print(f"ratio of surface-cue leaks |AUROC-0.5|, hard negatives / before: {ratio:.2f}")
    _record.record("derive_cues", {
        "problems": args.problems, "seed": args.seed,
        **{f"{k}_{f}": out[k][f] for k in out for f in ("auroc", "lo", "hi", "within_problem", "traces", "wrong")},
        **{f"{k}_feature_{n}": out[k]["per_feature"][n] for k in out for n in (*FEATURES, "restating_line")}},
        ratio, goal="surface-cue AUROC within 0.05 of chance with --hard-negatives")


if __name__ == "__main__":
    main()
