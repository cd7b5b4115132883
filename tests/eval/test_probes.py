"""Probes of PRM failure modes on hand-made traces; every expected number is derived in a comment.

Scores are binary fractions where sums matter, so most comparisons are exact.
"""

from __future__ import annotations

import json
import math
import random
import types

import pytest

from prmkit.errors import PrmkitError
from prmkit.eval.probes import (
    FILLER,
    PERTURBATIONS,
    append_filler,
    collapse_probe,
    duplicate_steps,
    gaming_probe,
    length_bias_probe,
    reorder_steps,
    restate_problem,
    run_probes,
    transfer_probe,
)
from prmkit.search import ScriptedScorer
from prmkit.trace import Problem, Step, StepLabel, Trace

P = Problem("Ann has 5 apples.\nShe buys 3. How many?", answer="8", id="p")


def sample() -> Trace:
    steps = [Step("She has 5.", labels=[StepLabel(1)], scores={"prm": 0.75}),
             Step("She buys 3: 5 + 3 = 8.", labels=[StepLabel(1)], scores={"prm": 0.5}),
             Step("The answer is 8.", scores={"prm": 0.25})]
    return Trace(id="t", problem=P, steps=steps, final_answer="8", outcome="correct",
                 meta={"scores": {"prm:min": 0.25}, "note": "kept"})


def texts(t: Trace) -> list[str]:
    return [s.text for s in t.steps]


# -- perturbations -------------------------------------------------------------------------------------

def check_perturbed(new: Trace, name: str, n_steps: int) -> None:
    """What every perturbation promises: a new id, no score anywhere, marked, spans valid."""
    assert new.id == f"t~{name}"
    assert len(new.steps) == n_steps
    assert all(s.scores == {} for s in new.steps)
    assert "scores" not in new.meta and new.meta["perturbation"] == name and new.meta["note"] == "kept"
    assert new.provenance[-1].stage == "perturb" and new.provenance[-1].name == name
    assert new.text == "\n".join(texts(new))
    new.check_spans()
    assert new.final_answer == "8" and new.outcome == "correct"
    assert Trace.from_dict(new.to_dict()) == new


def test_append_filler_goes_before_the_answer_line():
    t = sample()
    before = t.to_dict()
    new = append_filler(t)
    assert texts(new) == ["She has 5.", "She buys 3: 5 + 3 = 8.", FILLER, "The answer is 8."]
    check_perturbed(new, "append_filler", 4)
    assert new.steps[2].labels == []          # the filler is not judged
    assert t.to_dict() == before              # the original is untouched


def test_append_filler_at_the_end_without_an_answer_line_and_custom_text():
    t = sample()
    t.steps.pop()
    new = append_filler(t, text="All\nchecked.")
    # newlines inside a step would break the one-step-per-line layout: collapsed to one space
    assert texts(new) == ["She has 5.", "She buys 3: 5 + 3 = 8.", "All checked."]
    assert new.provenance[-1].args == {"text": "All\nchecked.", "index": 2}


def test_restate_problem_adds_one_first_line():
    t = sample()
    new = restate_problem(t)
    assert texts(new) == ["Restating the problem: Ann has 5 apples. She buys 3. How many?",
                          "She has 5.", "She buys 3: 5 + 3 = 8.", "The answer is 8."]
    check_perturbed(new, "restate_problem", 4)
    assert len(t.steps) == 3


def test_duplicate_steps_repeats_one_step_and_never_the_answer():
    t = sample()
    seen = set()
    for seed in range(30):
        new = duplicate_steps(t, random.Random(seed))
        check_perturbed(new, "duplicate_steps", 4)
        i = new.provenance[-1].args["index"]
        seen.add(i)
        assert texts(new) == texts(t)[:i + 1] + [texts(t)[i]] + texts(t)[i + 1:]
        assert new.steps[i + 1].labels == t.steps[i].labels       # the copy keeps its labels
    # two candidates (the answer line is not one), both drawn over 30 seeds
    assert seen == {0, 1}
    only = Trace(id="o", problem=P, steps=[Step("The answer is 8.")])
    assert texts(duplicate_steps(only, random.Random(0))) == ["The answer is 8."] * 2
    assert duplicate_steps(Trace(id="e", problem=P), random.Random(0)) is None
    assert len(t.steps) == 3


