"""``prmkit annotate`` in process: add-user prints the token once, queue, export, summary, and serve's
address check."""

from __future__ import annotations

import pytest
from annotate_traces import write_scored

from prmkit.annotate import Store
from prmkit.cli import main
from prmkit.trace import read_traces


def run(args, capsys, code=0):
    try:
        main(args)
    except SystemExit as e:
        assert e.code == code, capsys.readouterr()
    else:
        assert code == 0
    return capsys.readouterr()


def test_add_user_queue_export_summary(tmp_path, capsys):
    db = tmp_path / "labels.sqlite"
    out = run(["annotate", "add-user", "ann", "--db", str(db), "--admin"], capsys)
    token = out.out.strip()
    assert len(token) >= 32 and "shown this once" in out.err
    assert all(token.encode() not in p.read_bytes() for p in tmp_path.iterdir())
    err = run(["annotate", "add-user", "ann", "--db", str(db)], capsys, code=1).err
    assert "user 'ann' exists already" in err

    scored = write_scored(tmp_path)
    out = run(["annotate", "queue", str(scored), "--db", str(db), "--strategy", "convincing_wrong",
               "--per-problem-cap", "1", "--overlap", "0.5"], capsys)
    assert "queued 2 of 4 traces by convincing_wrong (1 for two annotators" in out.out
    store = Store(db)
    assert [store.item(i).trace.id for i, _ in store.queue()] == ["b1", "a2"]

    user = store.user_by_token(token)
    store.rate(user, 3, 0, 1)
    store.rate(user, 3, 1, -1)
    store.finish(user, 3)
    dest = tmp_path / "human.jsonl"
    out = run(["annotate", "export", "--db", str(db), "-o", str(dest)], capsys)
    assert "wrote 1 traces with 2 human step labels" in out.out
    assert [t.id for t in read_traces(dest)] == ["b1"]
    assert "exists" in run(["annotate", "export", "--db", str(db), "-o", str(dest)], capsys, code=1).err
    assert "2 human step labels" in run(["annotate", "summary", "--db", str(db)], capsys).out


def test_serve_refuses_a_remote_address_without_allow_remote(tmp_path, capsys):
    err = run(["annotate", "serve", "--db", str(tmp_path / "l.sqlite"), "--host", "0.0.0.0"], capsys, code=1).err
    assert "--allow-remote" in err and not (tmp_path / "l.sqlite").exists()


def test_queue_of_a_malformed_file_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "t", "problem": "q", "steps": [{"text": "s", "scores": {"prm": 2}}]}\n')
    err = run(["annotate", "queue", str(bad), "--db", str(tmp_path / "l.sqlite")], capsys, code=1).err
    assert "bad.jsonl:1: steps[0].scores.prm" in err and not (tmp_path / "l.sqlite").exists()


@pytest.mark.parametrize("args", [["--overlap", "2"], ["--strategy", "best"]])
def test_queue_options_are_checked(tmp_path, capsys, args):
    scored = write_scored(tmp_path)
    err = run(["annotate", "queue", str(scored), "--db", str(tmp_path / "l.sqlite"), *args], capsys, code=1).err
    assert "--overlap" in err or "unknown queue strategy 'best'" in err


def test_simulate_copies_the_traces_labels_within_a_budget(tmp_path, capsys):
    db = tmp_path / "labels.sqlite"
    run(["annotate", "queue", str(write_scored(tmp_path)), "--db", str(db), "--strategy", "disagreement"], capsys)
    out = run(["annotate", "simulate", "--db", str(db), "--source", "mc_soft", "--budget", "4",
               "--stop-at-first-wrong"], capsys).out
    # disagreement order a2, a1, b1, b2; mc_soft binarized: a2 (+1, -1 | stop), a1 (+1, +1)
    assert "finished 2 traces with 4 step labels" in out
    store = Store(db)
    got = [(store.item(r.item_id).trace.id, r.step, r.value) for r in store.ratings()]
    assert got == [("a1", 0, 1), ("a1", 1, 1), ("a2", 0, 1), ("a2", 1, -1)]


@pytest.mark.parametrize("kind, words", [("missing", "no such file"), ("folder", "folder"), ("empty", "empty"),
                                         ("not_utf8", "UTF-8")])
def test_a_bad_trace_file_is_one_line_naming_it(tmp_path, capsys, kind, words):
    path = tmp_path / "in.jsonl"
    if kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_text("")
    elif kind == "not_utf8":
        path.write_bytes(b'{"id": "t", "problem": "\xff", "steps": []}\n')
    for command in (["annotate", "queue", str(path)], ["annotate", "serve", str(path)]):
        err = run([*command, "--db", str(tmp_path / "l.sqlite")], capsys, code=1).err
        assert err.startswith("error: ") and "in.jsonl" in err and words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "l.sqlite").exists()
