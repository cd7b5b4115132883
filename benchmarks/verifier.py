"""Does the verifier verify? Best-of-N with a PRM against majority vote and an ORM, on held-out samples.

    python benchmarks/verifier.py --prm default --orm default-orm            # the shipped pair
    python benchmarks/verifier.py --prm runs/prm --orm runs/orm --problems 32 -n 8
    python benchmarks/verifier.py --heldout samples.jsonl --prm runs/prm     # given samples, no ORM

1. Held-out samples: ``--problems`` problems of the built-in ``arith`` environment (``--env-seed``,
   default 0; prmkit's training corpora use other seeds) at ``--steps`` operations with
   ``--distractors``, ``-n`` samples each from the default policy (``prmkit generate``'s settings,
   T 0.7), with symbolic step labels. Written to ``--heldout`` once and reused (resumable); a given
   file is used as it is.
2. The PRM scores every step (trace score: the minimum, fixed before looking: the field's usual
   reading) and the ORM every trace, each under its own key.
3. Printed, each with a 95% bootstrap interval (paired over problems for the differences):
   best-of-N accuracy of PRM (min), PRM-weighted voting, ORM, majority vote, random choice and pass@N at
   the largest N; the differences PRM − majority, PRM − ORM, PRM-weighted − majority; step AUROC and
   F1 against the symbolic labels; the process-collapse probe (AUROC within right-answer traces) and
   the gaming probe (share of min scores the perturbations raise); the result-check probe (does a valid
   step outscore the same step with its result changed; :mod:`prmkit.eval`). With ``--calculator``
   also the PRM with a calculator check of written arithmetic and the calculator alone
   (:class:`prmkit.scoring.CalculatorScorer`). Then the goals of issue 14 (met or not), the command
   line, and last the PRM − majority gap.

``--json FILE`` also writes the report sections (``bon``, ``summary``, ``step_metrics``, ``probes``), so
``prmkit report FILE`` renders them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _pts(d: dict) -> str:
    return f"{100 * d['diff']:+.1f} points [{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}]"


def _within(traces, key: str) -> float:
    from prmkit.eval import within_problem_auroc

    value = within_problem_auroc(traces, key)[0]
    return float("nan") if value is None else value


def _rivals(traces, methods, pairs, args, n: int, notes: dict[str, str]):
    """Best-of-N of the usual methods plus ``methods`` (one line each, with ``notes[key]``) and the
    paired differences ``pairs`` at ``n``; returns the curves."""
    from prmkit.eval import bon_curves, default_methods

    curves = bon_curves(traces, default_methods(traces) + list(methods), bootstrap=args.bootstrap,
                        seed=args.seed, comparisons=pairs)
    j = curves.ns.index(n)
    for m in methods:
        print(f"  {m.name:22s} {_pct(curves.acc[m.name][j])} [{_pct(curves.lo[m.name][j])}, "
              f"{_pct(curves.hi[m.name][j])}]{notes[m.key]}")
    for a, b in pairs:
        print(f"  {a} − {b}: {_pts(curves.compare(a, b, n))}")
    return curves


def _rankings(traces, key: str, label: str) -> None:
    """Step AUROC against the symbolic labels and within-problem AUROC of the scores under ``key``."""
    from prmkit.eval import step_metrics_for

    m = step_metrics_for(traces, key=key, label_source="symbolic").to_dict()
    print(f"  {label} step AUROC vs symbolic labels: {m['auroc']:.3f}; within-problem AUROC "
          f"{_within(traces, key):.3f}")


def _headroom(traces, methods) -> None:
    """What a PRM can add to the calculator: the problems whose calculator-clean candidates hold both
    right and wrong answers (elsewhere every ranking of the clean ones picks alike), and how often the
    PRM's top clean candidate is right there, against a random clean one."""
    from collections import defaultdict

    by = defaultdict(list)
    for t in traces:
        by[t.problem.id].append(t)
    mixed = right = rand = 0.0
    for group in by.values():
        clean = [t for t in group if (methods.alone.trace_score(t) or 0) > 0]
        ok = [t.outcome == "correct" for t in clean]
        if not any(ok) or all(ok):
            continue
        mixed += 1
        top = max(clean, key=lambda t: methods.prm.trace_score(t) or 0)  # ties: the first, in file order
        right += top.outcome == "correct"
        rand += sum(ok) / len(ok)
    print(f"  problems where the PRM decides among calculator-clean candidates (right and wrong answers "
          f"among them): {mixed:.0f} of {len(by)}; its top clean candidate right in {right:.0f}, a random "
          f"clean one in {rand:.1f} (the most the PRM can add to the calculator alone: "
          f"{100 * (mixed - rand) / len(by):.1f} points)")


