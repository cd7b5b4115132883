"""OpenRLHF PRM rows: hard and soft labels, options, export of foreign traces, errors."""

from __future__ import annotations

import json

import pytest

from prmkit._fields import Fields
from prmkit.data import ImportReport, detect_format, get_format, read, write
from prmkit.data._openrlhf import OpenRLHFFormat
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def decode(rec, **options):
    return OpenRLHFFormat(**options).decode(Fields(rec, path="in.jsonl", line=5))


def test_hard_fixture(fixtures):
    t1, t2 = read(fixtures / "openrlhf" / "hard.jsonl", "openrlhf")
    # Math-Shepherd style: the problem ends at "Step 1:", markers are not step text.
    assert t1.problem.text == "Ann has 4 pens and buys 6 more. How many pens does she have?"
    assert [s.text for s in t1.steps] == ["4 + 6 = 10.", "The answer is: 11"]
    assert [s.label().value for s in t1.steps] == [1, -1]
    assert (t1.first_error(), t1.final_answer, t1.id) == (1, "11", "hard.jsonl:1")
    lab = t1.steps[0].labels[0]
    assert (lab.kind, lab.source, lab.labeler) == ("hard", "mc_hard", None)
    # Template style: the problem is the text before the last newline ahead of the first placeholder.
    assert t2.problem.text == "Solve $2x = 6$."
    assert [s.text for s in t2.steps] == ["Divide both sides by 2.", "So $x = 3$.",
                                          "Check: $2 \\cdot 3 = 6$."]
    assert (t2.first_error(), t2.final_answer) == (-1, None)
    for t in (t1, t2):
        t.check_spans()


def test_soft_fixture(fixtures):
    t1, t2 = read(fixtures / "openrlhf" / "soft.jsonl", "openrlhf")
    assert [(s.label().value, s.label().kind, s.label().source) for s in t1.steps] == [
        (0.875, "soft", "mc_soft"), (1.0, "soft", "mc_soft")]
    assert (t1.first_error(), t1.final_answer) == (-1, "42")
    assert [s.label().value for s in t2.steps] == [0.125, 0]
    assert (t2.first_error(), t2.final_answer) == (0, "48")


@pytest.mark.parametrize("name", ["hard.jsonl", "soft.jsonl"])
def test_round_trip(fixtures, tmp_path, name):
    path = fixtures / "openrlhf" / name
    traces = list(read(path, "openrlhf"))
    assert [OpenRLHFFormat().encode(t) for t in traces] == records(path)
    write(traces, tmp_path / "o.jsonl", "openrlhf")
    assert records(tmp_path / "o.jsonl") == records(path)


def test_extra_keys_error_or_kept(fixtures):
    path = fixtures / "openrlhf" / "shepherd_mirror.jsonl"
    with pytest.raises(FormatError) as e:
        list(read(path, "openrlhf"))
    assert (e.value.line, e.value.field) == (1, "label")
    [t] = read(path, "openrlhf", keep_extra=True)
    assert sorted(t.meta["openrlhf"]["extra"]) == ["label", "task"]
    assert [s.label().value for s in t.steps] == [-1, 1]
    assert OpenRLHFFormat().encode(t) == records(path)[0]


def test_edit_rebuilds_from_the_template(fixtures):
    t = next(read(fixtures / "openrlhf" / "hard.jsonl", "openrlhf"))
    t.steps[1].text = "The answer is: 10"
    t.steps[1].labels.append(StepLabel(1, source="human"))
    assert OpenRLHFFormat().encode(t) == {
        "input": "Ann has 4 pens and buys 6 more. How many pens does she have?\n"
                 "4 + 6 = 10. ки\nThe answer is: 10 ки",
        "value": ["+", "+"]}


def test_relabel_keeps_text():
    rec = {"input": "q\na ки\nb ки", "value": ["+", "+"]}
    [t] = decode(rec)
    t.steps[0].labels = [StepLabel(-1)]
    assert OpenRLHFFormat().encode(t) == {"input": "q\na ки\nb ки", "value": ["-", "+"]}


def test_soft_and_hard_export():
    t = Trace(id="x", problem=Problem("q"), steps=[
        Step("a", labels=[StepLabel(0.75, kind="soft")]),
        Step("b", labels=[StepLabel(0.25, kind="soft")])])
    assert OpenRLHFFormat().encode(t) == {"input": "q\na ки\nb ки", "value": [0.75, 0.25]}
    assert OpenRLHFFormat(soft=False).encode(t)["value"] == ["+", "-"]
    assert OpenRLHFFormat(soft=False, threshold=0.2).encode(t)["value"] == ["+", "+"]
    t.steps[1].labels = [StepLabel(-1)]  # mixed kinds: hard tokens unless forced soft
    assert OpenRLHFFormat().encode(t)["value"] == ["+", "-"]
    assert OpenRLHFFormat(soft=True).encode(t)["value"] == [0.75, 0.0]


