"""The ``prmkit`` command: one subcommand per stage, mirroring the Python API.

What a person sees when something goes wrong:

- errors prmkit raises on purpose (:class:`~prmkit.errors.PrmkitError`) are one line, ``error: ...``,
  and exit 1;
- a usage mistake (unknown command or option, missing argument, bad value) is ``error: ...`` plus the
  command's usage line, and exits 2; bare ``prmkit`` (or ``prmkit data``) prints the help and exits 0;
- anything else is one line naming the exception, ``(run with --debug for the traceback)``, exit 1;
  ``--debug`` anywhere on the line, or ``PRMKIT_DEBUG=1``, shows the traceback instead.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import traceback
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from prmkit.cli._annotate import app as annotate_app
from prmkit.cli._cache import app as cache_app
from prmkit.cli._data import app as data_app
from prmkit.cli._demo import demo as demo_cmd
from prmkit.cli._eval import app as eval_app
from prmkit.cli._eval import report as report_cmd
from prmkit.cli._generate import generate as generate_cmd
from prmkit.cli._label import label as label_cmd
from prmkit.cli._monitor import agent_app
from prmkit.cli._monitor import monitor as monitor_cmd
from prmkit.cli._policy import app as policy_app
from prmkit.cli._rl import rl as rl_cmd
from prmkit.cli._score import score as score_cmd
from prmkit.cli._score import search as search_cmd
from prmkit.cli._score import select as select_cmd
from prmkit.cli._serve import serve as serve_cmd
from prmkit.cli._train import app as train_app
from prmkit.cli._tts import tts as tts_cmd

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
app.command(name="tts")(tts_cmd)
app.add_typer(train_app, name="train")
app.add_typer(eval_app, name="eval")
app.command(name="report")(report_cmd)
app.add_typer(cache_app, name="cache")
app.add_typer(agent_app, name="agent")
app.command(name="monitor")(monitor_cmd)
app.command(name="serve")(serve_cmd)
app.add_typer(annotate_app, name="annotate")
app.command(name="rl")(rl_cmd)


def _print_version(value: bool) -> None:
    if value:
        from prmkit import __version__

        typer.echo(f"prmkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of an unexpected error "
                                        "(may go anywhere on the line; or set PRMKIT_DEBUG=1).")] = False,
) -> None:
    """Process supervision: label, train, use, evaluate and document process reward models."""


@app.command()
def version() -> None:
    """Print the prmkit version."""
    from prmkit import __version__

    typer.echo(__version__)


#: The collector's thresholds while a command runs (each value at least this, see :func:`_fewer_collections`).
GC_THRESHOLDS = (50_000, 20, 20)


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Raise the cyclic garbage collector's thresholds while a command runs (never lower one; put back
    after it, for a caller that runs commands in its own process). A command imports torch and
    transformers and builds a model: millions of long-lived objects, which CPython's defaults (a
    collection every 700 allocations, a full one every 100 of those) traverse again and again. A
    one-step ``prmkit train prm --config default-word`` on 2 cores: 1,333 collections (8 full) taking
    1.8-1.9 s at the defaults, 116 (none full) taking 0.4 s at these; the run 17.9-18.6 s -> 15.8-16.2
    s, the same peak memory (2.0 GB)."""
    before = gc.get_threshold()
    gc.set_threshold(*(max(now, ours) for now, ours in zip(before, GC_THRESHOLDS, strict=True)))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``prmkit`` console script (``argv`` defaults to ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    # --debug is taken from anywhere before "--", so it can be added to the end of a failed line.
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end] or os.environ.get("PRMKIT_DEBUG", "") not in ("", "0")
    args = [a for i, a in enumerate(args) if i >= end or a != "--debug"]
    previous = _exit_on_sigterm()
    _watch_from_env()
    try:
        with _fewer_collections():
            code = app(args=args, standalone_mode=False, prog_name="prmkit")
        if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into Exit(130) before we see it
            typer.secho("interrupted", fg="yellow", err=True)
        if isinstance(code, int) and code:  # typer.Exit(n) returns n in non-standalone mode
            sys.exit(code)
    except _Terminated:
        typer.secho("terminated", fg="yellow", err=True)  # after the writers cleaned up and said so
        sys.exit(143)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        typer.secho("interrupted", fg="yellow", err=True)
        sys.exit(130)
    except BrokenPipeError:  # `prmkit data inspect x | head`: the reader left; nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except Exception as e:
        stopped = _stopped_by(e)
        if stopped is None:
            _fail(e, debug)
        # Raised while a Ctrl-C or SIGTERM unwound the stack (a worker pool broken by the same Ctrl-C,
        # a clean-up that failed): the user stopped the command, and that is what to say.
        typer.secho("interrupted" if stopped == 130 else "terminated", fg="yellow", err=True)
        sys.exit(stopped)
    finally:
        if previous is not None:  # in-process callers (tests, notebooks) get their handler back
            import signal

            signal.signal(signal.SIGTERM, previous)


