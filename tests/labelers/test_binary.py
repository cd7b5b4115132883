"""Binary search for the first error: exact rollout counts, the budget, and termination for any
rollout outcomes (the search never loops, never exceeds ``max_rollouts``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labeler_fakes import RulePolicy, make_trace

from prmkit.errors import PrmkitError
from prmkit.labelers import BinarySearchLabeler, MCLabeler, Rollout, max_search_rounds


def wrong_trace(n: int, tid: str = "T"):
    return make_trace(tid, [f"step {chr(97 + i)}" for i in range(n - 1)] + ["The answer is 7."])


def values(trace, source="binary_search"):
    return [None if lab is None else lab.value for lab in trace.labels(source)]


def test_four_steps_first_error_at_step_1_costs_two_prefixes():
    # Prefix 1 good (step 0 right), prefix 2 bad: the search visits prefix 2, then prefix 1.
    t = wrong_trace(4)
    pol = RulePolicy({"T@1": 1})
    report = BinarySearchLabeler(pol, k=3).label([t])
    assert [req.key for req, _ in pol.requests] == ["T@2", "T@1"]
    assert report.rollouts == 6
    assert values(t) == [1, -1, None, None]
    assert t.first_error("binary_search") == 1
    assert t.meta["labeling"]["binary"]["visited"] == [[2, 0], [1, 1]]
    assert t.steps[0].label("binary_search").rollouts == 6


def test_after_error_negative_labels_the_rest_minus_one():
    t = wrong_trace(4)
    BinarySearchLabeler(RulePolicy({"T@1": 1}), k=3, after_error="negative").label([t])
    assert values(t) == [1, -1, -1, -1]


def test_eight_steps_first_error_at_step_5():
    # Prefixes 1..5 good, 6.. bad. lo=1, hi=8: mid 4 good -> lo 5; mid 6 bad -> hi 6; mid 5 good.
    t = wrong_trace(8)
    pol = RulePolicy({f"T@{p}": 1 for p in range(1, 6)})
    report = BinarySearchLabeler(pol, k=2).label([t])
    assert [req.key for req, _ in pol.requests] == ["T@4", "T@6", "T@5"]
    assert report.rollouts == 6 == 2 * max_search_rounds(8)
    assert values(t) == [1] * 5 + [-1, None, None]


def test_a_correct_trace_needs_no_rollout():
    t = make_trace("T", ["a", "b", "The answer is 42."])
    pol = RulePolicy({})
    report = BinarySearchLabeler(pol, k=4).label([t])
    assert (report.rollouts, pol.requests) == (0, [])
    assert values(t) == [1, 1, 1]
    assert t.first_error("binary_search") == -1


def test_one_wrong_step_is_the_error_without_rollouts():
    t = make_trace("T", ["The answer is 7."])
    assert BinarySearchLabeler(RulePolicy({}), k=4).label([t]).rollouts == 0
    assert values(t) == [-1]


def test_budget_stops_the_search_and_says_where_the_error_lies():
    t = wrong_trace(8)
    pol = RulePolicy({f"T@{p}": 1 for p in range(1, 6)})
    report = BinarySearchLabeler(pol, k=2, max_rollouts=3).label([t])  # one round of 2 fits
    assert report.rollouts == 2 and report.counts["budget_exhausted"] == 1
    assert values(t) == [1, 1, 1, 1, None, None, None, None]  # prefix 4 good: steps 0..3 right
    assert t.meta["labeling"]["binary"]["first_error_within"] == [4, 7]
    assert t.first_error("binary_search") is None
    t2 = wrong_trace(8)
    assert BinarySearchLabeler(RulePolicy({}), k=2, max_rollouts=1).label([t2]).rollouts == 0
    assert values(t2) == [None] * 8


def test_binary_finds_what_linear_mc_finds_on_a_monotone_policy():
    for first in range(6):
        t_bin, t_mc = wrong_trace(6, "T"), wrong_trace(6, "T")
        table = {f"T@{p}": 2 for p in range(1, first + 1)}
        rb = BinarySearchLabeler(RulePolicy(table), k=2).label([t_bin])
        rm = MCLabeler(RulePolicy(table), k=2).label([t_mc])
        assert t_bin.first_error("binary_search") == t_mc.first_error("mc_hard") == first
        assert rb.rollouts <= 2 * max_search_rounds(6) < rm.rollouts == 10


def test_bad_arguments():
    with pytest.raises(PrmkitError, match="after_error"):
        BinarySearchLabeler(RulePolicy({}), after_error="zero")
    with pytest.raises(PrmkitError, match="max_rollouts"):
        BinarySearchLabeler(RulePolicy({}), max_rollouts=-1)


def drive(labeler, trace, outcome):
    """Run a plan by hand; ``outcome(prefix, index) -> bool`` says whether a rollout succeeds."""
    plan = labeler.plan(trace)
    asked = []
    try:
        needs = next(plan)
        while True:
            results = []
            for need in needs:
                asked.append(need.prefix)
                results.append([Rollout(trace.id, need.prefix, i, 0, "", reached=outcome(need.prefix, i))
                                for i in need.indices])
            needs = plan.send(results)
    except StopIteration as stop:
        return stop.value, asked


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 70), k=st.integers(1, 4), budget=st.integers(0, 40),
       whole=st.sampled_from(["42", "7", None]), data=st.data())
def test_search_terminates_within_budget_for_any_rollout_outcomes(n, k, budget, whole, data):
    """Adversarial (even non-monotone) rollout outcomes: the search ends, asks each prefix at most
    once, at most ceil(log2 n) prefixes (+1 when the trace's answer is unreadable), never more than
    ``max_rollouts`` rollouts, and a completed search's first error sits between a good and a bad
    observation."""
    steps = ["think"] * n
    trace = make_trace("T", steps, final_answer=whole)
    seen: dict[int, bool] = {}

    def outcome(p, i):
        if (p, i) not in seen:
            seen[(p, i)] = data.draw(st.booleans(), label=f"prefix {p} rollout {i}")
        return seen[(p, i)]

    labeler = BinarySearchLabeler(RulePolicy({}), k=k, max_rollouts=budget)
    result, asked = drive(labeler, trace, outcome)
    assert len(asked) == len(set(asked))
    assert len(asked) * k <= budget
    assert len(asked) <= max_search_rounds(n) + (whole is None)
    good = {p: any(seen[(p, i)] for i in range(k)) for p in asked}
    if whole == "42":
        good[n] = True
    elif whole == "7":
        good[n] = False
    first = result.notes.get("first_error")
    if first is not None and first >= 0:
        assert good.get(first + 1) is False            # the error ends a bad prefix ...
        assert first == 0 or good.get(first) is True   # ... right after a good one
        assert [len(labs) for labs in result.labels] == [1] * (first + 1) + [0] * (n - first - 1)
    elif first == -1:
        assert good.get(n) is True