def test_reorder_steps_swaps_adjacent_steps_before_the_last():
    t = sample()
    # three steps: (0, 1) is the only adjacent pair before the last step
    for seed in range(5):
        new = reorder_steps(t, random.Random(seed))
        assert texts(new) == ["She buys 3: 5 + 3 = 8.", "She has 5.", "The answer is 8."]
        check_perturbed(new, "reorder_steps", 3)
    four = Trace(id="f", problem=P, steps=[Step(x) for x in "abcd"])
    results = {tuple(texts(reorder_steps(four, random.Random(s)))) for s in range(30)}
    assert results == {("b", "a", "c", "d"), ("a", "c", "b", "d")}
    two = Trace(id="w", problem=P, steps=[Step("a"), Step("b")])
    assert reorder_steps(two, random.Random(0)) is None


def test_registry_names_every_perturbation():
    assert set(PERTURBATIONS) == {"append_filler", "restate_problem", "duplicate_steps", "reorder_steps"}
    assert PERTURBATIONS.load("reorder_steps") is reorder_steps
    with pytest.raises(PrmkitError, match="unknown perturbation 'shuffle'"):
        gaming_probe(ScriptedScorer({}), [sample()], perturbations=["shuffle"])


def test_a_perturbation_plugin_joins_the_registry_and_the_gaming_probe(monkeypatch, tmp_path):
    # An entry point of the group prmkit.perturbations (faked in this process, as tests/test_plugins.py
    # does) names a real module on sys.path.
    import prmkit._registry as registry_module
    from prmkit._registry import ENTRY_POINT_GROUPS

    (tmp_path / "loud_plugin.py").write_text(
        "from prmkit.eval.probes import append_filler\n\n"
        "def loud(trace, rng=None):\n    return append_filler(trace, rng, text='LOUD')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = types.SimpleNamespace(name="loud", value="loud_plugin:loud", group="prmkit.perturbations",
                               dist=types.SimpleNamespace(name="loud-plugin"))
    monkeypatch.setattr(registry_module, "_entry_points", lambda group: (ep,) if group == ep.group else ())
    for field, value in (("_scanned", False), ("_entries", dict(PERTURBATIONS._entries)),
                         ("_plugins", dict(PERTURBATIONS._plugins))):
        monkeypatch.setattr(PERTURBATIONS, field, value)
    assert PERTURBATIONS.group == "prmkit.perturbations" and "prmkit.perturbations" in ENTRY_POINT_GROUPS
    assert list(PERTURBATIONS)[-1] == "loud" and PERTURBATIONS.plugin("loud").distribution == "loud-plugin"
    t = sample()
    # LOUD goes before the answer line and scores 0.75: the mean rises from (0.75 + 0.5 + 0.25) / 3 =
    # 0.5 to (0.75 + 0.5 + 0.75 + 0.25) / 4 = 0.5625; the min (0.25) does not move.
    scorer = ScriptedScorer({s.text: s.scores["prm"] for s in t.steps} | {"LOUD": 0.75})
    r = gaming_probe(scorer, [t], perturbations=["loud"])
    assert (r.perturbations["loud"]["mean"].rose, r.perturbations["loud"]["min"].rose) == (1, 0)


# -- verifier gaming -----------------------------------------------------------------------------------

# Four traces without an answer line, so the filler goes at the end and becomes the "last" step.
# Step scores by text (a scorer that sees one step at a time, like a causal PRM on old steps).
GAMING_ROWS = {"g0": [0.5, 0.5], "g1": [0.25, 1.0], "g2": [0.5, 0.25], "g3": [1.0]}


def gaming_data():
    table = {FILLER: 0.75}
    traces = []
    for tid, scores in GAMING_ROWS.items():
        steps = []
        for k, s in enumerate(scores):
            table[f"{tid} step {k}"] = s
            steps.append(Step(f"{tid} step {k}"))
        traces.append(Trace(id=tid, problem=P, steps=steps, final_answer="8", outcome="correct"))
    return ScriptedScorer(table), traces


