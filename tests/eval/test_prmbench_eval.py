"""PRMBench evaluation: step F1s, PRMScore per class, pooled overall, groups, originals and out-of-range
labels. Every expected number is derived by hand in a comment next to it."""

from __future__ import annotations

import json

import pytest

from prmkit._fields import Fields
from prmkit.data import read
from prmkit.data._prmbench import PRMBenchFormat
from prmkit.errors import PrmkitError
from prmkit.eval._prmbench import evaluate_prmbench, prmbench_with_originals
from prmkit.trace import Problem, Step, StepLabel, Trace


def pm(tid: str, cls: str, scores: list[float | None], wrong: set[int],
       out_of_range: list[int] | None = None) -> Trace:
    """A PRMBench-like trace: 0-based ``wrong`` steps -1, the others +1; None = unscored step."""
    steps = [Step(f"s{i}", labels=[StepLabel(-1 if i in wrong else 1)],
                  scores={} if s is None else {"prm": s}) for i, s in enumerate(scores)]
    meta = {"classification": cls}
    if out_of_range:
        meta["out_of_range"] = out_of_range
    return Trace(tid, Problem("q"), steps, source="prmbench", meta={"prmbench": meta})


# Threshold 0.5, a step is called correct when score >= 0.5. Positive = correct step.
# circular
#   c1 [0.9, 0.3, 0.6, 0.2] wrong {1, 3}: TP, TN, TP, TN
#   c2 [0.4, 0.8, 0.7]      wrong {2}:    FN, TP, FP
#   -> TP 3, FN 1, FP 1, TN 2
#   F1+ = 2TP / (2TP + FP + FN) = 6 / 8 = 0.75;  F1- = 2TN / (2TN + FN + FP) = 4 / 6 = 2/3
#   PRMScore = (0.75 + 2/3) / 2 = 17/24 = 0.708333...
# confidence
#   d1 [0.55, 0.45, 0.1] wrong {2}: TP, FN, TN
#   d2 [0.5, 0.9]        wrong {1}: TP (0.5 >= 0.5), FP
#   -> TP 2, FN 1, FP 1, TN 1
#   F1+ = 4 / 6 = 2/3;  F1- = 2 / 4 = 0.5;  PRMScore = (2/3 + 1/2) / 2 = 7/12 = 0.583333...
# overall, pooled: TP 5, FN 2, FP 2, TN 3
#   F1+ = 10 / 14 = 5/7;  F1- = 6 / 10 = 0.6;  PRMScore = (5/7 + 3/5) / 2 = 23/35 = 0.657142...
#   (the mean of the class scores would be (17/24 + 7/12) / 2 = 31/48 = 0.645833...: not the same)
def two_classes() -> list[Trace]:
    return [pm("c1", "circular", [0.9, 0.3, 0.6, 0.2], {1, 3}),
            pm("c2", "circular", [0.4, 0.8, 0.7], {2}),
            pm("d1", "confidence", [0.55, 0.45, 0.1], {2}),
            pm("d2", "confidence", [0.5, 0.9], {1})]


# Two traces whose error_steps named steps past the end (as the importer records them):
#   e1 circular   [0.9, 0.1, 0.2] wrong {1}, out of range [7]:    TP, TN, FN
#   e2 confidence [0.8]           wrong {},  out of range [5, 6]: TP
def out_of_range_traces() -> list[Trace]:
    return [pm("e1", "circular", [0.9, 0.1, 0.2], {1}, out_of_range=[7]),
            pm("e2", "confidence", [0.8], set(), out_of_range=[5, 6])]


