"""The label store: every rollout a labeler makes, committed to SQLite as it completes.

One file (stdlib :mod:`sqlite3`, WAL journal) holds the rollouts of any number of labeling runs. A
*run* is one generation setup (policy, sampling parameters, prompt, seed, channel); its key is a hash
of that setup, so ``mc``, ``binary`` and ``advantage`` with the same policy and seed share their
rollouts, and changing anything that changes the rollouts starts a new run instead of mixing them.

A rollout row is ``(run, trace id, prefix index, rollout index)`` — UNIQUE, so a rollout can never be
stored twice — with its seed, completion text, token counts, wall time and whether it reached the
reference answer, plus a hash of the request it answered (a trace id that now names a different
trace is refused rather than given another trace's rollouts).

Each group of rollouts is committed in its own transaction as soon as the policy returns it. In WAL
mode with ``synchronous=NORMAL`` a committed transaction survives the labeling process being killed
(SIGKILL included); only an operating-system crash or power loss may drop the last few commits, which
a rerun simply makes again.

>>> store = LabelStore(":memory:")
>>> run = store.run_key({"policy": "scripted", "seed": 0})
>>> store.add(run, [Rollout("t", 1, 0, 7, "The answer is 4.", tokens=4, reached=True)])
1
>>> store.get(run, "t", 1)[0].reached, store.count(run)
(True, 1)
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.labelers._plan import Rollout
from prmkit.provenance import redact_secrets
from prmkit.trace import now

__all__ = ["LabelStore", "SCHEMA_VERSION", "StoreMismatchError"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_key TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rollouts (
    run_key TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    prefix_index INTEGER NOT NULL,
    rollout_index INTEGER NOT NULL,
    seed INTEGER,
    text TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    reached INTEGER,
    request_hash TEXT NOT NULL,
    created TEXT NOT NULL,
    UNIQUE (run_key, trace_id, prefix_index, rollout_index)
);
"""

_COLUMNS = ("trace_id", "prefix_index", "rollout_index", "seed", "text", "tokens", "prompt_tokens",
            "seconds", "reached", "finish_reason", "request_hash")


class StoreMismatchError(PrmkitError):
    """The store holds rollouts for a trace id whose problem or steps have since changed."""


def _row_to_rollout(row: tuple[Any, ...]) -> Rollout:
    (trace_id, prefix, index, seed, text, tokens, prompt_tokens, seconds, reached, finish,
     rhash) = row
    return Rollout(trace_id, prefix, index, seed, text, tokens=tokens, prompt_tokens=prompt_tokens,
                   seconds=seconds, reached=None if reached is None else bool(reached),
                   finish_reason=finish, request_hash=rhash)


class LabelStore:
    """A SQLite file of rollouts (``":memory:"`` for none on disk). Use as a context manager or
    :meth:`close` it.

    Only the process that labels writes to it (pool workers and Ray actors only generate), so there
    is one writer; readers (say, ``sqlite3 labels.sqlite``) may look at it while a run goes on.
    """

    def __init__(self, path: str | os.PathLike = ":memory:", *, timeout: float = 30.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
            if self.path != ":memory:":
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise PrmkitError(f"{self.path}: cannot switch the label store to WAL mode "
                                      f"(got {mode}); is it on a network file system?")
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._tx():
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    self._db.execute(stmt)
                row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is None:
                    self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
                elif int(row[0]) != SCHEMA_VERSION:
                    raise PrmkitError(f"{self.path}: label store schema {row[0]}, this prmkit reads "
                                      f"{SCHEMA_VERSION}")
        except sqlite3.DatabaseError as e:
            raise PrmkitError(f"{self.path}: not a usable label store ({e})") from None

    # -- transactions --------------------------------------------------------------------------------
    class _Tx:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> None:
            self.db.execute("BEGIN IMMEDIATE")

        def __exit__(self, exc_type: Any, *rest: Any) -> None:
            self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")

    def _tx(self) -> LabelStore._Tx:
        return LabelStore._Tx(self._db)

    # -- runs ------------------------------------------------------------------------------------------
    def run_key(self, config: dict[str, Any]) -> str:
        """The key of the run with this generation setup (registered on first use)."""
        blob = json.dumps(redact_secrets(config), sort_keys=True, ensure_ascii=False, default=str)
        key = hashlib.sha256(blob.encode()).hexdigest()[:16]
        with self._tx():
            self._db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?)", (key, blob, now()))
        return key

    def runs(self) -> list[dict[str, Any]]:
        """Every run: key, setup, creation time and rollout count."""
        rows = self._db.execute(
            "SELECT r.run_key, r.config, r.created, COUNT(o.trace_id) FROM runs r "
            "LEFT JOIN rollouts o ON o.run_key = r.run_key GROUP BY r.run_key ORDER BY r.created").fetchall()
        return [{"run_key": k, "config": json.loads(c), "created": t, "rollouts": n}
                for k, c, t, n in rows]

    # -- rollouts --------------------------------------------------------------------------------------
    def get(self, run_key: str, trace_id: str, prefix: int, *,
            request_hash: str | None = None) -> dict[int, Rollout]:
        """The stored rollouts of one prefix, by rollout index. With ``request_hash``, rows made for
        a different request raise :class:`StoreMismatchError`."""
        rows = self._db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM rollouts WHERE run_key=? AND trace_id=? "
            "AND prefix_index=?", (run_key, trace_id, prefix)).fetchall()
        out = {r[2]: _row_to_rollout(r) for r in rows}
        if request_hash is not None:
            for r in out.values():
                if r.request_hash != request_hash:
                    raise StoreMismatchError(
                        f"{self.path}: trace {trace_id!r} prefix {prefix} was rolled out for a "
                        "different problem, steps or reference answer; give the changed traces new "
                        "ids or use another store")
        return out

    def add(self, run_key: str, rollouts: Iterable[Rollout]) -> int:
        """Commit ``rollouts`` in one transaction; returns how many were new (a rollout already
        stored is left as it is — the UNIQUE constraint makes a duplicate impossible)."""
        rows = [(run_key, r.trace_id, r.prefix, r.index, r.seed, r.text, r.finish_reason, r.tokens,
                 r.prompt_tokens, float(r.seconds), None if r.reached is None else int(r.reached),
                 r.request_hash, now()) for r in rollouts]
        before = self._db.total_changes
        with self._tx():
            self._db.executemany(
                "INSERT INTO rollouts (run_key, trace_id, prefix_index, rollout_index, seed, text, "
                "finish_reason, tokens, prompt_tokens, seconds, reached, request_hash, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_key, trace_id, prefix_index, rollout_index) DO NOTHING", rows)
        return self._db.total_changes - before

    def rollouts(self, run_key: str | None = None, trace_id: str | None = None) -> list[Rollout]:
        """Stored rollouts (of one run / trace when given), ordered by trace, prefix and index."""
        where, args = [], []
        if run_key is not None:
            where.append("run_key=?")
            args.append(run_key)
        if trace_id is not None:
            where.append("trace_id=?")
            args.append(trace_id)
        sql = (f"SELECT {', '.join(_COLUMNS)} FROM rollouts"
               + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY trace_id, prefix_index, rollout_index")
        return [_row_to_rollout(r) for r in self._db.execute(sql, args).fetchall()]

    def count(self, run_key: str | None = None) -> int:
        """Stored rollouts (of one run when given)."""
        if run_key is None:
            return self._db.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM rollouts WHERE run_key=?",
                                (run_key,)).fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> LabelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LabelStore({self.path!r})"
