"""Fault tests: ``prmkit label``, ``prmkit data convert`` and ``prmkit score`` are SIGKILLed at moments
hypothesis picks, and the disk is inspected right after each kill, before anything else runs:

- no file at OUT's name unless it is complete (every record readable, as many as the input has, and
  equal to an uninterrupted run's) or is the old OUT, byte for byte;
- the label store opens, passes SQLite's integrity check, and holds only rollouts an uninterrupted run
  makes, each as that run made it;
- the next ``prmkit label`` reuses every rollout stored before the kill (its report's ``reused``
  equals what was on disk, ``generated`` the rest) and writes what an uninterrupted run writes.

``label`` is killed either in its main process alone or with its whole process group (its pool
worker too). Each assertion fails under a change a real regression would make: deleting the store at
the start of a run fails the ``reused`` check, writing OUT in place (no temporary file and rename)
fails the "complete or absent" check once a kill lands mid-write.

The moments are drawn by hypothesis with a fixed seed (``derandomize``), so a failure reproduces; the
explicit ``@example`` moments make sure some kills land mid-run on any machine. Shrinking is off: a
moment does not shrink reliably, and each example runs the CLI twice.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from store_probe import stored_rollouts

from prmkit.data import scan
from prmkit.labelers import LabelStore
from prmkit.trace import read_traces

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups")]

FAULTS = settings(max_examples=5, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate])

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}

# Two rollout completions, one reaching each trace's answer ("3" for t1 only): the labels vary.
COMPLETIONS = json.dumps(["So far so good.\nThe answer is 3.", "Hmm.\nThe answer is 9."])
# 0.05 s per request: 12 requests, so a run spends ~0.6 s generating and kills land inside it.
LABEL_ARGS = ["--policy", "scripted", "-p", f"completions={COMPLETIONS}", "-p", "delay=0.05",
              "-k", "2", "--seed", "5", "--window", "1", "--no-progress"]


def write_input(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            steps = [{"text": f"{i}+1={i + 1}"}, {"text": f"{i + 1}+1={i + 2}"},
                     {"text": f"The answer is {i + 2}."}]
            f.write(json.dumps({"id": f"t{i}", "problem": {"text": f"{i}+1+1?", "answer": str(i + 2)},
                                "steps": steps, "final_answer": str(i + 2)}) + "\n")


def prmkit(*args: str | Path) -> subprocess.Popen:
    """``prmkit ARGS`` in a session of its own (its process group is its pid)."""
    return subprocess.Popen([sys.executable, "-m", "prmkit", *map(str, args)], env=ENV,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen) -> str:
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, out
    return out


def comparable(obj):
    """A trace dict without what differs between runs by nature: timestamps and wall seconds."""
    if isinstance(obj, dict):
        return {k: comparable(v) for k, v in obj.items() if k not in ("time", "seconds")}
    if isinstance(obj, list):
        return [comparable(v) for v in obj]
    return obj


def traces_of(path: Path) -> list:
    return [comparable(t.to_dict()) for t in read_traces(path)]


def partial_of(out: Path) -> Path:
    return out.with_name(out.stem + ".partial" + out.suffix)


def kill(proc: subprocess.Popen, *, group: bool) -> None:
    """SIGKILL the main process alone or its whole group, then reap the main process. A run that
    already ended is left as it is (its moment came after the end)."""
    if proc.poll() is None:
        try:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.communicate(timeout=60)


def reap_group(pgid: int) -> None:
    """After the disk was inspected: end whatever this test started and is still in the group (a pool
    worker of a main process killed alone exits by itself; this only keeps the test tidy)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def assert_complete_or_absent(out: Path, expected: list, old: bytes | None, n: int) -> None:
    """OUT is absent, the old OUT untouched, or complete: every record valid, ``n`` of them, equal
    to an uninterrupted run's."""
    if not out.exists():
        assert old is None, f"{out}: the old OUT was removed"
        return
    if old is not None and out.read_bytes() == old:
        return
    report = scan(out)
    assert not report.skipped and report.records == n, (
        f"{out}: a partial file at the final name ({report.records} of {n} records, "
        f"{len(report.skipped)} unreadable)")
    assert traces_of(out) == expected


# -- label ----------------------------------------------------------------------------------------------

def store_rows(path: Path) -> set[tuple]:
    """Every stored rollout, as the labels use it; the store must open and pass SQLite's check."""
    if not path.exists():
        return set()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()
    with LabelStore(path) as s:
        rows = {(r.trace_id, r.prefix, r.index, r.seed, r.text, r.reached, r.tokens, r.finish_reason)
                for r in s.rollouts()}
        assert len(rows) == s.count()
    return rows


@pytest.fixture(scope="module")
def label_ref(tmp_path_factory):
    """An uninterrupted run: its input, output traces and stored rollouts."""
    d = tmp_path_factory.mktemp("label-ref")
    write_input(d / "in.jsonl", 6)
    finish(prmkit("label", d / "in.jsonl", d / "out.jsonl", *LABEL_ARGS, "--workers", "0"))
    rows = store_rows(d / "out.jsonl.labels.sqlite")
    assert len(rows) == 6 * 2 * 2  # 6 traces, 2 prefixes before the answer step, k=2
    return d / "in.jsonl", traces_of(d / "out.jsonl"), rows


