"""benchmarks/annotate_al.py (issue 50, item 4): the rule that turns accuracy curves into "labels
needed to match random at 400", on hand-made curves, and its scripted policy."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def al(request):
    sys.path.insert(0, str(BENCH))  # the script imports benchmarks/_record.py as a plain module
    request.addfinalizer(lambda: sys.path.remove(str(BENCH)))
    spec = importlib.util.spec_from_file_location("annotate_al", BENCH / "annotate_al.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_linear_interpolation_between_measured_budgets(al):
    # 0.60 lies a quarter of the way from 0.56 (B=100) to 0.72 (B=200): 100 + 0.25 * 100
    assert al.labels_to_match({100: 0.56, 200: 0.72, 400: 0.80}, 0.60) == pytest.approx(125.0)
    # between 200 and 400: 200 + (0.75 - 0.70) / (0.80 - 0.70) * 200
    assert al.labels_to_match({400: 0.80, 100: 0.60, 200: 0.70}, 0.75) == pytest.approx(300.0)
    # exactly at a measured budget
    assert al.labels_to_match({100: 0.5, 200: 0.7}, 0.7) == pytest.approx(200.0)


def test_first_budget_is_an_upper_bound_and_a_miss_is_none(al):
    assert al.labels_to_match({100: 0.81, 200: 0.70, 400: 0.75}, 0.80) == 100.0  # nothing known below 100
    assert al.labels_to_match({100: 0.50, 200: 0.60, 400: 0.79}, 0.80) is None
    assert al.labels_to_match({}, 0.5) is None


def test_the_first_crossing_counts_on_a_curve_that_dips(al):
    # up through 0.7 between 100 and 200, down, up again: the first crossing, 100 + 0.5 * 100
    assert al.labels_to_match({100: 0.6, 200: 0.8, 300: 0.5, 400: 0.9}, 0.7) == pytest.approx(150.0)


def test_best_ratio_takes_the_cheapest_strategy_but_never_the_baseline(al):
    curves = {"random": {100: 0.60, 200: 0.65, 400: 0.70},
              "uncertainty": {100: 0.62, 200: 0.66, 400: 0.69},      # never reaches 0.70
              "convincing_wrong": {100: 0.60, 200: 0.70, 400: 0.75},  # 200
              "disagreement": {100: 0.65, 200: 0.75, 400: 0.78}}     # 100 + 0.5 * 100 = 150
    name, need, ratio = al.best_ratio(curves)
    assert (name, need, ratio) == ("disagreement", pytest.approx(150.0), pytest.approx(0.375))
    assert al.best_ratio({"random": curves["random"], "uncertainty": curves["uncertainty"]}) == (None, None, None)


def test_the_scripted_policy_without_mistakes_writes_the_reference(al):
    from prmkit.envs import ArithConfig, ArithEnv

    for p in ArithEnv(ArithConfig(steps=(2, 4), seed=3)).problems(5):
        assert al.sample_solution(p, random.Random(0), p_error=0.0) == p.solution


def test_varied_wording_keeps_every_right_step_right_and_makes_right_samples_differ(al):
    """``--wording varied``: without mistakes every step still checks out (symbolic label +1) and the
    answer is right, yet a problem's right samples are not one text; with a mistake the checker still
    finds it (each wording holds the same equation)."""
    from prmkit.envs import ArithConfig, ArithEnv
    from prmkit.generate import completion_to_trace
    from prmkit.policies import Completion

    problems = ArithEnv(ArithConfig(steps=(3, 3), seed=5)).problems(4)
    for p in problems:
        texts = {al.sample_solution(p, random.Random(i), p_error=0.0, wording="varied") for i in range(16)}
        assert len(texts) > 4
        for i, text in enumerate(sorted(texts)):
            t = completion_to_trace(p, Completion(text), trace_id=f"{p.id}-{i}", source="test")
            assert t.outcome == "correct", text
            assert [s.labels[-1].value for s in t.steps] == [1] * len(t.steps), text
    wrong = [completion_to_trace(p, Completion(al.sample_solution(p, random.Random(i), p_error=1.0, wording="varied")),
                                 trace_id=f"w{i}", source="test") for i, p in enumerate(problems)]
    assert all(-1 in [s.labels[-1].value for s in t.steps] for t in wrong)
    with pytest.raises(ValueError, match="wording"):
        al.sample_solution(problems[0], random.Random(0), p_error=0.0, wording="fancy")


def test_simulate_takes_up_a_trace_where_the_budget_cut_it(tmp_path):
    """The benchmark spends its budgets in steps (100, then 100 more, ...): a trace cut at its first
    step is taken up at its second, and no label is counted twice."""
    from annotate_traces import write_scored

    from prmkit.annotate import Store, queue_file, simulate

    db = tmp_path / "labels.sqlite"
    queue_file(write_scored(tmp_path), db)  # a1 (2 steps), a2 (3), b1 (2), b2 (2) in file order
    first = simulate(db, source="mc_soft", budget=1)
    second = simulate(db, source="mc_soft", budget=3)
    assert (first.labels, first.traces, second.labels, second.traces) == (1, 0, 3, 1)
    ratings = Store(db).ratings()
    assert [(r.item_id, r.step) for r in ratings] == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_paired_step_auroc_difference_uses_the_same_steps_for_both_arms(al):
    """Two right steps and two wrong ones (symbolic labels). Arm ``a`` ranks every right step above
    every wrong one (AUROC 1); arm ``b`` ranks one wrong step above both right ones and the other
    below them (AUROC 2/4 = 0.5). The difference is 0.5; every paired replicate has ``a`` at 1 and
    ``b`` at most 1, so the interval lies in [0, 1] and holds the estimate. A step that one arm did
    not score is left out of both."""
    from prmkit.trace import Problem, Step, StepLabel, Trace

    def step(value, a, b):
        scores = {"a": a} if b is None else {"a": a, "b": b}
        return Step("x", scores=scores, labels=[StepLabel(value, source="symbolic", kind="hard")])

    p = Problem("What is 1 + 1?", answer="2", id="P")
    traces = [Trace("t1", p, [step(1, 0.9, 0.5), step(-1, 0.1, 0.9)]),
              Trace("t2", p, [step(1, 0.8, 0.4), step(-1, 0.2, 0.1), step(-1, 0.0, None)])]
    diff, lo, hi = al.paired_auroc_diff(traces, "a", "b", bootstrap=200, seed=0)
    assert diff == pytest.approx(0.5)
    assert 0.0 <= lo <= diff <= hi <= 1.0
    assert al.paired_auroc_diff(traces, "a", "a", bootstrap=50, seed=0) == (0.0, 0.0, 0.0)