def _verdict(result: dict) -> str:
    return "cannot measure" if result.get("failed") is None else "FAILED" if result["failed"] else "passed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prm", required=True, help="PRM: a checkpoint folder, or default")
    ap.add_argument("--orm", default=None, help="ORM: a checkpoint folder, or default-orm")
    ap.add_argument("--heldout", default=None,
                    help="held-out samples to use as they are (default: make them, once, in "
                         "runs/verifier/heldout-<settings>.jsonl)")
    ap.add_argument("--problems", type=int, default=128)
    ap.add_argument("-n", type=int, default=16, help="samples per problem (best-of-N up to this)")
    ap.add_argument("--steps", default="2-5")
    ap.add_argument("--distractors", type=int, default=1)
    ap.add_argument("--env-seed", type=int, default=0)
    ap.add_argument("--policy", default=None, help="policy backend (default: prmkit.policies.default_backend(): "
                    "torch where bfloat16 is native, else ct2 where installed, else hf)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--gaming-traces", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "auto"],
                    help="scoring precision (bf16: ~2x faster on CPUs with native bf16; scores differ "
                         "from fp32 by up to ~0.05, see benchmarks/score_precision.py)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--likelihood", action="store_true",
                    help="also score with the training-free likelihood scorer (the default policy's "
                         "surprise at each step's tokens) and compare the PRM with it")
    ap.add_argument("--likelihood-reduce", default="min", choices=["min", "mean", "result", "margin"],
                    help="what the likelihood scorer reads of a step: its most surprising token (min), the "
                         "mean, the most surprising token of the values it claims (result: after '='), or "
                         "how far those fall behind the LM's own first choice (margin)")
    ap.add_argument("--combine", action="store_true",
                    help="with --likelihood: also rank by the product of the PRM's and the likelihood's step "
                         "scores (both must hold; a step the likelihood does not score keeps the PRM's)")
    ap.add_argument("--calculator", action="store_true",
                    help="also rank by the PRM with a calculator check (prmkit.scoring.CalculatorScorer: a "
                         "step whose written arithmetic is wrong scores 0) and by the calculator alone")
    ap.add_argument("--scored", action="store_true",
                    help="the --heldout traces already carry the scores (a --save file): keep those "
                         "instead of scoring again (the PRM still loads for the probes)")
    ap.add_argument("--save", default=None, help="also write the scored held-out traces here (JSONL)")
    ap.add_argument("--json", default=None, help="also write the report sections here")
    args = ap.parse_args(argv)

    from prmkit.eval import bon_report, run_probes, step_metrics_for, within_problem_auroc
    from prmkit.generate import generate_file, load_problems
    from prmkit.policies import SamplingParams, load_policy
    from prmkit.scoring import StoredScorer, load_scorer, score_traces
    from prmkit.trace import read_traces

    t0 = time.perf_counter()
    heldout = Path(args.heldout or f"runs/verifier/heldout-arith{args.steps}-d{args.distractors}-seed"
                                    f"{args.env_seed}-{args.problems}x{args.n}.jsonl")
    if args.heldout is None:  # resumable: a finished file is only read
        problems, cfg = load_problems(env="arith", n=args.problems, steps=args.steps,
                                      distractors=args.distractors, env_seed=args.env_seed)
        params = SamplingParams(n=args.n, max_new_tokens=args.max_new_tokens, temperature=0.7, seed=args.seed)
        generate_file(heldout, problems, load_policy(args.policy), params=params, arith_config=cfg,
                      problems_per_call=max(1, 128 // args.n))
    traces = list(read_traces(heldout))
    print(f"held-out: {len(traces)} traces of {len({t.problem.id for t in traces})} problems ({heldout})")

    def carry(key: str) -> bool:  # --scored: every trace has this key's scores already
        return args.scored and all(any(key in st.scores for st in t.steps) for t in traces)

    prm = load_scorer("model", args.prm, {"cache": False, "precision": args.precision}, batch_size=args.batch_size)
    if not carry("prm"):
        score_traces(prm, traces, "prm", aggregate="min")
    if args.orm and not carry("orm"):
        orm = load_scorer("model", args.orm, {"cache": False, "precision": args.precision}, batch_size=args.batch_size)
        score_traces(orm, traces, "orm")
    if args.calculator:
        from prmkit.scoring import add_calculator_scores

        checked = add_calculator_scores(traces, "prm", aggregate="min")
        print(f"calculator: {checked.checks['flagged']} of {checked.checks['steps']} steps flagged "
              f"({checked.checks['with_equations']} with equations it reads)")

    if args.likelihood:
        from prmkit.scoring import LikelihoodScorer

        if not carry("likelihood"):
            score_traces(LikelihoodScorer(batch_size=args.batch_size, reduce=args.likelihood_reduce), traces,
                         "likelihood", aggregate="min")
        if args.combine:
            score_traces(StoredScorer("prm", "likelihood", missing="none"), traces, "combined", aggregate="min")
    if args.save:
        from prmkit.trace import write_traces

        write_traces(traces, args.save)

    report = bon_report(traces, bootstrap=args.bootstrap, seed=args.seed)
    curves = report.curves
    n = curves.ns[-1]
    j = curves.ns.index(n)
    print(f"\nbest-of-{n} on {curves.problems} problems (95% bootstrap intervals):")
    for m in curves.methods:
        print(f"  {m.name:22s} {_pct(curves.acc[m.name][j])} [{_pct(curves.lo[m.name][j])}, "
              f"{_pct(curves.hi[m.name][j])}]")
    names = {m.name for m in curves.methods}
    gaps = {}
    for a, b in [("PRM (min)", "majority"), ("PRM (min)", "ORM"), ("PRM weighted (min)", "majority"),
                 ("PRM weighted (min)", "ORM")]:
        if a in names and b in names:
            gaps[(a, b)] = curves.compare(a, b, n)
            print(f"  {a} − {b}: {_pts(gaps[(a, b)])}")
    if args.likelihood:
        from prmkit.eval import BonMethod

        lik = [BonMethod("likelihood (min)", "bon", "likelihood", "min"),
               BonMethod("likelihood weighted (min)", "weighted", "likelihood", "min")]
        pairs = [("likelihood (min)", "majority"), ("likelihood weighted (min)", "majority")]
        if args.combine:
            lik += [BonMethod("PRM×likelihood (min)", "bon", "combined", "min"),
                    BonMethod("PRM×likelihood weighted (min)", "weighted", "combined", "min")]
            pairs += [("PRM×likelihood (min)", "majority"), ("PRM×likelihood (min)", "likelihood (min)"),
                      ("PRM×likelihood weighted (min)", "majority")]
        if "PRM (min)" in names:
            pairs.insert(0, ("PRM (min)", "likelihood (min)"))
        reduce = f", reduce={args.likelihood_reduce})"
        _rivals(traces, lik, pairs, args, n, {
            "likelihood": "  (training-free: the default policy's token log-probs" + reduce,
            "combined": "  (the PRM's step scores times the likelihood's" + reduce})
        _rankings(traces, "likelihood", "likelihood")
        if args.combine:
            _rankings(traces, "combined", "PRM×likelihood")
    calc_gap = None
    if args.calculator:
        from prmkit.eval import checked_methods

        cm = checked_methods()  # the methods prmkit.eval.checked_bon_report judges
        main, weighted, alone = cm.main.name, cm.weighted.name, cm.alone.name
        calc = [cm.main, cm.weighted, cm.alone]  # the PRM alone is among the usual methods already
        pairs = [(main, "majority"), (main, cm.prm.name), (weighted, "majority"), (alone, "majority"),
                 (main, alone)]
        note = "  (a step whose written arithmetic is wrong scores 0)"
        cc = _rivals(traces, calc, pairs, args, n, {cm.main.key: note, cm.alone.key: note})
        calc_gap = cc.compare(main, "majority", n)
        _rankings(traces, "prm+calculator", "PRM+calculator")
        _headroom(traces, cm)
    sm = step_metrics_for(traces, key="prm", label_source="symbolic").to_dict()
    print(f"\nstep metrics vs symbolic labels: AUROC {sm['auroc']:.3f}  F1(error) {sm['f1_error']:.3f}  "
          f"on {sm['n']} labelled steps")
    within = within_problem_auroc(traces, "prm")
    print(f"within-problem AUROC of the trace score (min) for a right answer: {within[0]:.3f} over "
          f"{within[1]} problems with right and wrong samples (0.5: no better than chance; what "
          f"best-of-N needs, unlike the pooled step AUROC)" if within[1] else
          "within-problem AUROC: no problem has both right and wrong samples")
    probes = run_probes(prm, traces, key="prm", score=False, label_source="symbolic", aggregate="min",
                        seed=args.seed, gaming_traces=args.gaming_traces,
                        probes=["collapse", "gaming", "result_check"])
    col, gam, res = probes["collapse"], probes["gaming"], probes["result_check"]
    print(f"collapse probe: {'FAILED' if col.get('failed') else 'passed'} — {col.get('criterion', '')}")
    print(f"gaming probe: {'FAILED' if gam.get('failed') else 'passed'} — {gam.get('criterion', '')}")
    print(f"result-check probe: {_verdict(res)} — the written result scored above a changed one in "
          f"{res['caught']} of {res['n']} valid steps ({res['ties']} ties); {res.get('criterion', '')}")

    pm = gaps.get(("PRM (min)", "majority"))
    po = gaps.get(("PRM (min)", "ORM"))
    goals = [
        ("PRM − majority ≥ +5 points, interval excluding 0",
         pm is not None and pm["diff"] >= 0.05 and pm["lo"] > 0),
        ("PRM − ORM > 0, interval excluding 0", po is not None and po["lo"] > 0),
        ("PRM-weighted ≥ PRM and ≥ majority",
         "PRM weighted (min)" in names and curves.acc["PRM weighted (min)"][j] >= max(
             curves.acc["PRM (min)"][j], curves.acc["majority"][j])),
        ("step AUROC ≥ 0.90", (sm["auroc"] or 0) >= 0.90),
        ("collapse probe passes", not col.get("failed")),
        ("gaming probe passes", not gam.get("failed")),
    ]
    if calc_gap is not None:
        goals.insert(1, ("PRM+calculator − majority ≥ +5 points, interval excluding 0 (the PRM with a tool)",
                         calc_gap["diff"] >= 0.05 and calc_gap["lo"] > 0))
    print("\ngoals (issue 14):")
    for text, ok in goals:
        print(f"  [{'met' if ok else 'NOT met'}] {text}")
    if args.json:
        sections = {**report.to_dict(), "step_metrics": {"prm": sm}, "probes": probes}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(sections, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.json}")
    print(f"\n({time.perf_counter() - t0:.0f} s)  python benchmarks/verifier.py "
          + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    if pm is None:
        print("PRM (min) − majority: not computed (no PRM scores or no majority vote)")
    else:
        print(f"PRM (min) − majority at N={n}: {_pts(pm)}")
    _record.record("verifier", {"n": n, "goals": {text: ok for text, ok in goals}},
                   pm.get("diff") if isinstance(pm, dict) else None,
                   goal="PRM (min) − majority ≥ +5 points at N=16, the interval excluding 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
