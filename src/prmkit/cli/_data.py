"""``prmkit data convert | inspect | validate | stats | derive``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from prmkit.cli._help import names
from prmkit.cli._options import DistractorsOpt, EnvSeedOpt, MaxOperandOpt, OpsOpt, OverwriteOpt, StepsOpt
from prmkit.cli._paths import input_file, input_files, output_file
from prmkit.data import ERROR_TYPES, FORMATS, ImportReport, detect_format, read
from prmkit.data import convert as convert_file
from prmkit.errors import PrmkitError
from prmkit.trace import Trace

app = typer.Typer(help="Import, export, check and summarise trace files in any supported format.",
                  no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

FromOpt = Annotated[str | None, typer.Option(
    "--from", "-f", help=f"Input format (detected when omitted): {names(FORMATS)}.")]
OptionOpt = Annotated[list[str] | None, typer.Option(
    "--option", "-o", help="A format option KEY=VALUE (VALUE parsed as JSON when it can be), "
    "e.g. -o out_of_range=skip. Repeatable.")]


def parse_options(pairs: list[str] | None) -> dict[str, Any]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``; a value that is not JSON stays a string."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PrmkitError(f"option {pair!r} is not KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _read(path: Path, fmt: str | None, options: dict[str, Any], *, skip_invalid: bool,
          report: ImportReport):
    return read(path, fmt, skip_invalid=skip_invalid, report=report, **options)


def _print_problems(report: ImportReport, limit: int) -> None:
    for title, errors in (("skipped", report.skipped), ("issue", report.issues)):
        for e in errors[:limit]:
            err_console.print(f"[yellow]{title}[/] {e}", highlight=False, markup=True, soft_wrap=True)
        if len(errors) > limit:
            err_console.print(f"… and {len(errors) - limit} more {title} rows")
        if errors:
            counts = ", ".join(f"{n}× {r}" for r, n in
                               (report.skip_reasons() if title == "skipped"
                                else report.issue_reasons()).most_common(5))
            err_console.print(f"{title} by reason: {counts}", highlight=False, soft_wrap=True)


def print_skipped(report: ImportReport, out: Path, limit: int = 20, overwrite: bool = False) -> None:
    """List the records a ``--skip-invalid`` run skipped (location, field, id, reason) on stderr; past
    ``limit`` count them and write them all to ``OUT.skipped.jsonl`` (a stale one is removed only
    with ``overwrite``)."""
    for line in report.skipped_lines(out, limit=limit, overwrite=overwrite):
        err_console.print(line, highlight=False, markup=False, soft_wrap=True)


@app.command()
def convert(
    src: Annotated[Path, typer.Argument(help="Input file.", callback=input_files)],
    dst: Annotated[Path, typer.Argument(help="Output file (.parquet writes Parquet).")],
    from_: FromOpt = None,
    to: Annotated[str | None, typer.Option(
        "--to", "-t", help=f"Output format: {names(FORMATS)} or parquet (default: prmkit, or "
                           "parquet for a .parquet file).")] = None,
    skip_invalid: Annotated[bool, typer.Option(
        help="Skip malformed records (each is listed with its location and reason).")] = False,
    option: OptionOpt = None,
    write_option: Annotated[list[str] | None, typer.Option(
        "--write-option", "-w", help="An output format option KEY=VALUE. Repeatable.")] = None,
    show: Annotated[int, typer.Option(
        help="How many skipped rows / issues to list; past it they are counted and the skipped ones "
             "written to DST.skipped.jsonl.")] = 20,
    strict: Annotated[bool, typer.Option(
        help="Refuse a lossy conversion: fail (DST untouched) at the first trace the output format "
             "cannot hold whole, instead of dropping what does not fit and listing it.")] = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Convert a trace file from one format to another, streaming.

    A format that cannot hold everything a trace has (say trl_stepwise: no ids, nothing after the
    first wrong step) drops it: what was dropped is printed per field with its count (every record
    is read back to check), and --strict refuses instead.

    Example: prmkit data convert ../shared/data/processbench/gsm8k.json pb.jsonl --to trl_stepwise
    """
    from prmkit.data import ExportReport

    output_file(dst, overwrite)
    report, losses = ImportReport(), ExportReport()
    n = convert_file(src, dst, src_format=from_, dst_format=to, skip_invalid=skip_invalid, report=report,
                     read_options=parse_options(option), write_options=parse_options(write_option),
                     losses=losses, strict=strict)
    print_skipped(report, dst, show, overwrite)
    for e in report.issues[:show]:
        err_console.print(f"issue {e}", highlight=False, markup=False, soft_wrap=True)
    if len(report.issues) > show:
        err_console.print(f"… and {len(report.issues) - show} more issues", highlight=False)
    to = to or ("parquet" if dst.suffix == ".parquet" else "prmkit")
    console.print(f"wrote {n} {to} records to {dst} ({report.summary()})", highlight=False)
    if not losses.lossless:
        for line in losses.lines():
            err_console.print(line, highlight=False, markup=False, soft_wrap=True)