def test_two_classes_hand_computed():
    r = evaluate_prmbench(two_classes())
    c, d, o = r.classes["circular"], r.classes["confidence"], r.overall
    assert c["f1_positive"] == pytest.approx(0.75)
    assert c["f1_negative"] == pytest.approx(2 / 3)
    assert c["prmscore"] == pytest.approx(17 / 24)
    assert (c["n_traces"], c["n_steps"], c["n_error_steps"]) == (2, 7, 3)
    assert c["confusion"] == {"tp": 3, "fn": 1, "fp": 1, "tn": 2}
    assert d["f1_positive"] == pytest.approx(2 / 3)
    assert d["f1_negative"] == pytest.approx(0.5)
    assert d["prmscore"] == pytest.approx(7 / 12)
    assert (d["n_traces"], d["n_steps"], d["n_error_steps"]) == (2, 5, 2)
    assert o["f1_positive"] == pytest.approx(5 / 7)
    assert o["f1_negative"] == pytest.approx(0.6)
    assert o["prmscore"] == pytest.approx(23 / 35)
    assert o["class_mean"] == pytest.approx(31 / 48)
    assert (o["n_traces"], o["n_steps"], o["n_error_steps"]) == (4, 12, 5)
    # groups: mean of the classes present; sensitivity has none here
    assert r.groups["simplicity"] == {"prmscore": pytest.approx(17 / 24), "classes": ["circular"]}
    assert r.groups["soundness"] == {"prmscore": pytest.approx(7 / 12), "classes": ["confidence"]}
    assert r.groups["sensitivity"] == {"prmscore": None, "classes": []}
    assert r.out_of_range == {"policy": "exclude", "traces": 0, "indices": 0,
                              "by_class": {"circular": 0, "confidence": 0},
                              "indices_by_class": {"circular": 0, "confidence": 0}}


def test_threshold_moves_the_calls():
    # At 0.95 every step is called wrong: circular TP 0, FN 4, FP 0, TN 3
    # -> F1+ = 0 / 4 = 0, F1- = 6 / 10 = 0.6, PRMScore 0.3
    c = evaluate_prmbench(two_classes(), threshold=0.95).classes["circular"]
    assert (c["f1_positive"], c["f1_negative"], c["prmscore"]) == (0.0, pytest.approx(0.6),
                                                                    pytest.approx(0.3))


def test_out_of_range_exclude():
    r = evaluate_prmbench(two_classes() + out_of_range_traces())
    # e1 and e2 are dropped: every score as in the two-class example
    assert r.classes["circular"]["prmscore"] == pytest.approx(17 / 24)
    assert r.classes["confidence"]["prmscore"] == pytest.approx(7 / 12)
    assert r.classes["circular"]["n_traces"] == 2 and r.overall["n_traces"] == 4
    assert r.out_of_range == {"policy": "exclude", "traces": 2, "indices": 3,
                              "by_class": {"circular": 1, "confidence": 1},
                              "indices_by_class": {"circular": 1, "confidence": 2}}


def test_out_of_range_in_range():
    r = evaluate_prmbench(two_classes() + out_of_range_traces(), out_of_range="in_range")
    # circular + e1 (TP, TN, FN): TP 4, FN 2, FP 1, TN 3
    #   F1+ = 8 / (8 + 1 + 2) = 8/11, F1- = 6 / (6 + 2 + 1) = 2/3, PRMScore = (8/11 + 2/3) / 2 = 23/33
    c = r.classes["circular"]
    assert (c["f1_positive"], c["f1_negative"]) == (pytest.approx(8 / 11), pytest.approx(2 / 3))
    assert c["prmscore"] == pytest.approx(23 / 33) and c["n_traces"] == 3
    # confidence + e2: TP 3, FN 1, FP 1, TN 1 -> F1+ = 6 / 8 = 0.75, F1- = 2 / 4 = 0.5, PRMScore 0.625
    assert r.classes["confidence"]["prmscore"] == pytest.approx(0.625)
    assert r.out_of_range["traces"] == 2 and r.out_of_range["indices"] == 3
    assert r.out_of_range["policy"] == "in_range"


def test_unscored_steps_are_counted_and_left_out():
    traces = two_classes()
    traces.append(pm("c3", "circular", [None, None], {1}))
    c = evaluate_prmbench(traces).classes["circular"]
    assert c["unscored_steps"] == 2 and c["n_steps"] == 7 and c["n_traces"] == 3
    assert c["prmscore"] == pytest.approx(17 / 24)


ROW = {"original_question": "1+1?", "modified_question": "1+1?", "question": "1+1?",
       "original_process": ["x", "y", "z"], "reason": "r", "idx": "p1", "modified_steps": [2]}


