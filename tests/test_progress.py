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


def test_work_in_flight_moves_the_count_the_eta_and_the_line(clock):
    """A batch of 8 problems decoding for minutes: its fraction counts (``4.0/112`` half-way), the ETA
    is the time per item so far, and the line says what is in flight."""
    out = io.StringIO()
    p = PlainProgress(112, "problems", quiet_s=0, file=out)
    with p.inflight(8):
        clock.t += 40
        _progress._ACTIVE.append(p)
        try:
            _progress.report_within(0.5, "32/64 rows done, a batch of 32 at token 40/80")
        finally:
            _progress._ACTIVE.remove(p)
        p.tick()
    assert out.getvalue().splitlines() == [
        "problems: 4.0/112 (4%), 0:00:40 elapsed, about 0:18:00 left; 8 in progress "
        "(32/64 rows done, a batch of 32 at token 40/80)"]
    clock.t += 40
    p.advance(8)  # the batch's problems count together: the line says 8, never 1 of them alone
    p.tick()
    assert out.getvalue().splitlines()[-1] == "problems: 8/112 (7%), 0:01:20 elapsed, about 0:17:20 left"


def test_the_heartbeat_keeps_the_promise_while_nothing_reports(clock):
    out = io.StringIO()
    p = PlainProgress(10, "labeling", quiet_s=5, file=out)
    for _ in range(4):  # 4 x 20 s of one long item: a line at 30 s and at 60 s, none before 5 s
        clock.t += 20
        p.tick()
    p.close()
    assert [ln.split(",")[1].strip() for ln in out.getvalue().splitlines()[:2]] == [
        "0:00:40 elapsed", "0:01:20 elapsed"]


def test_batch_progress_fractions():
    b = _progress.BatchProgress(100)
    b.batch(64)
    assert (b.fraction(0, 80), b.fraction(40, 80), b.fraction(200, 80)) == (0.0, 0.32, 0.64)
    b.batch(36)
    assert b.fraction(80, 80) == 1.0 and b.detail(10, 80) == "64/100 rows done, a batch of 36 at token 10/80"


def _short_log(monkeypatch) -> io.StringIO:
    """stderr as a captured log (not a terminal), a line due every 0.3 s, no quiet start. Called in
    the test itself: pytest's capture replaces ``sys.stderr`` after fixtures are set up."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("FORCE_TERMINAL", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setattr(_progress, "EVERY_S", 0.3)
    monkeypatch.setattr(_progress, "QUIET_S", 0.0)
    return err


def test_sampling_reports_within_a_batch_every_interval_in_a_log(monkeypatch, tmp_path):
    """The 30-second promise, with a slow scripted policy and the interval made short: one call of
    8 problems (nothing finishes for ~2 s) prints lines with the requests done inside it, from the
    heartbeat, and counts the 8 problems together when the call returns."""
    from prmkit.envs import ArithConfig, ArithEnv
    from prmkit.generate import generate_file
    from prmkit.policies import SamplingParams, ScriptedPolicy

    err = _short_log(monkeypatch)
    cfg = ArithConfig(steps=(2, 2))
    problems = ArithEnv(cfg).problems(16)
    policy = ScriptedPolicy(["2 + 3 = 5\nThe answer is 5."], delay=0.25)
    generate_file(tmp_path / "out.jsonl", problems, policy, params=SamplingParams(n=2, max_new_tokens=16),
                  arith_config=cfg, problems_per_call=8)
    lines = err.getvalue().splitlines()
    inside = [ln for ln in lines if "8 in progress" in ln and "requests done" in ln]
    assert len(inside) >= 3, lines  # ~2 s a call, a line every 0.3 s
    assert not any(ln.startswith("problems: 1/16") for ln in lines)  # never one problem of a finished batch
    assert any(ln.startswith(("problems: 8/16 (50%)", "problems: 8.")) for ln in lines), lines
    assert lines[-1].startswith("problems: done, 16 in ")


def test_labeling_reports_within_its_rollouts_in_a_log(monkeypatch, tmp_path):
    """Labeling: the rollouts of one trace take seconds, and the log says how many of the current
    call's requests are done, at the (here shortened) interval, before any trace is finished."""
    from prmkit.labelers import MCLabeler, label_file
    from prmkit.policies import ScriptedPolicy
    from prmkit.trace import Problem, Step, Trace, write_traces

    err = _short_log(monkeypatch)
    steps = [Step("2 + 3 = 5"), Step("5 + 1 = 6"), Step("6 - 1 = 5"), Step("5 * 1 = 5"),
             Step("The answer is 5.", kind="final")]
    traces = [Trace(id=f"t{i}", problem=Problem("What is 2 + 3?", answer="5"), steps=steps) for i in range(2)]
    write_traces(traces, tmp_path / "in.jsonl")
    policy = ScriptedPolicy(["The answer is 5."], delay=0.3)  # 4 prefixes a trace: ~1.2 s a call
    label_file(tmp_path / "in.jsonl", tmp_path / "out.jsonl", MCLabeler(policy, k=2, workers=0),
               store=":memory:")
    lines = err.getvalue().splitlines()
    assert any(ln.startswith("labeling (mc): 0/2") and "requests done" in ln for ln in lines), lines
