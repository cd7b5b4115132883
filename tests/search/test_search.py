"""Beam search, lookahead and DVTS on hand-written trees, with hand-counted tokens.

Token counts: ``ScriptedPolicy`` counts whitespace-separated words of each completion; the
``ScriptedScorer`` keeps no count of its own, so scored tokens are the words of every trace handed
to it, problem text ("q", 1 word) included.
"""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.search import ScriptedScorer, beam_search, dvts, search

BEAM_TREE = {
    "": ["a b", "c", "d e f", "g"],
    "c\n": ["c2 y", "The answer is 4."],
    "d e f\n": ["h", "So the answer is 5."],
    "c\nc2 y\n": ["The answer is 6.", "k"],
}
BEAM_SCORES = {"a b": 0.6, "c": 0.9, "d e f": 0.7, "g": 0.1,
               "c2 y": 0.5, "The answer is 4.": 0.3, "h": 0.4, "So the answer is 5.": 0.8,
               "The answer is 6.": 0.95, "k": 0.2}


def test_beam_search_finds_the_known_best_path(problem, prompts, tree_policy):
    policy = tree_policy(BEAM_TREE)
    scorer = ScriptedScorer(BEAM_SCORES)
    r = beam_search(problem, policy, scorer, prompts, beam_width=2, expansions=2, max_depth=3)
    # Round 1: the root gives 2×2 first steps; c (0.9) and "d e f" (0.7) survive.
    # Round 2: "So the answer is 5." (0.8, finished) and "c2 y" (0.5) survive; one slot left.
    # Round 3: "The answer is 6." (0.95) finishes; it beats "…5." (0.8).
    assert [s.text for s in r.trace.steps] == ["c", "c2 y", "The answer is 6."]
    assert r.trace.final_answer == "6" and r.trace.outcome == "correct"
    assert [s.scores["scripted"] for s in r.trace.steps] == [0.9, 0.5, 0.95]
    assert r.trace.meta["search"]["path"] == "t0.1.0.0"
    assert sorted(t.final_answer for t in r.candidates) == ["5", "6"]
    assert [[(key, n) for key, _, n in call] for call in policy.calls] == [
        [("p/beam/t0", 4)], [("p/beam/t0.1", 2), ("p/beam/t0.2", 2)], [("p/beam/t0.1.0", 2)]]
    # generated: (2+1+3+1) + (2+4+1+5) + (4+1) words
    assert r.generated_tokens == 24
    # scored: round 1 (1+2)+(1+1)+(1+3)+(1+1) = 11; round 2 (1+1+2)+(1+1+4)+(1+3+1)+(1+3+5) = 24;
    # round 3 (1+1+2+4)+(1+1+2+1) = 13
    assert r.scored_tokens == 48
    assert r.compute["scorer_calls"] == 3 and r.compute["generations"] == 10 and r.depth == 3


def test_beam_search_with_lookahead_sees_past_a_good_looking_step(problem, prompts, tree_policy):
    tree = {"": ["a", "b"], "a\n": ["a2", "The answer is 9."], "b\n": ["b2", "The answer is 3."]}
    scores = {"a": 0.9, "b": 0.1, "a2": 0.1, "b2": 0.6, "The answer is 3.": 0.7,
              "The answer is 9.": 0.2}
    plain = beam_search(problem, tree_policy(tree), ScriptedScorer(scores), prompts, beam_width=1,
                        expansions=2, max_depth=2)
    assert [s.text for s in plain.trace.steps] == ["a", "The answer is 9."]

    policy = tree_policy(tree)
    r = beam_search(problem, policy, ScriptedScorer(scores), prompts, beam_width=1, expansions=2,
                    max_depth=2, lookahead=1)
    # a's greedy rollout a2 scores 0.1, b's rollout b2 0.6 (aggregate "last"): b is kept.
    assert [s.text for s in r.trace.steps] == ["b", "The answer is 3."]
    assert [s.scores["scripted"] for s in r.trace.steps] == [0.1, 0.7]
    keys = [[key for key, _, _ in call] for call in policy.calls]
    # the last round (depth 2 = max_depth) rolls nothing out
    assert keys == [["p/beam/t0"], ["p/beam/t0.0/la0", "p/beam/t0.1/la0"], ["p/beam/t0.1"]]
    # generated: a, b (2) + lookahead a2, b2 (2) + "The answer is 3.", b2 (5) = 9 words
    assert r.generated_tokens == 9
    # scored: round 1 [a,a2], [b,b2] = 3+3; round 2 [b,"The answer is 3."] = 6, [b,b2] = 3
    assert r.scored_tokens == 15


def test_dvts_splits_the_budget_into_independent_subtrees(problem, prompts, tree_policy):
    tree = {"": ["a", "b", "c", "d"], "a\n": ["The answer is 1.", "a2"],
            "d\n": ["The answer is 6.", "d2"]}
    scores = {"a": 0.9, "b": 0.8, "c": 0.3, "d": 0.4, "The answer is 1.": 0.5, "a2": 0.6,
              "The answer is 6.": 0.7, "d2": 0.1}
    policy = tree_policy(tree)
    r = dvts(problem, policy, ScriptedScorer(scores), prompts, n=4, m=2, max_depth=2)
    # n / m = 2 subtrees of width 1, m = 2 expansions each, all sampled in one policy call per round:
    # subtree 0 gets a, b and keeps a; subtree 1 gets c, d and keeps d (a beam of 2 would keep a, b).
    assert [[(key, n) for key, _, n in call] for call in policy.calls] == [
        [("p/dvts/t0", 2), ("p/dvts/t1", 2)], [("p/dvts/t0.0", 2), ("p/dvts/t1.1", 2)]]
    # subtree 0 ends open at a2 (0.6), subtree 1 finishes with 6 (0.7): one path per subtree
    assert [(t.meta["search"]["tree"], [s.text for s in t.steps]) for t in r.candidates] == [
        (0, ["a", "a2"]), (1, ["d", "The answer is 6."])]
    assert r.trace.final_answer == "6" and r.trace.meta["search"]["tree"] == 1
    assert r.generated_tokens == 4 + (4 + 1 + 4 + 1)
    assert r.args["subtrees"] == 2


def test_dvts_budget_must_divide(problem, prompts, tree_policy):
    with pytest.raises(PrmkitError, match="multiple of m"):
        dvts(problem, tree_policy({"": ["a"]}), ScriptedScorer({}), prompts, n=5, m=2)


def test_search_by_name_rejects_unknown_settings(problem, prompts, tree_policy):
    with pytest.raises(PrmkitError, match="unknown search setting"):
        search("beam", problem, tree_policy({"": ["a"]}), ScriptedScorer({}), prompts, depth=3)
    with pytest.raises(PrmkitError, match="unknown search strategy 'astar'"):
        search("astar", problem, tree_policy({"": ["a"]}), ScriptedScorer({}), prompts)


def test_an_orm_ranks_paths_too(problem, prompts, tree_policy):
    tree = {"": ["x", "y"], "x\n": ["The answer is 6."], "y\n": ["The answer is 7."]}
    orm = ScriptedScorer({"x": 0.2, "y": 0.9, "The answer is 6.": 0.8, "The answer is 7.": 0.1},
                         kind="orm", name="orm")
    r = beam_search(problem, tree_policy(tree), orm, prompts, beam_width=1, expansions=2, max_depth=2)
    assert [s.text for s in r.trace.steps] == ["y", "The answer is 7."]
    assert r.trace.meta["scores"] == {"orm": 0.1}