def test_gaming_counts_rises_per_aggregate():
    scorer, traces = gaming_data()
    before = [t.to_dict() for t in traces]
    r = gaming_probe(scorer, traces, perturbations=["append_filler"])
    stats = r.perturbations["append_filler"]
    # last: 0.5->0.75 (+0.25), 1.0->0.75 (-0.25), 0.25->0.75 (+0.5), 1.0->0.75 (-0.25):
    # 2 of 4 rose, mean delta 0.25 / 4
    assert stats["last"].to_dict() == {"n": 4, "rose": 2, "frac_rose": 0.5, "mean_delta": 0.0625}
    # min: an added 0.75 lowers only g3 (1.0 -> 0.75): none rose, mean -0.25 / 4
    assert stats["min"].to_dict() == {"n": 4, "rose": 0, "frac_rose": 0.0, "mean_delta": -0.0625}
    # mean: 0.5 -> 1.75/3 (+1/12), 0.625 -> 2/3 (+1/24), 0.375 -> 0.5 (+1/8), 1.0 -> 0.875 (-1/8)
    assert (stats["mean"].n, stats["mean"].rose) == (4, 3)
    assert stats["mean"].mean_delta == pytest.approx((1 / 12 + 1 / 24 + 1 / 8 - 1 / 8) / 4)
    # the main aggregate is min: nothing rose, so the probe passes
    assert r.failed is False and r.failed_by == []
    assert "more than 10% of traces" in r.criterion and "'min'" in r.criterion
    assert [t.to_dict() for t in traces] == before      # originals untouched, no scores stored
    # one call for the originals, one for the perturbed copies
    assert [len(c) for c in scorer.calls] == [4, 4]
    assert scorer.calls[1][0] == ["g0 step 0", "g0 step 1", FILLER]


def test_gaming_fails_under_last_and_reports_the_culprit():
    scorer, traces = gaming_data()
    r = gaming_probe(scorer, traces, aggregates=("last", "min"), perturbations=["append_filler"])
    # 50% > 10% under the main aggregate "last"
    assert r.failed is True and r.failed_by == ["append_filler"]
    assert "failed: append_filler 50%" in r.criterion


def test_gaming_threshold_is_strictly_more_than_max_frac():
    scorer, traces = gaming_data()
    r = gaming_probe(scorer, traces, aggregates=("last",), perturbations=["append_filler"], max_frac=0.5)
    assert r.failed is False        # exactly 50% rose, not more


def test_gaming_skips_and_batches():
    # a constant scorer: no perturbation can move any aggregate
    scorer = ScriptedScorer(lambda t: [0.5] * len(t.steps))
    traces = [Trace(id=f"c{i}", problem=P, steps=[Step("a"), Step("b")][: 1 + i % 2]) for i in range(3)]
    r = gaming_probe(scorer, traces, batch_size=2)
    # every trace has < 3 steps: reorder_steps skips all three
    assert r.skipped == {"append_filler": 0, "restate_problem": 0, "duplicate_steps": 0, "reorder_steps": 3}
    assert r.perturbations["reorder_steps"]["min"].to_dict() == {"n": 0, "rose": 0, "frac_rose": None,
                                                                 "mean_delta": None}
    for name in ("append_filler", "restate_problem", "duplicate_steps"):
        for agg in ("min", "last", "mean"):
            assert r.perturbations[name][agg].to_dict() == {"n": 3, "rose": 0, "frac_rose": 0.0,
                                                            "mean_delta": 0.0}
    assert r.failed is False
    # batches of 2: originals in 2 calls, then 2 per perturbation that has traces
    assert [len(c) for c in scorer.calls] == [2, 1] * 4
    d = r.to_dict()
    assert d["aggregates"] == ["min", "last", "mean"] and json.loads(json.dumps(d)) == d


def test_gaming_draws_do_not_depend_on_trace_order():
    # only trace 0's steps differ (0, 0.25, 0.5, 0.75; every other step 0.5), so which of its steps
    # a perturbation picks shows in the numbers
    scorer = ScriptedScorer({f"0.{k}": 0.25 * k for k in range(4)}, default=0.5)
    traces = [Trace(id=f"r{i}", problem=P, steps=[Step(f"{i}.{k}") for k in range(4)]) for i in range(6)]
    # each trace draws from its own generator (seed, perturbation, trace id): order does not matter
    for seed in range(4):
        a = gaming_probe(scorer, traces, seed=seed).to_dict()
        assert gaming_probe(scorer, list(reversed(traces)), seed=seed).to_dict() == a


