"""The label store: WAL on disk, one row per rollout (UNIQUE), runs keyed by setup, mismatch guard."""

from __future__ import annotations

import sqlite3

import pytest

from prmkit.errors import PrmkitError
from prmkit.labelers import LabelStore, Rollout, StoreMismatchError


def r(prefix, index, text="The answer is 4.", reached=True, h="h1"):
    return Rollout("t", prefix, index, 100 + index, text, tokens=4, prompt_tokens=9, seconds=0.5,
                   reached=reached, request_hash=h)


def test_wal_mode_roundtrip_and_persistence(tmp_path):
    path = tmp_path / "sub" / "labels.sqlite"
    with LabelStore(path) as st:
        run = st.run_key({"policy": {"model": "m"}, "seed": 0})
        assert st.add(run, [r(1, 0), r(1, 1, "The answer is 5.", False)]) == 2
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    with LabelStore(path) as st:
        got = st.get(run, "t", 1, request_hash="h1")
        assert sorted(got) == [0, 1]
        assert (got[1].text, got[1].reached, got[1].seed, got[1].tokens, got[1].prompt_tokens,
                got[1].seconds, got[1].fresh) == ("The answer is 5.", False, 101, 4, 9, 0.5, False)
        assert st.count() == st.count(run) == 2
        assert st.runs()[0]["config"] == {"policy": {"model": "m"}, "seed": 0}
        assert st.runs()[0]["rollouts"] == 2


def test_a_rollout_is_stored_once():
    with LabelStore() as st:
        run = st.run_key({"a": 1})
        assert st.add(run, [r(1, 0)]) == 1
        assert st.add(run, [r(1, 0, "other text"), r(1, 1)]) == 1  # the duplicate is ignored
        assert st.get(run, "t", 1)[0].text == "The answer is 4."
        with pytest.raises(sqlite3.IntegrityError):  # the constraint itself
            st._db.execute("INSERT INTO rollouts SELECT * FROM rollouts LIMIT 1")
        assert st.count() == 2


def test_runs_are_keyed_by_their_setup():
    with LabelStore() as st:
        a, b = st.run_key({"seed": 0, "k": 1}), st.run_key({"k": 1, "seed": 0})
        assert a == b != st.run_key({"seed": 1, "k": 1})
        st.add(a, [r(1, 0)])
        assert st.get(st.run_key({"seed": 1, "k": 1}), "t", 1) == {}


def test_a_changed_trace_is_refused():
    with LabelStore() as st:
        run = st.run_key({})
        st.add(run, [r(2, 0, h="old")])
        with pytest.raises(StoreMismatchError, match="trace 't' prefix 2"):
            st.get(run, "t", 2, request_hash="new")


def test_not_a_store(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_text("this is not sqlite" * 100)
    with pytest.raises(PrmkitError, match="not a usable label store"):
        LabelStore(bad)
