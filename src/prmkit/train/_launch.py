"""Training on several CPU processes: :func:`launch` starts them with torch's launcher, each runs
:func:`~prmkit.train.train` (``python -m prmkit.train``), and the main one's result comes back.

Why not ``accelerate launch --num_processes N``: on a machine without GPUs it starts one process
(``--cpu`` starts several only through ``mpirun``), and it reads the user's accelerate config, which
may name DeepSpeed or FSDP. ``accelerate launch --multi_gpu`` with no GPU visible does start N CPU
processes, by running ``torch.distributed.run`` in its own process; :func:`launch` does the same, with
the GPUs hidden, so the processes train on CPU and talk over gloo. On GPUs, use ``accelerate launch
--multi_gpu``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from prmkit.errors import PrmkitError
from prmkit.train._config import ConfigError, TrainConfig, load_config
from prmkit.train._trainer import TrainResult, _write_config_yaml, train

__all__ = ["launch"]


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
    if num_processes == 1:
        return train(cfg, log=log)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise PrmkitError("this is already one of several processes (WORLD_SIZE="
                          f"{os.environ['WORLD_SIZE']}): leave out num_processes under accelerate launch")
    import torch

    if torch.cuda.is_available():
        log(f"GPUs are visible, but these {num_processes} processes train on CPU; for GPUs use "
            "accelerate launch --multi_gpu --num_processes N -m prmkit train ...")
    from accelerate.utils import patch_environment
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, _cores() // num_processes))
    with tempfile.TemporaryDirectory(prefix="prmkit-launch-") as tmp:
        config, result = Path(tmp) / "train_config.yaml", Path(tmp) / "result.json"
        _write_config_yaml(cfg, config)
        # torchrun's arguments; --standalone: a rendezvous on a free local port. The processes inherit
        # this environment (patched: no GPU, the threads) and this working directory (relative paths).
        args = torchrun.get_args_parser().parse_args(
            ["--standalone", "--nnodes", "1", "--nproc_per_node", str(num_processes), "--max_restarts", "0",
             "-m", "prmkit.train", str(config), "--result", str(result)])
        log(f"starting {num_processes} training processes on CPU (gloo, {threads} thread(s) each)")
        try:
            with patch_environment(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=threads):
                torchrun.run(args)
        except ChildFailedError as e:
            rank, failure = e.get_first_failure()
            raise PrmkitError(f"training on {num_processes} processes failed (process {rank}: exit status "
                              f"{failure.exitcode}); their messages are above") from None
        if not result.is_file():
            raise PrmkitError(f"training on {num_processes} processes wrote no result")
        return TrainResult(**json.loads(result.read_text()))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker(argv: list[str] | None = None) -> int:
    """One training process: ``python -m prmkit.train CONFIG.yaml [--result RESULT.json]``.

    Trains with the config (in a one-process run, or as one of the processes torch's launcher or
    ``accelerate launch`` started); the main process writes the :class:`TrainResult` as JSON to
    ``--result``. Logs go to stderr; a prmkit error is one line there and exit status 1.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m prmkit.train", description=worker.__doc__)
    parser.add_argument("config", help="a training config (YAML), e.g. a run's train_config.yaml")
    parser.add_argument("--result", help="where the main process writes the TrainResult (JSON)")
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    try:
        result = train(load_config(args.config), log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except (PrmkitError, OSError) as e:  # as the prmkit command reports them: one line each
        where = f" (process {rank})" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
        what = f"{e.strerror or e}: {e.filename}" if isinstance(e, OSError) and e.filename else str(e)
        print(f"error{where}: {what}", file=sys.stderr, flush=True)
        return 1
    if args.result and rank == 0:
        Path(args.result).write_text(json.dumps(dataclasses.asdict(result)))
    return 0
