"""``prmkit score | select | search`` on tiny inputs (scripted scorers, or the tiny zero-head PRM)."""

from __future__ import annotations

import pytest
import typer

from prmkit.cli._score import score, search, select
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace, read_traces, write_traces


def run(*args: str) -> None:
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    for name, fn in (("score", score), ("select", select), ("search", search)):
        app.command(name)(fn)
    app(args=[str(a) for a in args], standalone_mode=False)


def two_problems():
    p1, p2 = Problem("2 + 3?", answer="5", id="p1"), Problem("1 + 1?", answer="2", id="p2")
    rows = [(p1, "5", [0.75, 0.25]), (p1, "6", [0.5, 0.625]), (p1, "5.0", [0.5, 0.5]),
            (p1, "6", [0.25, 0.5]), (p2, "2", [0.5]), (p2, "3", [0.25]), (p2, "3", [0.125])]
    out = []
    for i, (p, a, scores) in enumerate(rows):
        out.append(Trace(id=f"t{i}", problem=p, final_answer=a,
                         steps=[Step(f"s{k}", scores={"prm": s}) for k, s in enumerate(scores)],
                         outcome="correct" if float(a) == float(p.answer) else "incorrect"))
    return out


def test_score_with_a_model(tmp_path, tiny_prm_dir, capsys):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces([Trace(id="a", problem=Problem("1 + 1?"), steps=[Step("1 + 1 = 2"), Step("The answer is 2.")]),
                  Trace(id="b", problem=Problem("1 + 1?"))], src)
    run("score", "--model", tiny_prm_dir, src, dst)
    a, b = read_traces(dst)
    assert [s.scores for s in a.steps] == [{"prm": 0.5}, {"prm": 0.5}]  # zeroed head: 0.5
    assert a.meta["scores"] == {"prm:min": 0.5} and a.provenance[-1].stage == "score"
    assert b.steps == [] and "scores" not in b.meta
    printed = capsys.readouterr().out
    assert "2 traces, 1 scored by" in printed and "mean trace score 0.5000" in printed
    assert "unscored b: no steps" in printed
    # the time and rate (issue 15): the last line
    import re

    assert re.search(r"^\d+\.\d s \(\d+\.\d traces/s\)$", printed, re.M), printed


def test_score_report_says_time_and_rate():
    from prmkit.scoring import ScoreReport

    r = ScoreReport("out.jsonl", "scripted", "prm", "prm", "min", traces=10, scored=10, seconds=2.0)
    assert r.lines()[1:] == ["2.0 s (5.0 traces/s)"]
    assert ScoreReport("o", "s", "prm", "prm", "min").lines()[-1] == "0.0 s"


def test_score_with_a_scripted_scorer(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces([Trace(id="a", problem=Problem("q"), steps=[Step("a"), Step("b")])], src)
    run("score", "--scorer", "scripted", "-s", 'scores={"a": 0.25, "b": 0.75}', "--aggregate", "last",
        "--key", "v1", src, dst)
    [t] = read_traces(dst)
    assert [s.scores for s in t.steps] == [{"v1": 0.25}, {"v1": 0.75}] and t.meta["scores"] == {"v1:last": 0.75}


def test_score_needs_a_model(tmp_path):
    src = tmp_path / "in.jsonl"  # an input that passes its check: the missing model is what is said
    write_traces([Trace(id="a", problem=Problem("q"), steps=[Step("a")])], src)
    with pytest.raises(PrmkitError, match="--model DIR"):
        run("score", src, tmp_path / "out.jsonl")


def test_select_prints_accuracy_and_writes_choices(tmp_path, capsys):
    src, dst = tmp_path / "scored.jsonl", tmp_path / "chosen.jsonl"
    write_traces(two_problems(), src)
    run("select", "--method", "weighted", "--aggregate", "last", src, "-o", dst)
    lines = capsys.readouterr().out.splitlines()
    # p1: "6" weighs 0.625 + 0.5 > "5" 0.25 + 0.5 (wrong); p2: "2" 0.5 > "3" 0.25 + 0.125 (right)
    assert lines[0] == "weighted (aggregate last): accuracy 50.0% on 2 problems (scores: prm)"
    # majority: p1 tie 2-2 -> "5" (first seen, right), p2 "3" (wrong); oracle: both have a right one
    assert lines[1] == ("reference: majority: accuracy 50.0% on 2 problems; 1 tied, the earliest "
                        "answer in sample order chosen; oracle: accuracy 100.0% on 2 problems")
    chosen = list(read_traces(dst))
    assert [t.id for t in chosen] == ["t1", "t4"]
    assert chosen[0].meta["selection"]["reason"].startswith("answer '6' has the largest total score 1.125")


def test_select_without_scores_says_what_to_do(tmp_path):
    src = tmp_path / "plain.jsonl"
    write_traces([Trace(id="a", problem=Problem("q"), steps=[Step("x")], final_answer="1")], src)
    with pytest.raises(PrmkitError, match="run prmkit score first"):
        run("select", src)


def test_search_on_arith_with_scripted_policy_and_scorer(tmp_path, capsys):
    out = tmp_path / "found.jsonl"
    run("search", "--env", "arith", "--problems", "2", "--method", "beam", "--policy", "scripted",
        "-p", 'completions=["x = 1", "The answer is 7."]', "--scorer", "scripted",
        "-s", 'scores={"x = 1": 0.5, "The answer is 7.": 0.75}', "--beam-width", "1",
        "--expansions", "2", "--max-depth", "3", "-o", out)
    found = list(read_traces(out))
    assert [[s.text for s in t.steps] for t in found] == [["The answer is 7."]] * 2
    meta = found[0].meta["search"]
    # one round: 2 one-step candidates ("x = 1": 3 words, "The answer is 7.": 4 words)
    assert meta["compute"]["generated_tokens"] == 7 and meta["depth"] == 1
    assert "beam accuracy" in capsys.readouterr().out


def test_dvts_with_a_model(tmp_path, tiny_prm_dir, capsys):
    out = tmp_path / "found.jsonl"
    run("search", "--env", "arith", "--problems", "1", "--method", "dvts", "-n", "4", "--m", "2",
        "--model", tiny_prm_dir, "--policy", "scripted", "-p", 'completions=["x = 1", "The answer is 7."]',
        "--max-depth", "2", "-o", out)
    [t] = read_traces(out)
    assert t.meta["search"]["candidates"] == 2  # one path per subtree
    assert t.provenance[-1].args["subtrees"] == 2
    # every score is 0.5: ties keep generation order, so each subtree keeps "x = 1" (not an answer)
    # and runs to max_depth; 2 rounds x 2 subtrees x ("x = 1" 3 words + "The answer is 7." 4 words)
    compute = t.meta["search"]["compute"]
    assert compute["scorer_calls"] == 2 and compute["generated_tokens"] == 28
    # scored tokens are the PrefixCachingScorer's own count of tokens it ran
    assert 0 < compute["scored_tokens"] < compute["scored_traces"] * 200