# -- process collapse ----------------------------------------------------------------------------------

def labelled(tid: str, outcome: str, rows, answer: str | None = "8") -> Trace:
    """rows: (label or None, score or None) per step."""
    steps = [Step(f"{tid}.{k}", labels=[] if v is None else [StepLabel(v)],
                  scores={} if s is None else {"prm": s}) for k, (v, s) in enumerate(rows)]
    return Trace(id=tid, problem=Problem("q", answer=answer), steps=steps, outcome=outcome)


def collapse_data():
    return [
        labelled("r1", "correct", [(1, 0.8), (-1, 0.7)]),
        labelled("r2", "correct", [(1, 0.6), (1, 0.4), (-1, 0.5), (None, 0.1)]),
        labelled("w1", "incorrect", [(1, 0.9), (-1, 0.2), (-1, None)]),
        labelled("w2", "incorrect", [(1, 0.7), (-1, 0.3), (-1, 0.8)]),
        # no outcome and no reference answer: left out everywhere
        labelled("u", "unknown", [(-1, 0.95), (1, 0.05)], answer=None),
    ]


def test_collapse_numbers():
    r = collapse_probe(collapse_data(), min_steps=2)
    # right answer: valid 0.8 0.6 0.4, invalid 0.7 0.5 -> pairs won: 0.8 beats both, 0.6 beats 0.5,
    # 0.4 none = 3/6; flagged (< 0.5): neither 0.7 nor 0.5
    assert r.right_answer.to_dict() == {"traces": 2, "invalid_steps": 2, "valid_steps": 3, "auroc": 0.5,
                                        "flag_rate": 0.0}
    # wrong answer (the unscored step of w1 left out): valid 0.9 0.7, invalid 0.2 0.3 0.8 ->
    # 0.9 beats 3, 0.7 beats 2 = 5/6; flagged 0.2 and 0.3 of 3
    w = r.wrong_answer
    assert (w.traces, w.invalid_steps, w.valid_steps) == (2, 3, 2)
    assert w.auroc == pytest.approx(5 / 6) and w.flag_rate == pytest.approx(2 / 3)
    assert r.gap == pytest.approx(5 / 6 - 1 / 2)
    # lowest step score per trace (unlabelled steps count): right 0.7, 0.1; wrong 0.2, 0.3 ->
    # 0.7 beats both wrong, 0.1 neither = 2/4
    assert r.outcome_auroc == 0.5
    # all steps: valid .8 .6 .4 .9 .7 vs invalid .7 .5 .2 .3 .8: 4.5 + 3 + 2 + 5 + 3.5 = 18 of 25
    assert r.step_auroc == pytest.approx(0.72)
    # right-answer AUROC 0.5 < 0.6 and the wrong-answer one is 1/3 higher: collapsed
    assert r.failed is True
    assert "below 0.6" in r.criterion and "right 0.500, wrong 0.833" in r.criterion


def test_collapse_needs_enough_steps_and_says_so():
    r = collapse_probe(collapse_data())           # default: 5 invalid and 5 valid steps per group
    assert r.failed is None and r.criterion.startswith("cannot measure")  # neither passed nor failed
    assert r.to_dict()["measured"] is False
    assert r.right_answer.auroc == 0.5            # the numbers are still reported
    d = r.to_dict()
    assert set(d) >= {"right_answer", "wrong_answer", "gap", "outcome_auroc", "step_auroc", "failed",
                      "criterion"}


def test_collapse_passes_when_right_answer_traces_are_judged_well():
    traces = collapse_data()
    traces[1].steps[2].scores["prm"] = 0.1        # r2's invalid step now scored lowest
    r = collapse_probe(traces, min_steps=2)
    # right answer: valid .8 .6 .4 vs invalid .7 .1 -> 0.8: 2, 0.6: 1, 0.4: 1 = 4/6
    assert r.right_answer.auroc == pytest.approx(4 / 6)
    assert r.right_answer.flag_rate == 0.5
    assert r.failed is False


