"""Command-line options several commands share: the ``arith`` environment's difficulty settings
(``generate``, ``search``, ``data derive``) and ``--overwrite`` (every command that writes a file);
and :func:`given_options`, which tells the options a user typed from those left at their defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import typer

__all__ = ["StepsOpt", "OpsOpt", "MaxOperandOpt", "DistractorsOpt", "EnvSeedOpt", "OverwriteOpt",
           "given_options"]

StepsOpt = Annotated[str, typer.Option(help="arith: operations per problem, N or MIN-MAX (1-6).")]
OpsOpt = Annotated[str, typer.Option(help="arith: operations to draw from.")]
MaxOperandOpt = Annotated[int, typer.Option(help="arith: largest number in a problem.")]
DistractorsOpt = Annotated[int, typer.Option(help="arith: irrelevant quantities per problem.")]
EnvSeedOpt = Annotated[int, typer.Option(help="arith: which problem set.")]
OverwriteOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace an output that already exists (without it the command refuses, "
    "before loading anything; the old output stays as it is until the new one is complete).")]


def given_options(ctx: typer.Context, options: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """Of the command's parameters named in ``options`` (parameter -> the stage's name for it): the
    stage's names of those the user gave (on the command line, not left at their defaults), and how
    the command line spells each one (``{"k": "--k / -k"}``), for the stage's errors.

    A stage that serves several methods with one command line refuses the given options its method
    does not take (``prmkit label -m symbolic -k 8``); the defaults of the others are no choice."""
    given, spelled = [], {}
    for param in ctx.command.params:
        if param.name not in options:
            continue
        name = options[param.name]
        flags = sorted(param.opts + param.secondary_opts, key=lambda f: (not f.startswith("--"), f))
        spelled[name] = " / ".join(flags)
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.append(name)
    return given, spelled
