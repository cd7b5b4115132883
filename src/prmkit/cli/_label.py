"""``prmkit label``: label the steps of saved traces automatically (resumable).

Every registered labeler (:data:`prmkit.labelers.LABELERS`, plugins included) runs from here: the
shared options below go to the ones whose ``__init__`` takes them (:func:`prmkit.labelers.build_labeler`),
``-o KEY=VALUE`` to the labeler as it is. An option left out keeps the labeler's own default; one
given that the labeler does not take is refused, naming it, before any work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prmkit.cli._data import parse_options, print_skipped
from prmkit.cli._help import names, policy_help
from prmkit.cli._options import InFormatOpt, OverwriteOpt, PolicyArgOpt, SkipInvalidOpt, given_options
from prmkit.cli._paths import input_files, output_file
from prmkit.labelers import LABEL_OPTIONS, LABELERS

console = Console()

#: The command's parameters that are labeling options (parameter -> the labelers' name for it).
_LABEL_OPTIONS = {**{o: o for o in LABEL_OPTIONS}, "policy_arg": "policy_args", "judge_arg": "judge_args"}


def label(
    ctx: typer.Context,
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Traces to label (prmkit JSONL or any "
                                        "importable format).", callback=input_files)],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="Labelled traces (prmkit JSONL).")],
    method: Annotated[str, typer.Option(
        "--method", "-m", help=f"Labeler: {names(LABELERS)}.")] = "mc",
    policy: Annotated[str | None, typer.Option(help=policy_help("Rollout policy"))] = None,
    policy_arg: PolicyArgOpt = None,
    judge_policy: Annotated[str | None, typer.Option(
        help="The judge's backend, for labelers with a judge (default: --policy).")] = None,
    judge_arg: Annotated[list[str] | None, typer.Option(
        "--judge-arg", "-j", help="Judge policy argument KEY=VALUE (repeatable).")] = None,
    k: Annotated[int | None, typer.Option("-k", "--k", help="Rollouts per prefix.")] = None,
    max_rollouts: Annotated[int | None, typer.Option(
        help="Most rollouts per trace (a hard bound), for labelers with a budget.")] = None,
    after_error: Annotated[str | None, typer.Option(
        help="Steps after the first error stay 'unlabelled' or get -1 ('negative'), for labelers "
             "that find the first error.")] = None,
    retries: Annotated[int | None, typer.Option(help="Retries of an unparseable judge answer.")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help="Longest rollout, in tokens.")] = None,
    judge_max_new_tokens: Annotated[int | None, typer.Option(help="Longest judge answer.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Rollout sampling temperature.")] = None,
    judge_temperature: Annotated[float | None, typer.Option(help="Judge sampling temperature.")] = None,
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling mass.")] = None,
    seed: Annotated[int | None, typer.Option(
        help="Run seed: rollout r of prefix p of trace T uses derive_seed(seed, 'T@p', r).")] = None,
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
    from_format: InFormatOpt = None,
    skip_invalid: SkipInvalidOpt = False,
    window: Annotated[int, typer.Option(help="Traces in progress at once.")] = 64,
    report_json: Annotated[Path | None, typer.Option(
        "--report", help="Also write the run report as JSON here.")] = None,
    tree_out: Annotated[Path | None, typer.Option(
        help="omegaprm: also write each problem's rollout tree here as MATH-APS records (JSONL).")
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Label every step of the traces in IN and write them to OUT.

    Example: prmkit label --method binary -k 8 --max-rollouts 64 traces.jsonl labelled.jsonl
    Rollouts are committed to the label store as they complete: rerun the same command after an
    interrupt and only the missing rollouts are made; with a batch-invariant policy (hf, torch, or ct2 with
    -p batch_invariant=true) the labels are the same as an uninterrupted run. An interrupted run
    leaves no OUT, so a rerun is never refused; a finished OUT is replaced only with --overwrite
    (which keeps the store: delete it too to make new rollouts). A labeler takes the
    shared options its arguments name and keeps its own defaults for those left out; an option it
    does not take is refused, naming it (-m symbolic -k 8 is an error, not a run without -k).
    """
    from prmkit.data import ImportReport
    from prmkit.labelers import build_labeler, label_file, write_omegaprm_tree

    # An interrupted run has no OUT yet (it writes a temporary file beside OUT and renames it at the end), so a
    # resume is never refused; an existing OUT is a finished run.
    output_file(out, overwrite)
    output_file(report_json, overwrite)
    output_file(tree_out, overwrite)
    if tree_out is not None and method != "omegaprm":
        raise typer.BadParameter(f"--tree-out is for --method omegaprm, not {method}")
    options = {"policy": policy, "policy_args": parse_options(policy_arg), "judge_policy": judge_policy,
               "judge_args": parse_options(judge_arg), "k": k, "max_rollouts": max_rollouts,
               "after_error": after_error, "retries": retries, "max_new_tokens": max_new_tokens,
               "judge_max_new_tokens": judge_max_new_tokens, "temperature": temperature,
               "judge_temperature": judge_temperature, "top_p": top_p, "seed": seed, "shots": shots,
               "workers": workers, "ray_address": ray_address}
    given, spelled = given_options(ctx, _LABEL_OPTIONS)
    imported = ImportReport()
    with build_labeler(method, options, parse_options(option), given=given, spelled=spelled) as labeler:
        report = label_file(inp, out, labeler, store=store, fmt=from_format,
                            skip_invalid=skip_invalid, progress=not no_progress, window=window,
                            import_report=imported)
    first, *rest = report.lines()
    console.print(f"{out}: {first}", highlight=False, soft_wrap=True, markup=False)
    if tree_out is not None:
        records, left_out = write_omegaprm_tree(out, tree_out)
        console.print(f"{tree_out}: {records} MATH-APS records (the rollout trees)"
                      + (f"; {len(left_out)} unlabelled traces left out" if left_out else ""),
                      highlight=False, soft_wrap=True)
    if imported.skipped:
        console.print(f"{len(imported.skipped)} malformed input records skipped (not in {out})",
                      highlight=False, soft_wrap=True)
    if skip_invalid:
        print_skipped(imported, out, overwrite=overwrite)
    for line in rest:  # the store, then the skipped traces and issues
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    if report_json is not None:
        from prmkit.eval import save_section

        save_section("", report.to_dict(), report_json)
