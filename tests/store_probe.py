"""Reading a label store while another process writes it (the kill tests of ``prmkit label``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def stored_rollouts(path: Path) -> int:
    """Rollouts committed so far, read-only (0 before the store exists or while it cannot be read)."""
    if not path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0
