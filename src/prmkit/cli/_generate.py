"""``prmkit generate``: sample labelled traces from a policy on the built-in environment or a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prmkit.cli._data import parse_options
from prmkit.errors import PrmkitError

console = Console()


def generate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output JSONL of traces (appended; resumable).")],
    env: Annotated[str | None, typer.Option(help="Built-in environment: arith.")] = None,
    data: Annotated[Path | None, typer.Option(
        help="A dataset file of problems with reference answers (GSM8K, MATH-500, ...).")] = None,
    data_format: Annotated[str | None, typer.Option(
        "--data-format", help="Format of --data (detected when omitted).")] = None,
    policy: Annotated[str | None, typer.Option(
        help="Backend: ct2, hf, openai_compat, scripted (default: ct2 where ctranslate2 is installed, "
             "else hf).")] = None,
    policy_arg: Annotated[list[str] | None, typer.Option(
        "--policy-arg", "-p", help="Backend argument KEY=VALUE, e.g. -p model=HuggingFaceTB/SmolLM2-1.7B-Instruct "
        "or -p base_url=http://127.0.0.1:8000/v1 -p model=qwen. Repeatable.")] = None,
    n: Annotated[int, typer.Option("-n", help="Samples per problem.")] = 8,
    problems: Annotated[int, typer.Option(help="How many problems.")] = 50,
    start: Annotated[int, typer.Option(help="Index of the first problem.")] = 0,
    steps: Annotated[str, typer.Option(help="arith: operations per problem, N or MIN-MAX (1-6).")] = "3",
    ops: Annotated[str, typer.Option(help="arith: operations to draw from.")] = "+-*",
    max_operand: Annotated[int, typer.Option(help="arith: largest number in a problem.")] = 20,
    distractors: Annotated[int, typer.Option(help="arith: irrelevant quantities per problem.")] = 0,
    env_seed: Annotated[int, typer.Option(help="arith: which problem set.")] = 0,
    shots: Annotated[int | None, typer.Option(
        help="Worked examples in the prompt (default: 0 for the tuned default policy, else 2).")] = None,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.7,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling mass.")] = 1.0,
    max_new_tokens: Annotated[int, typer.Option(help="Longest completion, in tokens.")] = 128,
    seed: Annotated[int, typer.Option(help="Sampling seed (per problem and sample).")] = 0,
    batch_size: Annotated[int | None, typer.Option(
        help="Local backends: rows decoded together (default: ct2 64, hf 32).")] = None,
    problems_per_call: Annotated[int, typer.Option(help="Problems sent to the backend at once.")] = 4,
    no_labels: Annotated[bool, typer.Option("--no-labels", help="Skip symbolic step labels.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Start afresh instead of resuming.")] = False,
) -> None:
    """Sample N traces per problem: steps split, answer extracted, outcome checked, symbolic labels.

    Example: prmkit generate --env arith -n 8 --problems 50 -o traces.jsonl
    A rerun with the same arguments skips the problems already in the file.
    """
    from prmkit.envs._prompts import PromptBuilder
    from prmkit.eval import pass_at_k_traces
    from prmkit.policies import SamplingParams
    from prmkit.policies._sampling import sample_traces
    from prmkit.trace import read_traces

    items, cfg = load_problems(env, data, data_format, problems, start, steps, ops, max_operand,
                               env_seed, distractors)
    pol = load_policy(policy, policy_arg, batch_size)
    prompts = PromptBuilder.for_policy(pol, config=cfg, source=data_format, shots=shots)
    params = SamplingParams(n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                            seed=seed)
    report = sample_traces(items, pol, out, params=params, prompts=prompts,
                           problems_per_call=problems_per_call, label=not no_labels,
                           overwrite=overwrite)
    done = [t for t in read_traces(out)]
    ks = [k for k in (1, 4, 8, 16, 32) if k <= n]
    passk = pass_at_k_traces(done, ks)
    console.print(
        f"{out}: {len(done)} traces for {report.problems} problems "
        f"({report.skipped_done} already done, {report.generated} generated"
        + (f", {report.dropped_partial} partial lines redone" if report.dropped_partial else "")
        + f"); {report.tokens} new tokens; finish {dict(report.finish)}", highlight=False,
        soft_wrap=True)
    console.print("  ".join(f"pass@{k} {v:.1%}" for k, v in passk.items()), highlight=False,
                  soft_wrap=True)


def load_policy(policy: str | None, policy_arg: list[str] | None, batch_size: int | None):
    """The ``--policy`` backend (None: :func:`~prmkit.policies.default_backend`) with its
    ``-p KEY=VALUE`` arguments (local backends: ``--batch-size`` where given, no per-batch progress
    bar); shared by ``generate`` and ``search``."""
    from prmkit.policies import default_backend, get_policy

    policy = policy or default_backend()
    kwargs = parse_options(policy_arg)
    if policy in ("hf", "ct2"):
        if batch_size is not None:
            kwargs.setdefault("batch_size", batch_size)
        kwargs.setdefault("progress", False)
    return get_policy(policy, **kwargs)


def load_problems(env: str | None, data: Path | None, data_format: str | None, problems: int, start: int,
                  steps: str, ops: str, max_operand: int, env_seed: int, distractors: int = 0):
    """``(problems, arith config or None)`` from ``--env arith`` or ``--data PATH`` (shared by
    ``generate`` and ``search``)."""
    from prmkit.envs import ArithConfig, ArithEnv
    from prmkit.policies._sampling import problems_from_file

    if (env is None) == (data is None):
        raise PrmkitError("give exactly one of --env arith or --data PATH")
    if env is not None:
        if env != "arith":
            raise PrmkitError(f"unknown environment {env!r}; built in: arith")
        lo, _, hi = steps.partition("-")
        try:
            step_range = int(lo) if not hi else (int(lo), int(hi))
        except ValueError:
            raise PrmkitError(f"--steps must be N or MIN-MAX, got {steps!r}") from None
        cfg = ArithConfig(steps=step_range, ops=tuple(ops), max_operand=max_operand,
                          distractors=distractors, seed=env_seed)
        return ArithEnv(cfg).problems(problems, start=start), cfg
    assert data is not None
    if not data.exists():
        raise PrmkitError(f"{data}: no such file")
    return problems_from_file(data, data_format, limit=start + problems)[start:], None