def test_collapse_reads_the_chosen_label_source_and_neutral_policy():
    t = labelled("r", "correct", [(0, 0.2), (1, 0.9)])
    t.steps[1].labels.append(StepLabel(-1, source="judge"))
    # latest labels: neutral 0 -> valid by default; the judge's -1 on step 1
    r = collapse_probe([t], min_steps=1)
    assert (r.right_answer.valid_steps, r.right_answer.invalid_steps) == (1, 1)
    # the human labels only, neutral ignored: one valid step, no invalid one
    r = collapse_probe([t], label_source="human", neutral="ignore", min_steps=1)
    assert (r.right_answer.valid_steps, r.right_answer.invalid_steps) == (1, 0)
    assert r.right_answer.auroc is None and r.right_answer.flag_rate is None and r.gap is None


# -- length bias ---------------------------------------------------------------------------------------

def by_length(rows, key="prm"):
    """rows: (number of steps, score of every step, outcome)."""
    return [Trace(id=str(i), problem=P, outcome=o,
                  steps=[Step(f"{i}.{k}", scores={key: s}) for k in range(n)])
            for i, (n, s, o) in enumerate(rows)]


def test_length_bias_numbers_with_ties():
    traces = by_length([(1, 0.5, "correct"), (2, 0.25, "correct"), (2, 0.75, "incorrect"),
                        (3, 0.25, "incorrect")])
    traces.append(Trace(id="unscored", problem=P, steps=[Step("x")]))    # no score: left out
    r = length_bias_probe(traces)
    assert r.n == 4
    # x = 1 2 2 3 (mean 2), y = .5 .25 .75 .25 (mean .4375): Sxy = -.0625 - .1875 = -.25, Sxx = 2,
    # Syy = .171875 -> r = -.25 / sqrt(.34375); slope = -.25 / 2
    assert r.pearson == pytest.approx(-0.25 / math.sqrt(0.34375))
    assert r.slope == -0.125
    # average ranks: x 1 2.5 2.5 4, y 3 1.5 4 1.5 -> Sxy = -.75 - 1.5 = -2.25, Sxx = Syy = 4.5
    assert r.spearman == pytest.approx(-0.5)
    assert r.to_dict()["by_length"] == [{"steps": 1, "n": 1, "mean_score": 0.5},
                                        {"steps": 2, "n": 2, "mean_score": 0.5},
                                        {"steps": 3, "n": 1, "mean_score": 0.25}]
    # two points each, both falling
    assert r.to_dict()["within_outcome"] == {"correct": {"n": 2, "spearman": pytest.approx(-1.0)},
                                             "incorrect": {"n": 2, "spearman": pytest.approx(-1.0)}}
    assert r.failed is None and r.criterion.startswith("cannot measure")
    assert "(correct: 2 traces; incorrect: 2 traces)" in r.criterion
    assert length_bias_probe(traces, min_n=2).failed is True


def test_length_bias_within_outcome_separates_the_confound():
    # right answers are short and scored high, wrong ones long and low; within each group the
    # score does not follow length
    traces = by_length([(1, 0.8, "correct"), (2, 0.9, "correct"), (3, 0.9, "correct"), (4, 0.8, "correct"),
                        (5, 0.2, "incorrect"), (6, 0.3, "incorrect"), (7, 0.3, "incorrect"),
                        (8, 0.2, "incorrect")])
    r = length_bias_probe(traces, min_n=4)
    # overall ranks of y: .2 -> 1.5, .3 -> 3.5, .8 -> 5.5, .9 -> 7.5; centred: 1 3 3 1 -3 -1 -1 -3
    # against x - 4.5: Sxy = -32, Sxx = 42, Syy = 40
    assert r.spearman == pytest.approx(-32 / math.sqrt(42 * 40))
    # within: ranks 1 2 3 4 vs 1.5 3.5 3.5 1.5 -> centred products 1.5 - .5 + .5 - 1.5 = 0
    assert r.within_outcome["correct"].spearman == pytest.approx(0.0)
    assert r.within_outcome["incorrect"].spearman == pytest.approx(0.0)
    assert r.failed is False and "correct 0.000 (n=4)" in r.criterion


