"""``prmkit rl --config rl.yaml``: group-relative policy optimisation of a LoRA policy (docs/rl.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from prmkit.cli._paths import input_file, utf8_file

__all__ = ["rl"]


def rl(
    config: Annotated[Path, typer.Option("--config", "-c", help="The run's YAML config (docs/rl.md lists "
                                         "its fields; src/prmkit/rl/configs/arith-outcome.yaml is one).")],
    steps: Annotated[int | None, typer.Option(min=1, help="Train to this many steps (overrides the config's "
                                              "'steps'; a finished run continues to it).")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Optimise a policy (LoRA) with GRPO / RLOO against outcome, PRM, dense PRM, PAV or oracle step
    rewards on the arith environment; resumes from the output folder's last checkpoint.

    For example: prmkit rl --config src/prmkit/rl/configs/arith-outcome.yaml
    """
    from prmkit.rl import load_rl_config, rl_train

    utf8_file(input_file(str(config)))
    cfg = load_rl_config(config)
    if steps is not None:
        cfg.steps = steps
    cfg.progress = progress
    for line in rl_train(cfg).lines():
        typer.echo(line)
