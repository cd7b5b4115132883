"""``prmkit demo``: the whole pipeline on the embedded default (see :mod:`prmkit.demo`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prmkit.cli._data import parse_options
from prmkit.cli._help import policy_help
from prmkit.cli._paths import input_files

console = Console()


def demo(
    quick: Annotated[bool, typer.Option("--quick", help="A small run (about 3 minutes on 2 cores) that "
                                                       "exercises every stage; CI runs it.")] = False,
    preset: Annotated[str | None, typer.Option(
        help="full (the default: 48 + 64 problems x 16 samples, about 10 minutes on 2 cores), quick (the same as --quick), or "
             "verdict (384 held-out problems x 16 in the shipped models' setting: a verdict interval "
             "of about ±4.5 points, about 50 minutes on 2 cores).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Run folder (default runs/demo, or runs/demo-quick with --quick).")] = None,
    transfer_data: Annotated[Path | None, typer.Option(
        help="A GSM8K JSONL file: the domain-transfer probe evaluates the PRM on traces derived from "
             "its reference solutions (default: a shifted arith configuration, no data needed).",
        callback=input_files)] = None,
    overwrite: Annotated[bool, typer.Option(help="Delete the run folder and start afresh.")] = False,
    policy: Annotated[str | None, typer.Option(help=policy_help("Policy backend"))] = None,
    policy_arg: Annotated[list[str] | None, typer.Option(
        "--policy-arg", "-p", help="Backend argument KEY=VALUE, e.g. -p dtype=float32, or -p "
        "base_url=http://127.0.0.1:8000/v1 -p model=qwen with --policy openai_compat. Repeatable.")] = None,
) -> None:
    """Sample, label, train a PRM and an ORM, evaluate, probe and write the report.

    Example: prmkit demo   (then open runs/demo/report/report.html)
    A rerun with the same settings resumes where the last one stopped.
    """
    import dataclasses

    from prmkit.demo import DEMO_PRESETS, run_demo
    from prmkit.errors import PrmkitError

    if quick and preset not in (None, "quick"):
        raise PrmkitError(f"--quick and --preset {preset} disagree; give one")
    name = "quick" if quick else (preset or "full")
    if name not in DEMO_PRESETS:
        raise PrmkitError(f"unknown preset {name!r}; presets: {', '.join(DEMO_PRESETS)}")
    cfg = dataclasses.replace(DEMO_PRESETS[name],
                              transfer_data=str(transfer_data) if transfer_data is not None else None,
                              policy_args=parse_options(policy_arg))
    if policy is not None:
        cfg = dataclasses.replace(cfg, policy=policy)
    out = out or Path("runs/demo" if name == "full" else f"runs/demo-{name}")
    paths = run_demo(cfg, out, overwrite=overwrite, command="prmkit " + " ".join(sys.argv[1:]))
    import json

    summary = json.loads(Path(paths["json"]).read_text()).get("summary", {})
    console.print(summary.get("verdict", ""), highlight=False, soft_wrap=True)
    for kind, path in paths.items():
        console.print(f"{kind}: {path}", highlight=False, soft_wrap=True)
