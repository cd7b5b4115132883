"""The TRL side of ``benchmarks/train_vs_trl.py``: TRL 1.13.0's PRMTrainer, timed on the same data.

TRL dropped its PRM trainer after 1.13.0, so this module runs only in the benchmark venv made from
``benchmarks/requirements-trl113.txt`` (see the setup command in that file's header)::

    .venv-bench/bin/python benchmarks/_trl_prm.py --model tiny --steps 2 --batch-size 4
    .venv-bench/bin/python benchmarks/_trl_prm.py --model smollm2 --steps 3 --batch-size 8 --max-length 512

How TRL 1.13.0 tokenizes a stepwise-supervision row (``PRMTrainer.tokenize_row`` in
``trl/experimental/prm/prm_trainer.py``):

- the prompt and every step are tokenized *separately*, ``add_special_tokens=False``; the step
  separator (``PRMConfig.step_separator``, ``"\\n"`` by default) is tokenized once and appended to
  *every* step, the last one included. Nothing separates the prompt from the first step: the first
  step's tokens follow the prompt's directly. Per-piece tokenization can differ from tokenizing the
  joined text at the seams (BPE merges across a step boundary never happen);
- each step's label (``int(bool)``: 1 correct, 0 wrong) sits on the step's *last* token, which is the
  (last) separator token; every other position, the prompt's included, is ``-100``;
- the tokenizer's BOS (``bos_token_id``, when not ``None``) is prepended to the prompt; no EOS and no
  chat template. With SmolLM2 the BOS is ``<|im_start|>`` (id 1);
- ``max_completion_length`` (unused here) cuts the concatenated steps, then ``max_length`` cuts the
  whole sequence from the *right*: steps past ``max_length`` silently lose their labels, and a prompt
  longer than ``max_length`` leaves a row with no label at all (a batch made only of such rows has a
  NaN loss). No row is dropped and nothing is reported;
- the tokenized dataset holds only ``input_ids`` and ``labels``; the default collator,
  ``transformers.DataCollatorForTokenClassification``, pads each batch to its longest row (right
  padding with the pad token, labels with -100) and builds ``attention_mask``. Batches are drawn by
  the Trainer's seeded random sampler: no length bucketing.

``PRMConfig`` inherits TRL's ``_BaseConfig`` defaults ``gradient_checkpointing=True`` and
``bf16=True``; here checkpointing is off (so both trainers do the same work per token) and bf16 is
off unless asked for (``bf16=True``: TRL's default, the Trainer's bfloat16 autocast through
accelerate, weights and optimizer in float32). The optimizer is the Trainer's default,
``adamw_torch_fused``. The Trainer's telemetry ping is disabled (``HF_HUB_DISABLE_TELEMETRY``).
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "prmbench" / \
    "prm800k_train_p1_first400_4o_circular.jsonl"

__all__ = ["run_trl_prm", "rows_from_file", "make_tiny_llama", "smollm2_dir"]


def run_trl_prm(model_dir: str, train_rows: list[dict], eval_rows: list[dict], *, batch_size: int,
                max_length: int, steps: int, lr: float, seed: int, step_separator: str = "\n",
                gradient_checkpointing: bool = False, bf16: bool = False) -> dict[str, Any]:
    """Train ``steps`` optimizer steps of TRL's PRMTrainer from ``model_dir``, then evaluate.

    Rows are TRL stepwise-supervision dicts ``{"prompt": str, "completions": [str], "labels": [bool]}``.
    Only ``trainer.train()`` is timed (it includes building the dataloader and optimizer and the
    Trainer's own per-step bookkeeping; tokenization happens before, in the constructor).
    ``tokens`` / ``padded_tokens`` count the batches the training steps actually consumed
    (``attention_mask.sum()`` and ``input_ids.numel()``, counted in ``training_step``, so a batch
    that accelerate prefetches but no step uses is not counted).

    Returns ``seconds``, ``tokens``, ``padded_tokens``, ``tokens_per_s`` (real tokens / seconds),
    ``eval_loss``, ``train_loss`` (mean over the steps), ``model`` and ``tokenizer`` (the trained
    model, for an evaluation of one's own), ``optim`` (the Trainer's optimizer name), and also ``eval_accuracy`` (TRL's token
    accuracy over labelled positions), ``cpu_seconds`` (process CPU time of ``train()``, all
    threads: less sensitive than wall time to other load on a shared machine), ``steps``,
    ``step_seconds`` (wall time of each step, from a callback: the first includes warm-up),
    ``label_tokens`` (labelled positions trained on) and, over
    the train rows, ``truncated_rows`` (rows cut by ``max_length``) and ``labels_lost`` (step labels
    cut off with them).
    """
    import torch
    from datasets import Dataset
    from transformers import AutoModelForTokenClassification, AutoTokenizer, PrinterCallback, TrainerCallback
    from trl.experimental.prm import PRMConfig, PRMTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForTokenClassification.from_pretrained(model_dir, num_labels=2,
                                                            dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id

    # What max_length cuts off, from TRL's own tokenizer without the cut.
    truncated_rows = labels_lost = 0
    for row in train_rows:
        full = PRMTrainer.tokenize_row(row, tokenizer, step_separator, None, None, False, False)
        if len(full["input_ids"]) > max_length:
            truncated_rows += 1
            labels_lost += sum(x != -100 for x in full["labels"][max_length:])

    counts = {"tokens": 0, "padded_tokens": 0, "label_tokens": 0}

    class CountingPRMTrainer(PRMTrainer):
        def training_step(self, model, inputs, *args, **kwargs):
            counts["tokens"] += int(inputs["attention_mask"].sum())
            counts["padded_tokens"] += int(inputs["input_ids"].numel())
            counts["label_tokens"] += int((inputs["labels"] != -100).sum())
            return super().training_step(model, inputs, *args, **kwargs)

    step_seconds: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            step_seconds.append(time.perf_counter() - self.t0)

    # transformers 5.24 renamed gradient_checkpointing (TRL's default: True) to activation_checkpointing.
    if "activation_checkpointing" in PRMConfig.__dataclass_fields__:
        checkpointing = {"activation_checkpointing": gradient_checkpointing, "gradient_checkpointing": None}
    else:
        checkpointing = {"gradient_checkpointing": gradient_checkpointing}

    with tempfile.TemporaryDirectory(prefix="trl-prm-bench-") as out:
        args = PRMConfig(
            output_dir=out, max_steps=steps, per_device_train_batch_size=batch_size,
            per_device_eval_batch_size=batch_size, gradient_accumulation_steps=1, learning_rate=lr,
            seed=seed, max_length=max_length, step_separator=step_separator,
            eval_strategy="no", save_strategy="no", logging_strategy="no", report_to=[],
            disable_tqdm=True, dataloader_num_workers=0, dataloader_pin_memory=False,
            bf16=bf16, fp16=False, use_cpu=not torch.cuda.is_available(), **checkpointing,
        )
        trainer = CountingPRMTrainer(
            model=model, args=args, processing_class=tokenizer,
            train_dataset=Dataset.from_list(train_rows),
            eval_dataset=Dataset.from_list(eval_rows) if eval_rows else None,
            callbacks=[StepTimer()],
        )
        trainer.remove_callback(PrinterCallback)  # disable_tqdm prints the final metrics to stdout
        assert bool(trainer.args.gradient_checkpointing) == gradient_checkpointing, "checkpointing setting lost"
        t0, c0 = time.perf_counter(), time.process_time()
        out_train = trainer.train()
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        metrics = trainer.evaluate() if eval_rows else {}

    return {
        "seconds": seconds,
        "tokens": counts["tokens"],
        "padded_tokens": counts["padded_tokens"],
        "tokens_per_s": counts["tokens"] / seconds if seconds > 0 else float("nan"),
        "eval_loss": metrics.get("eval_loss", float("nan")),
        "train_loss": out_train.training_loss,
        "eval_accuracy": metrics.get("eval_accuracy", float("nan")),
        "cpu_seconds": cpu_seconds,
        "steps": out_train.global_step,
        "step_seconds": step_seconds,
        "label_tokens": counts["label_tokens"],
        "truncated_rows": truncated_rows,
        "labels_lost": labels_lost,
        "optim": str(getattr(args.optim, "value", args.optim)),
        "model": trainer.model,
        "tokenizer": tokenizer,
    }


def rows_from_file(path: str | os.PathLike, limit: int | None = None) -> list[dict]:
    """TRL stepwise rows from any trace file prmkit reads (each step's first label, > 0 is correct)."""
    from prmkit.data import read

    rows = []
    for trace in read(path):
        if limit is not None and len(rows) >= limit:
            break
        rows.append({"prompt": trace.problem.text,
                     "completions": [s.text for s in trace.steps],
                     "labels": [s.labels[0].value > 0 for s in trace.steps]})
    return rows


def smollm2_dir() -> str:
    """The newest converted SmolLM2-135M-Instruct folder in prmkit's cache (``$PRMKIT_CACHE`` or ~/.cache/prmkit)."""
    cache = os.environ.get("PRMKIT_CACHE") or os.path.expanduser("~/.cache/prmkit")
    found = sorted(glob.glob(os.path.join(cache, "gguf", "SmolLM2-135M-Instruct*", "config.json")),
                   key=os.path.getmtime)
    if not found:
        raise SystemExit(f"no converted SmolLM2 folder under {cache}/gguf (run prmkit once in the main venv)")
    return os.path.dirname(found[-1])


def make_tiny_llama(out_dir: str | os.PathLike, tokenizer_dir: str, *, hidden: int = 32, layers: int = 2,
                    seed: int = 0) -> str:
    """A random-init Llama (``hidden``, ``layers``) with ``tokenizer_dir``'s tokenizer, saved to ``out_dir``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=2048, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(seed)
    LlamaForCausalLM(cfg).save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return str(out_dir)


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny, smollm2, or a transformers folder")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--train-rows", type=int, default=None, help="default: all but the eval rows")
    ap.add_argument("--eval-rows", type=int, default=16, help="the file's last N rows")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--bf16", action="store_true", help="TRL's default bfloat16 autocast (default here: fp32)")
    a = ap.parse_args(argv)

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    rows = rows_from_file(a.data)
    eval_rows = rows[len(rows) - a.eval_rows:] if a.eval_rows else []
    train_rows = rows[:len(rows) - a.eval_rows][:a.train_rows]
    with tempfile.TemporaryDirectory(prefix="tiny-llama-") as tmp:
        if a.model == "tiny":
            model_dir = make_tiny_llama(tmp, smollm2_dir())
        elif a.model == "smollm2":
            model_dir = smollm2_dir()
        else:
            model_dir = a.model
        r = run_trl_prm(model_dir, train_rows, eval_rows, batch_size=a.batch_size, max_length=a.max_length,
                        steps=a.steps, lr=a.lr, seed=a.seed, bf16=a.bf16)
    del r["model"], r["tokenizer"]
    r["seconds_per_step"] = r["seconds"] / max(r["steps"], 1)
    r["padding_fraction"] = 1 - r["tokens"] / r["padded_tokens"] if r["padded_tokens"] else 0.0
    r["threads"] = torch.get_num_threads()
    json.dump(r, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