@FAULTS
@given(group=st.booleans(), workers=st.sampled_from([0, 1]), after=st.integers(0, 23),
       extra=st.floats(0, 0.06))
@example(group=False, workers=1, after=6, extra=0.0)   # mid-run, main process alone
@example(group=True, workers=0, after=12, extra=0.01)  # mid-run, the group
def test_label_killed_at_any_moment_leaves_a_consistent_disk_and_resumes_exactly(
        label_ref, tmp_path_factory, group, workers, after, extra):
    inp, expected, ref_rows = label_ref
    d = tmp_path_factory.mktemp("label")
    out, store, rep = d / "out.jsonl", d / "out.jsonl.labels.sqlite", d / "report.json"
    args = (*LABEL_ARGS, "--workers", str(workers))

    proc = prmkit("label", inp, out, *args)
    deadline = time.monotonic() + 60
    while proc.poll() is None and stored_rollouts(store) < after and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(extra)
    kill(proc, group=group)

    # the disk right after the kill
    assert_complete_or_absent(out, expected, None, 6)
    before = store_rows(store)
    assert before <= ref_rows, "the store holds rollouts an uninterrupted run does not make"
    reap_group(proc.pid)

    # --overwrite: a kill that landed after the rename left a complete OUT, which a rerun without it
    # refuses; it keeps the store, so the rerun still reuses every rollout stored.
    finish(prmkit("label", inp, out, *args, "--report", rep, "--overwrite"))
    report = json.loads(rep.read_text())
    assert (report["reused"], report["generated"]) == (len(before), len(ref_rows) - len(before)), (
        f"{len(before)} rollouts were stored before the kill")
    assert store_rows(store) == ref_rows
    assert traces_of(out) == expected
    assert not partial_of(out).exists()


# -- convert and score -------------------------------------------------------------------------------

def wait_for_writing(proc: subprocess.Popen, out: Path, old_stat: os.stat_result | None) -> None:
    """Until the run has started its output (the temporary file exists, or OUT changed: a writer
    that writes in place), or ended."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if partial_of(out).exists():
            return
        try:
            now = out.stat()
        except FileNotFoundError:
            now = None
        if now is not None and (old_stat is None or (now.st_ino, now.st_size, now.st_mtime_ns)
                                != (old_stat.st_ino, old_stat.st_size, old_stat.st_mtime_ns)):
            return
        time.sleep(0.005)


def kill_while_writing(command: list, out: Path, *, old: bytes | None, extra: float, group: bool,
                       expected: list, n: int) -> None:
    if old is not None:
        out.write_bytes(old)
    proc = prmkit(*command, "--overwrite")  # over an existing OUT (old) too: the replace is on trial
    wait_for_writing(proc, out, out.stat() if old is not None else None)
    time.sleep(extra)
    kill(proc, group=group)
    assert_complete_or_absent(out, expected, old, n)
    reap_group(proc.pid)


CONVERT_N = 3000  # ~0.4 s of writing here: long enough for a kill to land inside it


@pytest.fixture(scope="module")
def convert_ref(tmp_path_factory):
    d = tmp_path_factory.mktemp("convert-ref")
    write_input(d / "in.jsonl", CONVERT_N)
    finish(prmkit("data", "convert", d / "in.jsonl", d / "out.jsonl"))
    return d / "in.jsonl", traces_of(d / "out.jsonl")


@FAULTS
@given(old=st.booleans(), group=st.booleans(), extra=st.floats(0, 0.3))
@example(old=True, group=False, extra=0.02)
@example(old=False, group=True, extra=0.05)
def test_convert_killed_while_writing_leaves_no_partial_out(convert_ref, tmp_path_factory, old, group,
                                                            extra):
    inp, expected = convert_ref
    out = tmp_path_factory.mktemp("convert") / "out.jsonl"
    kill_while_writing(["data", "convert", inp, out], out, old=b"old output\n" if old else None,
                       extra=extra, group=group, expected=expected, n=CONVERT_N)


SCORE_ARGS = ["--scorer", "scripted", "-s", "scores={}", "-s", "default=0.5", "-s", "delay=0.05",
              "--chunk", "1"]  # 12 traces, one per call, 0.05 s each: ~0.6 s of writing


@pytest.fixture(scope="module")
def score_ref(tmp_path_factory):
    d = tmp_path_factory.mktemp("score-ref")
    write_input(d / "in.jsonl", 12)
    finish(prmkit("score", d / "in.jsonl", d / "out.jsonl", *SCORE_ARGS))
    return d / "in.jsonl", traces_of(d / "out.jsonl")


@FAULTS
@given(old=st.booleans(), group=st.booleans(), extra=st.floats(0, 0.7))
@example(old=True, group=False, extra=0.1)
@example(old=False, group=True, extra=0.2)
def test_score_killed_while_writing_leaves_no_partial_out(score_ref, tmp_path_factory, old, group,
                                                          extra):
    inp, expected = score_ref
    out = tmp_path_factory.mktemp("score") / "out.jsonl"
    kill_while_writing(["score", inp, out, *SCORE_ARGS], out, old=b"old output\n" if old else None,
                       extra=extra, group=group, expected=expected, n=12)
