"""Step metrics on hand-made scores and labels; every expected value is derived in a comment."""

from __future__ import annotations

import json

import pytest

from prmkit.errors import PrmkitError
from prmkit.eval._stepmetrics import collect_steps, step_metrics, step_metrics_for
from prmkit.trace import Problem, Step, StepLabel, Trace

# Seven steps; threshold 0.5 predicts "wrong" for scores < 0.5.
#   score  0.9  0.7  0.4  0.2  0.6  0.1  0.3
#   right   T    T    T    F    F    F    F
#   pred    ok   ok   err  err  ok   err  err
SCORES = [0.9, 0.7, 0.4, 0.2, 0.6, 0.1, 0.3]
CORRECT = [True, True, True, False, False, False, False]


def test_hand_example():
    m = step_metrics(SCORES, CORRECT, threshold=0.5, bins=2)
    assert (m.n, m.positives, m.negatives) == (7, 3, 4)
    # AUROC: pairs (right, wrong) with right scored higher: 0.9 and 0.7 beat all 4 wrong steps,
    # 0.4 beats 0.2, 0.1, 0.3 but not 0.6 -> (4 + 4 + 3) / (3 * 4) = 11/12.
    assert m.auroc == pytest.approx(11 / 12)
    # Errors as the positive class: TP = {0.2, 0.1, 0.3} = 3, FP = {0.4} = 1 (right step flagged),
    # FN = {0.6} = 1 (wrong step let through) -> F1 = 2*3 / (2*3 + 1 + 1) = 0.75.
    assert m.f1_error == pytest.approx(0.75)
    assert m.error_precision == pytest.approx(3 / 4) and m.error_recall == pytest.approx(3 / 4)
    # Correct steps as the positive class: TP = {0.9, 0.7} = 2, FP = {0.6}, FN = {0.4}
    # -> 2*2 / (4 + 1 + 1) = 2/3.
    assert m.f1_correct == pytest.approx(2 / 3)
    # Accuracy: 3 errors + 2 right steps predicted right, of 7.
    assert m.accuracy == pytest.approx(5 / 7)
    # Brier: (0.1^2 + 0.3^2 + 0.6^2 + 0.2^2 + 0.6^2 + 0.1^2 + 0.3^2) / 7
    #      = (0.01 + 0.09 + 0.36 + 0.04 + 0.36 + 0.01 + 0.09) / 7 = 0.96 / 7.
    assert m.brier == pytest.approx(0.96 / 7)
    # ECE, 2 bins: [0, 0.5) holds 0.4 0.2 0.1 0.3: mean 0.25, 1 of 4 right -> gap 0;
    # [0.5, 1] holds 0.9 0.7 0.6: mean 2.2/3, 2 of 3 right -> gap 0.2/3;
    # ECE = 4/7 * 0 + 3/7 * 0.2/3 = 0.2/7.
    assert m.ece == pytest.approx(0.2 / 7)
    b0, b1 = m.bins
    assert (b0.lo, b0.hi, b0.count, b1.lo, b1.hi, b1.count) == (0.0, 0.5, 4, 0.5, 1.0, 3)
    assert b0.mean_score == pytest.approx(0.25) and b0.frac_correct == pytest.approx(0.25)
    assert b1.mean_score == pytest.approx(2.2 / 3) and b1.frac_correct == pytest.approx(2 / 3)


def test_to_dict_shape_is_json():
    d = step_metrics(SCORES, CORRECT, bins=2).to_dict()
    for k in ("n", "positives", "negatives", "auroc", "threshold", "f1_error", "f1_correct",
              "accuracy", "ece", "brier", "bins"):
        assert k in d
    assert set(d["bins"][0]) >= {"lo", "hi", "count", "mean_score", "frac_correct"}
    assert json.loads(json.dumps(d)) == d


