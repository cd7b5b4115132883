"""ProcessBench evaluation: the official per-split numbers, per generator, the threshold sweep and where
the threshold may be chosen. Every expected number is derived by hand in a comment next to it."""

from __future__ import annotations

import json

import pytest

from prmkit.data import read
from prmkit.errors import PrmkitError
from prmkit.eval._processbench import (
    default_thresholds,
    evaluate_processbench,
    predict_first_error,
    processbench_split,
    threshold_sweep,
)
from prmkit.trace import Problem, Step, StepLabel, Trace


def pb(tid: str, scores: list[float | None], label: int, generator: str = "G1") -> Trace:
    """A ProcessBench-like trace: steps before ``label`` +1, the labelled step -1, later ones
    unlabelled (every step +1 when label == -1); ``None`` score = an unscored step."""
    steps = []
    for i, s in enumerate(scores):
        labels = []
        if label == -1 or i < label:
            labels = [StepLabel(1)]
        elif i == label:
            labels = [StepLabel(-1)]
        steps.append(Step(f"step {i}", labels=labels, scores={} if s is None else {"prm": s}))
    return Trace(tid, Problem("q"), steps, source="processbench",
                 meta={"processbench": {"generator": generator}})


# Split A at threshold 0.5 (prediction = first score < 0.5):
#   a1 G1 [0.9, 0.3, 0.8]  label 1 -> pred 1  hit   (error sample)
#   a2 G1 [0.9, 0.6, 0.2]  label 1 -> pred 2  miss  (error sample: flagged too late)
#   a3 G2 [0.4, 0.9]       label 1 -> pred 0  miss  (error sample: flagged too early)
#   a4 G2 [0.8, 0.7]       label -1 -> pred -1 hit  (correct sample)
#   a5 G1 [0.7, 0.45]      label -1 -> pred 1  miss (correct sample)
# error_acc = 1/3, correct_acc = 1/2, F1 = 2 (1/3)(1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 0.4
def split_a() -> list[Trace]:
    return [pb("a1", [0.9, 0.3, 0.8], 1, "G1"), pb("a2", [0.9, 0.6, 0.2], 1, "G1"),
            pb("a3", [0.4, 0.9], 1, "G2"), pb("a4", [0.8, 0.7], -1, "G2"),
            pb("a5", [0.7, 0.45], -1, "G1")]


# Split B at 0.5:
#   b1 G1 [0.95, -, 0.1]   label 2 -> the unscored step 1 is skipped, pred 2 hit; 1 unscored step
#   b2 G2 [0.2, 0.9]       label 0 -> pred 0 hit
#   b3 G2 [0.9, 0.9, 0.9]  label -1 -> pred -1 hit
#   b4 G1 [0.6, -]         label -1 -> pred -1 hit; 1 unscored step
# error_acc = 2/2 = 1, correct_acc = 2/2 = 1, F1 = 1; unscored_steps = 2
def split_b() -> list[Trace]:
    return [pb("b1", [0.95, None, 0.1], 2, "G1"), pb("b2", [0.2, 0.9], 0, "G2"),
            pb("b3", [0.9, 0.9, 0.9], -1, "G2"), pb("b4", [0.6, None], -1, "G1")]


def test_predict_first_error():
    t = pb("x", [0.9, None, 0.3, 0.1], 2)
    assert predict_first_error(t) == 2          # the unscored step 1 is skipped
    assert predict_first_error(t, threshold=0.2) == 3
    assert predict_first_error(t, threshold=0.05) == -1
    assert predict_first_error(t, threshold=0.3) == 3   # 0.3 is not below 0.3: strict "<"
    assert predict_first_error(t, key="other") == -1


