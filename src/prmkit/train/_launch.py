"""Training on several CPU processes: :func:`launch` starts them with torch's launcher, each runs
:func:`~prmkit.train.train` (``python -m prmkit.train``), and the main one's result comes back.

Why not ``accelerate launch --num_processes N``: on a machine without GPUs it starts one process
(``--cpu`` starts several only through ``mpirun``), and it reads the user's accelerate config, which
may name DeepSpeed or FSDP. ``accelerate launch --multi_gpu`` with no GPU visible does start N CPU
processes, by running ``torch.distributed.run`` in its own process; :func:`launch` does the same, with
the GPUs hidden, so the processes train on CPU and talk over gloo. On GPUs, use ``accelerate launch
--multi_gpu``.

The processes end with the process that launched them, however it ends (a SIGKILL too:
:func:`prmkit._procs.exit_with_parent`); torch's launcher starts each in its own session, where a
``kill`` of the launcher's process group does not reach them. A signal to the launching process
(Ctrl-C, SIGTERM) is passed on to them by torch's launcher; they end quietly, and the launching
process then does what the signal does there without a launcher: ``KeyboardInterrupt`` for Ctrl-C
(``prmkit train`` prints "interrupted", exit 130), the ``prmkit`` command's handler for SIGTERM
("terminated", exit 143).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from prmkit._durable import write_text_file
from prmkit._procs import exit_with_parent
from prmkit.errors import PrmkitError
from prmkit.train._config import ConfigError, TrainConfig, load_config
from prmkit.train._trainer import TrainResult, _check_output_dir, _write_config_yaml, train

__all__ = ["launch"]

#: Set by :func:`launch` for the processes it starts: its own process id, which each of them ends with.
PARENT_ENV = "PRMKIT_LAUNCHER_PID"
#: The signals torch's launcher catches in the launching process (its TORCHELASTIC_SIGNALS_TO_HANDLE
#: default) to stop the processes it started; it leaves its handlers installed after it returns.
_LAUNCHER_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")
#: The loggers in which torch's launcher narrates, as warnings, how it stops the processes on a
#: signal ("Received SIGINT death signal, shutting down workers", "Sending process N closing signal").
_LAUNCHER_LOGGERS = ("torch.distributed.elastic.agent.server.api", "torch.distributed.elastic.multiprocessing.api")


def launch(cfg: TrainConfig, num_processes: int = 1, *, log=print) -> TrainResult:
    """Train as ``cfg`` says on ``num_processes`` CPU processes (DDP over gloo); the same update as
    one process with ``num_processes`` times the batch. ``1`` trains in this process (:func:`train`).

    The config is checked here, once; each process gets ``max(1, cores // num_processes)`` threads
    unless ``OMP_NUM_THREADS`` is set. The main process writes the model, as in a one-process run, and
    its :class:`TrainResult` (tokens counted over all processes) is returned.

    >>> launch(TrainConfig(train=["t.jsonl"]), num_processes=0)
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: num_processes must be at least 1, got 0
    """
    if num_processes < 1:
        raise PrmkitError(f"num_processes must be at least 1, got {num_processes}")
    problems = cfg.validate()
    if problems:
        raise ConfigError(problems)
    _check_output_dir(cfg.output_dir)  # here, before the processes take seconds to start and load
    if num_processes == 1:
        return train(cfg, log=log)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise PrmkitError("this is already one of several processes (WORLD_SIZE="
                          f"{os.environ['WORLD_SIZE']}): leave out num_processes under accelerate launch")
    import torch

    if torch.cuda.is_available():
        log(f"GPUs are visible, but these {num_processes} processes train on CPU; for GPUs use "
            "accelerate launch --multi_gpu --num_processes N -m prmkit train ...")
    threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, _cores() // num_processes))
    with tempfile.TemporaryDirectory(prefix="prmkit-launch-") as tmp:
        config, result = Path(tmp) / "train_config.yaml", Path(tmp) / "result.json"
        _write_config_yaml(cfg, config)
        log(f"starting {num_processes} training processes on CPU (gloo, {threads} thread(s) each)")
        _run_processes(num_processes, threads, config, result)
        if not result.is_file():
            raise PrmkitError(f"training on {num_processes} processes wrote no result")
        return TrainResult.from_dict(json.loads(result.read_text()))


def _run_processes(num_processes: int, threads: str, config: Path, result: Path) -> None:
    """Run ``python -m prmkit.train CONFIG --result RESULT`` on ``num_processes`` processes with torch's
    launcher, in this process; their failure or a signal that stopped them is raised in prmkit's
    terms, and this process's signal handlers are as they were before."""
    from accelerate.utils import patch_environment
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # torchrun's arguments; --standalone: a rendezvous on a free local port. The processes inherit
    # this environment (patched: no GPU, the threads, this process's id) and this working directory
    # (relative paths).
    args = torchrun.get_args_parser().parse_args(
        ["--standalone", "--nnodes", "1", "--nproc_per_node", str(num_processes), "--max_restarts", "0",
         "-m", "prmkit.train", str(config), "--result", str(result)])
    handlers = _signal_handlers()
    stopped_by = None
    try:
        with (patch_environment(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=threads, **{PARENT_ENV: str(os.getpid())}),
              _warnings_off(_LAUNCHER_LOGGERS)):
            torchrun.run(args)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        raise PrmkitError(f"training on {num_processes} processes failed (process {rank}: exit status "
                          f"{failure.exitcode}); their messages are above") from None
    except SignalException as e:  # the launcher has stopped the processes already
        stopped_by = signal.Signals(e.sigval)
    finally:
        _restore_signal_handlers(handlers)
    if stopped_by is not None:
        _as_without_launcher(stopped_by, handlers.get(stopped_by), num_processes)


def _signal_handlers() -> dict[signal.Signals, Any]:
    return {sig: signal.getsignal(sig) for sig in (getattr(signal, n, None) for n in _LAUNCHER_SIGNALS)
            if sig is not None}


def _restore_signal_handlers(handlers: dict[signal.Signals, Any]) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # torch's launcher sets handlers only in the main thread
    for sig, handler in handlers.items():
        if handler is not None:  # None: set outside Python, cannot be put back from here
            signal.signal(sig, handler)


def _as_without_launcher(sig: signal.Signals, handler: Any, num_processes: int) -> NoReturn:
    """Do what ``sig`` does in this process without torch's launcher: call the handler it had before
    (Python's for Ctrl-C raises KeyboardInterrupt; the prmkit command's for SIGTERM prints
    "terminated" and exits 143); where that is the default action or none, one line."""
    if callable(handler):
        handler(sig, None)
    raise PrmkitError(f"training on {num_processes} processes stopped: this process got {sig.name}")


@contextlib.contextmanager
def _warnings_off(names: tuple[str, ...]) -> Iterator[None]:
    """Only errors from these loggers while the block runs (their levels restored after)."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.level, logging.ERROR))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker(argv: list[str] | None = None) -> int:
    """One training process: ``python -m prmkit.train CONFIG.yaml [--result RESULT.json]``.

    Trains with the config (in a one-process run, or as one of the processes torch's launcher or
    ``accelerate launch`` started); the main process writes the :class:`TrainResult` as JSON to
    ``--result``. Logs go to stderr; a prmkit error is one line there and exit status 1. Started by
    :func:`launch`, it ends with the launching process; stopped by SIGINT or SIGTERM, it unwinds
    (its staging folders are removed) and exits with 128 + the signal's number, quietly where it is
    one of several processes (the launcher says it once).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m prmkit.train", description=worker.__doc__)
    parser.add_argument("config", help="a training config (YAML), e.g. a run's train_config.yaml")
    parser.add_argument("--result", help="where the main process writes the TrainResult (JSON)")
    args = parser.parse_args(argv)
    parent = os.environ.pop(PARENT_ENV, "")
    if parent.isdigit():
        exit_with_parent(int(parent))
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    stop = _StopSignals()
    try:
        result = train(load_config(args.config), log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except BaseException as e:
        # A peer told to stop can leave (failing this process's all-reduce) a moment before this
        # process's own signal is handled: what follows from a stop is not reported.
        if stop.came(within=0.2):
            if world == 1:  # alone, it says so; one of several leaves that to its launcher
                print("interrupted" if stop.signum == signal.SIGINT else "terminated", file=sys.stderr)
            return 128 + stop.signum
        if not isinstance(e, (PrmkitError, OSError)):
            raise
        where = f" (process {rank})" if world > 1 else ""
        what = f"{e.strerror or e}: {e.filename}" if isinstance(e, OSError) and e.filename else str(e)
        print(f"error{where}: {what}", file=sys.stderr, flush=True)  # as the prmkit command does
        return 1
    finally:
        stop.restore()
        _leave_process_group()
    if args.result and rank == 0:
        write_text_file(args.result, json.dumps(result.to_dict()))
    return 0


def _leave_process_group() -> None:
    """Destroy the process group the training joined (``accelerate`` starts one on several processes
    and never ends it). Left to the interpreter's exit, gloo's threads were sometimes torn down while
    still joinable and the process aborted ("terminate called without an active exception", exit
    status -6) after its work was saved, failing a run that had succeeded."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class _StopSignals:
    """SIGINT and SIGTERM in a training process (torch's launcher passes on the one it got): the first
    raises KeyboardInterrupt, so the run unwinds once and removes its staging folders; later ones are
    ignored while it does. ``signum`` says which came (0: none)."""

    def __init__(self) -> None:
        self.signum = 0
        self._before: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._before[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        if not self.signum:
            self.signum = signum
            raise KeyboardInterrupt

    def came(self, within: float) -> bool:
        """Whether a stop signal came; one on its way is given ``within`` seconds to arrive."""
        if not self.signum:
            with contextlib.suppress(KeyboardInterrupt):
                time.sleep(within)
        return bool(self.signum)

    def restore(self) -> None:
        for sig, handler in self._before.items():
            if handler is not None:
                signal.signal(sig, handler)
