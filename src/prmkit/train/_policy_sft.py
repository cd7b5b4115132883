"""``prmkit policy sft``: fine-tune the policy on the environment's reference solutions (LoRA, TRL).

SmolLM2-135M-Instruct, prompted with worked examples, solves about 8% of two-step ``arith`` problems
per sample and 39% with 16 samples — too few successes for best-of-N to have anything to pick. Published
process-supervision work fine-tuned its generator on reference solutions for the same reason (the
generator of "Let's Verify Step by Step" was fine-tuned to write one step per line). This does that with
TRL's ``SFTTrainer`` and a LoRA adapter from ``peft``: prompt-completion pairs (the zero-shot prompt of
:class:`~prmkit.envs.PromptBuilder`, the reference solution), loss on the completion only.

The problems come from seeds no evaluation uses (:data:`SFT_SEED` and up), over a spread of
difficulties, so the tuned policy still makes real mistakes on harder or differently shaped problems.
The result is a plain PEFT adapter folder (safetensors) plus ``prmkit_sft.json`` recording the data,
the hyper-parameters and what the run cost.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prmkit._jsonio import publish_into
from prmkit.envs import ArithConfig, ArithEnv, PromptBuilder
from prmkit.errors import MissingDependencyError, PrmkitError

__all__ = ["PolicySFTConfig", "sft_policy", "SFT_SEED"]

#: First seed of the training problems (evaluation and demos use small seeds).
SFT_SEED = 100_000


@dataclass
class PolicySFTConfig:
    """What ``prmkit policy sft`` trains. Difficulty mixes: ``steps`` range, ``ops``, distractors in
    ``distractors`` (each problem draws one of them)."""

    output_dir: str = "runs/policy-sft"
    model: str | None = None
    gguf_file: str | None = None
    #: Training runs on the CPU by default (the embedded setting); "cuda" where there is a GPU.
    device: str = "cpu"
    examples: int = 800
    steps: tuple[int, int] = (1, 4)
    ops: tuple[str, ...] = ("+", "-", "*")
    max_operand: int = 20
    distractors: tuple[int, ...] = (0, 1)
    seed: int = SFT_SEED
    epochs: float = 1.0
    learning_rate: float = 3e-4
    batch_size: int = 8
    max_length: int = 256
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj",
                                                               "o_proj", "gate_proj", "up_proj",
                                                               "down_proj"])

    def validate(self) -> None:
        errors = []
        if self.examples < 1:
            errors.append("examples must be >= 1")
        if self.epochs <= 0:
            errors.append("epochs must be > 0")
        if self.batch_size < 1:
            errors.append("batch_size must be >= 1")
        if self.lora_r < 1:
            errors.append("lora_r must be >= 1")
        try:
            ArithConfig(steps=tuple(self.steps), ops=tuple(self.ops), max_operand=self.max_operand)
        except PrmkitError as e:
            errors.append(str(e))
        if errors:
            raise PrmkitError("policy sft config: " + "; ".join(errors))


def training_examples(cfg: PolicySFTConfig) -> list[dict[str, Any]]:
    """Conversational prompt-completion pairs (TRL's format) from reference solutions."""
    rows = []
    envs = [ArithEnv(ArithConfig(steps=tuple(cfg.steps), ops=tuple(cfg.ops),
                                 max_operand=cfg.max_operand, distractors=d, seed=cfg.seed + i))
            for i, d in enumerate(cfg.distractors)]
    prompts = PromptBuilder("arith", shots=0)
    for i in range(cfg.examples):
        p = envs[i % len(envs)].problem(i // len(envs))
        rows.append({"prompt": prompts.messages(p),
                     "completion": [{"role": "assistant", "content": p.solution}]})
    return rows


def sft_policy(cfg: PolicySFTConfig) -> Path:
    """Train a LoRA adapter on the policy; returns the adapter folder."""
    cfg.validate()
    try:
        from datasets import Dataset
        from peft import LoraConfig
        from trl import SFTConfig, SFTTrainer
    except ImportError as e:
        raise MissingDependencyError(e.name or "trl", "train", "prmkit policy sft") from None
    from prmkit.policies import load_causal_lm

    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model, tok, model_id = load_causal_lm(cfg.model, gguf_file=cfg.gguf_file, device=cfg.device)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    rows = training_examples(cfg)
    args = SFTConfig(
        output_dir=str(out / "trainer"), num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size, learning_rate=cfg.learning_rate,
        lr_scheduler_type="cosine", warmup_steps=0.05, logging_steps=10, save_strategy="no",
        report_to=[], max_length=cfg.max_length, completion_only_loss=True, seed=cfg.seed,
        use_cpu=cfg.device == "cpu", bf16=False, fp16=False, dataloader_num_workers=0,
        disable_tqdm=False,
    )
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=list(cfg.target_modules), task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tok, peft_config=lora)
    t0 = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - t0
    # The adapter only (adapter_config.json + safetensors) and its card, written whole beside the
    # trainer's folder, flushed, and moved in with adapter_config.json (what loads it) last.
    stage = out / ".tmp-adapter"
    shutil.rmtree(stage, ignore_errors=True)
    trainer.model.save_pretrained(stage)
    card = {
        "base_model": model_id, "config": asdict(cfg), "train_seconds": round(seconds, 1),
        "train_loss": round(float(result.training_loss), 4),
        "train_tokens": int(trainer.state.num_input_tokens_seen or 0),
        "steps": int(trainer.state.global_step),
        "log": [h for h in trainer.state.log_history if "loss" in h],
        "command": (f"prmkit policy sft --examples {cfg.examples} --steps {cfg.steps[0]}-{cfg.steps[1]} "
                    f"--ops {''.join(cfg.ops)} --epochs {cfg.epochs} --learning-rate {cfg.learning_rate} "
                    f"--batch-size {cfg.batch_size} --lora-r {cfg.lora_r} --seed {cfg.seed} "
                    f"--output-dir {cfg.output_dir}"),
    }
    (stage / "prmkit_sft.json").write_text(json.dumps(card, indent=2))
    publish_into(stage, out, last="adapter_config.json")
    return out
