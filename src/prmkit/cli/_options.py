"""Command-line options several command modules share, defined once: what to score with
(``--model``, ``--scorer``, ``-s``, ``--allow-pickle``, ``--aggregate``), where problems come from
(``--env``, ``--problems``, ``--start``, the ``arith`` difficulty settings), the policy (``--policy``,
``-p``), input (``--from``, ``--skip-invalid``), monitors (``--monitor``, ``--monitor-arg``) and
``--overwrite``; and :func:`given_options`, which tells the options a user typed from those left at
their defaults. A help that lists names takes them from the registry (plugins included)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from prmkit.cli._help import check_aggregator, monitor_help, names, policy_help
from prmkit.cli._paths import model_folders
from prmkit.data import FORMATS
from prmkit.generate import ENVS
from prmkit.scoring import AGGREGATORS, SCORERS

__all__ = ["StepsOpt", "OpsOpt", "MaxOperandOpt", "DistractorsOpt", "EnvSeedOpt", "EnvOpt", "ProblemsOpt",
           "StartOpt", "ShotsOpt", "OverwriteOpt", "ModelOpt", "ScorerOpt", "ScorerArgOpt", "AllowPickleOpt",
           "AggregateOpt", "InFormatOpt", "SkipInvalidOpt", "PolicyOpt", "PolicyArgOpt", "MonitorOpt",
           "MonitorArgOpt", "given_options"]

# -- problems (generate, search, data derive) --------------------------------------------------------
StepsOpt = Annotated[str, typer.Option(help="arith: operations per problem, N or MIN-MAX (1-6).")]
OpsOpt = Annotated[str, typer.Option(help="arith: operations to draw from.")]
MaxOperandOpt = Annotated[int, typer.Option(help="arith: largest number in a problem.")]
DistractorsOpt = Annotated[int, typer.Option(help="arith: irrelevant quantities per problem.")]
EnvSeedOpt = Annotated[int, typer.Option(help="arith: which problem set.")]
EnvOpt = Annotated[str | None, typer.Option(help=f"Built-in environment: {names(ENVS)}.")]
ProblemsOpt = Annotated[int, typer.Option(min=1, help="How many problems.")]
StartOpt = Annotated[int, typer.Option(min=0, help="Index of the first problem.")]
ShotsOpt = Annotated[int | None, typer.Option(
    help="Worked examples in the prompt (default: 0 for the tuned default policy, else 2).")]

# -- outputs and inputs ------------------------------------------------------------------------------
OverwriteOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace an output that already exists (without it the command refuses, "
    "before loading anything; the old output stays as it is until the new one is complete).")]
InFormatOpt = Annotated[str | None, typer.Option(
    "--from", help=f"Format of IN (detected when omitted): {names(FORMATS)}.")]
SkipInvalidOpt = Annotated[bool, typer.Option(
    "--skip-invalid", help="Skip malformed input records instead of failing (each listed with "
    "its place, id and reason; past 20, counted and written to OUT.skipped.jsonl).")]

# -- the verifier (score, select, search, eval) ------------------------------------------------------
ModelOpt = Annotated[Path | None, typer.Option(
    "--model", help="PRM / ORM checkpoint folder (prmkit train output, or a published PRM).",
    callback=model_folders)]
ScorerOpt = Annotated[str, typer.Option(
    "--scorer", help=f"Scorer backend: {names(SCORERS)} (model: the --model folder).")]
ScorerArgOpt = Annotated[list[str] | None, typer.Option(
    "--scorer-arg", "-s", help="Scorer argument KEY=VALUE, e.g. -s convention=qwen2.5-math-prm, "
    "-s max_length=4096 (read long traces in one pass, up to the model's positions) or -s cache=false. "
    "Repeatable.")]
AllowPickleOpt = Annotated[bool, typer.Option(
    "--allow-pickle", help="Load a --model folder whose weights are pickle files only "
    "(pytorch_model.bin, *.pt): unpickling can run code, so only for a checkpoint you trust.")]
AggregateOpt = Annotated[str, typer.Option(
    help=f"Step scores -> trace score: {names(AGGREGATORS)}; arguments after a colon (NAME:T).",
    callback=check_aggregator)]

# -- the policy (generate, label, search) ------------------------------------------------------------
PolicyOpt = Annotated[str | None, typer.Option(help=policy_help("Backend"))]
PolicyArgOpt = Annotated[list[str] | None, typer.Option(
    "--policy-arg", "-p", help="Policy argument KEY=VALUE (repeatable).")]

# -- monitors (monitor, agent run, eval monitor) -----------------------------------------------------
MonitorOpt = Annotated[list[str] | None, typer.Option(
    "--monitor", "-m", help=monitor_help() + " Repeatable.")]
MonitorArgOpt = Annotated[list[str] | None, typer.Option(
    "--monitor-arg", help="A monitor setting MONITOR.KEY=VALUE, e.g. prm.threshold=0.3, "
    "judge.policy=openai_compat, judge.base_url=http://127.0.0.1:8000/v1. Repeatable.")]


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
