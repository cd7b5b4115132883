"""The labeling database: tokens kept only as hashes, WAL, idempotent ratings, the queue shared by two
annotators at once."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from annotate_traces import scored_traces

from prmkit.annotate import Store
from prmkit.errors import PrmkitError


@pytest.fixture()
def store(tmp_path):
    s = Store(tmp_path / "labels.sqlite")
    ids = s.add_traces(scored_traces())
    s.set_queue([(i, 1, None) for i in ids], strategy="file order")
    return s


def test_a_token_is_stored_only_as_its_hash(store, tmp_path):
    _, token = store.add_user("ann")
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("labels.sqlite"))
    assert token.encode() not in raw and len(token) >= 32
    assert store.user_by_token(token).name == "ann" and store.user_by_token(token + "x") is None
    with pytest.raises(PrmkitError, match="exists already"):
        store.add_user("ann")
    with pytest.raises(PrmkitError, match="without spaces"):
        store.add_user("two words")


def test_the_database_is_in_wal_mode(store):
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_same_rating_twice_changes_nothing(store):
    user, _ = store.add_user("ann")
    assert store.rate(user, 1, 0, 1, seconds=3.0) is True
    assert store.rate(user, 1, 0, 1, seconds=3.0) is False  # a retry: no second row, no extra seconds
    assert [(r.step, r.value, r.seconds) for r in store.ratings(1)] == [(0, 1, 3.0)]
    assert store.rate(user, 1, 0, -1, seconds=2.0) is True  # changed: the new value, both times
    assert [(r.value, r.seconds) for r in store.ratings(1)] == [(-1, 5.0)]


def test_a_step_or_value_that_does_not_exist_is_refused(store):
    user, _ = store.add_user("ann")
    with pytest.raises(ValueError, match="steps 0-1, not 2"):
        store.rate(user, 1, 2, 1)
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        store.rate(user, 1, 0, 2)
    with pytest.raises(LookupError):
        store.rate(user, 99, 0, 1)
    assert store.ratings() == []


def test_trace_time_keeps_the_largest_total(store):
    user, _ = store.add_user("ann")
    store.rate(user, 1, 0, 1, trace_seconds=10.0)
    store.rate(user, 1, 1, 1, trace_seconds=25.0)
    store.finish(user, 1, note=" fine ", trace_seconds=20.0)  # an older total sent late
    (a,) = store.assignments(1)
    assert (a.seconds, a.note, a.done is not None) == (25.0, "fine", True)


def test_two_annotators_share_the_queue_and_double_items_get_both(store):
    ann, _ = store.add_user("ann")
    bob, _ = store.add_user("bob")
    store.set_queue([(2, 2, None), (1, 1, None), (3, 1, None)], strategy="test")
    assert store.next_item(ann) == 2 and store.next_item(ann) == 2  # held until finished
    assert store.next_item(bob) == 2  # wanted twice
    store.finish(ann, 2)
    assert store.next_item(ann) == 1
    store.finish(bob, 2)
    assert store.next_item(bob) == 3  # item 1 is ann's
    store.finish(ann, 1)
    store.finish(bob, 3)
    assert store.next_item(ann) is None and store.next_item(bob) is None


def test_concurrent_ratings_are_all_committed(store):
    users = [store.add_user(n)[0] for n in ("ann", "bob")]

    def work(user):
        for item in (1, 2, 3, 4):
            for step in range(2):
                store.rate(user, item, step, 1 if step else -1, seconds=1.0)

    threads = [threading.Thread(target=work, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.ratings()) == 16


def test_a_session_expires(store):
    user, _ = store.add_user("ann")
    sid = store.new_session(user)
    assert store.session_user(sid) == user and store.session_user("made-up") is None
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE sessions SET created = '2020-01-01T00:00:00+00:00'")
    assert store.session_user(sid) is None
