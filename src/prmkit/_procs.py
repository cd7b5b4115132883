"""Child processes that end when the process that started them ends, however it ends.

Shared by the label workers (:mod:`prmkit.labelers`, a process pool) and the training processes
(:mod:`prmkit.train`, started by torch's launcher): a SIGKILL of the main process must not leave them
running with nobody to read their results, re-parented to PID 1 where a ``kill`` of the main
process's group does not reach them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["exit_with_parent", "exit_with_process", "WATCH_ENV"]

#: ``prmkit`` commands started with this variable set to a process id end when that process ends
#: (a test harness that starts servers through a shell sets it to its own id).
WATCH_ENV = "PRMKIT_EXIT_WITH"

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_with_parent(parent: int) -> None:
    """Make this process end when ``parent`` (the process that started it) dies, however it dies.

    On Linux the kernel sends SIGKILL on the parent's death (``PR_SET_PDEATHSIG``). It fires when the
    parent *thread* that started this process ends, so the parent must start it from a thread that
    outlives it (a label pool's workers are started by the thread that runs the labelling, training
    processes by the thread that runs the launcher). If ``parent`` is already gone when this is
    called, the process exits at once. Elsewhere, or where prctl cannot be called, a daemon thread
    polls the parent's pid once a second.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:  # the parent died before the signal was armed
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="prmkit-parent-watchdog", daemon=True).start()


def exit_with_process(pid: int, interval: float = 0.5) -> None:
    """End this process (exit status 1) once process ``pid`` is gone — any process, not only the parent:
    a test harness whose servers run under a shell, or a job script. A daemon thread polls it."""
    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # someone else's process: it exists
            return True
        try:  # a zombie waiting for its reaper is gone too
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return True

    if not alive():
        os._exit(1)

    def watch() -> None:
        while alive():
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="prmkit-process-watchdog", daemon=True).start()
