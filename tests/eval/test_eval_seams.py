"""The seams between scoring and evaluation (issue 15): ``prmkit eval`` reads what ``prmkit score``
wrote; a trace the scorer dropped is a ProcessBench miss, never a lucky "no error"; PRMBench's
repeated keys are flagged on read and the evaluation keeps the first copy, counting the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run

from prmkit.data import scan
from prmkit.eval import evaluate_prmbench
from prmkit.eval._processbench import processbench_split, threshold_sweep
from prmkit.trace import Problem, Step, StepLabel, Trace

FIXTURES = Path(__file__).parents[1] / "fixtures"
SCRIPTED = ["--scorer", "scripted", "-s", "scores={}", "-s", "default=0.3"]


def pb(tid: str, scores: list[float | None], label: int) -> Trace:
    steps = [Step(f"s{i}", labels=[StepLabel(-1 if i == label else 1)] if label == -1 or i <= label else [],
                  scores={} if s is None else {"prm": s}) for i, s in enumerate(scores)]
    return Trace(tid, Problem("q"), steps, meta={"processbench": {"generator": "G"}})


# -- ProcessBench: a dropped trace is a miss ---------------------------------------------------------
# at 0.5: ok  [0.9, 0.8] label -1 -> pred -1, hit (correct side)
#         gone [-, -]    label -1 -> no score at all: a miss (was a hit: pred -1 == -1)
#         bad [0.9, 0.2] label 1  -> pred 1, hit (error side)
#         lost [-, -]    label 0  -> a miss either way
# correct_acc 1/2, error_acc 1/2, F1 1/2; 2 unscored traces, 4 unscored steps
def split() -> list[Trace]:
    return [pb("ok", [0.9, 0.8], -1), pb("gone", [None, None], -1), pb("bad", [0.9, 0.2], 1),
            pb("lost", [None, None], 0)]


def test_a_trace_without_scores_is_a_processbench_miss():
    m = processbench_split(split(), threshold=0.5)
    assert (m["correct_acc"], m["error_acc"], m["f1"]) == (0.5, 0.5, 0.5)
    assert (m["n_correct"], m["n_error"], m["unscored_traces"], m["unscored_steps"]) == (2, 2, 2, 4)
    assert (m["flagged_early"], m["flagged_late"], m["not_flagged"]) == (0, 0, 1)  # "lost": no step flagged
    # the sweep counts the same way at every threshold: at most one hit per side
    thresholds, f1s, _ = threshold_sweep(split(), thresholds=[0.1, 0.5, 0.95])
    assert f1s == [0.0, 0.5, 0.0]  # 0.1: "bad" predicted -1 (miss); 0.95: "ok" predicted 0 (miss)


def test_processbench_lines_say_how_many_traces_had_no_score():
    from prmkit.eval import evaluate_processbench

    text = "\n".join(evaluate_processbench({"s": split()}).lines())
    assert "2 traces had no score at all (the scorer could not take them): counted as misses" in text


# -- PRMBench: duplicate keys ------------------------------------------------------------------------
def pm(tid: str, scores: list[float], wrong: set[int]) -> Trace:
    steps = [Step(f"s{i}", labels=[StepLabel(-1 if i in wrong else 1)], scores={"prm": s})
             for i, s in enumerate(scores)]
    return Trace(tid, Problem("q"), steps, meta={"prmbench": {"classification": "circular"}})


def test_prmbench_keeps_the_first_copy_of_a_repeated_key_and_counts_the_rest():
    first = [pm("c1", [0.9, 0.2], {1}), pm("c2", [0.8], set())]      # TP TN, TP: PRMScore 1
    later = pm("c1", [0.1, 0.9], {1})                                  # FN FP: would lower it
    r = evaluate_prmbench([*first, later, later])
    assert r.classes["circular"]["prmscore"] == 1.0 and r.classes["circular"]["n_traces"] == 2
    assert r.duplicates == {"traces": 2, "ids": ["c1", "c1"]}
    assert "duplicate keys: 2 later copies left out, the first kept (c1, c1)" in r.lines()
    assert json.loads(json.dumps(r.to_dict()))["duplicates"]["traces"] == 2
    assert evaluate_prmbench(first).duplicates == {"traces": 0, "ids": []}


def test_a_repeated_prmbench_key_is_flagged_on_read_with_the_first_line(tmp_path, capsys):
    row = (FIXTURES / "prmbench" / "mini.jsonl").read_text().splitlines()[0]
    path = tmp_path / "dup.jsonl"
    path.write_text(f"{row}\n{row}\n")
    report = scan(path, "prmbench")
    key = "{classification}_{idx}".format(**json.loads(row))
    assert [str(e) for e in report.issues] == [
        f"{path}:2: idx — duplicate key {key} (first at line 1); an evaluation keeps the first copy"]
    code, out, err = run(["data", "validate", path], capsys)
    assert code == 1 and f"duplicate key {key} (first at line 1)" in " ".join((out + err).split())


# -- eval reads prmkit score output ------------------------------------------------------------------
@pytest.mark.parametrize("bench, fixture", [("processbench", "processbench/mini.json"),
                                            ("prmbench", "prmbench/mini.jsonl")])
def test_eval_reads_the_output_of_prmkit_score(bench, fixture, tmp_path, capsys):
    scored, direct, stored = tmp_path / "scored.jsonl", tmp_path / "direct.json", tmp_path / "stored.json"
    assert run(["score", FIXTURES / fixture, scored, *SCRIPTED], capsys)[0] == 0
    code, _, err = run(["eval", bench, FIXTURES / fixture, *SCRIPTED, "--json", direct], capsys)
    assert code == 0, err
    code, out, err = run(["eval", bench, scored, "--json", stored], capsys)  # no model: stored scores
    assert code == 0, err
    a, b = json.loads(direct.read_text())[bench], json.loads(stored.read_text())[bench]
    if bench == "processbench":
        assert a["splits"]["mini"] == b["splits"]["scored"]
    else:
        assert a["classes"] == b["classes"] and a["overall"] == b["overall"]


# -- PRMBench: the error-free originals from the command line ------------------------------------------
def test_eval_prmbench_originals_adds_the_correct_class_once_per_question(tmp_path, capsys):
    rows = [json.loads(x) for x in (FIXTURES / "prmbench" / "mini.jsonl").read_text().splitlines()]
    questions = {r["idx"] for r in rows}
    out = tmp_path / "pb.json"
    code, printed, err = run(["eval", "prmbench", FIXTURES / "prmbench" / "mini.jsonl", *SCRIPTED,
                              "--originals", "--json", out], capsys)
    assert code == 0, err
    correct = json.loads(out.read_text())["prmbench"]["classes"]["correct"]
    assert correct["n_traces"] == len(questions) < len(rows)  # one original per question, not per row
    assert correct["n_error_steps"] == 0
    assert correct["n_steps"] == sum(len(r["original_process"]) for r in {r["idx"]: r for r in rows}.values())
    # without --originals there is no such row
    assert run(["eval", "prmbench", FIXTURES / "prmbench" / "mini.jsonl", *SCRIPTED, "--json", out,
                "--overwrite"], capsys)[0] == 0
    assert "correct" not in json.loads(out.read_text())["prmbench"]["classes"]


def test_eval_prmbench_originals_need_a_model_for_stored_scores(tmp_path, capsys):
    scored = tmp_path / "scored.jsonl"
    assert run(["score", FIXTURES / "prmbench" / "mini.jsonl", scored, *SCRIPTED], capsys)[0] == 0
    code, _, err = run(["eval", "prmbench", scored, "--originals"], capsys)
    assert (code, err) == (1, "error: prmbench: the error-free originals have no stored scores; give the "
                              "PRM with --model DIR to score them\n")
