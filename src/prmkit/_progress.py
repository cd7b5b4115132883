"""One progress report for every long loop (sampling, HTTP requests, labeling, scoring, training), on
stderr: a rich bar on a terminal, periodic plain lines when stderr goes to a log or a pipe."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_bar", "PlainProgress"]

# Patched by tests; monotonic so a clock change cannot make a line claim a negative time.
_clock = time.monotonic


@contextmanager
def progress_bar(total: int, label: str, *, enabled: bool = True, transient: bool = True,
                 tty_only: bool = False) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``. On a terminal a rich bar is shown; when stderr is not a terminal (a log
    file, CI) :class:`PlainProgress` prints a plain line now and then instead, since a bar there would
    show only when the loop ends. Nothing is shown when disabled, when ``total <= 1``, or
    (``tty_only``) off a terminal. The bar always stops, also when the loop raises.

    >>> with progress_bar(3, "demo", enabled=False) as advance:
    ...     advance(3)
    """
    if not enabled or total <= 1:
        yield lambda n=1: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not (console.is_terminal or console.is_jupyter):
        if tty_only:
            yield lambda n=1: None
            return
        plain = PlainProgress(total, label, final=not transient)
        try:
            yield plain.advance
        finally:
            plain.close()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn(), transient=transient, console=console)
    task = bar.add_task(label, total=total)
    bar.start()
    try:
        yield lambda n=1: bar.update(task, advance=n)
    finally:
        bar.stop()


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class PlainProgress:
    """Progress as plain lines for logs: ``label: 12/120 (10%), 0:00:31 elapsed, about 0:04:39 left``.

    A line is printed each time another tenth of the work is done (``every_fraction``) or
    ``every_s`` seconds after the last line, whichever comes first, checked when work is reported; the
    first ``quiet_s`` seconds print nothing, so work that ends that soon leaves no lines. ``close()``
    prints ``label: done, N in H:MM:SS`` where a line was printed before or ``final`` asks for it.

    >>> import io
    >>> p = PlainProgress(4, "demo", quiet_s=0, file=io.StringIO())
    >>> for _ in range(4):
    ...     p.advance()
    >>> print(p.file.getvalue().splitlines()[0].split(",")[0])
    demo: 1/4 (25%)
    """

    def __init__(self, total: int, label: str, *, every_fraction: float = 0.1, every_s: float = 30.0,
                 quiet_s: float = 5.0, final: bool = False, file=None) -> None:
        self.total, self.label = total, label
        self.every_fraction, self.every_s, self.quiet_s, self.final = every_fraction, every_s, quiet_s, final
        self.file = file
        self.done = 0
        self.start = self.last_time = _clock()
        self.last_mark = 0  # the tenths (every_fraction steps) already reported
        self.printed = False

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more items done; print a line if one is due."""
        self.done += n
        now = _clock()
        if now - self.start < self.quiet_s:
            return
        mark = int(self.done / self.total / self.every_fraction + 1e-9) if self.total else 0
        if mark > self.last_mark or now - self.last_time >= self.every_s:
            if self.done < self.total:
                self._line(now)
            self.last_mark, self.last_time = mark, now

    def close(self) -> None:
        """The closing line (see the class docs)."""
        if not (self.printed or self.final):
            return
        elapsed = _clock() - self.start
        if self.done >= self.total:
            self._write(f"{self.label}: done, {self.done} in {_hms(elapsed)}")
        else:
            self._write(f"{self.label}: stopped at {self.done}/{self.total} after {_hms(elapsed)}")

    def _line(self, now: float) -> None:
        elapsed = now - self.start
        pct = 100 * self.done / self.total
        text = f"{self.label}: {self.done}/{self.total} ({pct:.0f}%), {_hms(elapsed)} elapsed"
        if self.done:
            text += f", about {_hms(elapsed * (self.total - self.done) / self.done)} left"
        self._write(text)

    def _write(self, text: str) -> None:
        out = self.file if self.file is not None else sys.stderr
        print(text, file=out, flush=True)
        self.printed = True
