"""The ``prmkit`` command: one subcommand per stage, mirroring the Python API.

Errors prmkit raises on purpose (:class:`~prmkit.errors.PrmkitError`) are printed as one line, without
a traceback, and exit with status 1.
"""

from __future__ import annotations

import sys

import typer

from prmkit.cli._data import app as data_app
from prmkit.cli._demo import demo as demo_cmd
from prmkit.cli._eval import app as eval_app
from prmkit.cli._eval import report as report_cmd
from prmkit.cli._generate import generate as generate_cmd
from prmkit.cli._label import label as label_cmd
from prmkit.cli._policy import app as policy_app
from prmkit.cli._score import score as score_cmd
from prmkit.cli._score import search as search_cmd
from prmkit.cli._score import select as select_cmd
from prmkit.cli._train import app as train_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="prmkit",
    help="Process supervision: label, train, use, evaluate and document process reward models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command(name="demo")(demo_cmd)
app.add_typer(data_app, name="data")
app.command(name="generate")(generate_cmd)
app.add_typer(policy_app, name="policy")
app.command(name="label")(label_cmd)
app.command(name="score")(score_cmd)
app.command(name="select")(select_cmd)
app.command(name="search")(search_cmd)
app.add_typer(train_app, name="train")
app.add_typer(eval_app, name="eval")
app.command(name="report")(report_cmd)


@app.command()
def version() -> None:
    """Print the prmkit version."""
    from prmkit import __version__

    typer.echo(__version__)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``prmkit`` console script."""
    from prmkit.errors import PrmkitError

    try:
        code = app(args=argv, standalone_mode=False)
        if isinstance(code, int) and code:  # typer.Exit(n) returns n in non-standalone mode
            sys.exit(code)
    except PrmkitError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        sys.exit(1)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        typer.secho("interrupted", fg="yellow", err=True)
        sys.exit(130)
    except OSError as e:  # a directory given as a file, a missing or unreadable path: one line
        typer.secho(f"error: {e.strerror or e}: {e.filename}" if e.filename else f"error: {e}",
                    fg="red", err=True)
        sys.exit(1)
    except Exception as e:  # click's usage errors arrive here in non-standalone mode
        usage, abort = _click_exceptions()
        if isinstance(e, usage):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, abort):
            sys.exit(1)
        raise


def _click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """Click's usage-error and abort classes: typer >= 0.29 bundles its own click (``typer._click``,
    with ``Abort`` in ``typer.exceptions``), whose classes are not the ``click`` package's; catch both."""
    import importlib

    usage: list[type] = []
    abort: list[type] = []
    for name in ("typer._click.exceptions", "typer.exceptions", "click.exceptions"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        usage += [c for c in (getattr(mod, "ClickException", None),) if c is not None]
        abort += [c for c in (getattr(mod, "Abort", None),) if c is not None]
    return tuple(usage), tuple(abort)