def test_bin_edges_and_threshold_tie():
    # 0.5 lies in the upper of 2 bins and, at threshold 0.5, is predicted right; 1.0 lies in the
    # last bin; 0.0 in the first.
    m = step_metrics([0.0, 0.5, 1.0], [False, True, True], threshold=0.5, bins=2)
    assert [b.count for b in m.bins] == [1, 2]
    assert (m.accuracy, m.f1_error, m.f1_correct) == (1.0, 1.0, 1.0)
    # Perfectly separated; ECE: bin 0 gap |0 - 0| = 0, bin 1 gap |0.75 - 1| -> 2/3 * 0.25.
    assert m.ece == pytest.approx(2 / 3 * 0.25)


def test_empty_bins_are_kept_with_none_means():
    m = step_metrics([0.1, 0.9], [False, True], bins=4)
    assert [(b.lo, b.hi, b.count) for b in m.bins] == [(0.0, 0.25, 1), (0.25, 0.5, 0), (0.5, 0.75, 0),
                                                       (0.75, 1.0, 1)]
    assert m.bins[1].mean_score is None and m.bins[1].frac_correct is None
    # ECE: |0.1 - 0| and |0.9 - 1|, each half the steps -> 0.1.
    assert m.ece == pytest.approx(0.1)


def test_undefined_numbers_are_none():
    # One class only: no AUROC; no error present or predicted: F1(error) undefined.
    m = step_metrics([0.9, 0.8], [True, True])
    assert m.auroc is None and m.f1_error is None and m.f1_correct == 1.0
    assert m.error_precision is None and m.error_recall is None
    # No steps at all: only counts and the empty bins remain.
    e = step_metrics([], [], bins=3)
    assert (e.n, e.auroc, e.accuracy, e.ece, e.brier) == (0, None, None, None, None)
    assert [b.count for b in e.bins] == [0, 0, 0]
    # No error present but one predicted: F1(error) is 0 (TP 0, FP 1), not undefined.
    assert step_metrics([0.2, 0.9], [True, True]).f1_error == 0.0


def test_scores_outside_unit_interval_have_no_calibration():
    m = step_metrics([2.0, -1.0], [True, False])
    assert m.auroc == 1.0 and m.ece is None and m.brier is None and m.bins == []


def test_bad_input_raises():
    with pytest.raises(PrmkitError, match="pair up"):
        step_metrics([0.1], [True, False])
    with pytest.raises(PrmkitError, match="bins"):
        step_metrics([0.1], [True], bins=0)


def _trace(rows, tid="t"):
    steps = []
    for score, labels in rows:
        steps.append(Step("s", labels=list(labels), scores={} if score is None else {"prm": score}))
    return Trace(id=tid, problem=Problem("q", id="p"), steps=steps)


def test_collect_steps_pairs_scores_with_binarised_labels():
    t = _trace([
        (0.9, [StepLabel(1, source="human")]),
        (0.8, [StepLabel(0, source="human")]),                     # neutral
        (None, [StepLabel(-1, source="human")]),                   # unscored: left out
        (0.3, []),                                                 # unlabelled: left out
        (0.4, [StepLabel(0.25, kind="soft", source="mc_soft")]),   # soft < 0.5 -> wrong
        (0.6, [StepLabel(-1, source="human"), StepLabel(1, source="mc_hard")]),
    ])
    assert collect_steps([t]) == ([0.9, 0.8, 0.4, 0.6], [True, True, False, True])  # latest label
    assert collect_steps([t], neutral="negative")[1] == [True, False, False, True]
    assert collect_steps([t], neutral="ignore") == ([0.9, 0.4, 0.6], [True, False, True])
    assert collect_steps([t], label_source="human") == ([0.9, 0.8, 0.6], [True, True, False])
    assert collect_steps([t], key="prm2") == ([], [])


def test_step_metrics_for_equals_the_two_steps():
    ts = [_trace([(s, [StepLabel(1 if c else -1)])], tid=str(i))
          for i, (s, c) in enumerate(zip(SCORES, CORRECT, strict=True))]
    got = step_metrics_for(ts, bins=2).to_dict()
    assert got == step_metrics(SCORES, CORRECT, bins=2).to_dict()
