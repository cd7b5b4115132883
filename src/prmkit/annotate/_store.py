"""The labeling database: one SQLite file in WAL mode, every rating committed as it is made.

Tables: ``users`` (name, SHA-256 of the token: a token is shown once and never stored),
``sessions`` (SHA-256 of the browser session id), ``items`` (the traces to label, as prmkit JSON),
``queue`` (the order annotators get items in, and how many annotators each needs), ``assignments``
(who took which item, when they finished it, the seconds spent on it, a note and a flag) and
``ratings`` (one row per item, step and annotator: -1 / 0 / +1, the seconds spent on the step, when).

WAL lets the server read while a rating is written, and two annotators write at once (each write is
one short ``BEGIN IMMEDIATE`` transaction; SQLite serialises them). ``synchronous=FULL``: a rating the
server answered for survives a crash of the process or the machine.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import secrets
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.trace import Trace, now
from prmkit.trace_queries import problem_key

__all__ = ["Store", "User", "Item", "Rating", "Assignment", "hash_secret", "VALUES", "FLAGS"]

#: The ratings of a step, as in PRM800K: -1 wrong, 0 okay (neutral), +1 right.
VALUES = (-1, 0, 1)
#: What an annotator can flag a trace as.
FLAGS = ("unclear", "bad_problem")
#: Longest time one rating or one trace may add (a tab left open overnight is not labelling time).
MAX_SECONDS = 3600.0
#: Days a browser session lasts (then the annotator logs in again with their token).
SESSION_DAYS = 7
#: Longest note kept (characters).
MAX_NOTE = 4000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, token_hash TEXT UNIQUE NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    hash TEXT PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY, trace_id TEXT UNIQUE NOT NULL, problem TEXT NOT NULL,
    n_steps INTEGER NOT NULL, trace TEXT NOT NULL, added TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queue (
    item_id INTEGER PRIMARY KEY REFERENCES items(id), rank INTEGER NOT NULL, copies INTEGER NOT NULL,
    strategy TEXT NOT NULL, priority REAL);
CREATE TABLE IF NOT EXISTS assignments (
    item_id INTEGER NOT NULL REFERENCES items(id), user_id INTEGER NOT NULL REFERENCES users(id),
    started TEXT NOT NULL, done TEXT, seconds REAL NOT NULL DEFAULT 0, note TEXT, flag TEXT,
    PRIMARY KEY (item_id, user_id));
CREATE TABLE IF NOT EXISTS ratings (
    item_id INTEGER NOT NULL REFERENCES items(id), step INTEGER NOT NULL,
    user_id INTEGER NOT NULL REFERENCES users(id), value INTEGER NOT NULL CHECK (value IN (-1, 0, 1)),
    seconds REAL NOT NULL, time TEXT NOT NULL, changes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (item_id, step, user_id));
CREATE TABLE IF NOT EXISTS queue_runs (
    id INTEGER PRIMARY KEY, strategy TEXT NOT NULL, args TEXT NOT NULL, items INTEGER NOT NULL,
    time TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS queue_rank ON queue(rank);
"""


def hash_secret(secret: str) -> str:
    """What the database keeps of a token or session id: its SHA-256 (the secret itself is random and
    long, so no salt or slow hash is needed to keep it from being guessed back)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class User:
    id: int
    name: str
    admin: bool


@dataclass(frozen=True)
class Item:
    """A trace in the database: ``id`` the database's, ``trace`` the record."""

    id: int
    trace: Trace


@dataclass(frozen=True)
class Rating:
    item_id: int
    step: int
    annotator: str
    value: int
    seconds: float
    time: str


@dataclass(frozen=True)
class Assignment:
    item_id: int
    annotator: str
    started: str
    done: str | None
    seconds: float
    note: str | None
    flag: str | None


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise PrmkitError(f"{what} must be a number of seconds >= 0, got {value!r}")
    return min(float(value), MAX_SECONDS)


