"""Stopping ``prmkit train --num-processes N`` (issue 45): the training processes end with the process
that launched them, even when it is SIGKILLed (torch's launcher starts each in its own session, where
``kill -- -PGID`` does not reach them); Ctrl-C is one line, "interrupted", and exit 130; SIGTERM is
"terminated" and exit 143, as for every other command; each process stopped by a signal ends quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from proc_checks import alive

from prmkit.cli import main
from prmkit.train._launch import worker

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process tree")


def _training_processes(pid: int) -> list[int]:
    """The children of ``pid`` that run ``python -m prmkit.train`` (the ranks)."""
    psutil = pytest.importorskip("psutil")
    out = []
    for p in psutil.Process(pid).children():
        try:
            if "prmkit.train" in p.cmdline():
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


class TwoProcessRun:
    """``prmkit train prm --num-processes 2`` of the tiny model on the marker data, long enough never
    to finish by itself, in its own session (as a terminal's foreground job is in its own group)."""

    def __init__(self, marker_files, tmp_path: Path) -> None:
        self.err = tmp_path / "stderr.txt"
        self.out = tmp_path / "run"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "CUDA_VISIBLE_DEVICES": ""}
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "prmkit", "train", "prm", "--config", "tiny", "--num-processes", "2",
                 f"train=[{marker_files['train']}]", f"output_dir={self.out}", "max_steps=1000000",
                 "log_every=1000000", "progress=false", "eval_fraction=0", "precision=fp32"],
                env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        self.ranks: list[int] = []

    def wait_until_training(self, timeout: float = 120) -> int:
        """Wait for the main rank's "optimizer steps" line; returns how much stderr there was then."""
        deadline = time.monotonic() + timeout
        while "optimizer steps" not in self.err.read_text():
            if self.proc.poll() is not None:
                pytest.fail(f"training ended before it started: {self.err.read_text()[-3000:]}")
            assert time.monotonic() < deadline, f"no training after {timeout} s: {self.err.read_text()[-3000:]}"
            time.sleep(0.1)
        self.ranks = _training_processes(self.proc.pid)
        assert len(self.ranks) == 2, self.ranks
        return len(self.err.read_text())

    def survivors(self, within: float) -> list[int]:
        deadline = time.monotonic() + within
        while any(alive(p) for p in self.ranks) and time.monotonic() < deadline:
            time.sleep(0.05)
        return [p for p in self.ranks if alive(p)]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        for pid in self.ranks:  # only what this test started, and only while it runs
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def two_process_run(marker_files, tmp_path):
    run = TwoProcessRun(marker_files, tmp_path)
    yield run
    run.close()


@pytest.mark.slow
def test_killing_the_launching_process_ends_every_training_process(two_process_run):
    run = two_process_run
    run.wait_until_training()
    os.kill(run.proc.pid, signal.SIGKILL)  # the main process alone, as the OOM killer does
    run.proc.wait(timeout=10)
    assert not run.survivors(within=5), "training processes outlived the launching one by 5 s"


@pytest.mark.slow
def test_ctrl_c_stops_every_process_with_one_line(two_process_run):
    run = two_process_run
    before = run.wait_until_training()
    os.killpg(run.proc.pid, signal.SIGINT)  # what Ctrl-C sends: the terminal's foreground group
    assert run.proc.wait(timeout=60) == 130
    assert run.err.read_text()[before:] == "interrupted\n"
    assert not run.survivors(within=1)
    assert not list(run.out.glob(".tmp-*"))


# -- in one process: what the launcher's signal turns into ---------------------------------------------

def _launcher_stopped_by(sig: int):
    """A stand-in for torch's launcher that gets ``sig`` while the processes run: it installs its
    handlers (as it does when it starts them), which turn the signal into its SignalException."""
    from torch.distributed.elastic.multiprocessing import api

    def run(args) -> None:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(s, api._terminate_process_handler)
        os.kill(os.getpid(), sig)
        time.sleep(5)
        raise AssertionError("the signal did not arrive")

    return run


@pytest.fixture
def handlers_kept():
    """This process's handlers of the launcher's signals, put back after the test whatever it did."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    before = {s: signal.getsignal(s) for s in sigs}
    yield before
    for s, h in before.items():
        signal.signal(s, h)


@pytest.mark.parametrize(("sig", "code", "line"), [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "terminated"),
    (signal.SIGHUP, 1, "error: training on 2 processes stopped: this process got SIGHUP"),
])
def test_a_signal_to_the_launcher_is_one_line(sig, code, line, marker_files, tmp_path, monkeypatch, capsys,
                                              handlers_kept):
    monkeypatch.setattr("torch.distributed.run.run", _launcher_stopped_by(sig))
    with pytest.raises(SystemExit) as info:
        main(["train", "prm", "--config", "tiny", "--num-processes", "2", f"train=[{marker_files['four']}]",
              f"output_dir={tmp_path / 'run'}", "progress=false"])
    err = capsys.readouterr().err.splitlines()
    assert (info.value.code, err[-1]) == (code, line)
    assert err[-2].startswith("starting 2 training processes")  # nothing between: no traceback, no log
    # torch's launcher leaves its handlers behind; a later Ctrl-C must be a KeyboardInterrupt again
    assert {s: signal.getsignal(s) for s in handlers_kept} == handlers_kept


@pytest.mark.parametrize(("world", "err"), [("2", ""), ("1", "interrupted\n")])
def test_a_stopped_training_process_ends_in_one_line_or_none(world, err, monkeypatch, capfd, handlers_kept):
    """One of several processes ends quietly (its launcher says "interrupted" once); one alone says it."""
    def stopped(cfg, log):
        os.kill(os.getpid(), signal.SIGINT)  # what the launcher passes on
        time.sleep(5)
        raise AssertionError("the signal did not arrive")

    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setattr("prmkit.train._launch.load_config", lambda path: None)
    monkeypatch.setattr("prmkit.train._launch.train", stopped)
    try:
        code = worker(["train_config.yaml"])
    except KeyboardInterrupt:
        pytest.fail("the training process let KeyboardInterrupt through (a traceback on each rank)")
    assert (code, capfd.readouterr().err) == (130, err)
    assert signal.getsignal(signal.SIGINT) is handlers_kept[signal.SIGINT]


def test_an_error_that_a_stop_explains_is_not_reported(monkeypatch, capfd, handlers_kept):
    """A peer that was told to stop can leave first: this process's all-reduce then fails a moment
    before its own signal is handled. That error is the stop's doing, not news."""
    got = []
    signal.signal(signal.SIGTERM, lambda *a: got.append(a))  # the test's own, should the worker set none
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM))

    def peer_left(cfg, log):
        timer.start()
        raise RuntimeError("[gloo] Connection closed by peer")

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("prmkit.train._launch.load_config", lambda path: None)
    monkeypatch.setattr("prmkit.train._launch.train", peer_left)
    try:
        assert worker(["train_config.yaml"]) == 128 + signal.SIGTERM
    finally:
        timer.join()
        time.sleep(0.1)  # the signal handled here, by the test's handler, if the worker had none
    assert capfd.readouterr().err == "" and not got

    def failed(cfg, log):  # and without a signal, the error is the process's to report
        raise RuntimeError("[gloo] Connection closed by peer")

    monkeypatch.setattr("prmkit.train._launch.train", failed)
    with pytest.raises(RuntimeError, match="closed by peer"):
        worker(["train_config.yaml"])
