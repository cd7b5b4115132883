"""One progress bar for every long loop (sampling, HTTP requests, trace generation), on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(total: int, label: str, *, enabled: bool = True, transient: bool = True,
                 tty_only: bool = False) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; a rich bar is shown unless disabled, ``total <= 1``, or (``tty_only``)
    stderr is not a terminal. The bar always stops, also when the loop raises.

    >>> with progress_bar(3, "demo", enabled=False) as advance:
    ...     advance(3)
    """
    if not enabled or total <= 1 or (tty_only and not sys.stderr.isatty()):
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn(), transient=transient,
                   console=Console(stderr=True))
    task = bar.add_task(label, total=total)
    bar.start()
    try:
        yield lambda n=1: bar.update(task, advance=n)
    finally:
        bar.stop()
