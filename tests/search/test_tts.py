"""Test-time-compute recipes (``prmkit tts``): loading and its errors, the sweep's accounting and
sample sharing, resume, the report section, and the command end to end.

A scripted policy answers by the sample's index (so its samples are known by hand) and a scripted
scorer scores by step text. Token counts as in ``test_search.py``: ``ScriptedPolicy`` counts the words
of each completion; ``ScriptedScorer`` keeps no count, so scored tokens are the words of every trace
handed to it, the problem's text included.
"""

from __future__ import annotations

import json

import pytest

from prmkit.errors import FormatError, PrmkitError
from prmkit.generate import load_problems
from prmkit.policies import ScriptedPolicy
from prmkit.search import ScriptedScorer, TtsResult, load_recipe, run_recipe, shipped_recipes

PROBLEMS, _ = load_problems(env="arith", n=2, steps="2")
ANSWER = {p.text: p.answer for p in PROBLEMS}


def _samples(answer: str) -> list[str]:
    # words: 7, 4, 6, 5 (generated tokens of samples 0..3)
    return ["a b c\nThe answer is 0.", f"The answer is {answer}.", "d e\nThe answer is 1.",
            f"x\nThe answer is {answer}."]


def _complete(request, k: int) -> str:
    text = next(t for t in ANSWER if t in json.dumps(request.messages))
    return _samples(ANSWER[text])[k % 4]


SCORES = {"a b c": 0.2, "The answer is 0.": 0.9, "d e": 0.5, "The answer is 1.": 0.3, "x": 0.6,
          **{f"The answer is {a}.": 0.8 for a in ANSWER.values()}}

RECIPE = """\
name: tiny
problems: {env: arith, n: 2, steps: "2"}
verifiers:
  s: {scorer: scripted}
budgets: [2, 4]
methods: [majority, bon, weighted, beam]
aggregators: [last, min]
settings: {max_depth: 3}
beam: {expansions: 2}
"""


class CountingPolicy(ScriptedPolicy):
    """Answers by sample index; counts calls and can fail at a given call (an interrupted run)."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__(_complete, model_id="counted")
        self.calls: list[tuple[int, str]] = []  # (n, first request's key) per call
        self.fail_at = fail_at

    def generate(self, requests, params):
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise KeyboardInterrupt
        self.calls.append((params.n, requests[0].key))
        return super().generate(requests, params)


def _recipe(tmp_path, text: str = RECIPE, name: str = "r.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _cells(result: TtsResult) -> dict[str, tuple]:
    return {f"{c.method}/{c.n}/{c.aggregate}": (c.right, c.judged, c.generated_tokens, c.scored_tokens)
            for c in result.cells}


# -- the recipe -------------------------------------------------------------------------------------------

def test_shipped_recipes_load_by_name():
    assert {"bon_vs_beam", "quick"} <= set(shipped_recipes())
    r = load_recipe("bon_vs_beam")
    assert set(r.methods) == {"majority", "bon", "weighted", "beam", "dvts", "mcts"}
    assert [v.describe() for v in r.verifiers] == ["--model default", "--model default -s check=calculator"]
    # 2 verifiers x 2 aggregators x 3 budgets per scored method, 3 for majority
    assert len(r.cells()) == 5 * 2 * 2 * 3 + 3
    assert load_recipe("quick").budgets == (2, 4)


def test_budget_maps_to_each_method_settings(tmp_path):
    r = load_recipe(_recipe(tmp_path, RECIPE.replace("[majority, bon, weighted, beam]",
                                                     "[beam, dvts, mcts]") + "dvts: {m: 2}\n"))
    opts = {c.key: r.search_options(c) for c in r.cells() if c.aggregate == "last"}
    assert (opts["beam/N=4/last/s"]["beam_width"], opts["beam/N=4/last/s"]["expansions"]) == (2, 2)
    assert (opts["dvts/N=4/last/s"]["n"], opts["dvts/N=4/last/s"]["m"]) == (4, 2)
    assert (opts["mcts/N=2/last/s"]["simulations"], opts["mcts/N=2/last/s"]["expansions"]) == (2, 2)
    assert opts["mcts/N=2/last/s"]["max_depth"] == 3 and opts["mcts/N=2/last/s"]["aggregate"] == "last"


def test_recipe_errors_name_file_line_and_field_all_at_once(tmp_path):
    bad = _recipe(tmp_path, """\