@app.command()
def validate(
    path: Annotated[Path, typer.Argument(help="File to check.", callback=input_files)],
    from_: FromOpt = None,
    option: OptionOpt = None,
    show: Annotated[int, typer.Option(min=0, help="How many problems to list (0: all).")] = 0,
) -> None:
    """Check every record; list malformed rows as file:line: field — reason. Exits 1 on any problem.

    Problems that an importer can keep a record for (say a PRMBench error index past the last step)
    are listed as issues and also fail the check.
    """
    from prmkit.data import scan

    fmt = from_ or detect_format(path)
    report = scan(path, fmt, **parse_options(option))
    limit = show or len(report.skipped) + len(report.issues) + 1
    _print_problems(report, limit)
    ok = not report.skipped and not report.issues
    style = "green" if ok else "red"
    console.print(f"[{style}]{path}: {fmt}: {report.summary()}[/]", highlight=False)
    if not ok:
        raise typer.Exit(1)


@app.command()
def stats(
    path: Annotated[Path, typer.Argument(help="File to summarise.", callback=input_files)],
    from_: FromOpt = None,
    option: OptionOpt = None,
    label_source: Annotated[str | None, typer.Option(
        help="Count only labels from this source (human, mc_hard, symbolic, ...).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Traces, steps per trace, label distribution and the first-error histogram.

    Example: prmkit data stats ../shared/data/processbench/math.json
    """
    from prmkit.data import compute_stats

    report = ImportReport()
    st = compute_stats(_read(path, from_, parse_options(option), skip_invalid=False, report=report),
                       label_source=label_source)
    if as_json:
        typer.echo(json.dumps({**st.to_dict(), "issues": len(report.issues)}, indent=2))
        return
    s = st.steps_summary()
    t = Table(title=clip(path.name, 200), show_header=False)
    t.add_row("traces", str(st.traces))
    t.add_row("steps", str(st.steps))
    t.add_row("steps per trace", f"min {s['min']}  mean {s['mean']:.2f}  median {s['median']:g}  "
              f"max {s['max']}")
    t.add_row("traces with no wrong step", str(st.no_error))
    # Names come from the data: a huge one is clipped, as in inspect (the renderer is super-linear).
    t.add_row("outcomes", clip(", ".join(f"{clip(k, 80)} {v}" for k, v in st.outcomes.most_common()), 2000))
    t.add_row("step kinds", clip(", ".join(f"{clip(k, 80)} {v}" for k, v in st.kinds.most_common()), 2000))
    if report.issues:
        t.add_row("import issues", str(len(report.issues)))
    console.print(t)
    lt = Table(title="step labels")
    for col in ("source", "label", "steps", "share"):
        lt.add_column(col, justify="right" if col in ("steps", "share") else "left")
    for (src, bucket), n in sorted(st.labels.items()):
        lt.add_row(clip(src, 80), bucket, str(n), f"{n / max(st.steps, 1):.1%}")
    console.print(lt)
    ft = Table(title="first wrong step (0-based)")
    for col in ("first error", "traces", "share"):
        ft.add_column(col, justify="right")
    for k, n in sorted(st.first_error.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        name = "none (-1)" if k == -1 else "unknown" if k is None else str(k)
        ft.add_row(name, str(n), f"{n / max(st.traces, 1):.1%}")
    console.print(ft)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a note of how many were cut (``limit`` 0: all).

    The terminal renderer wraps in more than linear time on very long strings (a 3 MB step took
    20 s, a 50 MB one never finished), so what ``inspect`` and ``stats`` print is clipped first.

    >>> clip("abcdef", 4)
    'abcd… [2 more characters not shown]'
    """
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters not shown]"


def _render(trace: Trace, limit: int = 2000) -> None:
    from rich.panel import Panel
    from rich.text import Text

    body = Text()
    body.append("problem: ", style="bold")
    body.append(clip(trace.problem.text.strip(), limit) + "\n")
    if trace.problem.answer is not None:
        body.append("reference answer: ", style="bold")
        body.append(f"{clip(trace.problem.answer, limit)}\n")
    for i, s in enumerate(trace.steps):
        lab = s.label()
        mark = ("   ·" if lab is None else
                f"{lab.value:+.0f}" if lab.kind == "hard" else f"{lab.value:.2f}").rjust(4)
        style = ("dim" if lab is None or lab.positive is None else
                 "green" if lab.positive else "red")
        body.append(f"[{i}] {mark} ", style=style)
        if s.kind != "reasoning":
            body.append(f"<{clip(s.kind, 80)}> ", style="cyan")
        body.append(clip(s.text.strip(), limit).replace("\n", "\n         ") + "\n")
        if s.scores:
            body.append("         scores: " + clip(", ".join(f"{k}={v:.3f}" for k, v in s.scores.items()),
                                                  limit) + "\n", style="magenta")
    body.append("final answer: ", style="bold")
    final = None if trace.final_answer is None else clip(trace.final_answer, limit)
    body.append(f"{final}   outcome: {clip(trace.outcome, 80)}   first error: "
                f"{trace.first_error()}")
    console.print(Panel(body, title=f"{clip(trace.id, 200)}  ({clip(trace.source or 'unknown source', 80)})",
                        title_align="left"))


@app.command()
def inspect(
    path: Annotated[Path, typer.Argument(help="File to show.", callback=input_files)],
    from_: FromOpt = None,
    option: OptionOpt = None,
    n: Annotated[int, typer.Option("-n", help="How many traces to show.")] = 3,
    id_: Annotated[list[str] | None, typer.Option("--id", help="Show the trace(s) with this id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print prmkit JSON instead (complete, never "
                                                        "clipped).")] = False,
    max_chars: Annotated[int, typer.Option(
        help="Longest text shown of a problem, step or answer; the rest is cut and counted (0: all).")
    ] = 2000,
) -> None:
    """Show traces: problem, steps with their labels and scores, final answer and outcome.

    Long texts are clipped to --max-chars, saying how many characters were cut."""
    report = ImportReport()
    shown = 0
    for t in _read(path, from_, parse_options(option), skip_invalid=False, report=report):
        if id_ and t.id not in id_:
            continue
        if as_json:
            typer.echo(json.dumps(t.to_dict(), ensure_ascii=False, indent=2))
        else:
            _render(t, max_chars)
        shown += 1
        if not id_ and shown >= n:
            break
    if id_ and shown == 0:
        raise PrmkitError(f"{path}: no trace with id {', '.join(id_)}")


@app.command()
def derive(
    paths: Annotated[list[Path], typer.Argument(
        metavar="[IN] OUT", help="A file of problems with reference solutions (GSM8K, MATH, arith problems "
        "in prmkit JSONL, ...) and the output JSONL; with --env only OUT.")],
    error_type: Annotated[list[str] | None, typer.Option(
        "--error-type", "-e", help=f"Error type to inject (repeatable; default all): {', '.join(ERROR_TYPES)}.")] = None,
    per_problem: Annotated[int, typer.Option(help="Wrong traces per problem (different types in turn).")] = 1,
    correct_fraction: Annotated[float, typer.Option(
        help="Chance that a problem also gives its correct reference trace.")] = 0.5,
    seed: Annotated[int, typer.Option(help="Seed of the injected errors.")] = 0,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Only the first N records of IN (a small corpus, or a quick check).")] = None,
    hard_negatives: Annotated[bool, typer.Option(
        "--hard-negatives", help="Only errors whose final answer looks plausible (whole where the right one is, "
        "within a factor 3 of it), and correct traces given the step counts of the wrong ones.")] = False,
    from_: FromOpt = None,
    env: Annotated[str | None, typer.Option(help="Problems from a built-in environment (arith) instead of IN.")] = None,
    problems: Annotated[int, typer.Option(help="--env: how many problems.")] = 50,
    start: Annotated[int, typer.Option(help="--env: index of the first problem.")] = 0,
    steps: StepsOpt = "3",
    ops: OpsOpt = "+-*",
    max_operand: MaxOperandOpt = 20,
    distractors: DistractorsOpt = 0,
    env_seed: EnvSeedOpt = 0,
    overwrite: OverwriteOpt = False,
) -> None:
    """Inject errors into reference solutions: wrong traces whose first wrong step is known.

    Labels by construction (source "synthetic", each naming its error type); later steps continue
    from the wrong value. A problem without a usable reference is skipped and counted.

    Example: prmkit data derive ../shared/data/gsm8k/train.jsonl derived.jsonl --per-problem 3 --seed 0
    Example: prmkit data derive --env arith --problems 40 --steps 2-5 -e misread_rate -e premature_answer --hard-negatives hard.jsonl
    Example: prmkit data derive --env arith --problems 400 --steps 2-5 --distractors 1 --env-seed 101 out.jsonl
    """
    from prmkit.data import derive_file

    if len(paths) != (1 if env else 2):
        raise PrmkitError("give IN and OUT, or --env arith and OUT" if not env else
                          "with --env the problems come from the environment: give only OUT")
    inp = paths[0]
    if not env:
        input_file(inp)
    output_file(paths[-1], overwrite)
    if env:
        from prmkit.generate import load_problems

        inp = load_problems(env=env, n=problems, start=start, steps=steps, ops=ops, max_operand=max_operand,
                            distractors=distractors, env_seed=env_seed)[0]
    report = derive_file(inp, paths[-1], error_types=error_type, per_problem=per_problem,
                         correct_fraction=correct_fraction, seed=seed, hard_negatives=hard_negatives, fmt=from_,
                         limit=limit)
    first, *rest = report.lines()
    for line in [f"wrote {paths[-1]}: {first}", *rest]:
        console.print(line, highlight=False, soft_wrap=True, markup=False)


__all__ = ["app", "clip", "parse_options", "print_skipped"]
