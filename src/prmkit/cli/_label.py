"""``prmkit label``: label the steps of saved traces automatically (resumable)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from prmkit.errors import PrmkitError

console = Console()

METHODS = ("mc", "binary", "advantage", "judge", "consensus", "symbolic")


def _kwargs(method: str, *, policy: Any, judge_policy: Any, k: int, max_rollouts: int,
            after_error: str, retries: int, max_new_tokens: int, judge_max_new_tokens: int,
            temperature: float, judge_temperature: float, top_p: float, seed: int,
            shots: int | None, workers: int | None, ray_address: str | None) -> dict[str, Any]:
    """The labeler's arguments for ``method`` from the command-line options."""
    if method == "symbolic":
        return {}
    rollout = {"k": k, "max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p,
               "seed": seed, "shots": shots, "workers": workers, "ray_address": ray_address}
    if method in ("mc", "advantage"):
        return {"policy": policy, **rollout}
    if method == "binary":
        return {"policy": policy, "max_rollouts": max_rollouts, "after_error": after_error, **rollout}
    judge = {"retries": retries, "max_new_tokens": judge_max_new_tokens,
             "temperature": judge_temperature, "top_p": top_p, "seed": seed, "workers": workers,
             "ray_address": ray_address}
    if method == "judge":
        return {"policy": judge_policy if judge_policy is not None else policy, **judge}
    return {"policy": policy, "judge_policy": judge_policy, "retries": retries,
            "judge_max_new_tokens": judge_max_new_tokens, "judge_temperature": judge_temperature,
            **rollout}


def label(
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Traces to label (prmkit JSONL or any "
                                        "importable format).")],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="Labelled traces (prmkit JSONL).")],
    method: Annotated[str, typer.Option(
        "--method", "-m", help="mc, binary, advantage, judge, consensus or symbolic.")] = "mc",
    policy: Annotated[str | None, typer.Option(
        help="Rollout policy: a backend (ct2, hf, openai_compat, scripted) or module:attr (default: ct2 "
             "where ctranslate2 is installed, else hf).")] = None,
    policy_arg: Annotated[list[str] | None, typer.Option(
        "--policy-arg", "-p", help="Policy argument KEY=VALUE (repeatable).")] = None,
    judge_policy: Annotated[str | None, typer.Option(
        help="judge / consensus: the judge's backend (default: --policy).")] = None,
    judge_arg: Annotated[list[str] | None, typer.Option(
        "--judge-arg", "-j", help="Judge policy argument KEY=VALUE (repeatable).")] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Rollouts per prefix.")] = 8,
    max_rollouts: Annotated[int, typer.Option(
        help="binary: most rollouts per trace (a hard bound).")] = 64,
    after_error: Annotated[str, typer.Option(
        help="binary: steps after the first error stay 'unlabelled' or get -1 ('negative').")
    ] = "unlabelled",
    retries: Annotated[int, typer.Option(help="judge: retries of an unparseable answer.")] = 2,
    max_new_tokens: Annotated[int, typer.Option(help="Longest rollout, in tokens.")] = 128,
    judge_max_new_tokens: Annotated[int, typer.Option(help="Longest judge answer.")] = 256,
    temperature: Annotated[float, typer.Option(help="Rollout sampling temperature.")] = 0.7,
    judge_temperature: Annotated[float, typer.Option(help="Judge sampling temperature.")] = 0.7,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling mass.")] = 1.0,
    seed: Annotated[int, typer.Option(
        help="Run seed: rollout r of prefix p of trace T uses derive_seed(seed, 'T@p', r).")] = 0,
    shots: Annotated[int | None, typer.Option(
        help="Worked examples in the rollout prompt (default: as the traces were generated).")
    ] = None,
    workers: Annotated[int | None, typer.Option(
        help="Worker processes (or Ray actors) that generate; 0 generates in this process.")] = None,
    ray_address: Annotated[str | None, typer.Option(
        help="Fan rollouts out over Ray: ray.init(address=...), e.g. auto or ray://host:10001.")
    ] = None,
    store: Annotated[Path | None, typer.Option(
        help="Label store (SQLite) of rollouts, for resuming; default OUT.labels.sqlite.")] = None,
    option: Annotated[list[str] | None, typer.Option(
        "--option", "-o", help="Any other labeler argument KEY=VALUE, e.g. -o sources=mc_soft.")
    ] = None,
    from_format: Annotated[str | None, typer.Option(
        "--from", help="Format of IN (detected when omitted).")] = None,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Skip malformed input records (listed) instead of failing.")] = False,
    window: Annotated[int, typer.Option(help="Traces in progress at once.")] = 64,
    report_json: Annotated[Path | None, typer.Option(
        "--report", help="Also write the run report as JSON here.")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Label every step of the traces in IN and write them to OUT.

    Example: prmkit label --method binary -k 8 --max-rollouts 64 traces.jsonl labelled.jsonl
    Rollouts are committed to the label store as they complete: rerun the same command after an
    interrupt and only the missing rollouts are made; with a batch-invariant policy (hf, or ct2 with
    -p batch_invariant=true) the labels are the same as an uninterrupted run.
    """
    from prmkit.cli._data import parse_options
    from prmkit.labelers import PolicySpec, default_store_path, get_labeler, label_file
    from prmkit.policies import default_backend

    if method not in METHODS:
        raise PrmkitError(f"unknown --method {method!r}; one of {', '.join(METHODS)}")

    def spec(name: str | None, args: list[str] | None) -> PolicySpec:
        name = name or default_backend()
        kwargs = parse_options(args)
        if name in ("hf", "ct2"):
            kwargs.setdefault("progress", False)  # one progress bar: the labeling one
        return PolicySpec(name, kwargs)

    pol = spec(policy, policy_arg)
    judge = spec(judge_policy, judge_arg) if judge_policy is not None else None
    kwargs = _kwargs(method, policy=pol, judge_policy=judge, k=k, max_rollouts=max_rollouts,
                     after_error=after_error, retries=retries, max_new_tokens=max_new_tokens,
                     judge_max_new_tokens=judge_max_new_tokens, temperature=temperature,
                     judge_temperature=judge_temperature, top_p=top_p, seed=seed, shots=shots,
                     workers=workers, ray_address=ray_address)
    kwargs.update(parse_options(option))
    labeler = get_labeler(method, **kwargs)
    store_path = ":memory:" if method == "symbolic" else (store or default_store_path(out))
    try:
        report = label_file(inp, out, labeler, store=store_path, fmt=from_format,
                            skip_invalid=skip_invalid, progress=not no_progress, window=window)
    finally:
        labeler.close()
    console.print(f"{out}: {report.summary()}", highlight=False, soft_wrap=True)
    if method != "symbolic":
        console.print(f"store: {store_path} ({report.wall_seconds:.1f} s)", highlight=False,
                      soft_wrap=True)
    for trace_id, reason in report.skipped[:10]:
        console.print(f"[yellow]skipped[/] {trace_id}: {reason}", highlight=False, soft_wrap=True)
    for issue in report.issues[:10]:
        console.print(f"[yellow]issue[/] {issue}", highlight=False, soft_wrap=True)
    if report_json is not None:
        report_json.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