def test_originals_as_class_correct():
    rows = [dict(ROW, classification="circular", modified_process=["a", "b"], error_steps=[2]),
            dict(ROW, classification="confidence", modified_process=["c", "d"], error_steps=[1])]
    traces = [t for row in rows for t in PRMBenchFormat().decode(Fields(row))]
    full = prmbench_with_originals(traces)
    assert [t.id for t in full] == ["circular_p1", "confidence_p1", "correct_p1"]  # one original
    scripted = {"circular_p1": [0.9, 0.1], "confidence_p1": [0.2, 0.8], "correct_p1": [0.9, 0.4, 0.8]}
    for t in full:
        for s, v in zip(t.steps, scripted[t.id], strict=True):
            s.scores["prm"] = v
    r = evaluate_prmbench(full)
    # correct_p1 [0.9, 0.4, 0.8], all steps right: TP, FN, TP -> F1+ = 4 / 5 = 0.8; F1- = 0 / 1 = 0;
    # no wrong step, so PRMScore = F1+ = 0.8 (the official multi_solutions rule)
    k = r.classes["correct"]
    assert (k["f1_positive"], k["f1_negative"], k["prmscore"]) == (0.8, 0.0, 0.8)
    assert k["n_error_steps"] == 0
    # overall leaves the originals out: circular TP, TN + confidence TN, TP -> both F1 = 1
    assert r.overall["n_traces"] == 2 and r.overall["prmscore"] == 1.0
    assert r.overall["class_mean"] == 1.0


def test_errors():
    with pytest.raises(PrmkitError, match="out_of_range must be one of"):
        evaluate_prmbench(two_classes(), out_of_range="skip")
    bare = Trace("z", Problem("q"), [Step("s", labels=[StepLabel(1)], scores={"prm": 0.9})])
    with pytest.raises(PrmkitError, match="trace z: no meta"):
        evaluate_prmbench([bare])
    with pytest.raises(PrmkitError, match="key 'orm'"):
        evaluate_prmbench(two_classes(), key="orm")
    unlabelled = pm("u", "circular", [0.9], set())
    unlabelled.steps[0].labels = []
    with pytest.raises(PrmkitError, match="trace u: step 0 has no label"):
        evaluate_prmbench([unlabelled])
    with pytest.raises(PrmkitError, match="no traces"):
        evaluate_prmbench([])


def test_to_dict_shape_and_lines():
    r = evaluate_prmbench(two_classes() + out_of_range_traces())
    d = json.loads(json.dumps(r.to_dict()))
    assert set(d) >= {"key", "threshold", "classes", "overall", "out_of_range"}
    keys = {"prmscore", "f1_positive", "f1_negative", "n_traces", "n_steps", "n_error_steps"}
    assert all(set(v) >= keys for v in d["classes"].values()) and set(d["overall"]) >= keys
    assert set(d["out_of_range"]) >= {"policy", "traces", "indices", "by_class"}
    text = "\n".join(r.lines())
    assert "circular" in text and "70.8" in text and "65.7" in text   # 17/24, 23/35 in %
    assert "2 traces (3 indices), excluded" in text


@pytest.mark.realdata
def test_real_prmbench_out_of_range_and_perfect_scores(shared_data):
    files = sorted((shared_data / "prmbench").glob("*.jsonl"))
    assert len(files) == 16
    bad_rows, bad_indices, by_class, rows = 0, 0, {}, 0
    for path in files:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows += 1
            n = len(row["modified_process"])
            bad = [v for v in row["error_steps"] if not 1 <= v <= n]
            by_class.setdefault(row["classification"], 0)
            if bad:
                bad_rows += 1
                bad_indices += len(bad)
                by_class[row["classification"]] += 1
    assert bad_rows == 78  # the importer's docstring says 78 rows over these 16 files: verified here

    traces = [t for path in files for t in read(path, "prmbench")]
    for t in traces:
        for s in t.steps:
            s.scores["prm"] = 1.0 if s.label().value > 0 else 0.0
    r = evaluate_prmbench(traces)
    assert r.out_of_range["traces"] == bad_rows and r.out_of_range["indices"] == bad_indices
    assert r.out_of_range["by_class"] == by_class
    assert r.overall["n_traces"] == rows - bad_rows
    assert all(m["prmscore"] == 1.0 for m in r.classes.values()) and r.overall["prmscore"] == 1.0
    assert all(g["prmscore"] == 1.0 for g in (r.groups["simplicity"], r.groups["soundness"]))
    kept = evaluate_prmbench(traces, out_of_range="in_range")
    assert kept.overall["n_traces"] == rows and kept.overall["prmscore"] == 1.0