name: bad
problems: {env: arith, n: 2}
methods: [bon, bfs]
aggregators: [last, median]
verifiers: {s: {scorer: scripted}}
""")
    with pytest.raises(FormatError) as e:
        load_recipe(bad)
    msg = str(e.value)
    assert f"{bad}:3: methods[1] — unknown method 'bfs'" in msg
    assert f"{bad}:4: aggregators[1] — unknown aggregator 'median'" in msg
    assert "budgets — missing" in msg and msg.startswith(f"{bad}: 3 problems in the recipe")


def test_recipe_refuses_an_unknown_key_and_an_unsplittable_budget(tmp_path):
    with pytest.raises(FormatError, match=r"r.yaml:6: budgets\[1\] — beam splits N=5"):
        load_recipe(_recipe(tmp_path, RECIPE.replace("[2, 4]", "[2,\n  5]")))
    with pytest.raises(FormatError, match=r"r.yaml:1: nmae — unknown recipe field"):
        load_recipe(_recipe(tmp_path, "nmae: x\n" + RECIPE))
    with pytest.raises(FormatError, match=r"verifiers — missing: the methods bon need a verifier"):
        load_recipe(_recipe(tmp_path, "problems: {env: arith}\nbudgets: [1]\nmethods: [bon]\n"))
    with pytest.raises(PrmkitError, match="no shipped recipe of that name"):
        load_recipe("no_such_recipe")


# -- the sweep ----------------------------------------------------------------------------------------------

def _run(tmp_path, out="run", **kw):
    return run_recipe(load_recipe(_recipe(tmp_path)), tmp_path / out,
                      scorers={"s": ScriptedScorer(SCORES, default=0.5)}, **kw)


def test_selection_cells_are_counted_by_hand_and_share_their_samples(tmp_path):
    policy = CountingPolicy()
    result = _run(tmp_path, policy=policy)
    cells = _cells(result)
    words = sum(len(p.text.split()) for p in PROBLEMS)  # the problem's words, in every scored trace
    # generated: samples 0,1 (7 + 4 words) per problem, all four 22; two problems
    # scored: each trace with its problem's words; at N=4 the first two plus samples 2, 3 (6 + 5)
    n2 = (2, 22, 2 * words + 22)
    n4 = (2, 44, 4 * words + 44)
    # last: sample 0 ("... 0.", 0.9) wins at both N: wrong; min: sample 0 is 0.2, sample 1 (0.8) wins
    assert cells["bon/2/last"] == (0, *n2) and cells["bon/4/last"] == (0, *n4)
    assert cells["bon/2/min"] == (2, *n2) and cells["bon/4/min"] == (2, *n4)
    # weighted, N=4, last: the right answer's two samples weigh 1.6 against 0.9
    assert cells["weighted/4/last"] == (2, *n4) and cells["weighted/2/last"] == (0, *n2)
    # majority: N=2 ties 1-1 (the earliest answer, "0", wins); N=4: the right answer 2 votes of 4
    assert cells["majority/2/None"] == (0, 2, 22, 0) and cells["majority/4/None"] == (2, 2, 44, 0)
    # one sampling call per problem at the largest N; N=2 chose among the first two samples
    sampled = [(n, key) for n, key in policy.calls if "/" not in key]  # searches key "pid/method/path"
    assert sampled == [(4, PROBLEMS[0].id), (4, PROBLEMS[1].id)]
    rows = [json.loads(x) for x in (tmp_path / "run" / "progress.jsonl").read_text().splitlines()]
    assert all(r["chosen"] < 2 for r in rows if r["unit"] == "cell" and "N=2/" in r["cell"]
               and not r["cell"].startswith("beam"))


def test_a_smaller_budget_alone_gives_the_same_cells(tmp_path):
    both = _cells(_run(tmp_path, "both", policy=CountingPolicy()))
    p = _recipe(tmp_path, RECIPE.replace("[2, 4]", "[2]"), "two.yaml")
    alone = _cells(run_recipe(load_recipe(p), tmp_path / "alone", policy=CountingPolicy(),
                              scorers={"s": ScriptedScorer(SCORES, default=0.5)}))
    assert alone == {k: v for k, v in both.items() if "/2/" in k}


def test_search_cells_add_up_over_problems(tmp_path):
    _run(tmp_path, policy=CountingPolicy())
    rows = [json.loads(x) for x in (tmp_path / "run" / "progress.jsonl").read_text().splitlines()]
    result = TtsResult.from_dict(json.loads((tmp_path / "run" / "tts.json").read_text())["tts"])
    for c in result.cells:
        mine = [r for r in rows if r["unit"] == "cell" and r["cell"].startswith(f"{c.method}/N={c.n}/")
                and f"/{c.aggregate or '-'}/" in r["cell"]]
        assert len(mine) == c.problems == 2
        assert c.generated_tokens == sum(r["generated_tokens"] for r in mine)
        assert c.scored_tokens == sum(r["scored_tokens"] for r in mine)
    beam = {(c.n, c.aggregate): c for c in result.cells if c.method == "beam"}
    assert beam[(4, "last")].settings["beam_width"] == 2 and beam[(2, "last")].settings["beam_width"] == 1
    assert beam[(4, "last")].generated_tokens > beam[(2, "last")].generated_tokens > 0


def test_a_killed_run_resumes_to_what_an_uninterrupted_one_writes(tmp_path):
    whole = CountingPolicy()
    _run(tmp_path, "whole", policy=whole)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, "resumed", policy=CountingPolicy(fail_at=len(whole.calls) // 2))
    assert not (tmp_path / "resumed" / "tts.json").exists()
    again = CountingPolicy()
    _run(tmp_path, "resumed", policy=again)
    # finished work is not redone: the second run makes only the calls the first did not finish
    assert 0 < len(again.calls) <= len(whole.calls) - len(whole.calls) // 2
    a, b = (json.loads((tmp_path / d / "tts.json").read_text())["tts"] for d in ("whole", "resumed"))
    assert a == b
    done = CountingPolicy()
    _run(tmp_path, "resumed", policy=done)
    assert done.calls == []
    with pytest.raises(PrmkitError, match="another version of the recipe"):
        run_recipe(load_recipe(_recipe(tmp_path, RECIPE.replace("max_depth: 3", "max_depth: 4"))),
                   tmp_path / "resumed", policy=CountingPolicy(), scorers={"s": ScriptedScorer(SCORES)})


# -- the report ----------------------------------------------------------------------------------------------

def test_the_report_section_renders_from_a_results_file(tmp_path):
    from prmkit.eval import load_results, render_markdown, write_report

    f = tmp_path / "tts.json"
    f.write_text(json.dumps({"tts": {
        "recipe": "hand", "problems": 4, "budgets": [2, 4], "policy": "p",
        "verifiers": {"prm": "--model default"},
        "cells": [{"method": "bon", "n": 4, "aggregate": "min", "verifier": "prm", "problems": 4,
                   "judged": 4, "right": 2, "generated_tokens": 100, "scored_tokens": 300},
                  {"method": "majority", "n": 2, "problems": 4, "judged": 0, "right": 0,
                   "generated_tokens": 40, "scored_tokens": 0}]}}))
    md = render_markdown(load_results([f]))
    # 2 of 4: Wilson [0.150, 0.850]; 100 and 300 tokens over 4 problems
    assert "| **bon** | prm | min | 4 | 50.0% [15.0%, 85.0%] | 2/4 | 25 | 75 |" in md
    assert "| **majority** | — | — | 2 | — | 0/0 | 10 | 0 |" in md
    assert "## Test-time compute: accuracy against compute" in md and "**prm**: --model default" in md
    pytest.importorskip("matplotlib")
    written = write_report(load_results([f]), tmp_path / "report", figures=True)
    assert [k for k in written if k.startswith("figure:")] == ["figure:tts"]
    assert "![Accuracy against tokens generated" in written["markdown"].read_text()


def test_a_results_file_with_a_malformed_tts_section_is_refused(tmp_path):
    from prmkit.eval import load_results

    f = tmp_path / "tts.json"
    f.write_text(json.dumps({"tts": {"budgets": "2,4"}}))
    with pytest.raises(FormatError, match="tts.budgets — must be a non-empty list of integers"):
        load_results([f])


# -- the command ------------------------------------------------------------------------------------------------

def test_the_command_runs_a_scripted_recipe_and_the_report_draws_it(tmp_path, capsys):
    from prmkit.cli import main

    recipe = _recipe(tmp_path, """\