def _stopped_by(e: BaseException | None) -> int | None:
    """130 (Ctrl-C) or 143 (SIGTERM) when ``e`` was raised while one of them unwound the stack (it is
    in ``e``'s context chain), else None."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, _Terminated):
            return 143
        if isinstance(e, KeyboardInterrupt):
            return 130
        e = e.__context__
    return None


def _fail(e: Exception, debug: bool) -> None:
    """Report an error the user did not cause by stopping the command: one line, exit 1 (or click's)."""
    from prmkit.errors import PrmkitError

    if isinstance(e, PrmkitError):
        if debug:
            traceback.print_exc()
        _error(str(e))
        sys.exit(1)
    click_error = _click_error(e)
    if click_error is not None:
        sys.exit(click_error)
    if debug:
        raise e
    if isinstance(e, OSError) and e.filename:  # a path the checks could not foresee: one line
        _error(f"{e.filename}: {e.strerror or e}")
    else:
        text = " ".join(str(e).split()) or "(no message)"
        _error(f"{type(e).__name__}: {text} (run with --debug for the traceback)")
    sys.exit(1)


def _watch_from_env() -> None:
    """``PRMKIT_EXIT_WITH=PID``: end with that process (servers a test harness starts through a shell)."""
    from prmkit._procs import WATCH_ENV, exit_with_process

    value = os.environ.get(WATCH_ENV, "")
    if value.isdigit() and int(value) > 0:
        exit_with_process(int(value))


class _Terminated(SystemExit):
    """SIGTERM, raised where the main thread was, so the stack unwinds as for Ctrl-C."""


def _exit_on_sigterm() -> Any:
    """SIGTERM (``kill``, a job scheduler's stop) ends the command as Ctrl-C does: the stack unwinds,
    so every writer removes its temporary file and no output is left half-written; exit 143.
    Returns the handler it replaced (None where signals are not this thread's to set)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise _Terminated(143)

    try:
        return signal.signal(signal.SIGTERM, stop)
    except (ValueError, OSError):  # pragma: no cover - an embedding that owns the signals
        return None


def _error(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)


def _click_error(e: Exception) -> int | None:
    """Show one of click's exceptions as a person expects and return its exit status; None for any
    other exception. Typer >= 0.29 bundles its own click (``typer._click``) whose classes are not the
    ``click`` package's, so both are matched."""
    usage, click_exc, abort = _click_exceptions()
    if isinstance(e, abort):
        return 1
    if not isinstance(e, click_exc):
        return None
    ctx = getattr(e, "ctx", None)
    if type(e).__name__ == "NoArgsIsHelpError":  # bare `prmkit` / `prmkit data`: the help, exit 0
        text = e.format_message()  # typer's rich help has printed itself already; plain help has not
        if text.strip():
            typer.echo(text)
        return 0
    _error(" ".join(e.format_message().split()))
    if isinstance(e, usage) and ctx is not None:
        typer.echo(f"{ctx.get_usage()}  (see '{ctx.command_path} --help')", err=True)
    return int(getattr(e, "exit_code", 1))


def _click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    """Click's usage-error, base-exception and abort classes, from ``typer._click`` (typer >= 0.29;
    ``Abort`` in ``typer.exceptions``) and from the ``click`` package."""
    import importlib

    usage: list[type] = []
    click_exc: list[type] = []
    abort: list[type] = []
    for name in ("typer._click.exceptions", "typer.exceptions", "click.exceptions"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for found, attr in ((usage, "UsageError"), (click_exc, "ClickException"), (abort, "Abort")):
            cls = getattr(mod, attr, None)
            if cls is not None:
                found.append(cls)
    return tuple(usage), tuple(click_exc), tuple(abort)
