"""Killing ``prmkit label``'s main process alone (SIGKILL, not its process group) leaves no child
behind: the pool worker exits with its parent, and the resource tracker follows once no process
holds its pipe."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from proc_checks import alive

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process tree")

SLOW_POLICY = textwrap.dedent('''
    import os, time

    class SlowPolicy:
        """Announces the worker's pid in a file when asked to generate, then never answers."""

        name = "slow"
        model_id = "slow"

        def __init__(self, marker):
            self.marker = marker

        def describe(self):
            return {"backend": "slow"}

        def generate(self, requests, params):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(300)
            return []
''')


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (psutil where installed, else /proc)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent_of[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        kids = [c for c, p in parent_of.items() if p in frontier]
        found += kids
        frontier = kids
    return found


def _label_until_a_worker_generates(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """``prmkit label`` with one worker whose policy never answers, in a session of its own, returned
    once the worker is inside ``generate`` (it wrote its pid to the marker file)."""
    (tmp_path / "slowpolicy.py").write_text(SLOW_POLICY)
    inp, marker = tmp_path / "in.jsonl", tmp_path / "worker.pid"
    steps = [{"text": "1+1=2"}, {"text": "2+1=3"}, {"text": "The answer is 3."}]  # two need rollouts
    inp.write_text(json.dumps({"id": "t1", "problem": {"text": "1+1+1?", "answer": "3"}, "steps": steps,
                               "final_answer": "3"}) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "prmkit", "label", str(inp), str(tmp_path / "out.jsonl"),
         "--policy", "slowpolicy:SlowPolicy", "-p", f"marker={marker}", "--workers", "1", "-k", "1",
         "--no-progress"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while not marker.exists() or not marker.read_text():
        if proc.poll() is not None:
            pytest.fail(f"label ended before generating: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the worker never started generating")
        time.sleep(0.1)
    return proc, marker


@pytest.mark.slow
def test_killing_the_main_process_leaves_no_worker(tmp_path):
    proc, marker = _label_until_a_worker_generates(tmp_path)
    kids: list[int] = []
    try:
        kids = _children(proc.pid)
        assert int(marker.read_text()) in kids  # the worker is the main process's child

        os.kill(proc.pid, signal.SIGKILL)  # the main process alone
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [k for k in kids if alive(k)]
        assert not survivors, f"children outlived the main process by 5 s: {survivors}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in kids:  # only what this test started, and only while it runs
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stderr.close()


def test_ctrl_c_ends_label_and_its_workers_in_one_line(tmp_path):
    """Ctrl-C reaches the whole process group: ``prmkit label`` says "interrupted" and exits 130; its
    workers end without a traceback each (a 20-line KeyboardInterrupt from a worker before)."""
    proc, marker = _label_until_a_worker_generates(tmp_path)
    kids: list[int] = []
    try:
        kids = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = proc.communicate(timeout=60)
        err = err.decode()
        assert proc.returncode == 130, err
        assert "Traceback" not in err and err.strip().splitlines()[-1] == "interrupted", err
        deadline = time.monotonic() + 5
        while any(alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [k for k in kids if alive(k)]
        assert not (tmp_path / "out.jsonl").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in kids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
