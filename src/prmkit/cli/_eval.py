"""``prmkit eval run | processbench | prmbench | bon | probes | monitor | refusals`` and ``prmkit report``.

Each benchmark is a registered evaluation task (``prmkit.eval.EVAL_TASKS``): ``prmkit eval run TASK...``
runs any set of them into one results file, and each per-benchmark command runs its one task, prints
its numbers and, with ``--json FILE``, writes them as its report section(s) (``{"processbench": {...}}``
…); ``prmkit report`` merges such files into the Markdown / HTML / JSON report with the
process-supervision card.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from prmkit.cli._help import check_probes, probe_help
from prmkit.cli._options import (
    AggregateOpt,
    AllowPickleOpt,
    ModelOpt,
    MonitorArgOpt,
    MonitorOpt,
    OverwriteOpt,
    ScorerArgOpt,
    ScorerOpt,
)
from prmkit.cli._paths import input_files, input_folders, output_file, output_folder
from prmkit.cli._score import load_scorer_opts

if TYPE_CHECKING:
    from prmkit.scoring import StepScorer

__all__ = ["app", "report"]

console = Console()
app = typer.Typer(help="Evaluate a PRM: ProcessBench, PRMBench, best-of-N curves, failure-mode probes, "
                       "monitorability, refusals; eval run runs any set of registered tasks into one file.",
                  no_args_is_help=True)

KeyOpt = Annotated[str, typer.Option(help="Score key: step.scores[KEY] (scored here or already stored).")]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="Write the numbers to this JSON file "
                                                             "(a report section; see prmkit report).")]
BatchOpt = Annotated[int, typer.Option(min=1, help="Sequences per forward pass.")]
# Counts are checked as the command line is read: a negative count would otherwise be taken (a
# negative --bootstrap silently gives no intervals, a negative --limit drops samples from the end).
BootstrapOpt = Annotated[int, typer.Option(min=1, help="Bootstrap replicates for the 95% intervals.")]


def _echo(lines: list[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def _warn(line: str) -> None:
    console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)


def _task(name: str, data: list[Path] | Path, options: dict[str, Any], scorer: Any = None) -> Any:
    """Run the registered task ``name`` (what ``prmkit eval run`` runs too), printing as it goes."""
    from prmkit.eval import run_eval_task

    return run_eval_task(name, data if isinstance(data, list) else [data], options=options, scorer=scorer,
                         echo=_echo, warn=_warn).sections


def _save(section: str, data: dict[str, Any], path: Path | None) -> None:
    from prmkit.eval import save_section

    if path is not None:
        console.print(f"wrote {save_section(section, data, path)}", highlight=False)


def _prm(model: Path | None, scorer: str, scorer_arg: list[str] | None, batch_size: int,
         allow_pickle: bool = False) -> StepScorer | None:
    """The PRM to score with (loaded once per command), or None: use the scores the traces carry."""
    if model is None and scorer == "model":
        return None
    return load_scorer_opts(model, scorer, scorer_arg, batch_size, allow_pickle)


@app.command("processbench")
def processbench(
    files: Annotated[list[Path], typer.Argument(help="ProcessBench split files (gsm8k.json, math.json, "
                                                     "…); the split name is the file stem.",
                                                callback=input_files)],
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    key: KeyOpt = "prm",
    threshold: Annotated[float | None, typer.Option(
        help="Fixed step threshold (a step scoring below it is the predicted first error). Default "
             "0.5 unless --tune-on or --cross-split chooses one.")] = None,
    tune_on: Annotated[list[Path] | None, typer.Option(
        "--tune-on", help="Choose the threshold by a sweep on these split files (never reported).",
        callback=input_files)] = None,
    cross_split: Annotated[bool, typer.Option(
        "--cross-split", help="Each split's threshold is chosen on the other given splits.")] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N samples of each file.")] = None,
    by_generator: Annotated[bool, typer.Option(
        "--by-generator", help="Also print each split's results per generator (always in --json).")] = False,
    batch_size: BatchOpt = 8,
    json_out: JsonOpt = None,
    allow_pickle: AllowPickleOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """ProcessBench: accuracy on erroneous and on error-free samples, their F1, and the mean F1.

    Example: prmkit eval processbench ../shared/data/processbench/gsm8k.json --model runs/demo/prm --json pb.json
    """
    output_file(json_out, overwrite)
    prm = _prm(model, scorer, scorer_arg, batch_size, allow_pickle)
    sections = _task("processbench", files, {"key": key, "threshold": threshold, "tune_on": tune_on,
                                             "cross_split": cross_split, "limit": limit,
                                             "by_generator": by_generator}, prm)
    _save("", sections.to_dict(), json_out)


@app.command("prmbench")
def prmbench(
    files: Annotated[list[Path], typer.Argument(help="PRMBench JSONL files (one per error class, or the "
                                                     "combined file).", callback=input_files)],
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    key: KeyOpt = "prm",
    threshold: Annotated[float, typer.Option(help="A step scoring at or above it is predicted correct.")] = 0.5,
    out_of_range: Annotated[str, typer.Option(
        help="Rows whose error_steps point past the last step: exclude (default) or in_range (keep, "
             "score the steps in range). Counted either way.")] = "exclude",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N rows of each file.")] = None,
    originals: Annotated[bool, typer.Option(
        "--originals", help="Also score each question's error-free original solution once (class "
        "'correct', the official loader's extra row; needs --model).")] = False,
    batch_size: BatchOpt = 8,
    json_out: JsonOpt = None,
    allow_pickle: AllowPickleOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """PRMBench: PRMScore (mean of the F1 of correct and of wrong steps) per error class and overall.

    Example: prmkit eval prmbench ../shared/data/prmbench/prm800k_test_p1_4o_*.jsonl --model runs/demo/prm
    """
    output_file(json_out, overwrite)
    prm = _prm(model, scorer, scorer_arg, batch_size, allow_pickle)
    sections = _task("prmbench", files, {"key": key, "threshold": threshold, "out_of_range": out_of_range,
                                         "limit": limit, "originals": originals}, prm)
    _save("", sections.to_dict(), json_out)


@app.command("bon")
def bon(
    inp: Annotated[Path, typer.Argument(metavar="SCORED", help="Scored traces (prmkit score output), N per "
                                                              "problem, with outcomes.", callback=input_files)],
    prm_key: Annotated[str, typer.Option(help="Step-score key of the PRM.")] = "prm",
    orm_key: Annotated[str, typer.Option(help="Trace-score key of the ORM (meta.scores).")] = "orm",
    label_source: Annotated[str | None, typer.Option(
        help="Step labels for the step metrics (default: each step's latest).")] = None,
    threshold: Annotated[float, typer.Option(help="Step threshold for the step F1.")] = 0.5,
    bootstrap: BootstrapOpt = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    json_out: JsonOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Best-of-N curves (PRM with each aggregator, ORM, majority, weighted, random, pass@N) with
    bootstrap 95% intervals, and step metrics (AUROC, F1, calibration) where steps carry labels.

    Example: prmkit eval bon scored.jsonl --json bon.json
    """
    output_file(json_out, overwrite)
    sections = _task("bon", inp, {"prm_key": prm_key, "orm_key": orm_key, "label_source": label_source,
                                  "threshold": threshold, "bootstrap": bootstrap, "seed": seed})
    _save("", sections.to_dict(), json_out)


