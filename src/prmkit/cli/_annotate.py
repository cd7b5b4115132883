"""``prmkit annotate``: the human labeling app (serve, add-user, queue, export, summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from prmkit.annotate import EXPORT_FORMATS, STRATEGIES
from prmkit.cli._help import names
from prmkit.cli._options import OverwriteOpt
from prmkit.cli._paths import input_files, output_file

app = typer.Typer(help="Collect human step labels: a labeling web app and active-learning queues.",
                  no_args_is_help=True)

DbOpt = Annotated[Path, typer.Option("--db", help="The labeling database (SQLite).")]


@app.command()
def serve(
    traces: Annotated[Path | None, typer.Argument(
        metavar="TRACES", help="Traces to label (prmkit JSONL), stored in the database; queued in file order "
        "unless `prmkit annotate queue` made a queue.", callback=input_files)] = None,
    db: DbOpt = Path("labels.sqlite"),
    host: Annotated[str, typer.Option(help="Address to bind (anything but loopback needs --allow-remote).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow a non-loopback --host (put HTTPS in front of it).")] = False,
    show_answer: Annotated[bool, typer.Option(
        "--show-answer", help="Show each problem's reference answer to the annotators.")] = False,
) -> None:
    """Serve the labeling page until interrupted.

    Then open http://127.0.0.1:8765 and log in with a token from `prmkit annotate add-user`
    (docs/annotate.md runs the full line: prmkit annotate serve traces.jsonl --db labels.sqlite).
    """
    from prmkit.annotate import serve as run

    run(traces, db, host=host, port=port, allow_remote=allow_remote, show_answer=show_answer)


@app.command("add-user")
def add_user(
    name: Annotated[str, typer.Argument(help="The annotator's name (recorded as the labeler of each label).")],
    db: DbOpt = Path("labels.sqlite"),
    admin: Annotated[bool, typer.Option("--admin", help="May see the admin page (progress, agreement, cost).")
                     ] = False,
) -> None:
    """Add an annotator and print their token, once (the database keeps only its hash).

    Example: prmkit annotate add-user ann --db labels.sqlite --admin
    """
    from prmkit.annotate import add_user as add

    token = add(db, name, admin=admin)
    typer.echo(token)
    typer.secho(f"token of {name}: shown this once, the database keeps only its hash", err=True, fg="yellow")


@app.command()
def queue(
    traces: Annotated[Path, typer.Argument(metavar="SCORED_TRACES", help="Traces with PRM step scores "
                                           "(prmkit score's output).", callback=input_files)],
    db: DbOpt = Path("labels.sqlite"),
    strategy: Annotated[str, typer.Option(help=f"What to label first: {names(STRATEGIES)}.")] = "random",
    per_problem_cap: Annotated[int | None, typer.Option(help="Most traces queued per problem.")] = None,
    overlap: Annotated[float, typer.Option(
        help="Fraction of queued traces labelled by two annotators (for agreement).")] = 0.0,
    limit: Annotated[int | None, typer.Option(help="Queue at most this many traces.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random strategy and of the overlap draw.")] = 0,
    score_key: Annotated[str | None, typer.Option(
        help="The PRM whose step scores to read (default: the one on the traces).")] = None,
    aggregate: Annotated[str, typer.Option(help="convincing_wrong: step scores -> trace score.")] = "min",
    against: Annotated[str | None, typer.Option(
        help="disagreement: the label source to compare the PRM with (default: any label not human).")] = None,
) -> None:
    """Store scored traces and order the queue by an active-learning strategy (ratings are kept).

    Example: prmkit annotate queue scored.jsonl --db labels.sqlite --strategy convincing_wrong --overlap 0.1
    """
    from prmkit.annotate import queue_file

    result = queue_file(traces, db, strategy=strategy, per_problem_cap=per_problem_cap, overlap=overlap,
                        limit=limit, seed=seed, score_key=score_key, aggregate=aggregate, against=against)
    for line in result.lines():
        typer.echo(line)


@app.command()
def export(
    db: DbOpt = Path("labels.sqlite"),
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the labelled traces go.")] = Path("labels.jsonl"),
    format: Annotated[str, typer.Option(
        "--format", help=f"Output format: {', '.join(EXPORT_FORMATS)}.")] = "prmkit",
    keep_labels: Annotated[bool, typer.Option(
        "--keep-labels", help="Keep the traces' other labels beside the human ones.")] = False,
    include_unfinished: Annotated[bool, typer.Option(
        "--include-unfinished", help="Also write traces no annotator finished (their ratings so far).")] = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Write the human labels as traces that `prmkit train prm` trains on (or PRM800K / TRL stepwise).

    Example: prmkit annotate export --db labels.sqlite -o human.jsonl
    """
    from prmkit.annotate import export_labels

    output_file(out, overwrite)
    result = export_labels(db, out, format=format, keep_labels=keep_labels, include_unfinished=include_unfinished)
    for line in result.lines():
        typer.echo(line)


@app.command()
def summary(
    db: DbOpt = Path("labels.sqlite"),
    results: Annotated[Path | None, typer.Option(
        "--results", help="Also write it as the report's annotation section to this JSON file "
        "(prmkit report FILE ... renders it).")] = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Progress, agreement (kappa on double-labelled steps) and cost (time per step label).

    Example: prmkit annotate summary --db labels.sqlite --results annotation.json
    """
    from prmkit.annotate import summary_of

    if results is not None:
        output_file(results, overwrite)
    for line in summary_of(db, results=results).lines():
        typer.echo(line)


@app.command()
def simulate(
    db: DbOpt = Path("labels.sqlite"),
    name: Annotated[str, typer.Option(help="The simulated annotator's name.")] = "simulated",
    source: Annotated[str | None, typer.Option(
        help="Answer with the traces' labels of this source (symbolic, mc_hard, ...; default: each step's "
        "latest).")] = None,
    budget: Annotated[int | None, typer.Option(help="Stop after this many step labels.")] = None,
    error_rate: Annotated[float, typer.Option(help="Chance that a label is replaced by another value.")] = 0.0,
    stop_at_first_wrong: Annotated[bool, typer.Option(
        "--stop-at-first-wrong", help="Leave the steps after a -1 unrated (PRM800K phase 2).")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the errors.")] = 0,
) -> None:
    """Label the queue with a simulated annotator who copies a label the traces carry.

    Example: prmkit annotate simulate --db labels.sqlite --budget 40
    """
    from prmkit.annotate import simulate as run

    for line in run(db, name, source=source, budget=budget, error_rate=error_rate,
                    stop_at_first_wrong=stop_at_first_wrong, seed=seed).lines():
        typer.echo(line)