def test_two_splits_fixed_threshold_hand_computed():
    r = evaluate_processbench({"A": split_a(), "B": split_b()})
    a, b = r.splits["A"], r.splits["B"]
    assert (a["n_error"], a["n_correct"]) == (3, 2)
    assert a["error_acc"] == pytest.approx(1 / 3)
    assert a["correct_acc"] == pytest.approx(1 / 2)
    assert a["f1"] == pytest.approx(0.4)
    assert a["unscored_steps"] == 0
    # the two misses on A's erroneous samples: a3 flagged step 0 before its error, a2 step 2 after it
    assert (a["flagged_early"], a["flagged_late"], a["not_flagged"]) == (1, 1, 0)
    assert (b["flagged_early"], b["flagged_late"], b["not_flagged"]) == (0, 0, 0)
    # at 0.1 no step of a1 [0.9, 0.3, 0.8], a2 [0.9, 0.6, 0.2] or a3 [0.4, 0.9] is below it
    low = processbench_split(split_a(), threshold=0.1)
    assert (low["error_acc"], low["flagged_early"], low["flagged_late"], low["not_flagged"]) == (0.0, 0, 0, 3)
    assert (b["error_acc"], b["correct_acc"], b["f1"]) == (1.0, 1.0, 1.0)
    assert (b["n_error"], b["n_correct"], b["unscored_steps"]) == (2, 2, 2)
    # average F1 = (0.4 + 1.0) / 2 = 0.7
    assert r.average_f1 == pytest.approx(0.7)
    assert r.threshold == 0.5 and r.threshold_source == "fixed"
    assert a["threshold"] == 0.5 and a["threshold_source"] == "fixed"
    assert r.sweep == []


def test_by_generator_hand_computed():
    r = evaluate_processbench({"A": split_a(), "B": split_b()})
    g = r.by_generator["A"]
    # A/G1: errors a1 hit, a2 miss -> 1/2; correct a5 miss -> 0; F1 = 2 * 0.5 * 0 / 0.5 = 0
    assert g["G1"] == {"error_acc": 0.5, "correct_acc": 0.0, "f1": 0.0, "n_error": 2, "n_correct": 1}
    # A/G2: error a3 miss -> 0; correct a4 hit -> 1; F1 = 0
    assert g["G2"] == {"error_acc": 0.0, "correct_acc": 1.0, "f1": 0.0, "n_error": 1, "n_correct": 1}
    # B/G1: b1 hit (error), b4 hit (correct); B/G2: b2 hit, b3 hit
    assert r.by_generator["B"]["G1"] == {"error_acc": 1.0, "correct_acc": 1.0, "f1": 1.0,
                                         "n_error": 1, "n_correct": 1}
    assert r.by_generator["B"]["G2"]["f1"] == 1.0


def test_generator_falls_back_to_source():
    t = pb("s", [0.9], -1)
    t.meta = {}
    t.source = "my-policy"
    r = evaluate_processbench({"S": [t]})
    assert list(r.by_generator["S"]) == ["my-policy"]
    # one error-free sample, no erroneous one: error_acc None, so F1 None, and so the average
    assert r.splits["S"]["error_acc"] is None and r.splits["S"]["correct_acc"] == 1.0
    assert r.splits["S"]["f1"] is None and r.average_f1 is None


# Tuning split T (hit intervals: an error trace with label L is hit for s_L < t <= min(scores before L),
# an error-free one for t <= min(scores)):
#   t1 error [0.75, 0.9] label 0 -> hit iff t > 0.75
#   t2 clean [0.8, 0.85]         -> hit iff t <= 0.8
# so F1 = 1 exactly on (0.75, 0.8] and 0 elsewhere; the grid points there are 0.76 ... 0.80, and the
# tie-break (nearest 0.5) picks 0.76.
def split_t() -> list[Trace]:
    return [pb("t1", [0.75, 0.9], 0), pb("t2", [0.8, 0.85], -1)]