@app.command("probes")
def probes(
    inp: Annotated[Path, typer.Argument(metavar="TRACES", help="Labelled traces (in-domain), N per problem.",
                                        callback=input_files)],
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    label_source: Annotated[str | None, typer.Option(help="Step labels to use (default: latest).")] = None,
    transfer: Annotated[list[Path] | None, typer.Option(
        help="A second data source (labelled traces in any format) for the domain-transfer probe. "
             "Repeatable.", callback=input_files)] = None,
    transfer_gsm8k: Annotated[Path | None, typer.Option(
        help="Build the second source from a GSM8K file's reference solutions (one corrupted step "
             "each for half of them).", callback=input_files)] = None,
    transfer_limit: Annotated[int, typer.Option(min=1, help="Problems taken from --transfer-gsm8k.")] = 50,
    gaming_traces: Annotated[int, typer.Option(min=1, help="Traces the gaming probe perturbs.")] = 64,
    optimiser_traces: Annotated[Path | None, typer.Option(
        help="Traces a real optimiser produced against a PRM (e.g. benchmarks/rl_gaming.py's fooling traces): "
             "the gaming probe says how many of their wrong steps this PRM passes.", callback=input_files)] = None,
    only: Annotated[list[str] | None, typer.Option("--probe", help=probe_help(),
                                                  callback=check_probes)] = None,
    aggregate: AggregateOpt = "min",
    batch_size: BatchOpt = 8,
    seed: Annotated[int, typer.Option(help="Seed of the perturbations.")] = 0,
    json_out: JsonOpt = None,
    allow_pickle: AllowPickleOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Failure-mode probes: process collapse, verifier gaming, result check, length bias, domain transfer.

    Example: prmkit eval probes runs/demo/heldout.jsonl --model runs/demo/prm --transfer-gsm8k ../shared/data/gsm8k/test.jsonl --json probes.json
    """
    output_file(json_out, overwrite)
    sc = _prm(model, scorer, scorer_arg, batch_size, allow_pickle)
    sections = _task("probes", inp, {"label_source": label_source, "transfer": transfer,
                                     "transfer_gsm8k": transfer_gsm8k, "transfer_limit": transfer_limit,
                                     "gaming_traces": gaming_traces, "aggregate": aggregate, "seed": seed,
                                     "probe": only, "optimiser_traces": optimiser_traces}, sc)
    _save("", sections.to_dict(), json_out)


def report(
    results: Annotated[list[Path], typer.Argument(help="JSON files written by prmkit eval … --json (or a "
                                                       "demo's report.json); later files win per section.",
                                                  callback=input_files)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder.")] = Path("runs/report"),
    traces: Annotated[list[Path] | None, typer.Option(
        "--traces", help="Trace files whose provenance fills the process-supervision card. Repeatable.",
        callback=input_files)] = None,
    model_dir: Annotated[list[Path] | None, typer.Option(
        "--model-dir", help="PRM / ORM checkpoint folders for the card. Repeatable.",
        callback=input_folders)] = None,
    card: Annotated[list[str] | None, typer.Option(
        "--card", help="FIELD=VALUE for what provenance cannot know (e.g. deployment_monitor=none). "
                       "Repeatable.")] = None,
    title: Annotated[str | None, typer.Option(help="Report title.")] = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Merge evaluation results into report.md, a self-contained report.html and report.json.

    Example: prmkit report pb.json bon.json probes.json --traces scored.jsonl --model-dir runs/prm -o runs/report
    """
    from prmkit.eval import parse_card_overrides, report_files

    output_folder(out, overwrite, ("report.md", "report.html", "report.json"))
    paths, warnings = report_files(results, out, traces=traces or [], model_dirs=model_dir or [],
                                   card=parse_card_overrides(card or []), title=title)
    for w in warnings:
        console.print(f"[yellow]{w}[/]", highlight=False, soft_wrap=True)
    for kind, path in paths.items():
        console.print(f"{kind}: {path}", highlight=False, soft_wrap=True)


@app.command("monitor")
def monitor_eval(
    inp: Annotated[Path, typer.Argument(metavar="TRACES", help="Agent trajectories (prmkit agent run "
                                                               "output, or any traces with the env's labels).",
                                        callback=input_files)],
    monitor_spec: MonitorOpt = None,
    monitor_arg: MonitorArgOpt = None,
    control: Annotated[Path | None, typer.Option(
        help="Control arm (the same tasks and agents run with --loophole off): adds the intervention "
             "archetype.", callback=input_files)] = None,
    view: Annotated[list[str] | None, typer.Option(
        "--view", help="all, actions, reasoning (default: all three). Repeatable.")] = None,
    bootstrap: BootstrapOpt = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    json_out: JsonOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Monitorability: TPR, TNR and g-mean² = TPR x TNR per monitor and view, with bootstrap intervals,
    for the outcome, process and (with --control) intervention archetypes.

    On the files of prmkit agent run (the README runs this line after making them):
    prmkit eval monitor agent.jsonl --control agent-off.jsonl -m rule -m prm:runs/agent-prm
    """
    output_file(json_out, overwrite)
    sections = _task("monitor", inp, {"monitor": monitor_spec, "monitor_arg": monitor_arg, "control": control,
                                      "view": view, "bootstrap": bootstrap, "seed": seed})
    _save("", sections.to_dict(), json_out)


@app.command("refusals")
def refusals(
    inp: Annotated[Path, typer.Argument(metavar="TRACES", help="Spec-environment trajectories (prmkit agent "
                                                               "spec output).", callback=input_files)],
    model: Annotated[Path | None, typer.Option(help="A PRM checkpoint (its min step score ranks a trace).",
                                               callback=input_folders)] = None,
    orm: Annotated[Path | None, typer.Option(help="An ORM checkpoint (its trace score ranks a trace).",
                                             callback=input_folders)] = None,
    bootstrap: BootstrapOpt = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    json_out: JsonOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Safety specs: over- and under-refusal per organism, and how well a PRM and an ORM rank reasoned
    refusals above surface ones (AUROC with intervals, and their difference).

    On the file of prmkit agent spec (the README runs this line after making it):
    prmkit eval refusals spec.jsonl --model runs/spec-prm --orm runs/spec-orm
    """
    from prmkit.scoring import load_scorer

    output_file(json_out, overwrite)
    prm = load_scorer("model", model, {"cache": False}) if model is not None else None
    sections = _task("refusals", inp, {"orm": orm, "bootstrap": bootstrap, "seed": seed}, prm)
    _save("", sections.to_dict(), json_out)


def _task_names_help() -> str:
    from prmkit.cli._help import names
    from prmkit.eval import EVAL_TASKS

    return (f"Evaluation tasks to run, in order: {names(EVAL_TASKS)} (and any --tasks-from adds). "
            "--list describes them.")


@app.command("run")
def run_tasks(
    tasks: Annotated[list[str] | None, typer.Argument(metavar="TASK...", help=_task_names_help(),
                                                      show_default=False)] = None,
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    data: Annotated[list[str] | None, typer.Option(
        "--data", help="TASK=PATH: a data file of a task (repeatable; a task given none reads its default "
                       "data, if it has one: --list says).")] = None,
    task_arg: Annotated[list[str] | None, typer.Option(
        "--task-arg", "-T", help="A task's option TASK.KEY=VALUE (KEY=VALUE: every task run that takes "
                                 "KEY), e.g. -T bon.bootstrap=200. Repeatable; --list shows each task's.")] = None,
    tasks_from: Annotated[list[Path] | None, typer.Option(
        "--tasks-from", help="A Python file that registers tasks (prmkit.eval.register_eval_task); it runs "
                             "as code, so only a file you trust. Repeatable.", callback=input_files)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write every task's sections, with a meta section, to this one results file "
                            "(render it with prmkit report).")] = None,
    list_tasks: Annotated[bool, typer.Option(
        "--list", help="Describe the registered tasks (or the TASKs given): data source, metric, report "
                       "sections, options.")] = False,
    batch_size: BatchOpt = 8,
    allow_pickle: AllowPickleOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Run evaluation tasks (ProcessBench, PRMBench, best-of-N, probes, monitorability, refusals, or
    your own) into one results file that prmkit report renders; the PRM is loaded once, when the first
    task that scores asks for it.

    Example: prmkit eval run bon probes --model runs/demo/prm --data bon=runs/demo/heldout.jsonl --data probes=runs/demo/heldout.jsonl -T probes.probe=collapse -o results.json
    """
    from prmkit.eval import eval_tasks_file, list_eval_tasks, load_task_file, parse_data_args, parse_task_args

    output_file(out, overwrite)
    for path in tasks_from or []:
        load_task_file(path)
    if list_tasks:
        _echo(list_eval_tasks(tasks))
        return
    names = list(tasks or [])
    _, runs = eval_tasks_file(names, out, data=parse_data_args(data or []),
                              options=parse_task_args(task_arg or [], names),
                              scorer=lambda: _prm(model, scorer, scorer_arg, batch_size, allow_pickle),
                              model=model, echo=_echo, warn=_warn)
    if out is not None:
        console.print(f"wrote {out} (sections: {', '.join(s for r in runs for s in r.sections)}, meta)",
                      highlight=False, soft_wrap=True)