name: cli
problems: {env: arith, n: 2, steps: "2"}
policy: {backend: scripted, options: {completions: ["x = 1", "The answer is 5."]}}
verifiers:
  s: {scorer: scripted, scores: {"x = 1": 0.7, "The answer is 5.": 0.4}, default: 0.5}
budgets: [1, 2]
methods: [bon, dvts]
dvts: {m: 1}
settings: {max_depth: 2}
""")
    main(["tts", "--recipe", str(recipe), "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert "dvts     N=2   s (last)" in out and "tts.json: results" in out
    main(["report", str(tmp_path / "run" / "tts.json"), "-o", str(tmp_path / "report")])
    md = (tmp_path / "report" / "report.md").read_text()
    assert md.count("| **bon** | s | last |") == 2 and md.count("| **dvts** | s | last |") == 2


def test_a_run_grows_to_more_problems_without_redoing_the_first(tmp_path):
    from dataclasses import replace

    recipe = load_recipe(_recipe(tmp_path))
    first = CountingPolicy()
    run_recipe(replace(recipe, problems={**recipe.problems, "n": 1}), tmp_path / "run", policy=first,
               scorers={"s": ScriptedScorer(SCORES, default=0.5)})
    more = CountingPolicy()
    _run(tmp_path, policy=more)
    assert {key.split("/")[0] for _, key in first.calls} == {PROBLEMS[0].id}
    assert {key.split("/")[0] for _, key in more.calls} == {PROBLEMS[1].id}
