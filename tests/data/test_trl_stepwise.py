"""TRL stepwise supervision: reading, label provenance, truncation on export, errors."""

from __future__ import annotations

import json

import pytest

from prmkit._fields import Fields
from prmkit.data import detect_format, get_format, read, write
from prmkit.data._trl_stepwise import TRLStepwiseFormat
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture()
def sample(fixtures):
    return fixtures / "trl_stepwise" / "sample.jsonl"


def test_fixture_steps_and_labels(sample):
    t1, t2, t3 = read(sample, "trl_stepwise", keep_extra=True)
    assert t1.id == "sample.jsonl:1" and t1.problem.text == "Which is larger, 0.7 or 0.65?"
    assert [s.text for s in t1.steps] == [
        "Compare tenths: 0.7 has 7 tenths and 0.65 has 6 tenths.", "So 0.65 is larger."]
    assert [s.label().value for s in t1.steps] == [1, -1]
    assert t1.first_error() == 1
    lab = t1.steps[0].labels[0]
    assert (lab.kind, lab.source, lab.labeler) == ("hard", "human", None)
    assert (t2.first_error(), len(t2.steps), t2.text) == (-1, 3, None)
    assert t3.meta == {"trl_stepwise": {"extra": {"source": "hand-written", "difficulty": 2}}}
    assert t3.provenance[0].args["keep_extra"] is True


def test_unknown_keys_are_an_error_by_default(sample):
    with pytest.raises(FormatError) as e:
        list(read(sample, "trl_stepwise"))
    assert (e.value.line, e.value.field, e.value.reason) == (3, "difficulty",
                                                             "unexpected field (also source)")


def test_round_trip(sample, tmp_path):
    traces = list(read(sample, "trl_stepwise", keep_extra=True))
    assert [TRLStepwiseFormat().encode(t) for t in traces] == records(sample)
    write(traces, tmp_path / "o.jsonl", "trl_stepwise")
    assert records(tmp_path / "o.jsonl") == records(sample)


def test_label_source_and_labeler_options(sample):
    t = next(read(sample, "trl_stepwise", label_source="mc_hard", labeler="math-shepherd"))
    assert {(lab.source, lab.labeler) for lab in t.labels()} == {("mc_hard", "math-shepherd")}


def test_edits_show(sample):
    t = next(read(sample, "trl_stepwise"))
    t.steps[1].text = "So 0.7 is larger."
    t.steps[1].labels.append(StepLabel(1, source="judge"))
    t.problem.text = "0.7 or 0.65: which is larger?"
    assert TRLStepwiseFormat().encode(t) == {
        "prompt": "0.7 or 0.65: which is larger?",
        "completions": ["Compare tenths: 0.7 has 7 tenths and 0.65 has 6 tenths.", "So 0.7 is larger."],
        "labels": [True, True]}


def _processbench_like() -> Trace:
    return Trace(id="pb-1", problem=Problem("q"), steps=[
        Step("a", labels=[StepLabel(1)]), Step("b", labels=[StepLabel(-1)]), Step("c"), Step("d")])


def test_unlabelled_steps_after_the_first_error_are_cut():
    rec = TRLStepwiseFormat().encode(_processbench_like())
    assert rec == {"prompt": "q", "completions": ["a", "b"], "labels": [True, False]}
    with pytest.raises(PrmkitError, match=r"trace pb-1: step 2 has no label .*unlabeled='error'"):
        TRLStepwiseFormat(unlabeled="error").encode(_processbench_like())


def test_unlabelled_step_before_any_error_fails():
    t = _processbench_like()
    t.steps[0].labels = []
    with pytest.raises(PrmkitError, match=r"trace pb-1: step 0 has no label"):
        TRLStepwiseFormat().encode(t)
    t = Trace(id="ok", problem=Problem("q"), steps=[Step("a", labels=[StepLabel(1)]), Step("b")])
    with pytest.raises(PrmkitError, match=r"trace ok: step 1 has no label"):
        TRLStepwiseFormat().encode(t)


