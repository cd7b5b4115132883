"""``prmkit data``: convert, validate, stats and inspect through the real console entry point."""

from __future__ import annotations

import json

import pytest

from prmkit import Problem, Step, StepLabel, Trace, read_traces, write_traces
from prmkit.cli import main
from prmkit.cli._data import parse_options
from prmkit.errors import PrmkitError


def run(argv, capsys):
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def sample(tmp_path):
    ts = [
        Trace("a", Problem("q"), [Step("x", labels=[StepLabel(1)]), Step("y", labels=[StepLabel(-1)])]),
        Trace("b", Problem("q"), [Step("x", labels=[StepLabel(1)])]),
        Trace("c", Problem("q"), [Step("x"), Step("y", labels=[StepLabel(-1)])]),
    ]
    p = tmp_path / "t.jsonl"
    write_traces(ts, p)
    return p, ts


def test_stats_json_counts(tmp_path, capsys):
    p, _ = sample(tmp_path)
    code, out, _ = run(["data", "stats", str(p), "--json"], capsys)
    assert code == 0
    d = json.loads(out)
    assert d["traces"] == 3 and d["steps"] == 5
    # a: first error at 1; b: none; c: unknown (unlabelled step 0 before the error)
    assert d["first_error"] == {"-1": 1, "1": 1, "unknown": 1}
    assert d["labels"] == {"-:none": 1, "human:+1": 2, "human:-1": 2}


def test_stats_table_renders(tmp_path, capsys):
    p, _ = sample(tmp_path)
    code, out, _ = run(["data", "stats", str(p)], capsys)
    assert code == 0 and "traces with no wrong step" in out and "first wrong step" in out


def test_validate_lists_malformed_rows_and_fails(tmp_path, capsys):
    p, _ = sample(tmp_path)
    with open(p, "a", encoding="utf-8") as f:
        f.write('{"id": "d", "problem": {"text": "q"}, "steps": [{"text": "x", "kind": "musing"}]}\n')
        f.write("{broken\n")
        f.write('{"id": "e", "problem": {"text": "q"}, "steps": []}\n')
    code, out, err = run(["data", "validate", str(p), "--from", "prmkit"], capsys)
    assert code == 1
    assert f"{p}:4: steps[0].kind — must be one of" in err
    assert f"{p}:5: invalid JSON" in err
    assert "4 traces" in out  # the good rows before and after were all read


def test_validate_clean_file_passes(tmp_path, capsys):
    p, _ = sample(tmp_path)
    code, out, _ = run(["data", "validate", str(p)], capsys)
    assert code == 0 and "3 traces" in out


def test_convert_skip_invalid_reports_and_keeps_good_rows(tmp_path, capsys):
    p, ts = sample(tmp_path)
    with open(p, "a", encoding="utf-8") as f:
        f.write('{"id": 5}\n')
    out_p = tmp_path / "out.jsonl"
    code, _, err = run(["data", "convert", str(p), str(out_p)], capsys)
    assert code == 1 and "id — expected string" in err
    code, out, err = run(["data", "convert", str(p), str(out_p), "--skip-invalid"], capsys)
    assert code == 0 and "skipped" in err and ":4: id — expected string" in err
    assert list(read_traces(out_p)) == ts


