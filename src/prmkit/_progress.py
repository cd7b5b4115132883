"""One progress report for every long loop (sampling, HTTP requests, labeling, scoring, training), on
stderr: a rich bar on a terminal, periodic plain lines when stderr goes to a log or a pipe.

Work inside one item (a batch of 128 rows decoding for minutes) is reported too: the stage says how
many of its items are in flight (``advance.inflight(n)``), and the code doing the work says how far
it is (:func:`report_within`: a fraction and a few words, such as ``"37/80 tokens"``), so the count,
the ETA and the lines move while a batch runs. Off a terminal a line comes at least every 30 seconds
even when nothing reports (a heartbeat thread), so a log never goes quiet for longer.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_bar", "PlainProgress", "report_within", "BatchProgress"]

# Patched by tests; monotonic so a clock change cannot make a line claim a negative time.
_clock = time.monotonic

#: Off a terminal, the longest a log goes without a line while work goes on (seconds), and how long
#: work runs before its first line (work that ends sooner leaves none).
EVERY_S = 30.0
QUIET_S = 5.0

#: The open progress reports, innermost last: :func:`report_within` goes to the innermost.
_ACTIVE: list[_Report] = []
_ACTIVE_LOCK = threading.Lock()


def report_within(fraction: float, detail: str = "") -> None:
    """Say how far the work in flight is (``fraction`` of the items declared by ``inflight``, 0-1)
    and what it is doing (``detail``), to the innermost open progress report; nothing where none is
    open. Cheap: a decode loop may call it every step."""
    with _ACTIVE_LOCK:
        report = _ACTIVE[-1] if _ACTIVE else None
    if report is not None:
        report.within(fraction, detail)


class BatchProgress:
    """A call's progress through ``total`` rows done in batches, for :func:`report_within`:
    ``batch(size)`` when a batch starts, ``step(t, steps)`` as it goes (say decode step ``t`` of at most
    ``steps``).

    >>> b = BatchProgress(64)
    >>> b.batch(16); b.batch(16)
    >>> b.fraction(8, 16), b.detail(8, 16)
    (0.375, '16/64 rows done, a batch of 16 at token 8/16')
    """

    def __init__(self, total: int, unit: str = "rows") -> None:
        self.total, self.unit = max(1, total), unit
        self.before = 0
        self.size = 0

    def batch(self, size: int) -> None:
        self.before += self.size
        self.size = size

    def fraction(self, t: int, steps: int) -> float:
        return min(1.0, (self.before + self.size * min(t, steps) / max(1, steps)) / self.total)

    def detail(self, t: int, steps: int) -> str:
        return (f"{self.before}/{self.total} {self.unit} done, a batch of {self.size} at token "
                f"{min(t, steps)}/{steps}")

    def step(self, t: int, steps: int) -> None:
        report_within(self.fraction(t, steps), self.detail(t, steps))

    def add(self, n: int) -> None:
        """``n`` more rows done, where the work has no steps to report (a scoring batch)."""
        self.before += n
        report_within(min(1.0, self.before / self.total), f"{self.before}/{self.total} {self.unit} done")


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
        yield _Report()
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not (console.is_terminal or console.is_jupyter):
        if tty_only:
            yield _Report()
            return
        plain = PlainProgress(total, label, every_s=EVERY_S, quiet_s=QUIET_S, final=not transient,
                              heartbeat=True)
        with _opened(plain):
            try:
                yield plain
            finally:
                plain.close()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn(), transient=transient, console=console)
    report = _RichReport(bar, bar.add_task(label, total=total), label)
    bar.start()
    with _opened(report):
        try:
            yield report
        finally:
            bar.stop()


@contextmanager
def _opened(report: _Report) -> Iterator[None]:
    with _ACTIVE_LOCK:
        _ACTIVE.append(report)
    try:
        yield
    finally:
        with _ACTIVE_LOCK:
            if report in _ACTIVE:
                _ACTIVE.remove(report)


class _Report:
    """What :func:`progress_bar` yields: ``advance(n)`` (call it) counts items done;
    ``inflight(n)`` (a context) says ``n`` items are being worked on, whose progress
    :func:`report_within` then reports. This base reports nothing (a disabled bar)."""

    def __call__(self, n: int = 1) -> None:
        self.advance(n)

    def advance(self, n: int = 1) -> None:
        pass

    def within(self, fraction: float, detail: str = "") -> None:
        pass

    @contextmanager
    def inflight(self, n: int) -> Iterator[None]:
        self._set_inflight(n)
        try:
            yield
        finally:
            self._set_inflight(0)

    def _set_inflight(self, n: int) -> None:
        pass


class _RichReport(_Report):
    """A rich bar whose count includes the work in flight and whose label shows its detail."""

    def __init__(self, bar, task, label: str) -> None:
        self.bar, self.task, self.label = bar, task, label
        self.done, self.items, self.fraction = 0, 0, 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.bar.update(self.task, completed=self.done + self.items * self.fraction)

    def within(self, fraction: float, detail: str = "") -> None:
        self.fraction = min(max(fraction, 0.0), 1.0)
        self.bar.update(self.task, completed=self.done + self.items * self.fraction,
                        description=f"{self.label} ({detail})" if detail else self.label)

    def _set_inflight(self, n: int) -> None:
        self.items, self.fraction = n, 0.0
        self.bar.update(self.task, completed=self.done, description=self.label)


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class PlainProgress(_Report):
    """Progress as plain lines for logs: ``label: 12/120 (10%), 0:00:31 elapsed, about 0:04:39 left``.

    A line is printed each time another tenth of the work is done (``every_fraction``) or
    ``every_s`` seconds after the last line, whichever comes first, checked when work is reported and,
    with ``heartbeat``, by a background thread every second, so a line comes at least every
    ``every_s`` seconds while work goes on (:meth:`tick` is that check). The first ``quiet_s`` seconds
    print nothing, so work that ends that soon leaves no lines. ``close()`` prints
    ``label: done, N in H:MM:SS`` where a line was printed before or ``final`` asks for it.

    Work in flight counts (``inflight(n)`` and :func:`report_within`): the count shows the items done
    plus the finished fraction of those in flight (``12.4/120``), the line says what is in flight, and
    the ETA is the time per item so far times the items left.

    >>> import io
    >>> p = PlainProgress(4, "demo", quiet_s=0, file=io.StringIO())
    >>> for _ in range(4):
    ...     p.advance()
    >>> print(p.file.getvalue().splitlines()[0].split(",")[0])
    demo: 1/4 (25%)
    """

    def __init__(self, total: int, label: str, *, every_fraction: float = 0.1, every_s: float = 30.0,
                 quiet_s: float = 5.0, final: bool = False, file=None, heartbeat: bool = False) -> None:
        self.total, self.label = total, label
        self.every_fraction, self.every_s, self.quiet_s, self.final = every_fraction, every_s, quiet_s, final
        self.file = file
        self.done = 0
        self.items, self.fraction, self.detail = 0, 0.0, ""  # the work in flight
        self.start = self.last_time = _clock()
        self.last_mark = 0  # the tenths (every_fraction steps) already reported
        self.printed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        if heartbeat:
            self._thread = threading.Thread(target=self._beat, name=f"progress: {label}", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.every_s)):
            self.tick()

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more items done; print a line if one is due."""
        with self._lock:
            self.done += n
            if not self.items:
                self.detail = ""  # said of work that is now counted
            self._due(_clock(), tenths=True)

    def within(self, fraction: float, detail: str = "") -> None:
        """The work in flight is ``fraction`` done (see :func:`report_within`); a line if one is due."""
        with self._lock:
            self.fraction, self.detail = min(max(float(fraction), 0.0), 1.0), detail
            self._due(_clock(), tenths=True)

    def _set_inflight(self, n: int) -> None:
        with self._lock:
            self.items, self.fraction, self.detail = n, 0.0, ""

    def tick(self) -> None:
        """Print a line if ``every_s`` seconds passed since the last one (the heartbeat's check)."""
        with self._lock:
            self._due(_clock(), tenths=False)

    def _effective(self) -> float:
        return min(self.total, self.done + self.items * self.fraction)

    def _due(self, now: float, *, tenths: bool) -> None:
        if now - self.start < self.quiet_s or self._stop.is_set():
            return
        done = self._effective()
        mark = int(done / self.total / self.every_fraction + 1e-9) if self.total else 0
        if (tenths and mark > self.last_mark) or now - self.last_time >= self.every_s:
            if done < self.total:
                self._line(now)
            self.last_mark, self.last_time = max(mark, self.last_mark), now

    def close(self) -> None:
        """The closing line (see the class docs); stops the heartbeat."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self._lock:
            if not (self.printed or self.final):
                return
            elapsed = _clock() - self.start
            if self.done >= self.total:
                self._write(f"{self.label}: done, {self.done} in {_hms(elapsed)}")
            else:
                self._write(f"{self.label}: stopped at {self.done}/{self.total} after {_hms(elapsed)}")

    def _line(self, now: float) -> None:
        elapsed = now - self.start
        done = self._effective()
        shown = f"{self.done}" if done == self.done else f"{done:.1f}"
        pct = 100 * done / self.total
        text = f"{self.label}: {shown}/{self.total} ({pct:.0f}%), {_hms(elapsed)} elapsed"
        if done > 0:
            text += f", about {_hms(elapsed * (self.total - done) / done)} left"
        if self.items:
            text += f"; {self.items} in progress" + (f" ({self.detail})" if self.detail else "")
        elif self.detail:
            text += f"; {self.detail}"
        self._write(text)

    def _write(self, text: str) -> None:
        out = self.file if self.file is not None else sys.stderr
        print(text, file=out, flush=True)
        self.printed = True