def test_neutral_and_soft_labels():
    t = Trace(id="n", problem=Problem("q"), steps=[
        Step("a", labels=[StepLabel(0)]), Step("b", labels=[StepLabel(0.4, kind="soft")])])
    assert TRLStepwiseFormat().encode(t)["labels"] == [True, False]
    assert TRLStepwiseFormat(threshold=0.3).encode(t)["labels"] == [True, True]
    assert TRLStepwiseFormat(neutral="negative").encode(t)["labels"] == [False, False]
    with pytest.raises(PrmkitError, match="step 0"):
        TRLStepwiseFormat(neutral="ignore").encode(t)


@pytest.mark.parametrize("rec, field, reason", [
    ({"prompt": "q", "completions": ["a", "b"], "labels": [True]}, "labels",
     "1 labels for 2 completions"),
    ({"prompt": "q", "completions": [], "labels": []}, "completions", "empty"),
    ({"prompt": "q", "completions": ["a"], "labels": [1]}, "labels[0]", "expected boolean"),
    ({"prompt": "q", "completions": ["a", 2], "labels": [True, True]}, "completions[1]",
     "expected string"),
    ({"prompt": [{"role": "user", "content": "q"}], "completions": ["a"], "labels": [True]},
     "prompt", "expected string"),
    ({"completions": ["a"], "labels": [True]}, "prompt", "missing"),
])
def test_malformed_records(rec, field, reason):
    with pytest.raises(FormatError) as e:
        TRLStepwiseFormat().decode(Fields(rec, path="in.jsonl", line=2))
    assert (e.value.path, e.value.line, e.value.field) == ("in.jsonl", 2, field)
    assert reason in e.value.reason


def test_bad_options():
    for opts in ({"neutral": "x"}, {"unlabeled": "drop"}):
        with pytest.raises(PrmkitError):
            get_format("trl_stepwise", **opts)


def test_detect():
    assert TRLStepwiseFormat.detect({"prompt": "q", "completions": ["a"], "labels": [True]})
    assert not TRLStepwiseFormat.detect({"prompt": "q", "completions": ["a"], "labels": [1]})
    assert not TRLStepwiseFormat.detect({"prompt": "q", "chosen": "a", "rejected": "b"})
    assert not TRLStepwiseFormat.detect({"id": "x", "problem": "p", "steps": ["a"], "label": 0,
                                         "generator": "g", "final_answer_correct": True})


@pytest.mark.realdata
def test_math_shepherd_rows_to_trl_and_back(shared_data, tmp_path):
    src = shared_data / "math_shepherd_sample" / "samples_math-shepherd.jsonl"
    shepherd = list(read(src, "math_shepherd"))
    write(shepherd, tmp_path / "trl.jsonl", "trl_stepwise")
    assert detect_format(tmp_path / "trl.jsonl") == "trl_stepwise"
    back = list(read(tmp_path / "trl.jsonl", "trl_stepwise", label_source="mc_hard"))
    for a, b in zip(shepherd, back, strict=True):
        assert [s.text for s in a.steps] == [s.text for s in b.steps]
        assert [lab.value for lab in a.labels()] == [lab.value for lab in b.labels()]
        assert a.problem.text == b.problem.text
    recs = records(tmp_path / "trl.jsonl")
    assert [TRLStepwiseFormat().encode(t) for t in back] == recs


@pytest.mark.realdata
def test_processbench_export_cuts_after_the_first_error(shared_data, tmp_path):
    """ProcessBench labels steps up to the first error only: the export keeps exactly those."""
    src = shared_data / "processbench" / "gsm8k.json"
    raw = json.loads(src.read_text(encoding="utf-8"))
    traces = list(read(src, "processbench"))
    out = tmp_path / "pb.jsonl"
    assert write(traces, out, "trl_stepwise") == len(raw) == 400
    for rec, trl in zip(raw, records(out), strict=True):
        k = rec["label"]
        n = len(rec["steps"]) if k == -1 else k + 1
        assert trl["completions"] == rec["steps"][:n]
        assert trl["labels"] == [True] * (n if k == -1 else k) + ([] if k == -1 else [False])
