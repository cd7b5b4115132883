"""Every writer publishes its output the same way: the finished temporary file is flushed to disk
(fsync), renamed over OUT, and then (POSIX) the folder is flushed, so a crash or power loss leaves the
old OUT or the complete new one. A SIGKILL test cannot see a missing fsync; these tests watch the calls."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from prmkit import _jsonio
from prmkit.data import convert
from prmkit.eval import save_section
from prmkit.labelers import get_labeler, label_file
from prmkit.policies import ScriptedPolicy
from prmkit.scoring import ScriptedScorer, score_file
from prmkit.search import select_file


@pytest.fixture
def calls(fsync_calls):
    return fsync_calls


def assert_published_durably(calls: list[tuple], out: Path) -> None:
    ino = out.stat().st_ino
    at = next(i for i, c in enumerate(calls) if c[:2] == ("replace", ino) and Path(c[2]).name == out.name)
    assert ("file", ino) in calls[:at], f"{out.name} renamed without an fsync of its bytes first"
    if os.name == "posix":
        assert ("dir", out.parent.stat().st_ino) in calls[at + 1:], "the folder was not flushed"


def test_replace_durably_flushes_the_file_then_renames_then_flushes_the_folder(tmp_path, calls):
    tmp, out = tmp_path / "x.partial", tmp_path / "x"
    out.write_text("old\n")
    tmp.write_text("new\n")
    _jsonio.replace_durably(tmp, out)
    assert out.read_text() == "new\n" and not tmp.exists()
    assert [c[0] for c in calls] == ["file", "replace"] + (["dir"] if os.name == "posix" else [])
    assert_published_durably(calls, out)


def _traces(path: Path, n: int = 3) -> Path:
    with path.open("w") as f:
        for i in range(n):
            steps = [{"text": f"{i}+1={i + 1}"}, {"text": f"The answer is {i + 1}."}]
            f.write(json.dumps({"id": f"t{i}", "problem": {"text": f"{i}+1?", "answer": str(i + 1)},
                                "steps": steps, "final_answer": str(i + 1)}) + "\n")
    return path


def _convert(inp, out):
    convert(inp, out)


def _score(inp, out):
    score_file(inp, out, ScriptedScorer({}, default=0.5), progress=False)


def _label(inp, out):
    labeler = get_labeler("mc", policy=ScriptedPolicy(["The answer is 1."]), k=1, workers=0)
    label_file(inp, out, labeler, store=out.parent / "s.sqlite", progress=False)


def _select(inp, out):
    scored = inp.parent / "scored.jsonl"
    _score(inp, scored)
    select_file(scored, method="bon", out=out)


def _section(inp, out):
    save_section("bon", {"accuracy": 0.5}, out)


@pytest.mark.parametrize("write", [_convert, _score, _label, _select, _section],
                         ids=["convert", "score", "label", "select", "save_section"])
def test_each_writer_publishes_through_the_durable_rename(tmp_path, calls, write):
    inp, out = _traces(tmp_path / "in.jsonl"), tmp_path / "out" / "out.jsonl"
    out.parent.mkdir()
    write(inp, out)
    assert_published_durably(calls, out)
