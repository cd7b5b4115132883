"""``prmkit generate``: sample labelled traces from a policy on the built-in environment or a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prmkit.cli._data import parse_options
from prmkit.cli._options import (
    DistractorsOpt,
    EnvOpt,
    EnvSeedOpt,
    MaxOperandOpt,
    OpsOpt,
    PolicyOpt,
    ProblemsOpt,
    ShotsOpt,
    StartOpt,
    StepsOpt,
)
from prmkit.cli._paths import input_files

console = Console()


def generate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output JSONL of traces (appended; resumable).")],
    env: EnvOpt = None,
    data: Annotated[Path | None, typer.Option(
        help="A dataset file of problems with reference answers (GSM8K, MATH-500, ...).",
        callback=input_files)] = None,
    data_format: Annotated[str | None, typer.Option(
        "--data-format", help="Format of --data (detected when omitted).")] = None,
    policy: PolicyOpt = None,
    policy_arg: Annotated[list[str] | None, typer.Option(
        "--policy-arg", "-p", help="Backend argument KEY=VALUE, e.g. -p model=HuggingFaceTB/SmolLM2-1.7B-Instruct "
        "or -p base_url=http://127.0.0.1:8000/v1 -p model=qwen. Repeatable.")] = None,
    n: Annotated[int, typer.Option("-n", help="Samples per problem.")] = 8,
    problems: ProblemsOpt = 50,
    start: StartOpt = 0,
    steps: StepsOpt = "3",
    ops: OpsOpt = "+-*",
    max_operand: MaxOperandOpt = 20,
    distractors: DistractorsOpt = 0,
    env_seed: EnvSeedOpt = 0,
    shots: ShotsOpt = None,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.7,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling mass.")] = 1.0,
    max_new_tokens: Annotated[int, typer.Option(help="Longest completion, in tokens.")] = 128,
    seed: Annotated[int, typer.Option(help="Sampling seed (per problem and sample).")] = 0,
    batch_size: Annotated[int | None, typer.Option(
        help="Local backends: rows decoded together (default: torch 64, ct2 64, hf 16).")] = None,
    problems_per_call: Annotated[int, typer.Option(help="Problems sent to the backend at once.")] = 4,
    no_labels: Annotated[bool, typer.Option("--no-labels", help="Skip symbolic step labels.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Start afresh instead of resuming.")] = False,
    hints: Annotated[str | None, typer.Option(
        help="Ask each problem once per hint arm, comma-separated among none,right,wrong (\"A teacher says "
             "the answer is N.\" with the right or a wrong N appended), for the faithfulness probe of "
             "prmkit eval probes.")] = None,
    hint_seed: Annotated[int, typer.Option(help="Draws the wrong hints' values.")] = 0,
) -> None:
    """Sample N traces per problem: steps split, answer extracted, outcome checked, symbolic labels.

    Example: prmkit generate --env arith -n 8 --problems 50 -o traces.jsonl
    A rerun with the same arguments skips the problems already in the file.
    """
    from prmkit.generate import generate_file, load_problems
    from prmkit.policies import SamplingParams, load_policy

    items, cfg = load_problems(env=env, data=data, data_format=data_format, n=problems, start=start,
                               steps=steps, ops=ops, max_operand=max_operand, distractors=distractors,
                               env_seed=env_seed, hints=hints.split(",") if hints else None,
                               hint_seed=hint_seed)
    params = SamplingParams(n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                            seed=seed)
    report = generate_file(out, items, load_policy(policy, parse_options(policy_arg), batch_size=batch_size),
                           params=params, arith_config=cfg, source=data_format, shots=shots,
                           problems_per_call=problems_per_call, label=not no_labels, overwrite=overwrite)
    for line in report.lines():  # pass@k of the whole output, from what the run returned
        console.print(line, highlight=False, soft_wrap=True)
