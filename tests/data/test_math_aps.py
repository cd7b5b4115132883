"""MATH-APS: prefix trees read as one trace per leaf, soft labels per entry, lossless regrouping."""

from __future__ import annotations

import json

import pytest

from prmkit._fields import Fields
from prmkit.data import detect_format, get_format, read, write
from prmkit.data._math_aps import MathAPSFormat
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Problem, Step, StepLabel, Trace


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def entries(step):
    return [lab.meta["math_aps"]["entry"] for lab in step.labels]


@pytest.fixture()
def chain(fixtures):
    return fixtures / "math_aps" / "chain.jsonl"


@pytest.fixture()
def tree(fixtures):
    return fixtures / "math_aps" / "tree.jsonl"


def test_a_chain_is_one_trace(chain):
    [t] = read(chain, "math_aps")
    assert t.id == "chain.jsonl:1"
    assert (t.problem.text, t.problem.answer) == ("What is $2 + 3 \\cdot 4$?", "14")
    assert [s.text for s in t.steps] == ["Multiply first: $3 \\cdot 4 = 12$.",
                                         "Then $2 + 12 = \\boxed{14}$."]
    assert [[lab.value for lab in s.labels] for s in t.steps] == [[0.875], [1.0]]
    assert [entries(s) for s in t.steps] == [[1], [2]]
    assert [s.meta["math_aps"]["sep"] for s in t.steps] == ["\n\n", "\n\n"]
    lab = t.steps[0].labels[0]
    assert (lab.kind, lab.source, lab.labeler) == ("soft", "mc_soft", "omegaprm")
    assert t.meta["math_aps"] == {"question_id": 11, "record": "chain.jsonl:1",
                                  "root": [{"entry": 0, "mc_value": 0.5}]}
    assert (t.final_answer, t.first_error(), t.outcome) == ("14", -1, "unknown")
    t.check_spans()
    assert MathAPSFormat().encode(t) == records(chain)[0]


def test_a_tree_is_one_trace_per_leaf(tree):
    t0, t1, t2 = read(tree, "math_aps")
    assert [t.id for t in (t0, t1, t2)] == ["tree.jsonl:1#0", "tree.jsonl:1#1", "tree.jsonl:1#2"]
    # entries 1 and 3 are the same state "A." with two estimates: one step, two labels
    assert [s.text for s in t0.steps] == ["A.", "B1 $\\boxed{4}$"]
    assert [entries(s) for s in t0.steps] == [[1, 3], [2]]
    assert [[lab.value for lab in s.labels] for s in t0.steps] == [[0.5, 0.375], [1.0]]
    assert [s.span for s in t0.steps] == [(4, 6), (8, 22)]
    assert t0.first_error() == 0  # the latest label of step 0 is entry 3's 0.375
    assert [s.text for s in t1.steps] == ["C. $\\boxed{5}$"]
    assert t1.steps[0].meta["math_aps"]["sep"] == "\n\n " and t1.steps[0].span == (5, 19)
    assert [entries(s) for s in t2.steps] == [[1, 3], [5]]
    assert [t.final_answer for t in (t0, t1, t2)] == ["4", "5", "3"]
    for t in (t0, t1, t2):
        t.check_spans()
        assert t.problem.answer == "4"
        assert t.meta["math_aps"]["root"] == [{"entry": 0, "mc_value": 0.25}]


def test_tree_regroups_losslessly(tree, tmp_path):
    fmt = MathAPSFormat()
    traces = list(read(tree, "math_aps"))
    assert fmt.encode_record(traces) == records(tree)[0]
    # one trace alone gives the entries it holds
    assert fmt.encode(traces[1]) == {
        "question": "Q?", "final_answer": "4", "question_id": 12, "reasoning_steps": [
            {"solution_prefix": "Q?", "mc_value": 0.25},
            {"solution_prefix": "Q?\n\n C. $\\boxed{5}$", "mc_value": 0.0}]}
    assert write(traces, tmp_path / "o.jsonl", "math_aps") == 1
    assert records(tmp_path / "o.jsonl") == records(tree)