def test_unlabelled_steps_truncate_or_fail():
    # ProcessBench-like: labels up to the first error only.
    t = Trace(id="pb", problem=Problem("q"), steps=[
        Step("a", labels=[StepLabel(1)]), Step("b", labels=[StepLabel(-1)]), Step("c")])
    assert OpenRLHFFormat().encode(t) == {"input": "q\na ки\nb ки", "value": ["+", "-"]}
    with pytest.raises(PrmkitError, match=r"trace pb: step 2 has no label"):
        OpenRLHFFormat(unlabeled="error").encode(t)
    t.steps[0].labels = []
    with pytest.raises(PrmkitError, match=r"trace pb: step 0 has no label"):
        OpenRLHFFormat().encode(t)
    t.steps[0].labels = [StepLabel(0)]
    assert OpenRLHFFormat().encode(t)["value"] == ["+", "-"]
    with pytest.raises(PrmkitError, match="step 0"):
        OpenRLHFFormat(neutral="ignore").encode(t)


def test_custom_keys_token_and_reward_tokens():
    rec = {"text": "Find y.\ny = 2 <step>\nDone <step>", "labels": ["good", "bad"]}
    opts = dict(input_key="text", label_key="labels", placeholder_token="<step>",
                reward_tokens=("good", "bad"), label_source="human", labeler="ann")
    [t] = decode(rec, **opts)
    assert [s.text for s in t.steps] == ["y = 2", "Done"]
    assert [(s.label().value, s.label().source, s.label().labeler) for s in t.steps] == [
        (1, "human", "ann"), (-1, "human", "ann")]
    assert OpenRLHFFormat(**opts).encode(t) == rec


@pytest.mark.parametrize("rec, field, reason", [
    ({"input": "q\na ки\nb ки", "value": ["+"]}, "value", "1 labels for 2 placeholders"),
    ({"input": "q\na ки", "value": ["+", "-"]}, "value", "2 labels for 1 placeholders"),
    ({"input": "q\na ки\nb ки", "value": ["+", "?"]}, "value[1]", "'?' is not a reward token"),
    ({"input": "q\na ки\nb ки", "value": ["+", 0.5]}, "value[0]", "expected number"),
    ({"input": "q\na ки", "value": [1.5]}, "value[0]", "lies in [0, 1]"),
    ({"input": "q\na ки", "value": [True]}, "value[0]", "expected number"),
    ({"input": "no placeholder", "value": []}, "input", "no step tag"),
    ({"input": "q\na ки", "value": "+"}, "value", "expected list"),
    ({"value": ["+"]}, "input", "missing"),
    ({"input": "q\na ки", "value": ["+"], "x": 1}, "x", "unexpected field"),
])
def test_malformed_records(rec, field, reason):
    with pytest.raises(FormatError) as e:
        decode(rec)
    assert (e.value.path, e.value.line, e.value.field) == ("in.jsonl", 5, field)
    assert reason in e.value.reason


def test_missing_problem_is_an_issue_not_an_error(tmp_path):
    p = tmp_path / "n.jsonl"
    p.write_text(json.dumps({"input": "one step ки", "value": ["+"]}, ensure_ascii=False) + "\n",
                 encoding="utf-8")
    report = ImportReport()
    [t] = read(p, "openrlhf", report=report)
    assert t.problem.text == "" and [s.text for s in t.steps] == ["one step"]
    assert [(e.line, e.field) for e in report.issues] == [(1, "input")]
    assert OpenRLHFFormat().encode(t) == {"input": "one step ки", "value": ["+"]}


def test_bad_options():
    for opts in ({"neutral": "maybe"}, {"unlabeled": "skip"}, {"reward_tokens": ("+", "+")},
                 {"placeholder_token": " "}, {"label_key": "input"}, {"nope": 1}):
        with pytest.raises(PrmkitError):
            get_format("openrlhf", **opts)


def test_detect():
    assert OpenRLHFFormat.detect({"input": "q\na ки", "value": ["+"]})
    assert OpenRLHFFormat.detect({"input": "q Step 1: a ки", "label": "x", "value": ["+"],
                                  "task": "GSM8K"})
    assert not OpenRLHFFormat.detect({"input": "q Step 1: a ки", "label": "q Step 1: a +"})
    assert not OpenRLHFFormat.detect({"prompt": "q", "completions": ["a"], "labels": [True]})


@pytest.mark.realdata
def test_math_shepherd_rows_as_openrlhf(shared_data, tmp_path):
    """Real Math-Shepherd rows in OpenRLHF's training shape (input + a '+'/'-' list, as in
    OpenRLHF's example dataset) read back with the same steps and labels, and round trip."""
    src = shared_data / "math_shepherd_sample" / "samples_math-shepherd.jsonl"
    shepherd = list(read(src, "math_shepherd"))
    path = tmp_path / "openrlhf.jsonl"
    assert write(shepherd, path, "openrlhf") == 7
    recs = records(path)
    assert [r["input"] for r in recs] == [json.loads(x)["input"] for x in src.open(encoding="utf-8")]
    assert detect_format(path) == "openrlhf"
    traces = list(read(path, "openrlhf"))
    for a, b, rec in zip(shepherd, traces, recs, strict=True):
        assert [s.text for s in a.steps] == [s.text for s in b.steps]
        assert [lab.value for lab in a.labels()] == [lab.value for lab in b.labels()]
        assert a.problem.text == b.problem.text
        assert OpenRLHFFormat().encode(b) == rec