# Reported split R:
#   r1 error [0.3, 0.9] label 0 -> hit iff t > 0.3
#   r2 clean [0.6, 0.7]         -> hit iff t <= 0.6
#   r3 clean [0.9, 0.65]        -> hit iff t <= 0.65
# Its own best would be 0.5 (F1 = 1 on (0.3, 0.6], nearest 0.5); at T's 0.76: r1 hit, r2 and r3 miss
# -> error_acc 1, correct_acc 0, F1 0.
def split_r() -> list[Trace]:
    return [pb("r1", [0.3, 0.9], 0), pb("r2", [0.6, 0.7], -1), pb("r3", [0.9, 0.65], -1)]


def test_sweep_best_thresholds_differ():
    ths, f1s, best = threshold_sweep(split_t())
    assert best == 0.76
    assert ths == default_thresholds([0.75, 0.9, 0.8, 0.85]) and len(ths) == 99  # scores on the grid
    assert [th for th, f in zip(ths, f1s, strict=True) if f == 1.0] == [0.76, 0.77, 0.78, 0.79, 0.8]
    assert all(f == 0.0 for th, f in zip(ths, f1s, strict=True) if not 0.75 < th <= 0.8)
    assert threshold_sweep(split_r())[2] == 0.5


def test_tuned_threshold_applied_to_reported_split():
    r = evaluate_processbench({"R": split_r()}, tune_on={"T": split_t()})
    assert r.threshold == 0.76 and r.threshold_source == "tuned on T"
    rep = r.splits["R"]
    # the reported numbers are those at 0.76 (chosen on T), not at R's own best 0.5 (which gives F1 1)
    assert (rep["error_acc"], rep["correct_acc"], rep["f1"]) == (1.0, 0.0, 0.0)
    assert rep["threshold"] == 0.76 and rep["threshold_source"] == "tuned on T"
    assert processbench_split(split_r(), threshold=0.5)["f1"] == 1.0
    [sw] = r.sweep
    assert sw["tuned_on"] == "T" and sw["best"] == 0.76
    assert sw["f1"][sw["thresholds"].index(0.76)] == 1.0


def test_cross_split():
    r = evaluate_processbench({"T": split_t(), "R": split_r()}, cross_split=True)
    # R is reported at the threshold chosen on T (0.76); T at the one chosen on R (0.5):
    # T at 0.5: t1 miss (0.5 is not > 0.75), t2 hit -> error_acc 0, correct_acc 1, F1 0.
    assert r.splits["R"]["threshold"] == 0.76 and r.splits["R"]["threshold_source"] == "tuned on T"
    assert r.splits["T"]["threshold"] == 0.5 and r.splits["T"]["threshold_source"] == "tuned on R"
    assert (r.splits["T"]["error_acc"], r.splits["T"]["correct_acc"], r.splits["T"]["f1"]) == (0.0, 1.0, 0.0)
    assert r.threshold is None and r.threshold_source == "cross-split"
    assert [s["tuned_on"] for s in r.sweep] == ["R", "T"]
    assert r.average_f1 == 0.0


def test_refuses_tuning_on_the_reported_split():
    with pytest.raises(PrmkitError, match="both tuned on and reported"):
        evaluate_processbench({"R": split_r()}, tune_on={"R": split_r()})
    # Same traces under another name: caught by id.
    with pytest.raises(PrmkitError, match="trace r1 .* tuning split 'R2'"):
        evaluate_processbench({"R": split_r()}, tune_on={"R2": split_r()})
    with pytest.raises(PrmkitError, match="not both"):
        evaluate_processbench({"R": split_r()}, threshold=0.3, tune_on={"T": split_t()})
    with pytest.raises(PrmkitError, match="at least two splits"):
        evaluate_processbench({"R": split_r()}, cross_split=True)
    with pytest.raises(PrmkitError, match="trace r1"):
        evaluate_processbench({"R": split_r(), "R2": split_r()}, cross_split=True)
    # A tuning split without error-free samples cannot define F1.
    with pytest.raises(PrmkitError, match="needs both"):
        evaluate_processbench({"R": split_r()}, tune_on={"T": [pb("e", [0.1], 0)]})


