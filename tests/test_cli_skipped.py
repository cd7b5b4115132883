"""Nothing dropped unsaid (issue 15, item 11): ``--skip-invalid`` names every record it skips, and past
20 counts them and writes them all beside OUT; a lossy export says per field what it dropped, and
``--strict`` refuses it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_run import run

from prmkit import Problem, Step, StepLabel, Trace, read_traces, write_traces
from prmkit.data import ExportReport, convert, read, trace_losses, write
from prmkit.errors import PrmkitError

FIXTURES = Path(__file__).parent / "fixtures"


def with_bad_rows(tmp_path, bad: int) -> Path:
    """Two good traces, then ``bad`` records whose first step's text is a number (lines 3, 4, ...)."""
    path = tmp_path / "in.jsonl"
    write_traces([Trace(f"ok{i}", Problem("q", answer="7"), [Step("a"), Step("The answer is 7.")])
                  for i in range(2)], path)
    with open(path, "a", encoding="utf-8") as f:
        for i in range(bad):
            f.write(json.dumps({"id": f"bad{i}", "problem": {"text": "q"}, "steps": [{"text": 5}]}) + "\n")
    return path


def test_convert_lists_each_skipped_record_with_place_id_and_reason(tmp_path, capsys):
    inp, out = with_bad_rows(tmp_path, 3), tmp_path / "out.jsonl"
    code, _, err = run(["data", "convert", inp, out, "--skip-invalid"], capsys)
    assert code == 0
    for i in range(3):
        assert f"skipped {inp}:{i + 3}: steps[0].text — expected string, got integer (id bad{i})" in err
    assert "more" not in err and not Path(f"{out}.skipped.jsonl").exists()  # 3 <= 20: listed, no file


def test_past_20_skipped_records_are_counted_and_all_written_beside_out(tmp_path, capsys):
    inp, out = with_bad_rows(tmp_path, 23), tmp_path / "out.jsonl"
    code, _, err = run(["data", "convert", inp, out, "--skip-invalid"], capsys)
    assert code == 0
    listed = [x for x in err.splitlines() if x.startswith(f"skipped {inp}:")]
    assert len(listed) == 20
    assert "(id bad19)" in err and "(id bad20)" not in err
    assert "… and 3 more: 23 records skipped" in err
    side = Path(f"{out}.skipped.jsonl")
    assert f"all 23 skipped records (file, line, field, id, reason): {side}" in err
    rows = [json.loads(x) for x in side.read_text().splitlines()]
    assert [(r["line"], r["id"]) for r in rows] == [(i + 3, f"bad{i}") for i in range(23)]
    assert rows[0] == {"path": str(inp), "line": 3, "field": "steps[0].text", "id": "bad0",
                       "reason": "expected string, got integer"}
    assert not Path(f"{side}.partial").exists()
    # A later run of the same OUT that skips fewer leaves no stale list of the earlier one.
    code, _, _ = run(["data", "convert", with_bad_rows(tmp_path, 1), out, "--skip-invalid",
                      "--overwrite"], capsys)
    assert code == 0 and not side.exists()