def test_write_groups_consecutive_records(chain, tree, tmp_path):
    traces = list(read(chain, "math_aps")) + list(read(tree, "math_aps")) + list(read(chain, "math_aps"))
    assert write(traces, tmp_path / "o.jsonl", "math_aps") == 3
    assert records(tmp_path / "o.jsonl") == records(chain) + records(tree) + records(chain)


def test_round_trip_through_prmkit_jsonl(tree, tmp_path):
    write(read(tree, "math_aps"), tmp_path / "t.jsonl", "prmkit")
    write(read(tmp_path / "t.jsonl", "prmkit"), tmp_path / "back.jsonl", "math_aps")
    assert records(tmp_path / "back.jsonl") == records(tree)


def test_edits_show_and_conflicts_fail(tree):
    fmt = MathAPSFormat()
    t0, t1, t2 = read(tree, "math_aps")
    t0.steps[1].labels[0].value = 0.75
    t0.steps[1].text = "B1 gives $\\boxed{4}$"
    rec = fmt.encode_record([t0, t1, t2])
    assert rec["reasoning_steps"][2] == {"solution_prefix": "Q?\n\nA.\n\nB1 gives $\\boxed{4}$",
                                         "mc_value": 0.75}
    # a state shared by two traces edited in one of them only
    t0.steps[0].text = "A!"
    with pytest.raises(PrmkitError, match=r"entry 1 of record tree.jsonl:1 differs between traces "
                                          r"tree.jsonl:1#0 and tree.jsonl:1#2"):
        fmt.encode_record([t0, t1, t2])
    t2.steps[0].text = "A!"  # edited everywhere: every prefix through it changes
    rec = fmt.encode_record([t0, t1, t2])
    assert [e["solution_prefix"] for e in rec["reasoning_steps"]] == [
        "Q?", "Q?\n\nA!", "Q?\n\nA!\n\nB1 gives $\\boxed{4}$", "Q?\n\nA!", "Q?\n\n C. $\\boxed{5}$",
        "Q?\n\nA!\n\nB2 $\\boxed{3}$"]


def test_foreign_trace_export_and_back():
    t = Trace(id="x", problem=Problem("1+1?", answer="2", id="5"), steps=[
        Step("Add.", labels=[StepLabel(0.5, kind="soft", source="mc_soft")]),
        Step("= 2", labels=[StepLabel(1, source="human")]),
        Step("Done.")])
    rec = MathAPSFormat().encode(t)
    assert rec == {"question": "1+1?", "final_answer": "2", "question_id": 5, "reasoning_steps": [
        {"solution_prefix": "1+1?\n\nAdd.", "mc_value": 0.5},
        {"solution_prefix": "1+1?\n\nAdd.\n\n= 2", "mc_value": 1.0}]}
    [back] = MathAPSFormat().decode(Fields(rec))
    assert [s.text for s in back.steps] == ["Add.", "= 2"]
    # a new labelled step on a MATH-APS trace becomes a new entry
    back.steps.append(Step("So 2.", labels=[StepLabel(0.0, kind="soft")]))
    assert MathAPSFormat(separator="\n").encode(back)["reasoning_steps"][-1] == {
        "solution_prefix": "1+1?\n\nAdd.\n\n= 2\nSo 2.", "mc_value": 0.0}


def test_export_needs_answer_and_question_id():
    t = Trace(id="x", problem=Problem("q"), steps=[Step("a", labels=[StepLabel(1)])])
    with pytest.raises(PrmkitError, match="reference answer"):
        MathAPSFormat().encode(t)
    t.problem.answer = "1"
    with pytest.raises(PrmkitError, match="integer question_id"):
        MathAPSFormat().encode(t)
    t.problem.id = "7"
    t.steps[0].labels = []
    with pytest.raises(PrmkitError, match="no labelled step"):
        MathAPSFormat().encode(t)


def test_root_only_record():
    rec = {"question": "q", "final_answer": "1", "question_id": 0,
           "reasoning_steps": [{"solution_prefix": "q", "mc_value": 0.25}]}
    [t] = MathAPSFormat().decode(Fields(rec))
    assert t.steps == [] and t.meta["math_aps"]["root"] == [{"entry": 0, "mc_value": 0.25}]
    assert MathAPSFormat().encode(t) == rec