def test_length_bias_other_aggregate_and_orm_scores():
    traces = by_length([(1, 0.5, "correct"), (2, 0.25, "correct")])
    traces[1].steps[1].scores["prm"] = 1.0            # last step 1.0, min 0.25
    assert length_bias_probe(traces, aggregate="last").slope == 0.5   # (1.0 - 0.5) / 1
    assert length_bias_probe(traces, aggregate="min").slope == -0.25
    orm = [Trace(id=str(n), problem=P, steps=[Step("s")] * n, meta={"scores": {"orm": 1 / n}})
           for n in (1, 2, 4)]
    r = length_bias_probe(orm, key="orm")
    assert r.n == 3 and r.spearman == pytest.approx(-1.0)
    assert r.within_outcome["correct"].to_dict() == {"n": 0, "spearman": None}


# -- domain transfer -----------------------------------------------------------------------------------

SOURCE_A = [[(1, 0.9), (1, 0.8), (-1, 0.3), (None, 0.2)],   # first error 2, predicted 2: hit
            [(1, 0.7), (1, 0.6)],                            # none, predicted none: hit
            [(1, 0.4), (-1, 0.45)]]                          # first error 1, predicted 0: miss
SOURCE_B = [[(1, 0.6), (-1, 0.7)],                           # first error 1, predicted none: miss
            [(1, 0.3), (1, 0.8), (-1, 0.2)],                 # first error 2, predicted 0: miss
            [(None, 0.9), (-1, 0.1)]]                        # first error unknown: not judged


def source(name, rows, scored=True):
    out = []
    for i, r in enumerate(rows):
        t = labelled(f"{name}{i}", "unknown", r)
        if not scored:
            for s in t.steps:
                s.scores.clear()
        out.append(t)
    return out


def test_transfer_numbers_from_stored_scores():
    r = transfer_probe(None, {"a": source("a", SOURCE_A), "b": source("b", SOURCE_B)}, "a")
    a, b = r.sources["a"], r.sources["b"]
    # a: valid .9 .8 .7 .6 .4 vs invalid .3 .45 -> 4 * 2 + 1 = 9 of 10; below 0.5: .3 and .45
    # (invalid, tp = 2), .4 (valid, fp = 1), fn = 0 -> F1 = 4 / 5; first errors 2 of 3
    assert a.to_dict() == {"traces": 3, "steps": 7, "auroc": pytest.approx(0.9), "f1_error": 0.8,
                           "first_error_acc": pytest.approx(2 / 3), "first_error_traces": 3}
    # b: valid .6 .3 .8 vs invalid .7 .2 .1 -> 2 + 2 + 3 = 7 of 9; tp = 2 (.2 .1), fp = 1 (.3),
    # fn = 1 (.7) -> F1 = 4 / 6; 2 + 3 + 1 labelled, scored steps; first errors 0 of 2 judged
    assert b.auroc == pytest.approx(7 / 9) and b.f1_error == pytest.approx(4 / 6)
    assert (b.traces, b.steps, b.first_error_acc, b.first_error_traces) == (3, 6, 0.0, 2)
    assert r.out_of_domain == "b" and r.auroc_drop == pytest.approx(0.9 - 7 / 9)
    # drop 0.122 >= 0.1
    assert r.failed is True and "in-domain 0.900, b 0.778" in r.criterion


def test_transfer_scores_with_a_scorer_and_stores_the_scores():
    a, b = source("a", SOURCE_A, scored=False), source("b", SOURCE_B, scored=False)
    assert not any(s.scores for t in a + b for s in t.steps)
    scores = [[s for _, s in rows] for rows in SOURCE_A + SOURCE_B]      # served in turn: a, then b
    r = transfer_probe(ScriptedScorer(scores), {"a": a, "b": b}, "a", key="prm2")
    assert r.sources["a"].auroc == pytest.approx(0.9) and r.sources["b"].auroc == pytest.approx(7 / 9)
    assert a[0].steps[0].scores == {"prm2": 0.9} and a[0].meta["scores"] == {"prm2:min": 0.2}
    assert r.key == "prm2"


def test_transfer_names_the_worst_other_source():
    c = [labelled("c0", "unknown", [(1, 0.5), (-1, 0.5)])]       # a tie: AUROC 0.5
    r = transfer_probe(None, {"a": source("a", SOURCE_A), "b": source("b", SOURCE_B), "c": c}, "a")
    assert r.out_of_domain == "c" and r.auroc_drop == pytest.approx(0.4)
    assert r.failed is True
    # the verdict's line names every source's AUROC, the deciding one first
    assert r.criterion.endswith("; in-domain 0.900, c 0.500 (the largest drop), b 0.778")
    # a small drop but an out-of-domain AUROC near chance still fails
    r = transfer_probe(None, {"c": c, "c2": c}, "c")
    assert r.auroc_drop == 0.0 and r.failed is True


