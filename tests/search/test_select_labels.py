"""What a selection says it did (issue 15): an ORM's trace scores are not labelled with an
aggregator they never went through, and a majority vote decided by its tie rule is counted."""

from __future__ import annotations

from prmkit import write_traces
from prmkit.search import select, select_file, select_problems
from prmkit.trace import Problem, Step, Trace


def orm_traces() -> list[Trace]:
    """Two problems x 2 traces with an ORM's trace score only (meta.scores["orm"])."""
    out = []
    for p, rows in (("p1", [("5", 0.25, True), ("6", 0.75, False)]),
                    ("p2", [("7", 0.875, True), ("8", 0.125, False)])):
        for i, (answer, score, right) in enumerate(rows):
            out.append(Trace(id=f"{p}#{i}", problem=Problem("q", answer="x", id=p), steps=[Step("s")],
                             final_answer=answer, outcome="correct" if right else "incorrect",
                             meta={"scores": {"orm": score}}))
    return out


def test_select_with_an_orm_key_says_trace_scores_not_an_aggregate(tmp_path):
    r = select_problems(orm_traces(), "bon", aggregate="min", key="orm")
    assert r.aggregate is None and all(s.aggregate is None for s in r.selections)
    # p1: 0.75 (wrong) beats 0.25; p2: 0.875 (right) -> 1 of 2
    assert r.summary() == "bon (trace scores): accuracy 50.0% on 2 problems"
    path = tmp_path / "orm.jsonl"
    write_traces(orm_traces(), path)
    assert select_file(path, key="orm").lines()[0] == ("bon (trace scores): accuracy 50.0% on 2 problems "
                                                      "(scores: orm)")
    # a PRM key keeps its aggregate in the label
    prm = [Trace(id=t.id, problem=t.problem, steps=[Step("s", scores={"prm": t.meta["scores"]["orm"]})],
                 final_answer=t.final_answer, outcome=t.outcome) for t in orm_traces()]
    assert select_problems(prm, "bon", aggregate="min", key="prm").summary().startswith(
        "bon (aggregate min): accuracy 50.0%")
    assert select(prm[:2], "weighted", key="prm", aggregate="last").aggregate == "last"


def test_majority_ties_are_counted_and_the_rule_is_said():
    def problem(pid: str, answers: list[str]) -> list[Trace]:
        return [Trace(id=f"{pid}#{i}", problem=Problem("q", answer="5", id=pid), steps=[Step("s")],
                      final_answer=a) for i, a in enumerate(answers)]

    # p1: 5, 6 -> tied, "5" first; p2: 6, 5 -> tied, "6" first (wrong); p3: 5, 5, 6 -> no tie
    ts = problem("p1", ["5", "6"]) + problem("p2", ["6", "5"]) + problem("p3", ["5", "5", "6"])
    r = select_problems(ts, "majority")
    assert r.ties == 2
    assert [s.trace.final_answer for s in r.selections] == ["5", "6", "5"]
    assert r.summary() == ("majority: accuracy 66.7% on 3 problems; 2 tied, the earliest answer in "
                           "sample order chosen")
    # the rule depends on file order: reversed samples flip the tied problems' choices
    flipped = select_problems(problem("p1", ["6", "5"]) + problem("p2", ["5", "6"]), "majority")
    assert [s.trace.final_answer for s in flipped.selections] == ["6", "5"] and flipped.ties == 2
    assert select_problems(problem("p3", ["5", "5", "6"]), "majority").ties == 0
    assert select_problems(ts, "oracle").ties == 0
