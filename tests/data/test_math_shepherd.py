"""Math-Shepherd: hand-written rows with hand-derived steps, labels and answers; edits; errors."""

from __future__ import annotations

import copy
import json

import pytest

from prmkit._fields import Fields
from prmkit.data import detect_format, get_format, read, write
from prmkit.data._math_shepherd import TAG, MathShepherdFormat, parse_tagged
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture()
def sample(fixtures):
    return fixtures / "math_shepherd" / "sample.jsonl"


def test_fixture_steps_labels_and_answers(sample):
    t1, t2, t3 = read(sample, "math_shepherd")

    assert t1.id == "sample.jsonl:1"
    assert t1.problem.text == ("Ann has 4 pens and buys 6 more. Then she gives away half. "
                               "How many pens does she have?")
    assert [s.text for s in t1.steps] == [
        "She buys 6 more: 4 + 6 = <<4+6=10>>10 pens.",
        "She gives away half: 10 / 2 = <<10/2=5>>5 pens.",
        "She has 5 + 1 = 6 pens. The answer is: 6",
    ]
    assert [s.label().value for s in t1.steps] == [1, 1, -1]
    assert t1.first_error() == 2
    assert (t1.final_answer, t1.outcome, t1.source) == ("6", "incorrect", "math_shepherd")
    assert t1.meta == {"math_shepherd": {"task": "GSM8K"}}
    lab = t1.steps[0].labels[0]
    assert (lab.kind, lab.source, lab.labeler) == ("hard", "mc_hard", "math-shepherd")

    # A step may hold a newline; only the tag ends it.
    assert [s.text for s in t2.steps] == [
        "The common denominator is $6$.",
        "So $\\frac{3}{6} + \\frac{2}{6}$\n$= \\frac{5}{6}$.",
        "The answer is: \\frac{5}{6}",
    ]
    assert t2.first_error() == -1
    assert (t2.final_answer, t2.outcome) == ("\\frac{5}{6}", "correct")

    # A later step can be right after a wrong one (Monte Carlo labels are per prefix); no task.
    assert [s.label().value for s in t3.steps] == [-1, 1]
    assert (t3.first_error(), t3.final_answer, t3.outcome, t3.meta) == (0, "8", "correct", {})


def test_spans_point_into_the_input(sample):
    for t, rec in zip(read(sample, "math_shepherd"), records(sample), strict=True):
        assert t.text == rec["input"]
        t.check_spans()
        assert t.steps[0].span[0] == rec["input"].index("Step 1: ") + len("Step 1: ")


def test_round_trip_of_every_fixture_row_and_file(sample, tmp_path):
    fmt = MathShepherdFormat()
    traces = list(read(sample, "math_shepherd"))
    assert [fmt.encode(t) for t in traces] == records(sample)
    out = tmp_path / "out.jsonl"
    assert write(traces, out, "math_shepherd") == 3
    assert records(out) == records(sample)


def test_round_trip_through_prmkit_jsonl(sample, tmp_path):
    write(read(sample, "math_shepherd"), tmp_path / "t.jsonl", "prmkit")
    back = [MathShepherdFormat().encode(t) for t in read(tmp_path / "t.jsonl", "prmkit")]
    assert back == records(sample)


def test_edited_step_text_and_label_show_in_the_export(sample):
    fmt = MathShepherdFormat()
    t = next(read(sample, "math_shepherd"))
    t.steps[2].text = "She has 5 pens. The answer is: 5"
    t.steps[2].labels.append(StepLabel(1, source="human"))
    rec = fmt.encode(t)
    q = t.problem.text
    assert rec["input"] == (f"{q} Step 1: She buys 6 more: 4 + 6 = <<4+6=10>>10 pens. ки\n"
                            "Step 2: She gives away half: 10 / 2 = <<10/2=5>>5 pens. ки\n"
                            "Step 3: She has 5 pens. The answer is: 5 ки")
    assert rec["label"] == rec["input"].replace(" ки", " +")
    assert rec["task"] == "GSM8K"