def test_convert_to_parquet_and_back(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    from prmkit.data import read_parquet

    p, ts = sample(tmp_path)
    code, _, _ = run(["data", "convert", str(p), str(tmp_path / "t.parquet")], capsys)
    assert code == 0
    assert list(read_parquet(tmp_path / "t.parquet")) == ts


def test_inspect_and_missing_file(tmp_path, capsys):
    p, _ = sample(tmp_path)
    code, out, _ = run(["data", "inspect", str(p), "--id", "c"], capsys)
    assert code == 0 and "first error: None" in out
    code, _, err = run(["data", "inspect", str(tmp_path / "nope.jsonl")], capsys)
    assert code == 1 and "no such file" in err


def test_parse_options():
    assert parse_options(["a=1", "b=x", "c=[1,2]", "d="]) == {"a": 1, "b": "x", "c": [1, 2], "d": ""}
    with pytest.raises(PrmkitError):
        parse_options(["novalue"])


@pytest.mark.realdata
def test_stats_processbench_math(shared_data, capsys):
    # The example: 1,000 traces, 406 of them with no wrong step.
    code, out, _ = run(["data", "stats", str(shared_data / "processbench" / "math.json"), "--json"],
                       capsys)
    d = json.loads(out)
    assert code == 0 and d["traces"] == 1000 and d["first_error"]["-1"] == 406
    assert sum(d["first_error"].values()) == 1000 and "unknown" not in d["first_error"]


@pytest.mark.realdata
def test_validate_prmbench_reports_out_of_range_rows(shared_data, capsys):
    p = shared_data / "prmbench" / "prm800k_test_p1_4o_circular.jsonl"
    code, out, err = run(["data", "validate", str(p)], capsys)
    assert code == 1
    assert f"{p}:54: error_steps[1] — step 34 is not one of the 33 steps" in err.replace("\n", "")


@pytest.mark.realdata
@pytest.mark.parametrize("rel, fmt", [
    ("processbench/math.json", "processbench"), ("processbench/gsm8k.json", "processbench"),
    ("prm800k_sample/openr_samples_prm800k.jsonl", "prm800k"),
    ("prm800k_sample/tongyx361_phase1_train_example.json", "prm800k"),
    ("math_shepherd_sample/samples_math-shepherd.jsonl", "math_shepherd"),
    ("math_aps_sample/samples_math-aps.jsonl", "math_aps"), ("gsm8k/train.jsonl", "gsm8k"),
    ("gsm8k/test_socratic.jsonl", "gsm8k"), ("math500/test.jsonl", "math"),
    ("prmbench/prm800k_train_p1_first400_4o_deception.jsonl", "prmbench"),
])
def test_every_real_file_is_detected(shared_data, rel, fmt):
    from prmkit.data import detect_format

    assert detect_format(shared_data / rel) == fmt


@pytest.mark.realdata
def test_convert_real_processbench_to_trl_and_back(shared_data, tmp_path, capsys):
    from prmkit.data import read

    out = tmp_path / "pb.trl.jsonl"
    code, msg, _ = run(["data", "convert", str(shared_data / "processbench" / "gsm8k.json"), str(out),
                        "--to", "trl_stepwise"], capsys)
    assert code == 0 and "wrote 400 trl_stepwise records" in msg
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # Error-free traces keep every step; others end at their first wrong step, labelled False.
    src = list(read(shared_data / "processbench" / "gsm8k.json"))
    for t, r in zip(src, rows, strict=True):
        fe = t.first_error()
        assert len(r["completions"]) == (len(t.steps) if fe == -1 else fe + 1)
        assert r["labels"] == [True] * len(r["labels"]) if fe == -1 else r["labels"][-1] is False
    back = list(read(out, "trl_stepwise"))
    assert [len(t.steps) for t in back] == [len(r["completions"]) for r in rows]


def test_inspect_clips_a_huge_step_and_says_how_much_it_cut(tmp_path, capsys):
    # One 4 MiB line: the renderer's wrapping is super-linear (a 3 MB step took 20 s, 50 MB never
    # finished), so inspect shows the first --max-chars characters and counts the rest.
    big = "x" * (4 * 2**20)
    p = tmp_path / "big.jsonl"
    write_traces([Trace("big", Problem("q"), [Step(big), Step("fine")])], p)
    assert p.stat().st_size > 4 * 2**20
    code, out, _ = run(["data", "inspect", str(p)], capsys)
    assert code == 0
    assert f"[{len(big) - 2000} more characters not shown]" in out.replace("│", "").replace("\n", " ")
    assert out.count("x") == 2000 and "fine" in out and len(out) < 10_000
    code, out, _ = run(["data", "inspect", str(p), "--max-chars", "10"], capsys)
    assert out.count("x") == 10 and f"{len(big) - 10} more characters" in out


def test_stats_clips_a_huge_label_source(tmp_path, capsys):
    src = "s" * 2**20
    p = tmp_path / "t.jsonl"
    write_traces([Trace("a", Problem("q"), [Step("x", labels=[StepLabel(1, source=src)])])], p)
    code, out, _ = run(["data", "stats", str(p)], capsys)
    assert code == 0 and f"{len(src) - 80} more characters" in out.replace("│", "").replace("\n", " ")
    assert out.count("s") < 300 and len(out) < 10_000
