"""PRMBench: 1-based error steps, out-of-range indices, verbatim round trips, the original solution.

Expected values are derived by hand from tests/fixtures/prmbench/mini.jsonl. The out-of-range
count over the real files was measured on the 16 files in shared/data (SOURCE.md's 100 rows are
over the full 25-file release).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from prmkit._fields import Fields
from prmkit._jsonio import iter_json_records
from prmkit.data import ImportReport, detect_format, get_format, read
from prmkit.data._prmbench import PRMBenchFormat, prmbench_original
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace


@pytest.fixture()
def mini(fixtures: Path) -> Path:
    return fixtures / "prmbench" / "mini.jsonl"


def values(trace: Trace) -> list[float | None]:
    return [None if lab is None else lab.value for lab in trace.labels()]


def raw(path: Path) -> dict[int, dict[str, Any]]:
    return dict(iter_json_records(path))


# id: (label values, first_error, out-of-range values or None)
MINI = {
    "counterfactual_prm_test_p1_42": ([1, -1, -1, 1], 1, None),
    "missing_condition_prm_train_p1_7": ([1, -1, 1], 1, [5]),
    "multi_solutions_prm_test_p1_3": ([1, 1], -1, None),
    "step_contradiction_prm_test_p1_9": ([1, 1, 1, -1, 1], 3, [6, 7]),
    "redundency_prm_test_p1_42": ([1, -1, 1, 1, 1], 1, None),
}


def test_fixture_hand_derived(mini):
    report = ImportReport()
    traces = list(read(mini, "prmbench", report=report))
    assert [t.id for t in traces] == list(MINI)
    for t in traces:
        labels, first_error, out_of_range = MINI[t.id]
        assert values(t) == labels, t.id
        assert t.first_error() == first_error
        assert t.meta["prmbench"].get("out_of_range") == out_of_range
        assert all(lab.source == "synthetic" and lab.labeler == "prmbench"
                   for s in t.steps for lab in s.labels)
        assert t.source == "prmbench" and t.outcome == "unknown"
    first = traces[0]
    assert first.problem.text == "A shirt costs $20 and is discounted by 25%. What is the sale price?"
    assert first.problem.id == "prm_test_p1_42" == traces[4].problem.id
    assert first.steps[1].text == "25% of 20 is 4."
    m = first.meta["prmbench"]
    assert m["classification"] == "counterfactual"
    assert m["error_steps"] == [3, 2] and m["modified_steps"] == [2, 3, 4]
    assert m["original_process"][1] == "25% of 20 is 5."
    assert m["reason"].startswith("Step 2 miscomputes")
    # "Step k." prefixes are kept verbatim.
    assert traces[3].steps[0].text == "Step 1. Subtract 3 from both sides."
    assert (report.records, report.traces, report.skipped) == (5, 5, [])


def test_out_of_range_indices_are_reported_with_their_location(mini):
    report = ImportReport()
    list(read(mini, "prmbench", report=report))
    assert [(e.line, e.field) for e in report.issues] == [
        (2, "error_steps[1]"), (4, "error_steps[1]"), (4, "error_steps[2]")]
    assert all(e.path == str(mini) for e in report.issues)
    assert "step 5 is not one of the 3 steps" in report.issues[0].reason


def test_out_of_range_skip(mini):
    report = ImportReport()
    traces = list(read(mini, "prmbench", out_of_range="skip", report=report))
    assert [t.id for t in traces] == ["counterfactual_prm_test_p1_42",
                                      "multi_solutions_prm_test_p1_3", "redundency_prm_test_p1_42"]
    assert [(e.line, e.field) for e in report.skipped] == [(2, "error_steps[1]"),
                                                           (4, "error_steps[1]")]
    assert report.issues == [] and (report.records, report.traces) == (5, 3)


def test_out_of_range_error(mini):
    with pytest.raises(FormatError) as e:
        list(read(mini, "prmbench", out_of_range="error"))
    assert (e.value.path, e.value.line, e.value.field) == (str(mini), 2, "error_steps[1]")
    report = ImportReport()
    got = list(read(mini, "prmbench", out_of_range="error", skip_invalid=True, report=report))
    assert len(got) == 3 and [e.line for e in report.skipped] == [2, 4]


def test_unknown_out_of_range_policy():
    with pytest.raises(PrmkitError, match="out_of_range must be one of"):
        get_format("prmbench", out_of_range="drop")


def test_round_trip_is_verbatim(fixtures):
    for path in sorted((fixtures / "prmbench").glob("*.jsonl")):
        fmt = PRMBenchFormat(keep_extra=path.name == "extra_fields.jsonl")
        for line, rec in iter_json_records(path):
            original = copy.deepcopy(rec)
            [t] = fmt.decode(Fields(rec, path=str(path), line=line))
            assert rec == original, "decode must not change its input"
            back = json.loads(json.dumps(fmt.encode(t)))
            assert back == original, (path.name, line)
            # Order and out-of-range values of error_steps survive.
            assert back["error_steps"] == original["error_steps"]


def test_export_follows_edited_labels_and_text(mini):
    fmt = PRMBenchFormat()
    traces = {t.id: t for t in read(mini, "prmbench")}
    t = traces["counterfactual_prm_test_p1_42"]
    t.steps[3].labels.append(StepLabel(-1, source="judge"))
    t.steps[0].text = "25% of $20 is the discount."
    rec = fmt.encode(t)
    assert rec["error_steps"] == [2, 3, 4]  # edited: sorted, from the labels
    assert rec["modified_process"][0] == "25% of $20 is the discount."
    # Out-of-range values are kept after the edited in-range ones.
    t = traces["step_contradiction_prm_test_p1_9"]
    t.steps[0].labels = [StepLabel(-1)]
    assert fmt.encode(t)["error_steps"] == [1, 4, 6, 7]
    # Clearing the only error; soft and neutral labels count by their verdict.
    t = traces["missing_condition_prm_train_p1_7"]
    t.steps[1].labels = [StepLabel(0)]
    t.steps[2].labels = [StepLabel(0.2, source="mc_soft", kind="soft")]
    assert fmt.encode(t)["error_steps"] == [3, 5]
    t.problem.text = "A rectangle is 4 cm wide and 6 cm long. What is its area?"
    assert fmt.encode(t)["modified_question"] == t.problem.text


def test_export_needs_a_label_on_every_step(mini):
    t = next(iter(read(mini, "prmbench")))
    t.steps[2].labels = []
    with pytest.raises(PrmkitError, match="step 2 has no label"):
        PRMBenchFormat().encode(t)


def test_multi_solutions_shape(mini):
    t = {t.id: t for t in read(mini, "prmbench")}["multi_solutions_prm_test_p1_3"]
    assert t.problem.answer == "56"
    assert t.meta["prmbench"]["original_response"].startswith("        Step 1. 7 * 8")
    assert t.meta["prmbench"]["error_steps"] == [] and t.first_error() == -1
    rec = PRMBenchFormat().encode(t)
    assert rec["ground_truth"] == "56" and rec == raw(mini)[3]


def test_null_ground_truth_round_trips(mini):
    rec = {**raw(mini)[3], "ground_truth": None, "original_response": None}
    [t] = PRMBenchFormat().decode(Fields(copy.deepcopy(rec)))
    assert t.problem.answer is None
    assert PRMBenchFormat().encode(t) == rec


def test_original_solution(mini):
    traces = list(read(mini, "prmbench"))
    o = prmbench_original(traces[0])
    assert o.id == "correct_prm_test_p1_42"
    assert [s.text for s in o.steps] == ["The discount is 25% of $20.", "25% of 20 is 5.",
                                         "The sale price is 20 - 5 = 15.", "So the sale price is $15."]
    assert values(o) == [1, 1, 1, 1] and o.first_error() == -1
    assert o.problem.text == traces[0].meta["prmbench"]["original_question"]
    assert o.meta["prmbench"]["classification"] == "correct"
    assert o.meta["prmbench"]["original_of"] == "counterfactual_prm_test_p1_42"
    assert o.provenance[-1].stage == "derive"
    # The classes of one question share one original.
    originals = {x.id: x for x in map(prmbench_original, traces)}
    assert sorted(originals) == ["correct_prm_test_p1_3", "correct_prm_test_p1_42",
                                 "correct_prm_test_p1_9", "correct_prm_train_p1_7"]
    with pytest.raises(PrmkitError, match="not a PRMBench trace"):
        prmbench_original(Trace(id="x", problem=Problem("q"), steps=[Step("a")]))


def test_keep_extra(fixtures):
    path = fixtures / "prmbench" / "extra_fields.jsonl"
    with pytest.raises(FormatError) as e:
        list(read(path, "prmbench"))
    assert (e.value.line, e.value.field) == (1, "annotator")
    [t] = read(path, "prmbench", keep_extra=True)
    assert t.meta["prmbench"]["extra"] == {"difficulty": "easy", "annotator": {"id": 3}}
    assert PRMBenchFormat().encode(t) == raw(path)[1]


def test_trace_from_elsewhere_exports():
    t = Trace(id="t9", problem=Problem("q"), steps=[Step("a", labels=[StepLabel(1)]),
                                                    Step("b", labels=[StepLabel(-1)])])
    rec = PRMBenchFormat().encode(t)
    assert rec["error_steps"] == [2] and rec["modified_process"] == ["a", "b"]
    assert rec["idx"] == "t9" and rec["classification"] == "unknown"
    [back] = PRMBenchFormat().decode(Fields(rec))
    assert values(back) == [1, -1]


def test_detect(mini):
    rec = raw(mini)[1]
    assert PRMBenchFormat.detect(rec)
    assert not PRMBenchFormat.detect({"id": "a", "problem": "q", "steps": []})
    assert not PRMBenchFormat.detect({"id": "a", "generator": "g", "problem": "q", "steps": ["s"],
                                      "final_answer_correct": True, "label": 0})
    assert not PRMBenchFormat.detect({"problem": "q", "solution": "s", "answer": "1"})
    assert not PRMBenchFormat.detect(None)


GOOD: dict[str, Any] = {
    "original_question": "q", "modified_question": "q", "original_process": ["a", "b"],
    "modified_process": ["a", "c"], "modified_steps": [2], "error_steps": [2], "reason": "r",
    "idx": "i", "question": "q", "classification": "counterfactual"}
ERRORS = [
    ({"modified_process": []}, "modified_process"),
    ({"modified_process": ["a", None]}, "modified_process[1]"),
    ({"error_steps": ["2"]}, "error_steps[0]"),
    ({"error_steps": [2.0]}, "error_steps[0]"),
    ({"error_steps": [True]}, "error_steps[0]"),
    ({"error_steps": 2}, "error_steps"),
    ({"modified_steps": [None]}, "modified_steps[0]"),
    ({"original_process": "a b"}, "original_process"),
    ({"classification": None}, "classification"),
    ({"idx": 3}, "idx"),
    ({"reason": None}, "reason"),
    ({"ground_truth": 56}, "ground_truth"),
    ({"original_response": ["x"]}, "original_response"),
    ({"label": 1}, "label"),
]


@pytest.mark.parametrize("change,field", ERRORS)
def test_malformed_rows_name_the_field(change, field):
    with pytest.raises(FormatError) as e:
        PRMBenchFormat().decode(Fields({**GOOD, **change}, path="pb.jsonl", line=12))
    assert (e.value.path, e.value.line, e.value.field) == ("pb.jsonl", 12, field)


@pytest.mark.parametrize("key", sorted(GOOD))
def test_missing_fields_name_the_field(key):
    with pytest.raises(FormatError) as e:
        PRMBenchFormat().decode(Fields({k: v for k, v in GOOD.items() if k != key}))
    assert e.value.field == key


@pytest.mark.parametrize("index", [0, -1, 3])
def test_indices_outside_one_to_n_are_out_of_range(index):
    fmt = PRMBenchFormat()
    [t] = fmt.decode(Fields({**GOOD, "error_steps": [index]}, path="p", line=1))
    assert t.meta["prmbench"]["out_of_range"] == [index] and values(t) == [1, 1]
    assert [e.field for e in fmt.report.issues] == ["error_steps[0]"]
    assert fmt.encode(t)["error_steps"] == [index]


def test_skip_mode_decode_returns_nothing_and_counts():
    fmt = PRMBenchFormat(out_of_range="skip")
    assert fmt.decode(Fields({**GOOD, "error_steps": [9]}, path="p", line=4)) == []
    assert [(e.line, e.field) for e in fmt.report.skipped] == [(4, "error_steps[0]")]


# -- the real files ----------------------------------------------------------------------------------

#: Rows of the 16 files whose error_steps name a step past the end of modified_process, and how
#: many such indices they hold (measured; SOURCE.md's 100 rows are over all 25 files).
REAL_OUT_OF_RANGE_ROWS = 78
REAL_OUT_OF_RANGE_INDICES = 117


@pytest.mark.realdata
def test_real_files(shared_data):
    files = sorted((shared_data / "prmbench").glob("*.jsonl"))
    assert len(files) == 16
    report = ImportReport()
    fmt = PRMBenchFormat()
    traces = []
    for path in files:
        rows = raw(path)
        for t in read(path, "prmbench", report=report):
            line = t.provenance[0].args["line"]
            assert json.loads(json.dumps(fmt.encode(t))) == rows[line]
            traces.append(t)
    assert len(traces) == 3921 and report.skipped == []
    assert len({(e.path, e.line) for e in report.issues}) == REAL_OUT_OF_RANGE_ROWS
    assert len(report.issues) == REAL_OUT_OF_RANGE_INDICES
    assert sum("out_of_range" in t.meta["prmbench"] for t in traces) == REAL_OUT_OF_RANGE_ROWS
    assert all(e.field.startswith("error_steps[") for e in report.issues)
    # Ids are unique over the files (idx repeats across the classes).
    assert len({t.id for t in traces}) == 3921
    assert len({t.problem.id for t in traces}) < 3921
    assert Counter(t.meta["prmbench"]["classification"] for t in traces) == {
        "circular": 491, "counterfactual": 491, "redundency": 491, "step_contradiction": 491,
        "confidence": 490, "domain_inconsistency": 490, "missing_condition": 490, "deception": 487}
    # Every step is labelled: -1 exactly at the in-range error steps.
    t = next(t for t in traces if t.id == "circular_prm_test_p1_0")
    assert values(t) == [1, 1, -1, -1, -1, 1, 1]


@pytest.mark.realdata
def test_real_files_skip_mode(shared_data):
    report = ImportReport()
    n = sum(1 for path in sorted((shared_data / "prmbench").glob("*.jsonl"))
            for _ in read(path, "prmbench", out_of_range="skip", report=report))
    assert n == 3921 - REAL_OUT_OF_RANGE_ROWS
    assert len(report.skipped) == REAL_OUT_OF_RANGE_ROWS and report.issues == []


@pytest.mark.realdata
def test_real_rows_are_detected(shared_data):
    for path in sorted((shared_data / "prmbench").glob("*.jsonl")):
        assert PRMBenchFormat.detect(next(iter_json_records(path))[1])
        # No format registered before PRMBench claims its rows.
        assert detect_format(path) == "prmbench"