def test_relabel_only_keeps_the_text_verbatim(sample):
    t = next(read(sample, "math_shepherd"))
    t.steps[0].labels = [StepLabel(-1, source="judge")]
    rec = MathShepherdFormat().encode(t)
    assert rec["input"] == t.text
    assert rec["label"] == (f"{t.problem.text} Step 1: She buys 6 more: 4 + 6 = <<4+6=10>>10 pens. -\n"
                            "Step 2: She gives away half: 10 / 2 = <<10/2=5>>5 pens. +\n"
                            "Step 3: She has 5 + 1 = 6 pens. The answer is: 6 -")


def test_edited_problem_shows(sample):
    t = next(read(sample, "math_shepherd"))
    t.problem.text = "Changed question?"
    rec = MathShepherdFormat().encode(t)
    assert rec["input"].startswith("Changed question? Step 1: She buys")


def test_foreign_trace_uses_the_template_and_reads_back():
    t = Trace(id="x", problem=Problem("2+2?"), steps=[
        Step("2+2=4.", labels=[StepLabel(0, source="human")]),
        Step("The answer is: 4", labels=[StepLabel(0.3, kind="soft", source="mc_soft")])])
    rec = MathShepherdFormat().encode(t)
    assert rec == {"input": "2+2? Step 1: 2+2=4. ки\nStep 2: The answer is: 4 ки",
                   "label": "2+2? Step 1: 2+2=4. +\nStep 2: The answer is: 4 -"}
    # neutral and threshold decide the marks
    rec2 = MathShepherdFormat(neutral="negative", threshold=0.25).encode(t)
    assert rec2["label"] == "2+2? Step 1: 2+2=4. -\nStep 2: The answer is: 4 +"
    [back] = MathShepherdFormat().decode(Fields(rec, path="f", line=1))
    assert [s.text for s in back.steps] == ["2+2=4.", "The answer is: 4"]


def test_unlabelled_step_cannot_be_written():
    t = Trace(id="x", problem=Problem("q"), steps=[Step("a", labels=[StepLabel(1)]), Step("b")])
    with pytest.raises(PrmkitError, match=r"trace x: step 1 has no label"):
        MathShepherdFormat().encode(t)
    t.steps[1].labels = [StepLabel(0)]
    with pytest.raises(PrmkitError, match="step 1"):
        MathShepherdFormat(neutral="ignore").encode(t)
    with pytest.raises(PrmkitError, match="at least one step"):
        MathShepherdFormat().encode(Trace(id="e", problem=Problem("q")))


def test_errors_name_file_line_and_field(fixtures):
    path = fixtures / "math_shepherd" / "bad.jsonl"
    fmt = get_format("math_shepherd")
    expected = {
        2: ("label", "differs from input at character 51"),
        3: ("input", "no 'Step 1:'"),
        4: ("label", "expected ' +' or ' -' for step 2"),
        5: ("source", "unexpected field"),
    }
    for line, rec in enumerate(records(path), 1):
        if line == 1:
            assert fmt.decode(Fields(rec, path=str(path), line=1))
            continue
        with pytest.raises(FormatError) as e:
            fmt.decode(Fields(rec, path=str(path), line=line))
        field, reason = expected[line]
        assert (e.value.path, e.value.line, e.value.field) == (str(path), line, field)
        assert reason in e.value.reason
    with pytest.raises(FormatError) as e:
        list(read(path, "math_shepherd"))
    assert (e.value.line, e.value.field) == (2, "label")


@pytest.mark.parametrize("rec, field", [
    ({"label": "x"}, "input"),
    ({"input": "q Step 1: a ки", "label": 3}, "label"),
    ({"input": "q Step 1: a ки", "label": "q Step 1: a +", "task": None}, "task"),
    ({"input": "q Step 1: a", "label": "q Step 1: a"}, "input"),
    ({"input": "q Step 1: a ки", "label": "q Step 1: a + and more"}, "label"),
])
def test_malformed_records(rec, field):
    with pytest.raises(FormatError) as e:
        MathShepherdFormat().decode(Fields(rec, path="in.jsonl", line=7))
    assert (e.value.line, e.value.field) == (7, field)