class Store:
    """The labeling database at ``path`` (created with its schema when missing).

    >>> import tempfile, os
    >>> s = Store(os.path.join(tempfile.mkdtemp(), "labels.sqlite"))
    >>> user, token = s.add_user("ann")
    >>> s.user_by_token(token).name, s.user_by_token("wrong") is None
    ('ann', True)
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise PrmkitError(f"{self.path}: its folder {parent} does not exist")
        with self._connect() as db:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise PrmkitError(f"{self.path}: SQLite could not switch to WAL mode (got {mode!r}); "
                                  "is it on a network file system?")
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except sqlite3.Error as e:
            raise PrmkitError(f"{self.path}: cannot open the labeling database: {e}") from None
        try:
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA synchronous=FULL")
            yield db
        except sqlite3.DatabaseError as e:
            raise PrmkitError(f"{self.path}: {e}") from None
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE), committed on success."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- users and sessions ----------------------------------------------------------------------
    def add_user(self, name: str, *, admin: bool = False) -> tuple[User, str]:
        """Add an annotator; returns the user and their token, which is not stored (only its hash)."""
        name = name.strip()
        if not name or len(name) > 64 or any(c.isspace() or not c.isprintable() for c in name):
            raise PrmkitError(f"a user name is 1-64 printable characters without spaces, got {name!r}")
        token = secrets.token_urlsafe(24)
        with self._write() as db:
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise PrmkitError(f"{self.path}: user {name!r} exists already")
            cur = db.execute("INSERT INTO users (name, token_hash, admin, created) VALUES (?, ?, ?, ?)",
                             (name, hash_secret(token), int(admin), now()))
        return User(int(cur.lastrowid), name, admin), token

    def users(self) -> list[User]:
        with self._connect() as db:
            return [User(i, n, bool(a)) for i, n, a in
                    db.execute("SELECT id, name, admin FROM users ORDER BY id")]

    def user_by_token(self, token: str) -> User | None:
        """The user whose token this is, or None (compared by hash: the token is not stored)."""
        return self._user_where("token_hash = ?", hash_secret(token)) if token else None

    def user_by_name(self, name: str) -> User | None:
        return self._user_where("name = ?", name)

    def _user_where(self, where: str, value: str) -> User | None:
        with self._connect() as db:
            row = db.execute(f"SELECT id, name, admin FROM users WHERE {where}", (value,)).fetchone()
        return None if row is None else User(row[0], row[1], bool(row[2]))

    def new_session(self, user: User) -> str:
        """A new browser session id for ``user`` (kept as a hash)."""
        sid = secrets.token_urlsafe(32)
        with self._write() as db:
            db.execute("INSERT INTO sessions (hash, user_id, created) VALUES (?, ?, ?)",
                       (hash_secret(sid), user.id, now()))
        return sid

    def session_user(self, sid: str) -> User | None:
        """The user of a browser session, or None (no such session, or one older than
        :data:`SESSION_DAYS`: log in again)."""
        if not sid:
            return None
        with self._connect() as db:
            row = db.execute("SELECT u.id, u.name, u.admin, s.created FROM sessions s JOIN users u ON "
                             "u.id = s.user_id WHERE s.hash = ?", (hash_secret(sid),)).fetchone()
        if row is None:
            return None
        age = _dt.datetime.now(_dt.timezone.utc) - _dt.datetime.fromisoformat(row[3])
        return User(row[0], row[1], bool(row[2])) if age < _dt.timedelta(days=SESSION_DAYS) else None

    def end_session(self, sid: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM sessions WHERE hash = ?", (hash_secret(sid),))

    # -- items and the queue -----------------------------------------------------------------------
    def add_traces(self, traces: Iterable[Trace]) -> list[int]:
        """Store traces as items (a trace id already stored keeps its item, and must have the same
        steps); returns their item ids, in order."""
        ids = []
        with self._write() as db:
            for t in traces:
                if not t.steps:
                    raise PrmkitError(f"trace {t.id}: has no steps to label")
                row = db.execute("SELECT id, trace FROM items WHERE trace_id = ?", (t.id,)).fetchone()
                if row is not None:
                    old = Trace.from_dict(json.loads(row[1]))
                    if [s.text for s in old.steps] != [s.text for s in t.steps]:
                        raise PrmkitError(f"{self.path}: trace {t.id} is stored already with other steps; "
                                          "give the new trace another id")
                    ids.append(int(row[0]))
                    continue
                cur = db.execute("INSERT INTO items (trace_id, problem, n_steps, trace, added) "
                                 "VALUES (?, ?, ?, ?, ?)",
                                 (t.id, problem_key(t.problem), len(t.steps), json.dumps(t.to_dict()), now()))
                ids.append(int(cur.lastrowid))
        return ids

    def item(self, item_id: int) -> Item | None:
        with self._connect() as db:
            row = db.execute("SELECT id, trace FROM items WHERE id = ?", (item_id,)).fetchone()
        return None if row is None else Item(row[0], Trace.from_dict(json.loads(row[1])))

    def count_items(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT COUNT(*) FROM items").fetchone()[0])

    def items(self) -> list[Item]:
        with self._connect() as db:
            return [Item(i, Trace.from_dict(json.loads(t)))
                    for i, t in db.execute("SELECT id, trace FROM items ORDER BY id")]

    def set_queue(self, entries: list[tuple[int, int, float | None]], *, strategy: str,
                  args: dict[str, Any] | None = None) -> None:
        """Replace the queue with ``(item id, copies, priority)`` in order (ratings are kept: an item
        already labelled stays labelled, whatever its new place)."""
        with self._write() as db:
            db.execute("DELETE FROM queue")
            db.executemany("INSERT INTO queue (item_id, rank, copies, strategy, priority) VALUES (?, ?, ?, ?, ?)",
                           [(i, r, c, strategy, p) for r, (i, c, p) in enumerate(entries)])
            db.execute("INSERT INTO queue_runs (strategy, args, items, time) VALUES (?, ?, ?, ?)",
                       (strategy, json.dumps(args or {}, sort_keys=True), len(entries), now()))

    def queue(self) -> list[tuple[int, int]]:
        """``(item id, copies)`` in queue order."""
        with self._connect() as db:
            return [(i, c) for i, c in db.execute("SELECT item_id, copies FROM queue ORDER BY rank")]

    def next_item(self, user: User) -> int | None:
        """The item ``user`` should label next: one they started and did not finish, else the first in
        the queue that still needs an annotator and that they have not taken (taken for them here,
        in one transaction, so two annotators never take the last place on one item)."""
        with self._write() as db:
            row = db.execute("SELECT a.item_id FROM assignments a JOIN queue q ON q.item_id = a.item_id "
                             "WHERE a.user_id = ? AND a.done IS NULL ORDER BY q.rank LIMIT 1",
                             (user.id,)).fetchone()
            if row is not None:
                return int(row[0])
            row = db.execute(
                "SELECT q.item_id FROM queue q WHERE NOT EXISTS (SELECT 1 FROM assignments a WHERE "
                "a.item_id = q.item_id AND a.user_id = ?) AND (SELECT COUNT(*) FROM assignments a "
                "WHERE a.item_id = q.item_id) < q.copies ORDER BY q.rank LIMIT 1", (user.id,)).fetchone()
            if row is None:
                return None
            db.execute("INSERT INTO assignments (item_id, user_id, started) VALUES (?, ?, ?)",
                       (row[0], user.id, now()))
            return int(row[0])

    # -- ratings -----------------------------------------------------------------------------------
    def _check_step(self, db: sqlite3.Connection, item_id: int, step: int) -> None:
        row = db.execute("SELECT n_steps FROM items WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise LookupError(f"no item {item_id}")
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < row[0]:
            raise ValueError(f"item {item_id} has steps 0-{row[0] - 1}, not {step!r}")

    def rate(self, user: User, item_id: int, step: int, value: int, *, seconds: float = 0.0,
             trace_seconds: float | None = None) -> bool:
        """Record ``user``'s rating of a step, committed before this returns. The same rating sent
        again changes nothing (a retry after a lost answer is safe); a new value replaces the old one
        and adds its seconds. Returns whether anything changed. A step that does not exist is a
        ValueError, an item that does not exist a LookupError."""
        if isinstance(value, bool) or value not in VALUES:
            raise ValueError(f"a rating is -1, 0 or 1, got {value!r}")
        seconds = _seconds(seconds, "seconds")
        with self._write() as db:
            self._check_step(db, item_id, step)
            self._touch(db, user, item_id, trace_seconds)
            old = db.execute("SELECT value FROM ratings WHERE item_id = ? AND step = ? AND user_id = ?",
                             (item_id, step, user.id)).fetchone()
            if old is not None and old[0] == value:
                return False
            if old is None:
                db.execute("INSERT INTO ratings (item_id, step, user_id, value, seconds, time) "
                           "VALUES (?, ?, ?, ?, ?, ?)", (item_id, step, user.id, value, seconds, now()))
            else:
                db.execute("UPDATE ratings SET value = ?, seconds = seconds + ?, time = ?, changes = changes + 1 "
                           "WHERE item_id = ? AND step = ? AND user_id = ?",
                           (value, seconds, now(), item_id, step, user.id))
            return True

    def _touch(self, db: sqlite3.Connection, user: User, item_id: int, trace_seconds: float | None) -> None:
        """Make sure ``user`` holds ``item_id`` and keep the larger of the trace times (the page sends
        its running total, so a resent total counts once)."""
        db.execute("INSERT OR IGNORE INTO assignments (item_id, user_id, started) VALUES (?, ?, ?)",
                   (item_id, user.id, now()))
        if trace_seconds is not None:
            db.execute("UPDATE assignments SET seconds = MAX(seconds, ?) WHERE item_id = ? AND user_id = ?",
                       (_seconds(trace_seconds, "trace_seconds"), item_id, user.id))

    def finish(self, user: User, item_id: int, *, note: str | None = None, flag: str | None = None,
               done: bool = True, trace_seconds: float | None = None) -> None:
        """Save ``user``'s note and flag on an item and, with ``done``, mark it finished."""
        if flag is not None and flag not in FLAGS:
            raise ValueError(f"a flag is one of {', '.join(FLAGS)}, got {flag!r}")
        if note is not None and not isinstance(note, str):
            raise ValueError("a note is text")
        note = (note or "").strip()[:MAX_NOTE] or None
        with self._write() as db:
            if db.execute("SELECT 1 FROM items WHERE id = ?", (item_id,)).fetchone() is None:
                raise LookupError(f"no item {item_id}")
            self._touch(db, user, item_id, trace_seconds)
            db.execute("UPDATE assignments SET note = ?, flag = ?, done = CASE WHEN ? THEN COALESCE(done, ?) "
                       "ELSE NULL END WHERE item_id = ? AND user_id = ?",
                       (note, flag, int(done), now(), item_id, user.id))

    def ratings(self, item_id: int | None = None, user: User | None = None) -> list[Rating]:
        where, args = [], []
        if item_id is not None:
            where.append("r.item_id = ?")
            args.append(item_id)
        if user is not None:
            where.append("r.user_id = ?")
            args.append(user.id)
        sql = ("SELECT r.item_id, r.step, u.name, r.value, r.seconds, r.time FROM ratings r "
               "JOIN users u ON u.id = r.user_id" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY r.item_id, r.step, r.time, u.name")
        with self._connect() as db:
            return [Rating(*row) for row in db.execute(sql, args)]

    def assignments(self, item_id: int | None = None) -> list[Assignment]:
        sql = ("SELECT a.item_id, u.name, a.started, a.done, a.seconds, a.note, a.flag FROM assignments a "
               "JOIN users u ON u.id = a.user_id" + (" WHERE a.item_id = ?" if item_id is not None else "")
               + " ORDER BY a.item_id, a.started, u.name")
        with self._connect() as db:
            return [Assignment(*row) for row in db.execute(sql, () if item_id is None else (item_id,))]

    def queue_runs(self) -> list[dict[str, Any]]:
        with self._connect() as db:
            return [{"strategy": s, "args": json.loads(a), "items": n, "time": t}
                    for s, a, n, t in db.execute("SELECT strategy, args, items, time FROM queue_runs ORDER BY id")]