def test_unknown_label_names_the_trace():
    t = pb("gsm8k-77", [0.9, 0.2], 1)
    t.steps[0].labels = []  # step 0 unlabelled and nothing wrong before it: first error unknown
    with pytest.raises(PrmkitError, match="gsm8k-77"):
        evaluate_processbench({"A": [*split_a(), t]})


def test_missing_key_is_an_error():
    with pytest.raises(PrmkitError, match="key 'orm'"):
        evaluate_processbench({"A": split_a()}, key="orm")


def test_sweep_matches_direct_evaluation():
    # Invariant: the interval arithmetic of the sweep equals evaluating each threshold directly,
    # unscored steps and all.
    traces = split_a() + split_b() + split_t() + split_r()
    ths, f1s, _ = threshold_sweep({"A": split_a(), "B": split_b(), "T": split_t(), "R": split_r()})
    for th, f in zip(ths, f1s, strict=True):
        assert f == pytest.approx(processbench_split(traces, threshold=th)["f1"]), th


def test_to_dict_shape_and_lines():
    r = evaluate_processbench({"R": split_r()}, tune_on={"T": split_t()})
    d = json.loads(json.dumps(r.to_dict()))
    assert set(d) >= {"key", "threshold", "threshold_source", "splits", "average_f1", "by_generator",
                      "sweep"}
    assert set(d["splits"]["R"]) >= {"error_acc", "correct_acc", "f1", "n_error", "n_correct",
                                     "threshold", "threshold_source", "unscored_steps"}
    assert set(d["by_generator"]["R"]["G1"]) == {"error_acc", "correct_acc", "f1", "n_error",
                                                  "n_correct"}
    assert set(d["sweep"][0]) == {"tuned_on", "thresholds", "f1", "best"}
    text = "\n".join(r.lines())
    assert "R " in text and "average F1 0.0" in text and "threshold 0.76 (tuned on T)" in text
    fixed = "\n".join(evaluate_processbench({"A": split_a(), "B": split_b()}).lines())
    assert "average F1 70.0" in fixed and "2 steps had no score" in fixed
    assert "2 erroneous samples missed: 1 flagged a right step first, 1 flagged only after the error, " \
           "0 flagged no step" in fixed


@pytest.mark.realdata
def test_real_gsm8k_perfect_and_constant_scores(shared_data):
    path = shared_data / "processbench" / "gsm8k.json"
    raw = json.loads(path.read_text())
    n_error = sum(1 for x in raw if x["label"] != -1)
    n_correct = sum(1 for x in raw if x["label"] == -1)
    traces = list(read(path, "processbench"))
    assert len(traces) == n_error + n_correct

    # Perfect scores from each step's own label (unlabelled steps after the error: 1.0, never reached).
    for t in traces:
        for s in t.steps:
            lab = s.label()
            s.scores["prm"] = 0.0 if lab is not None and lab.value == -1 else 1.0
    r = evaluate_processbench({"gsm8k": traces})
    s = r.splits["gsm8k"]
    assert (s["error_acc"], s["correct_acc"], s["f1"]) == (1.0, 1.0, 1.0)
    assert (s["n_error"], s["n_correct"], s["unscored_steps"]) == (n_error, n_correct, 0)
    per_gen = r.by_generator["gsm8k"]
    assert sum(g["n_error"] for g in per_gen.values()) == n_error
    assert sum(g["n_correct"] for g in per_gen.values()) == n_correct
    assert all(g["f1"] in (1.0, None) for g in per_gen.values())

    # A constant 0.7: nothing is below 0.5, every prediction is -1.
    for t in traces:
        for st in t.steps:
            st.scores["prm"] = 0.7
    s = evaluate_processbench({"gsm8k": traces}).splits["gsm8k"]
    assert (s["error_acc"], s["correct_acc"], s["f1"]) == (0.0, 1.0, 0.0)
