"""MATH / MATH-500: both record shapes, the splitter option, answers, round trips, errors."""

from __future__ import annotations

import json
import statistics

import pytest

from prmkit._fields import Fields
from prmkit.data import ImportReport, detect_format, get_format, read, write
from prmkit.data._math import MATHFormat
from prmkit.data._split import get_splitter
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, Trace


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture()
def math500(fixtures):
    return fixtures / "math" / "math500.jsonl"


@pytest.fixture()
def hendrycks(fixtures):
    return fixtures / "math" / "hendrycks.json"


def test_math500_shape(math500):
    t1, t2 = read(math500, "math")
    assert t1.id == t1.problem.id == "test/prealgebra/9001.json"
    assert [s.text for s in t1.steps] == [
        "We write both fractions over $8$: $\\frac{3}{4} = \\frac{6}{8}$.",
        "Then $\\frac{6}{8} + \\frac{1}{8} = \\boxed{\\frac{7}{8}}$."]
    assert (t1.final_answer, t1.problem.answer) == ("\\frac{7}{8}", "\\frac{7}{8}")
    assert (t1.outcome, t1.source) == ("correct", "math")
    assert t1.meta == {"math": {"subject": "Prealgebra", "level": 2}}
    assert [s.text for s in t2.steps] == ["Taking square roots, $x = \\pm 1.2$.",
                                          "Since $x > 0$, $x = \\boxed{1.2}$."]
    assert t2.final_answer == "1.2"
    for t in (t1, t2):
        t.check_spans()
        assert all(not s.labels for s in t.steps)


def test_hendrycks_shape(hendrycks):
    [t] = read(hendrycks, "math")
    assert t.id == "hendrycks.json:1" and t.problem.id is None
    assert [s.text for s in t.steps] == [
        "We have $6! = 720 = 2^4 \\cdot 3^2 \\cdot 5$.",
        "So the number of divisors is $(4+1)(2+1)(1+1) = \\boxed{30}$."]
    assert (t.final_answer, t.problem.answer) == ("30", "30")
    assert t.meta == {"math": {"level": "Level 3", "type": "Number Theory", "boxed_answer": True}}


def test_round_trips(math500, hendrycks, tmp_path):
    fmt = MATHFormat()
    traces = list(read(math500, "math"))
    assert [fmt.encode(t) for t in traces] == records(math500)
    write(traces, tmp_path / "o.jsonl", "math")
    assert records(tmp_path / "o.jsonl") == records(math500)
    [t] = read(hendrycks, "math")
    assert fmt.encode(t) == json.loads(hendrycks.read_text(encoding="utf-8"))


def test_splitter_option(math500):
    recs = records(math500)
    [t] = MATHFormat(splitter="blank_line").decode(Fields(recs[0]))
    assert len(t.steps) == 1  # one paragraph
    [t] = MATHFormat(splitter="blank_line").decode(Fields(recs[1]))
    assert [s.text for s in t.steps] == ["Taking square roots, $x = \\pm 1.2$.",
                                         "Since $x > 0$, $x = \\boxed{1.2}$."]
    [t] = MATHFormat(splitter=get_splitter("sentence", newline=True)).decode(Fields(recs[1]))
    assert len(t.steps) == 2
    t = next(read(math500, "math", splitter="newline"))
    assert t.provenance[0].args["splitter"] == "newline"
    with pytest.raises(PrmkitError, match="unknown splitter"):
        get_format("math", splitter="paragraphs")


def test_edits_show(math500):
    t1, t2 = read(math500, "math")
    t2.steps[0].text = "Square roots give $x = 1.2$ or $x = -1.2$."
    t2.problem.answer = "6/5"
    assert MATHFormat().encode(t2) == {
        **records(math500)[1],
        "solution": "Square roots give $x = 1.2$ or $x = -1.2$.\n\nSince $x > 0$, $x = \\boxed{1.2}$.",
        "answer": "6/5"}
    del t1.steps[0]  # a deleted step is not silently kept from the original text
    assert MATHFormat().encode(t1)["solution"] == (
        "Then $\\frac{6}{8} + \\frac{1}{8} = \\boxed{\\frac{7}{8}}$.")


def test_foreign_trace_export():
    t = Trace(id="x", problem=Problem("1+1?", answer="2", id="p/1"), steps=[Step("a."), Step("b.")])
    assert MATHFormat().encode(t) == {"problem": "1+1?", "solution": "a.\n\nb.", "answer": "2",
                                      "unique_id": "p/1"}


def test_missing_box_is_an_issue(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps({"problem": "p", "solution": "No box here.", "level": 1}) + "\n")
    report = ImportReport()
    [t] = read(p, "math", report=report)
    assert t.final_answer is None and t.problem.answer is None
    assert [(e.line, e.field) for e in report.issues] == [(1, "solution")]
    assert MATHFormat().encode(t) == {"problem": "p", "solution": "No box here.", "level": 1}


@pytest.mark.parametrize("rec, field, reason", [
    ({"solution": "s", "level": 1}, "problem", "missing"),
    ({"problem": "p", "solution": " \n ", "level": 1}, "solution", "no steps"),
    ({"problem": "p", "solution": "s", "level": [5]}, "level", "expected integer or string"),
    ({"problem": "p", "solution": "s", "unique_id": 7}, "unique_id", "expected string"),
    ({"problem": "p", "solution": "s", "level": 1, "steps": []}, "steps", "unexpected field"),
])
def test_malformed_records(rec, field, reason):
    with pytest.raises(FormatError) as e:
        MATHFormat().decode(Fields(rec, path="in.jsonl", line=4))
    assert (e.value.path, e.value.line, e.value.field) == ("in.jsonl", 4, field)
    assert reason in e.value.reason


def test_keep_extra():
    rec = {"problem": "p", "solution": "$\\boxed{1}$", "level": 1, "source_file": "a.json"}
    [t] = MATHFormat(keep_extra=True).decode(Fields(rec))
    assert t.meta["math"]["extra"] == {"source_file": "a.json"}
    assert MATHFormat().encode(t) == rec


def test_detect():
    assert MATHFormat.detect({"problem": "p", "solution": "s", "level": "Level 1", "type": "Algebra"})
    assert MATHFormat.detect({"problem": "p", "solution": "s", "answer": "a", "unique_id": "u"})
    assert not MATHFormat.detect({"id": "x", "generator": "g", "problem": "p", "steps": ["a"],
                                  "final_answer_correct": True, "label": -1})  # ProcessBench
    assert not MATHFormat.detect({"question": "q", "answer": "a\n#### 1"})


@pytest.mark.realdata
def test_math500_round_trip_with_every_splitter(shared_data):
    path = shared_data / "math500" / "test.jsonl"
    assert detect_format(path) == "math"
    recs = records(path)
    steps = {}
    for name in ("sentence", "blank_line", "newline", "step_marker"):
        fmt = MATHFormat(splitter=name)
        traces = list(read(path, "math", splitter=name))
        assert len(traces) == 500
        for t, rec in zip(traces, recs, strict=True):
            t.check_spans()
            assert fmt.encode(t) == rec
            assert t.id == rec["unique_id"] and t.problem.answer == rec["answer"]
        steps[name] = [len(t.steps) for t in traces]
    # every MATH-500 solution has a box, and it is the given answer
    assert all(t.final_answer == t.problem.answer for t in read(path, "math"))
    # why "sentence" is the default: paragraphs leave most solutions as one step
    assert sum(n == 1 for n in steps["blank_line"]) > 300
    assert sum(n == 1 for n in steps["sentence"]) < 100
    assert statistics.median(steps["sentence"]) >= 3
