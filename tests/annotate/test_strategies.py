"""Queue strategies on four traces with hand-set PRM scores (tests/annotate/conftest.py): the orders
below are worked out by hand from those scores."""

from __future__ import annotations

import pytest
from annotate_traces import scored_traces

from prmkit.annotate import STRATEGIES, build_queue
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace

IDS = ["a1", "a2", "b1", "b2"]


def order(strategy, **kw):
    traces = scored_traces()
    return [traces[e.index].id for e in build_queue(traces, strategy, **kw)]


def test_the_registry_lists_the_four_strategies():
    assert list(STRATEGIES)[:4] == ["random", "uncertainty", "convincing_wrong", "disagreement"]
    assert STRATEGIES.group == "prmkit.queue_strategies"


def test_uncertainty_puts_the_step_nearest_one_half_first():
    # nearest step to 0.5: a1 0.8 (0.3), a2 0.55 (0.05), b1 0.9 (0.4), b2 0.4 (0.1)
    assert order("uncertainty") == ["a2", "b2", "a1", "b1"]


def test_convincing_wrong_puts_wrong_answers_the_prm_likes_first():
    # wrong answers: b1 (min score 0.9) before a2 (0.55); then the right ones in file order
    assert order("convincing_wrong") == ["b1", "a2", "a1", "b2"]
    assert order("convincing_wrong", aggregate="mean") == ["b1", "a2", "a1", "b2"]


def test_disagreement_puts_the_largest_gap_with_the_mc_labels_first():
    # largest |prm - mc_soft|: a2 0.6 (0.6 against 0.0); the others 0.1 (a tie: file order)
    assert order("disagreement") == ["a2", "a1", "b1", "b2"]
    assert order("disagreement", against="judge") == IDS  # no judge labels: every trace ties at -1


def test_per_problem_cap_and_limit():
    assert order("uncertainty", per_problem_cap=1) == ["a2", "b2"]
    assert order("convincing_wrong", limit=3) == ["b1", "a2", "a1"]


def test_random_is_a_seeded_permutation():
    first = order("random", seed=3)
    assert sorted(first) == IDS and order("random", seed=3) == first
    traces = [Trace(f"t{i}", Problem(f"q{i}"), [Step("s")]) for i in range(12)]
    orders = {tuple(e.index for e in build_queue(traces, "random", seed=s)) for s in range(3)}
    assert len(orders) == 3  # three seeds, three different orders of 12


def test_overlap_marks_that_fraction_for_two_annotators():
    entries = build_queue(scored_traces(), "uncertainty", overlap=0.5)
    assert sum(e.copies == 2 for e in entries) == 2 and {e.copies for e in entries} == {1, 2}
    assert all(e.copies == 1 for e in build_queue(scored_traces(), "uncertainty"))


def test_strategies_that_need_scores_say_so():
    plain = [Trace("t", Problem("q"), [Step("s")])]
    with pytest.raises(PrmkitError, match="no step scores; score them first"):
        build_queue(plain, "uncertainty")
    with pytest.raises(PrmkitError, match="no step scores from 'orm'"):
        build_queue(scored_traces(), "uncertainty", key="orm")
    with pytest.raises(PrmkitError, match="unknown queue strategy 'best'"):
        build_queue(scored_traces(), "best")
    with pytest.raises(PrmkitError, match="--overlap"):
        build_queue(scored_traces(), "random", overlap=1.5)
    assert [e.index for e in build_queue(plain, "random")] == [0]  # random needs no scores
