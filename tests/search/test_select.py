"""Selection on hand-made traces and scores; each method's choice is written out literally.

Scores are binary fractions (0.25, 0.375, ...) so sums and ties are exact.
"""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.search import group_answers, select, select_problems
from prmkit.trace import Problem, Step, Trace

P = Problem("2 + 3?", answer="5", id="p1")

#: (final answer, step scores); trace 2 writes "5.0", which is the answer 5; trace 4 has none.
ROWS = [("5", [0.75, 0.25]), ("6", [0.5, 0.625]), ("5.0", [0.5, 0.5]), ("6", [0.25, 0.5]),
        (None, [0.375])]


def traces(problem=P, rows=ROWS, key="prm"):
    out = []
    for i, (answer, scores) in enumerate(rows):
        steps = [Step(f"step {k}", scores={key: s}) for k, s in enumerate(scores)]
        correct = answer is not None and float(answer) == float(problem.answer)
        out.append(Trace(id=f"{problem.id}#{i}", problem=problem, steps=steps, final_answer=answer,
                         outcome="correct" if correct else "incorrect"))
    return out


def test_groups_join_equivalent_answers():
    groups = group_answers(traces(), [0.25, 0.5, 0.5, 0.25, 0.375])
    assert [(g.answer, g.members, g.weight, g.correct) for g in groups] == [
        ("5", [0, 2], 0.75, True), ("6", [1, 3], 0.75, False), (None, [4], 0.375, False)]


@pytest.mark.parametrize(("method", "aggregate", "chosen"), [
    # min scores: 0.25, 0.5, 0.5, 0.25, 0.375 -> traces 1 and 2 tie; the earliest wins
    ("bon", "min", 1),
    # last scores: 0.25, 0.625, 0.5, 0.5, 0.375
    ("bon", "last", 1),
    # min: "5" weighs 0.25 + 0.5 = 0.75, "6" weighs 0.5 + 0.25 = 0.75, 2 votes each: the earliest
    # answer ("5") wins; its best trace is 2 (0.5)
    ("weighted", "min", 2),
    # last: "5" weighs 0.25 + 0.5 = 0.75, "6" weighs 0.625 + 0.5 = 1.125; its best trace is 1
    ("weighted", "last", 1),
    # 2 votes each: the answer seen first ("5"), its first trace
    ("majority", "min", 0),
    ("oracle", "min", 0),
])
def test_each_method_chooses(method, aggregate, chosen):
    sel = select(traces(), method, aggregate=aggregate, key="prm")
    assert sel.index == chosen
    assert sel.trace.id == f"p1#{chosen}"


def test_selection_says_why():
    sel = select(traces(), "weighted", aggregate="last", key="prm")
    assert sel.reason == ("answer '6' has the largest total score 1.125 over 2 trace(s); "
                          "trace 1 is its best (0.625)")
    assert sel.scores == [0.25, 0.625, 0.5, 0.5, 0.375]
    assert sel.correct is False
    d = sel.to_dict()
    assert d["chosen"] == "p1#1" and d["groups"][1] == {
        "answer": "6", "members": [1, 3], "votes": 2, "weight": 1.125, "best": 0.625, "correct": False}
    tie = select(traces(), "majority")
    assert tie.reason == "answer '5' has the most votes (2 of 5); tied, the earliest answer wins"


def test_scores_passed_directly_and_unscored_traces():
    ts = traces()
    # trace 1 unscored, trace 4 (no answer) the best: bon takes it, weighted cannot vote with it
    scores = [[0.5], [], [0.25], [0.25], [0.75]]
    assert select(ts, "bon", scores=scores).index == 4
    sel = select(ts, "weighted", scores=scores)
    assert sel.index == 0 and sel.groups[1].weight == 0.25
    none = select(ts, "bon", scores=[[]] * 5)
    assert none.index is None and none.trace is None and none.correct is False
    assert none.reason == "no trace is scored"


def test_orm_scores_are_read_from_meta():
    ts = traces()
    for t, s in zip(ts, [0.1, 0.2, 0.9, 0.3, 0.4], strict=True):
        t.meta["scores"] = {"orm": s}
    assert select(ts, "bon", key="orm").index == 2


def test_methods_that_need_scores_say_so():
    with pytest.raises(PrmkitError, match="needs scores"):
        select(traces(), "bon")
    with pytest.raises(PrmkitError, match="unknown selection method 'best'"):
        select(traces(), "best", key="prm")


def test_select_problems_reports_accuracy():
    q = Problem("1 + 1?", answer="2", id="p2")
    rows = [("3", [0.5]), ("2", [0.25]), ("3", [0.125])]
    both = traces() + traces(q, rows)
    # p1: bon(min) picks trace 1 ("6", wrong); p2: trace 0 ("3", wrong)
    assert select_problems(both, "bon", key="prm").accuracy == 0.0
    # p1: "5" (tie broken by order), right; p2: "3" has 2 votes, wrong
    assert select_problems(both, "majority").accuracy == 0.5
    report = select_problems(both, "oracle")
    assert report.accuracy == 1.0 and [s.index for s in report.selections] == [0, 1]
    assert report.summary() == "oracle: accuracy 100.0% on 2 problems"