def test_keep_extra_on_record_and_entries():
    rec = {"question": "q", "final_answer": "1", "question_id": 0, "split": "train",
           "reasoning_steps": [{"solution_prefix": "q", "mc_value": 0.25, "n": 16},
                               {"solution_prefix": "q\n\na", "mc_value": 1, "n": 8}]}
    with pytest.raises(FormatError) as e:
        MathAPSFormat().decode(Fields(rec))
    assert e.value.field == "split"
    [t] = MathAPSFormat(keep_extra=True).decode(Fields(rec))
    assert t.steps[0].labels[0].meta["math_aps"] == {"entry": 1, "extra": {"n": 8}}
    assert MathAPSFormat().encode(t) == rec


@pytest.mark.parametrize("rec, field, reason", [
    ({"question": "q", "final_answer": "1", "question_id": 0, "reasoning_steps": []},
     "reasoning_steps", "empty"),
    ({"question": "q", "final_answer": "1", "question_id": 0,
      "reasoning_steps": [{"solution_prefix": "q a", "mc_value": 1},
                          {"solution_prefix": "Q b", "mc_value": 1}]},
     "reasoning_steps[1].solution_prefix", "does not start with the record's question"),
    ({"question": "q", "final_answer": "1", "question_id": 0,
      "reasoning_steps": [{"solution_prefix": "q a", "mc_value": 1.5}]},
     "reasoning_steps[0].mc_value", "not a probability"),
    ({"question": "q", "final_answer": "1", "question_id": 0,
      "reasoning_steps": [{"solution_prefix": "q a", "mc_value": True}]},
     "reasoning_steps[0].mc_value", "expected number"),
    ({"question": "q", "final_answer": "1", "question_id": "0",
      "reasoning_steps": [{"solution_prefix": "q a", "mc_value": 1}]}, "question_id", "expected integer"),
    ({"question": "q", "final_answer": "1", "question_id": 0,
      "reasoning_steps": [{"solution_prefix": "q a", "mc_value": 1, "x": 0}]},
     "reasoning_steps[0].x", "unexpected field"),
    ({"question": "q", "question_id": 0, "reasoning_steps": [{"solution_prefix": "q a", "mc_value": 1}]},
     "final_answer", "missing"),
])
def test_malformed_records(rec, field, reason):
    with pytest.raises(FormatError) as e:
        MathAPSFormat().decode(Fields(rec, path="in.jsonl", line=2))
    assert (e.value.path, e.value.line, e.value.field) == ("in.jsonl", 2, field)
    assert reason in e.value.reason


def test_bad_option():
    with pytest.raises(PrmkitError):
        get_format("math_aps", neutral="sometimes")


def test_detect():
    assert MathAPSFormat.detect({"question": "q", "final_answer": "1", "question_id": 0,
                                 "reasoning_steps": []})
    assert not MathAPSFormat.detect({"question": "q", "answer": "a\n#### 1"})
    assert not MathAPSFormat.detect({"question": {"problem": "q"}, "label": {"steps": []}})


@pytest.mark.realdata
def test_real_records(shared_data, tmp_path):
    path = shared_data / "math_aps_sample" / "samples_math-aps.jsonl"
    assert detect_format(path) == "math_aps"
    recs = records(path)
    traces = list(read(path, "math_aps"))
    fmt = MathAPSFormat()
    assert list(fmt.encode_records(traces)) == recs
    for t in traces:
        t.check_spans()
        assert t.problem.answer in {r["final_answer"] for r in recs}
    # every entry is held by some trace (a label, or the root)
    for k, rec in enumerate(recs, 1):
        mine = [t for t in traces if t.meta["math_aps"]["record"] == f"samples_math-aps.jsonl:{k}"]
        held = {lab.meta["math_aps"]["entry"] for t in mine for s in t.steps for lab in s.labels}
        held |= {r["entry"] for r in mine[0].meta["math_aps"]["root"]}
        assert held == set(range(len(rec["reasoning_steps"])))
    # the sample's prefixes form trees, not chains: one trace per leaf
    assert [sum(t.meta["math_aps"]["record"].endswith(f":{k}") for t in traces)
            for k in (1, 2, 3)] == [81, 7, 36]
    out = tmp_path / "o.jsonl"
    assert write(traces, out, "math_aps") == 3
    assert records(out) == recs
