"""MCTS on hand-written trees: PUCT choices, visits and tokens counted by hand.

Token counts as in ``test_search.py``: ``ScriptedPolicy`` counts whitespace-separated words of each
completion; ``ScriptedScorer`` keeps no count, so scored tokens are the words of every trace handed to
it, problem text ("q", 1 word) included.
"""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.policies import ScriptedPolicy
from prmkit.search import ScriptedScorer, beam_search, mcts, puct, search

TREE = {"": ["a", "b"], "a\n": ["a1", "The answer is 5."], "b\n": ["The answer is 6.", "b1"]}
SCORES = {"a": 0.6, "b": 0.5, "a1": 0.3, "The answer is 5.": 0.1, "The answer is 6.": 0.9, "b1": 0.2}


def test_puct_formula():
    # q + c * P * sqrt(N) / (1 + n)
    assert puct(0.5, 0.5, 4, 1, 1.0) == 0.5 + 0.5 * 2 / 2
    assert puct(0.2, 0.5, 0, 0, 3.0) == 0.2  # an unvisited parent: only q counts


def test_mcts_follows_puct_on_a_hand_made_tree(problem, prompts, tree_policy):
    policy = tree_policy(TREE)
    scorer = ScriptedScorer(SCORES)
    r = mcts(problem, policy, scorer, prompts, simulations=3, expansions=2, c_puct=1.0, max_depth=3)
    # sim 1: the root expands into a (0.6) and b (0.5), prior 1/2 each; N(root) = 0, so PUCT is q:
    #        a is visited (backs up 0.6).
    # sim 2: N(root) = 1: a 0.6 + 0.5*1/2 = 0.85 < b 0.5 + 0.5*1/1 = 1.0: b expands into
    #        "The answer is 6." (0.9, ended) and b1 (0.2); the answer (q 0.9 > 0.2) is visited.
    # sim 3: N(root) = 2: a 0.6 + 0.5*1.414/2 = 0.954 < b 0.9 + 0.354 = 1.254; under b the answer
    #        0.9 + 0.5*1/2 = 1.15 > b1 0.2 + 0.5 = 0.7: the ended answer is visited again (no compute).
    assert [s.text for s in r.trace.steps] == ["b", "The answer is 6."]
    assert r.trace.outcome == "correct" and r.trace.meta["search"]["visits"] == 2
    assert r.trace.meta["search"]["path"] == "t0.1.0"
    assert [[(key, n) for key, _, n in call] for call in policy.calls] == [
        [("p/mcts/t0", 2)], [("p/mcts/t0.1", 2)]]
    # generated: a, b (1 + 1) + "The answer is 6.", b1 (4 + 1)
    assert r.generated_tokens == 7
    # scored: (1+1) + (1+1); then (1+1+4) + (1+1+1)
    assert r.scored_tokens == 13 and r.compute["scorer_calls"] == 2
    assert r.depth == 2 and [t.final_answer for t in r.candidates] == ["6"]


def test_mcts_finds_the_path_the_scorer_rewards_where_greedy_beam_does_not(problem, prompts, tree_policy):
    # a looks best (0.9) but every answer below it scores 0.1; b (0.4) leads to a 0.95 answer.
    tree = {"": ["a", "b"], "a\n": ["The answer is 5.", "The answer is 4."],
            "b\n": ["b2", "The answer is 3."], "b\nb2\n": ["The answer is 6.", "The answer is 2."]}
    scores = {"a": 0.9, "b": 0.4, "The answer is 5.": 0.1, "The answer is 4.": 0.1, "b2": 0.6,
              "The answer is 3.": 0.2, "The answer is 6.": 0.95, "The answer is 2.": 0.1}
    greedy = beam_search(problem, tree_policy(tree), ScriptedScorer(scores), prompts, beam_width=1,
                         expansions=2, max_depth=3)
    assert greedy.trace.final_answer != "6"
    r = mcts(problem, tree_policy(tree), ScriptedScorer(scores), prompts, simulations=8, expansions=2,
             max_depth=3)
    assert r.trace.final_answer == "6" and r.trace.outcome == "correct"
    by_value = mcts(problem, tree_policy(tree), ScriptedScorer(scores), prompts, simulations=8,
                    expansions=2, max_depth=3, answer="value")
    assert by_value.trace.final_answer == "6"


def _seeded_policy():
    return ScriptedPolicy(["x = 1", "x = 2", "y = 3", "The answer is 6.", "The answer is 5."])


def _scorer():
    return ScriptedScorer(lambda t: [0.3 + 0.1 * (len(s.text) % 5) for s in t.steps])


def _tree(r):
    return [(t.meta["search"]["path"], t.meta["search"]["visits"], t.text) for t in r.candidates]