def test_keep_extra_round_trips_unknown_keys():
    rec = {"input": "q? Step 1: a ки", "label": "q? Step 1: a -", "task": "GSM8K", "source": "s1"}
    [t] = MathShepherdFormat(keep_extra=True).decode(Fields(copy.deepcopy(rec)))
    assert t.meta["math_shepherd"]["extra"] == {"source": "s1"}
    assert MathShepherdFormat().encode(t) == rec


def test_text_after_the_last_tag_is_kept():
    rec = {"input": "q? Step 1: a ки\n", "label": "q? Step 1: a +\n"}
    [t] = MathShepherdFormat().decode(Fields(rec))
    assert t.meta["math_shepherd"]["tail"] == "\n"
    assert MathShepherdFormat().encode(t) == rec
    t.steps[0].text = "b"  # rebuilt from the template: the tail stays
    assert MathShepherdFormat().encode(t) == {"input": "q? Step 1: b ки\n", "label": "q? Step 1: b +\n"}


def test_parse_tagged_spans():
    text = "Q? Step 1: one ки\nStep 2:  two  ки"
    p = parse_tagged(text, TAG)
    assert [text[a:b] for a, b in p.steps] == ["one", "two"]
    assert text[slice(*p.problem)] == "Q?"
    assert [text[a:b] for a, b in p.tags] == [TAG, TAG]
    # Without a marker: the problem ends at the last newline before the first tag.
    p = parse_tagged("Q\nline two\nfirst ки\nsecond ки", "ки")
    assert p.problem == (0, 10) and not p.marked
    with pytest.raises(ValueError, match="no step tag"):
        parse_tagged("no tags", TAG)
    # The question may itself say "Step 1:"; the solution starts at the last one before the tag.
    text = "Do this. Step 1: think. Then answer. Step 1: 2+2=4 ки"
    p = parse_tagged(text, TAG, require_marker=True)
    assert text[slice(*p.problem)] == "Do this. Step 1: think. Then answer."
    assert [text[a:b] for a, b in p.steps] == ["2+2=4"]


def test_detect():
    fmt = MathShepherdFormat
    assert fmt.detect({"input": "q Step 1: a ки", "label": "q Step 1: a +", "task": "GSM8K"})
    assert not fmt.detect({"input": "q Step 1: a ки", "value": ["+"]})  # OpenRLHF
    assert not fmt.detect({"input": "q Step 1: a ки", "label": "l", "value": ["+"], "task": "t"})
    assert not fmt.detect({"question": "q", "answer": "a\n#### 1"})
    assert not fmt.detect({"id": "x", "problem": "p", "steps": []})


@pytest.mark.realdata
def test_real_rows_round_trip(shared_data):
    path = shared_data / "math_shepherd_sample" / "samples_math-shepherd.jsonl"
    assert detect_format(path) == "math_shepherd"
    recs = records(path)
    traces = list(read(path, "math_shepherd"))
    assert len(traces) == len(recs) == 7
    fmt = MathShepherdFormat()
    for t, rec in zip(traces, recs, strict=True):
        t.check_spans()
        assert fmt.encode(t) == rec
    # SOURCE.md's (+, -) counts per row
    counts = [(sum(s.label().value > 0 for s in t.steps), sum(s.label().value < 0 for s in t.steps))
              for t in traces]
    assert counts == [(4, 1), (0, 3), (0, 2), (0, 5), (1, 4), (0, 2), (0, 3)]
    assert traces[0].final_answer == "13520" and traces[0].first_error() == 4
    assert all(t.meta["math_shepherd"]["task"] == "GSM8K" for t in traces)
