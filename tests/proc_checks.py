"""Process checks shared by the tests that kill prmkit's processes. A plain module on sys.path
(tests/conftest.py), as ``cli_run`` is."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone: it holds nothing and runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