def test_transfer_without_enough_data():
    r = transfer_probe(None, {"a": source("a", SOURCE_A)}, "a")
    assert (r.out_of_domain, r.auroc_drop, r.failed) == (None, None, None)
    assert r.criterion.startswith("cannot measure") and r.to_dict()["measured"] is False
    with pytest.raises(PrmkitError, match="in_domain 'x' is not one of the sources: a"):
        transfer_probe(None, {"a": []}, "x")


# -- the whole section -----------------------------------------------------------------------------------

def test_run_probes_has_the_report_shape():
    traces = collapse_data()[:4]
    for t in traces:
        for s in t.steps:
            s.scores.clear()
    scorer = ScriptedScorer(lambda t: [0.5 + 0.125 * (k % 3) for k in range(len(t.steps))])
    other = source("b", SOURCE_B, scored=False)
    d = run_probes(scorer, traces, transfer_sources={"own": traces, "other": other}, in_domain="own")
    assert json.loads(json.dumps(d)) == d
    assert set(d) == {"collapse", "gaming", "result_check", "length_bias", "transfer"}
    group = {"traces", "invalid_steps", "valid_steps", "auroc", "flag_rate"}
    assert set(d["collapse"]["right_answer"]) >= group and set(d["collapse"]["wrong_answer"]) >= group
    assert set(d["collapse"]) >= {"gap", "outcome_auroc", "step_auroc", "failed", "criterion"}
    assert set(d["gaming"]) >= {"aggregates", "perturbations", "failed", "criterion"}
    for by_agg in d["gaming"]["perturbations"].values():
        assert set(by_agg) == {"min", "last", "mean"}
        assert all(set(v) == {"n", "rose", "frac_rose", "mean_delta"} for v in by_agg.values())
    assert set(d["length_bias"]) >= {"aggregate", "n", "pearson", "spearman", "slope", "by_length",
                                     "within_outcome", "failed", "criterion"}
    assert set(d["length_bias"]["within_outcome"]) == {"correct", "incorrect"}
    assert set(d["transfer"]) >= {"sources", "in_domain", "out_of_domain", "auroc_drop", "failed",
                                  "criterion"}
    assert set(d["transfer"]["sources"]["other"]) >= {"traces", "steps", "auroc", "f1_error",
                                                      "first_error_acc"}
    # the traces were scored once with the scorer and the scores stored
    assert traces[0].steps[1].scores == {"prm": 0.625}
    assert d["length_bias"]["n"] == 4


def test_run_probes_without_a_second_source_leaves_transfer_out():
    # A probe the inputs do not allow is left out, not reported as passed.
    d = run_probes(ScriptedScorer(lambda t: [0.5] * len(t.steps)), collapse_data()[:2])
    assert list(d) == ["collapse", "gaming", "result_check", "length_bias"]


def test_length_bias_cannot_measure_when_nearly_all_traces_share_a_length():
    # The case in small: 15 of 16 right-answer traces have 4 steps. The one 5-step trace is
    # scored lower, a Spearman of about -0.45 that says nothing about length: no verdict.
    rows = [(4, 0.6 + 0.01 * i, "correct") for i in range(15)] + [(5, 0.1, "correct")]
    r = length_bias_probe(by_length(rows))
    assert r.within_outcome["correct"].spearman is not None
    assert r.failed is None and r.to_dict()["measured"] is False
    assert r.criterion.startswith("cannot measure: no outcome group has 10 traces of varied length "
                                  "(correct: 15 of 16 traces have the same length; incorrect: 0 traces)")
    # 12 of 16 (75%) at one length is varied enough (at most 80%): measured, and the drop fails it.
    rows = [(4, 0.6, "correct")] * 12 + [(5 + i, 0.1, "correct") for i in range(4)]
    r = length_bias_probe(by_length(rows))
    assert r.failed is True and r.to_dict()["measured"] is True