def test_score_skip_invalid_lists_what_it_skipped(tmp_path, capsys):
    inp, out = with_bad_rows(tmp_path, 21), tmp_path / "scored.jsonl"
    code, stdout, err = run(["score", inp, out, "--scorer", "scripted", "-s", "scores={}",
                             "-s", "default=0.5", "--skip-invalid"], capsys)
    assert code == 0, err
    assert "21 malformed input records skipped" in stdout
    assert f"skipped {inp}:3: steps[0].text — expected string, got integer (id bad0)" in err
    assert "… and 1 more: 21 records skipped" in err
    rows = [json.loads(x) for x in Path(f"{out}.skipped.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"bad{i}" for i in range(21)]
    assert [t.id for t in read_traces(out)] == ["ok0", "ok1"]


# -- lossy exports -------------------------------------------------------------------------------------

def test_processbench_to_trl_stepwise_says_what_it_dropped(tmp_path, capsys):
    # mini.json: labels -1, 0, 2, 1 over 3, 2, 3, 4 steps. TRL keeps the steps up to the first wrong
    # one: 3 + 1 + 3 + 2 = 9 of 12, so 3 dropped; no ids, outcomes or generators (meta.processbench);
    # its labels have no labeler (ProcessBench's say "processbench"): 9 label details.
    out = tmp_path / "pb.jsonl"
    code, stdout, err = run(["data", "convert", FIXTURES / "processbench" / "mini.json", out,
                             "--to", "trl_stepwise"], capsys)
    assert code == 0
    assert "wrote 4 trl_stepwise records" in stdout
    assert ("dropped (not held by trl_stepwise) in 4 of 4 traces: label details 9, id 4, outcome 4, "
            "meta.processbench 4, steps 3") in err


def test_strict_refuses_a_lossy_export_and_leaves_dst_alone(tmp_path, capsys):
    out = tmp_path / "pb.jsonl"
    out.write_text("old\n")
    code, _, err = run(["data", "convert", FIXTURES / "processbench" / "mini.json", out,
                        "--to", "trl_stepwise", "--strict", "--overwrite"], capsys)
    assert code == 1
    assert err.startswith("error: trace mini-0: trl_stepwise cannot hold everything it has (it would "
                          "drop label details 3, id 1, outcome 1, meta.processbench 1)")
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["pb.jsonl"]


def test_strict_passes_a_conversion_that_loses_nothing(tmp_path, capsys):
    out = tmp_path / "pb.json"
    code, _, err = run(["data", "convert", FIXTURES / "processbench" / "mini.json", out,
                        "--to", "processbench", "--strict"], capsys)
    assert code == 0 and "dropped" not in err
    assert json.loads(out.read_text()) == json.loads((FIXTURES / "processbench" / "mini.json").read_text())


# Inspect logs are imported only (tests/data/test_inspect.py): there is no writing them back.
SAME_FORMAT = [p for p in sorted(FIXTURES.glob("*/*.json*"))
               if p.parent.name not in ("checker", "inspect") and "bad" not in p.name and "extra" not in p.name
               and "mirror" not in p.name]


@pytest.mark.parametrize("path", SAME_FORMAT, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_writing_a_file_back_in_its_own_format_loses_nothing(tmp_path, path):
    # Position-made ids (formats with no id field), the import's source and provenance are not data:
    # a same-format round trip must report nothing, or every export would cry wolf.
    losses = ExportReport()
    traces = list(read(path, skip_invalid=True))  # some fixtures hold a malformed row on purpose
    write(traces, tmp_path / "out", traces[0].source or "prmkit", losses=losses, strict=True)
    assert losses.lossless and losses.traces == len(traces)


def test_scores_labels_and_provenance_of_a_scored_trace_are_counted():
    t = Trace("run-7", Problem("2+2?", answer="4"),
              [Step("2+2=4", labels=[StepLabel(0.5, source="mc_soft", kind="soft"), StepLabel(1)],
                    scores={"prm": 0.9}),
               Step("The answer is 4.", labels=[StepLabel(1)], scores={"prm": 0.8})],
              final_answer="4", outcome="correct", meta={"scores": {"prm:min": 0.8}})
    t.add_provenance("score", "prm")
    # What TRL stepwise reads back: the texts and the verdicts, nothing else.
    back = Trace("input", Problem("2+2?"), [Step("2+2=4", labels=[StepLabel(1)]),
                                           Step("The answer is 4.", labels=[StepLabel(1)])])
    assert dict(trace_losses(t, back)) == {
        "id": 1, "earlier labels": 1, "step scores": 2, "final_answer": 1, "outcome": 1,
        "problem.answer": 1, "meta.scores": 1, "provenance": 1}


def test_convert_api_counts_losses_and_strict_raises(tmp_path):
    src = FIXTURES / "processbench" / "mini.json"
    losses = ExportReport()
    assert convert(src, tmp_path / "a.jsonl", dst_format="openrlhf", losses=losses) == 4
    assert losses.dropped["steps"] == 3 and losses.lossy == 4
    with pytest.raises(PrmkitError, match="trace mini-0: openrlhf cannot hold"):
        convert(src, tmp_path / "b.jsonl", dst_format="openrlhf", strict=True)
    assert not (tmp_path / "b.jsonl").exists() and not (tmp_path / "b.partial.jsonl").exists()
    shutil.rmtree(tmp_path)
