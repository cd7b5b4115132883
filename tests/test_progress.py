"""Progress is visible in logs: off a terminal, long work prints plain lines now and then."""

from __future__ import annotations

import io
import sys

import pytest

from prmkit import _progress
from prmkit._progress import PlainProgress, progress_bar


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(_progress, "_clock", c)
    return c


def test_a_line_every_tenth_and_a_closing_line(clock):
    out = io.StringIO()
    p = PlainProgress(50, "sampling", quiet_s=0, file=out)
    for _ in range(50):
        clock.t += 1
        p.advance()
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "sampling: 5/50 (10%), 0:00:05 elapsed, about 0:00:45 left"
    assert [ln.split(" ")[1] for ln in lines[:-1]] == [f"{5 * i}/50" for i in range(1, 10)]
    assert lines[-1] == "sampling: done, 50 in 0:00:50"


def test_a_line_every_30_seconds_when_the_tenths_come_slowly(clock):
    out = io.StringIO()
    p = PlainProgress(1000, "training", quiet_s=0, file=out)
    for _ in range(7):  # 7 items, 20 s each: no tenth is reached, a line every 30 s is
        clock.t += 20
        p.advance()
    assert [ln.split(",")[0] for ln in out.getvalue().splitlines()] == [
        "training: 2/1000 (0%)", "training: 4/1000 (0%)", "training: 6/1000 (1%)"]


def test_short_work_leaves_no_lines_and_a_stop_is_said(clock):
    out = io.StringIO()
    p = PlainProgress(10, "scoring", file=out)  # the default: 5 quiet seconds
    for _ in range(10):
        clock.t += 0.1
        p.advance()
    p.close()
    assert out.getvalue() == ""
    p = PlainProgress(10, "labeling", quiet_s=0, file=out)
    clock.t += 40
    p.advance(3)
    p.close()
    assert out.getvalue().splitlines()[-1] == "labeling: stopped at 3/10 after 0:00:40"


def test_progress_bar_off_a_terminal_prints_plain_lines(monkeypatch, clock):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("FORCE_TERMINAL", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    with progress_bar(20, "problems", transient=False) as advance:
        for _ in range(20):
            clock.t += 1
            advance(1)
    text = err.getvalue()
    assert "problems: 6/20 (30%), 0:00:06 elapsed" in text  # the first line after 5 quiet seconds
    assert text.splitlines()[-1] == "problems: done, 20 in 0:00:20"
    assert "\x1b[" not in text and "━" not in text  # no bar, no escape codes in a log
    err.truncate(0)
    with progress_bar(20, "requests", tty_only=True) as advance:  # tty_only: nothing in a log
        clock.t += 60
        advance(20)
    assert err.getvalue() == ""
