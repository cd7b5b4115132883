"""ProcessBench: labels up to the first wrong step, outcome, generator, export from labels, errors.

Expected values are derived by hand from tests/fixtures/processbench/mini.json; the real-data counts
are those of shared/data/processbench/SOURCE.md.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from prmkit._fields import Fields
from prmkit.data import ImportReport, detect_format, get_format, read, write
from prmkit.data._processbench import ProcessBenchFormat
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace


@pytest.fixture()
def mini(fixtures: Path) -> Path:
    return fixtures / "processbench" / "mini.json"


def values(trace: Trace) -> list[float | None]:
    return [None if lab is None else lab.value for lab in trace.labels()]


# id: (label values, first_error, outcome, generator)
MINI = {
    "mini-0": ([1, 1, 1], -1, "correct", "Qwen2-7B-Instruct"),
    "mini-1": ([-1, None], 0, "incorrect", "Meta-Llama-3-8B-Instruct"),
    "mini-2": ([1, 1, -1], 2, "incorrect", "Qwen2-7B-Instruct"),
    "mini-3": ([1, -1, None, None], 1, "correct", "Qwen2-7B-Instruct"),  # wrong step, right answer
}


def test_fixture_hand_derived(mini):
    traces = list(read(mini, "processbench"))
    assert [t.id for t in traces] == list(MINI)
    for t in traces:
        labels, first_error, outcome, generator = MINI[t.id]
        assert values(t) == labels, t.id
        assert t.first_error() == first_error
        assert t.outcome == outcome
        assert t.meta["processbench"]["generator"] == generator
        assert t.source == "processbench"
        assert all(lab.source == "human" and lab.labeler == "processbench" and lab.kind == "hard"
                   for s in t.steps for lab in s.labels)
    assert traces[3].problem.text == "What is 15% of 80?"
    assert traces[3].steps[1].text == "0.15 * 80 = 120."
    # Per-generator breakdown straight from the traces.
    assert Counter(t.meta["processbench"]["generator"] for t in traces) == {
        "Qwen2-7B-Instruct": 3, "Meta-Llama-3-8B-Instruct": 1}


def test_lines_point_at_each_element(mini):
    report = ImportReport()
    traces = list(read(mini, "processbench", report=report))
    assert [t.provenance[0].args["line"] for t in traces] == [2, 14, 25, 37]  # the lines of the opening braces
    assert (report.records, report.traces) == (4, 4)


def test_round_trip_and_array_write(mini, tmp_path):
    raw = json.loads(mini.read_text(encoding="utf-8"))
    fmt = ProcessBenchFormat()
    traces = []
    for i, rec in enumerate(raw):
        original = copy.deepcopy(rec)
        [t] = fmt.decode(Fields(rec, path=str(mini), line=i))
        assert rec == original
        assert json.loads(json.dumps(fmt.encode(t))) == original
        traces.append(t)
    out = tmp_path / "out.json"
    assert write(traces, out, "processbench") == 4
    assert json.loads(out.read_text(encoding="utf-8")) == raw  # one JSON array, as the source


def test_export_follows_edited_labels_and_text(mini):
    fmt = ProcessBenchFormat()
    traces = {t.id: t for t in read(mini, "processbench")}
    t = traces["mini-0"]
    t.steps[1].labels.append(StepLabel(-1, source="judge", labeler="me"))
    t.steps[2].text = "So \\boxed{19} pens."
    rec = fmt.encode(t)
    assert rec["label"] == 1 and rec["steps"][2] == "So \\boxed{19} pens."
    # Labelling the steps after the first error does not change the label.
    t = traces["mini-3"]
    t.steps[2].labels.append(StepLabel(1))
    t.steps[3].labels.append(StepLabel(-1))
    assert fmt.encode(t)["label"] == 1
    # A neutral label is not an error.
    t = traces["mini-2"]
    t.steps[2].labels = [StepLabel(0)]
    assert fmt.encode(t)["label"] == -1
    t.outcome = "correct"
    assert fmt.encode(t)["final_answer_correct"] is True


def test_export_refuses_what_it_cannot_express(mini):
    fmt = ProcessBenchFormat()
    t = next(iter(read(mini, "processbench")))
    t.steps[1].labels = []
    with pytest.raises(PrmkitError, match="step 1 has no label"):
        fmt.encode(t)
    t = next(iter(read(mini, "processbench")))
    t.outcome = "unknown"
    with pytest.raises(PrmkitError, match="outcome is unknown"):
        fmt.encode(t)
    with pytest.raises(PrmkitError, match="no steps"):
        fmt.encode(Trace(id="x", problem=Problem("q"), outcome="correct"))


def test_trace_from_elsewhere_uses_its_source_as_generator():
    t = Trace(id="x", problem=Problem("q"), steps=[Step("a", labels=[StepLabel(1)]),
                                                   Step("b", labels=[StepLabel(-1)])],
              outcome="incorrect", source="smollm2")
    assert ProcessBenchFormat().encode(t) == {
        "id": "x", "generator": "smollm2", "problem": "q", "steps": ["a", "b"],
        "final_answer_correct": False, "label": 1}
    t.source = None
    with pytest.raises(PrmkitError, match="no generator"):
        ProcessBenchFormat().encode(t)


def test_keep_extra(fixtures):
    path = fixtures / "processbench" / "extra_fields.json"
    with pytest.raises(FormatError) as e:
        list(read(path, "processbench"))
    assert (e.value.line, e.value.field) == (2, "annotator_agreement")
    [t] = read(path, "processbench", keep_extra=True)
    assert t.meta["processbench"]["extra"] == {"split": "gsm8k", "annotator_agreement": 3}
    assert ProcessBenchFormat().encode(t) == json.loads(path.read_text(encoding="utf-8"))[0]


def test_detect():
    rec = {"id": "a", "generator": "g", "problem": "q", "steps": ["s"],
           "final_answer_correct": True, "label": 0}
    assert ProcessBenchFormat.detect(rec)
    assert not ProcessBenchFormat.detect({"id": "a", "problem": "q", "steps": [{"text": "s"}]})
    assert not ProcessBenchFormat.detect({"prompt": "q", "completions": ["s"], "labels": [True]})
    assert not ProcessBenchFormat.detect({"labeler": "x", "question": {}, "label": {"steps": []}})
    assert not ProcessBenchFormat.detect({"question": "q", "answer": "a"})
    assert not ProcessBenchFormat.detect("x")


GOOD: dict[str, Any] = {"id": "g-1", "generator": "g", "problem": "q", "steps": ["a", "b", "c"],
                        "final_answer_correct": False, "label": 1}
ERRORS = [
    ({"label": 3}, "label"),
    ({"label": -2}, "label"),
    ({"label": True}, "label"),
    ({"label": "1"}, "label"),
    ({"label": 1.0}, "label"),
    ({"steps": []}, "steps"),
    ({"steps": ["a", 2, "c"]}, "steps[1]"),
    ({"steps": "a. b. c."}, "steps"),
    ({"final_answer_correct": "yes"}, "final_answer_correct"),
    ({"final_answer_correct": None}, "final_answer_correct"),
    ({"generator": None}, "generator"),
    ({"id": 7}, "id"),
    ({"problem": {"text": "q"}}, "problem"),
    ({"annotations": []}, "annotations"),
]


@pytest.mark.parametrize("change,field", ERRORS)
def test_malformed_elements_name_the_field(change, field):
    rec = {**GOOD, **change}
    with pytest.raises(FormatError) as e:
        ProcessBenchFormat().decode(Fields(rec, path="pb.json", line=40))
    assert (e.value.path, e.value.line, e.value.field) == ("pb.json", 40, field)


@pytest.mark.parametrize("key", sorted(GOOD))
def test_missing_fields_name_the_field(key):
    rec = {k: v for k, v in GOOD.items() if k != key}
    with pytest.raises(FormatError) as e:
        ProcessBenchFormat().decode(Fields(rec, path="pb.json", line=1))
    assert e.value.field == key


def test_label_bounds_are_inclusive():
    for label in (-1, 0, 2):
        [t] = ProcessBenchFormat().decode(Fields({**GOOD, "label": label}))
        assert t.first_error() == label


def test_skip_invalid_counts_bad_elements(tmp_path, mini):
    raw = json.loads(mini.read_text(encoding="utf-8"))
    raw[1]["label"] = 9
    p = tmp_path / "pb.json"
    p.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    report = ImportReport()
    got = list(read(p, "processbench", skip_invalid=True, report=report))
    assert [t.id for t in got] == ["mini-0", "mini-2", "mini-3"]
    assert [e.field for e in report.skipped] == ["label"]
    assert get_format("processbench").container == "array"


# -- the real splits ---------------------------------------------------------------------------------

@pytest.mark.realdata
@pytest.mark.parametrize("split,items,no_error,wrong_but_correct", [
    ("math", 1000, 406, 94), ("gsm8k", 400, 193, 7)])
def test_real_splits(shared_data, split, items, no_error, wrong_but_correct):
    path = shared_data / "processbench" / f"{split}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    fmt = ProcessBenchFormat()
    traces = list(read(path, "processbench"))
    assert len(traces) == items
    assert sum(t.first_error() == -1 for t in traces) == no_error
    assert sum(t.first_error() != -1 and t.outcome == "correct" for t in traces) == wrong_but_correct
    for t, rec in zip(traces, raw, strict=True):
        assert fmt.encode(t) == rec
    generators = Counter(t.meta["processbench"]["generator"] for t in traces)
    assert sum(generators.values()) == items and len(generators) >= 10


@pytest.mark.realdata
def test_real_splits_are_detected(shared_data):
    for split in ("gsm8k", "math"):
        assert detect_format(shared_data / "processbench" / f"{split}.json") == "processbench"


@pytest.mark.realdata
def test_real_math_688_is_the_corrected_label(shared_data):
    # SOURCE.md: this copy carries the fix of QwenLM/ProcessBench#9 (label 2 -> 0).
    t = next(t for t in read(shared_data / "processbench" / "math.json", "processbench")
             if t.id == "math-688")
    assert t.first_error() == 0 and values(t)[0] == -1
    assert all(v is None for v in values(t)[1:])
