"""Command-line options several commands share: the ``arith`` environment's difficulty settings
(``generate``, ``search``, ``data derive``) and ``--overwrite`` (every command that writes a file)."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["StepsOpt", "OpsOpt", "MaxOperandOpt", "DistractorsOpt", "EnvSeedOpt", "OverwriteOpt"]

StepsOpt = Annotated[str, typer.Option(help="arith: operations per problem, N or MIN-MAX (1-6).")]
OpsOpt = Annotated[str, typer.Option(help="arith: operations to draw from.")]
MaxOperandOpt = Annotated[int, typer.Option(help="arith: largest number in a problem.")]
DistractorsOpt = Annotated[int, typer.Option(help="arith: irrelevant quantities per problem.")]
EnvSeedOpt = Annotated[int, typer.Option(help="arith: which problem set.")]
OverwriteOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace an output that already exists (without it the command refuses, "
    "before loading anything; the old output stays as it is until the new one is complete).")]
