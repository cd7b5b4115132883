"""The Trace record: construction, label helpers, JSON round trips, streaming JSONL."""

from __future__ import annotations

import gzip
import json

import pytest

from prmkit import FormatError, Problem, Provenance, Step, StepLabel, Trace, read_traces, write_traces


def full_trace() -> Trace:
    text = "Plan: add.\n\n2+2=4\n\nThe answer is 4."
    return Trace(
        id="t-1",
        problem=Problem("What is 2+2?", answer="4", solution="2+2=4", id="p1", meta={"level": 1}),
        steps=[
            Step("Plan: add.", kind="plan", span=(0, 10),
                 labels=[StepLabel(1, source="human", labeler="ann-7", time="2024-01-01T00:00:00")]),
            Step("2+2=4", span=(12, 17),
                 labels=[StepLabel(0.75, source="mc_soft", kind="soft", labeler="mc",
                                   args={"k": 8}, model="smollm2", rollouts=8,
                                   cost={"tokens": 120.0, "seconds": 1.5})],
                 scores={"prm": 0.9}),
            Step("The answer is 4.", kind="final", span=(19, 35), meta={"x": [1, 2]}),
        ],
        final_answer="4", outcome="correct", source="unit", text=text, meta={"k": "v"},
        provenance=[Provenance("import", "hand", {"a": 1}, "0.1.0", "2024-01-01T00:00:00")],
    )


def test_round_trip_dict_and_json_lossless():
    t = full_trace()
    t.check_spans()
    d = t.to_dict()
    assert Trace.from_dict(json.loads(json.dumps(d))) == t


def test_first_error_and_labels():
    t = Trace(id="a", problem=Problem("q"), steps=[
        Step("a", labels=[StepLabel(1)]), Step("b", labels=[StepLabel(-1)]), Step("c")])
    assert t.first_error() == 1
    t.steps[1].labels.append(StepLabel(0.9, source="mc_soft", kind="soft"))
    # The latest label wins; a soft 0.9 is positive, and step c is unlabelled.
    assert t.first_error() is None
    assert t.first_error(source="human") == 1
    ok = Trace(id="b", problem=Problem("q"), steps=[Step("a", labels=[StepLabel(1)])])
    assert ok.first_error() == -1


def test_neutral_label_is_not_a_verdict():
    assert StepLabel(0).positive is None
    assert StepLabel(1).positive is True
    assert StepLabel(0.49, kind="soft").positive is False


@pytest.mark.parametrize("bad", [2, 0.5, -3])
def test_hard_label_values_checked(bad):
    with pytest.raises(ValueError):
        StepLabel(bad)


def test_streaming_jsonl_round_trip(tmp_path):
    traces = [full_trace() for _ in range(3)]
    for i, t in enumerate(traces):
        t.id = f"t{i}"
    for name in ("a.jsonl", "a.jsonl.gz"):
        p = tmp_path / name
        assert write_traces(iter(traces), p) == 3
        assert list(read_traces(p)) == traces
    with gzip.open(tmp_path / "a.jsonl.gz", "rt", encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 3


def test_read_traces_is_lazy(tmp_path):
    p = tmp_path / "t.jsonl"
    write_traces([full_trace()], p)
    with open(p, "a", encoding="utf-8") as f:
        f.write("{not json\n")
    it = read_traces(p)
    assert next(it).id == "t-1"  # the good line is served before the bad one is read
    with pytest.raises(FormatError) as e:
        next(it)
    assert e.value.line == 2 and e.value.path == str(p)


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("id"), "id"),
    (lambda d: d["steps"][1].update(kind="thought"), "steps[1].kind"),
    (lambda d: d["steps"][1]["labels"][0].update(value="yes"), "steps[1].labels[0].value"),
    (lambda d: d["steps"][0]["labels"][0].update(value=0.5), "steps[0].labels[0].value"),
    (lambda d: d["steps"][0].update(span=[0, 3]), "steps[0].span"),
    (lambda d: d.update(surprise=1), "surprise"),
    (lambda d: d.update(outcome="maybe"), "outcome"),
    (lambda d: d["steps"][1]["scores"].update(prm="high"), "steps[1].scores.prm"),
])
def test_malformed_trace_names_field(mutate, field):
    d = full_trace().to_dict()
    mutate(d)
    with pytest.raises(FormatError) as e:
        Trace.from_dict(d, path="x.jsonl", line=7)
    assert e.value.field == field
    assert str(e.value).startswith("x.jsonl:7: ")