def test_mcts_same_seed_same_tree(problem, prompts):
    a = mcts(problem, _seeded_policy(), _scorer(), prompts, simulations=6, expansions=3, seed=1)
    b = mcts(problem, _seeded_policy(), _scorer(), prompts, simulations=6, expansions=3, seed=1)
    c = mcts(problem, _seeded_policy(), _scorer(), prompts, simulations=6, expansions=3, seed=2)
    assert _tree(a) == _tree(b) and a.compute == b.compute and a.trace.text == b.trace.text
    assert _tree(a) != _tree(c)


def test_mcts_rollout_mixing_counts_rollout_tokens(problem, prompts, tree_policy):
    tree = {"": ["a", "b"], "a\n": ["The answer is 5."], "b\n": ["The answer is 6."]}
    scores = {"a": 0.9, "b": 0.5, "The answer is 5.": 0.9, "The answer is 6.": 0.5}
    r = mcts(problem, tree_policy(tree), ScriptedScorer(scores), prompts, simulations=1, expansions=2,
             max_depth=3, rollout_weight=1.0)
    # one expansion (a, b: 2 tokens) and one greedy rollout step per child (4 + 4 tokens); by outcome
    # a's rollout is wrong (0), b's right (1): with weight 1 b is taken though the PRM prefers a.
    assert r.generated_tokens == 10
    assert [s.text for s in r.trace.steps] == ["b"]  # the best-valued leaf: nothing ended yet


def test_mcts_refuses_bad_settings(problem, prompts, tree_policy):
    with pytest.raises(PrmkitError, match="simulations must be >= 1.*answer must be one of"):
        mcts(problem, tree_policy(TREE), ScriptedScorer(SCORES), prompts, simulations=0, answer="x")
    with pytest.raises(PrmkitError, match="unknown search setting.*beam_width"):
        search("mcts", problem, tree_policy(TREE), ScriptedScorer(SCORES), prompts, beam_width=2)


def test_cli_search_mcts_end_to_end(tmp_path, capsys):
    from prmkit.trace import read_traces
    from tests.search.test_cli_score import run

    out = tmp_path / "found.jsonl"
    run("search", "--env", "arith", "--problems", "2", "--method", "mcts", "--policy", "scripted",
        "-p", 'completions=["x = 1", "The answer is 7."]', "--scorer", "scripted",
        "-s", 'scores={"x = 1": 0.5, "The answer is 7.": 0.75}', "--simulations", "2",
        "--expansions", "2", "--c-puct", "0.5", "--max-depth", "3", "-o", out)
    found = list(read_traces(out))
    assert len(found) == 2 and all(t.meta["search"]["method"] == "mcts" for t in found)
    assert found[0].provenance[-1].args["simulations"] == 2
    assert "mcts accuracy" in capsys.readouterr().out
    with pytest.raises(PrmkitError, match="--simulations.* not an option of the beam search"):
        run("search", "--env", "arith", "--problems", "1", "--method", "beam", "--policy", "scripted",
            "-p", 'completions=["x = 1"]', "--scorer", "scripted", "-s", 'scores={"x = 1": 0.5}',
            "--simulations", "4", "-o", tmp_path / "b.jsonl")


class _KeyedPolicy(ScriptedPolicy):
    """The seeded scripted policy, recording the key of every request."""

    def __init__(self) -> None:
        super().__init__(["x = 1", "x = 2", "y = 3", "The answer is 6.", "The answer is 5."])
        self.keys: list[str] = []

    def generate(self, requests, params):
        self.keys += [r.key for r in requests]
        return super().generate(requests, params)


def _without_times(t) -> dict:
    d = t.to_dict()
    for p in d["provenance"]:
        p.pop("time", None)
    return d


def test_search_file_resumes_an_interrupted_run(tmp_path):
    from prmkit.search import search_file
    from prmkit.trace import Problem, read_traces

    problems = [Problem("1 + 1?", answer="2", id="a"), Problem("2 + 2?", answer="4", id="b")]
    opts = {"method": "mcts", "simulations": 2, "expansions": 2, "max_depth": 2, "seed": 3}

    def scorer(fail_on: str | None):
        def fn(t):
            if t.problem.id == fail_on:
                raise KeyboardInterrupt  # the run is cut while searching problem b
            return [0.5] * len(t.steps)
        return ScriptedScorer(fn)

    out, full = tmp_path / "found.jsonl", tmp_path / "full.jsonl"
    with pytest.raises(KeyboardInterrupt):
        search_file(out, problems, _KeyedPolicy(), scorer("b"), **opts)
    assert not out.exists()
    policy = _KeyedPolicy()
    resumed = search_file(out, problems, policy, scorer(None), **opts)
    assert {k.split("/")[0] for k in policy.keys} == {"b"}  # a was not searched again
    whole = search_file(full, problems, _KeyedPolicy(), scorer(None), **opts)
    # the same traces but for each provenance entry's time (to the second: two runs can straddle one)
    assert [_without_times(t) for t in read_traces(out)] == [_without_times(t) for t in read_traces(full)]
    assert resumed.problems == whole.problems == 2 and resumed.generated_tokens == whole.generated_tokens
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".searching.jsonl")]
