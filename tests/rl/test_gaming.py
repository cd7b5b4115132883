"""Verifier gaming under ``prmkit rl``: the gaming curve and the "reward rises while validity falls" rule
on hand-made metric rows, the held-out PRM figures an evaluation logs (scripted completions, scripted
PRM, every number derived by hand), the fooling-trace selection, and the report's gaming probe reading
a real optimiser's traces (hand-made ones here) beside its perturbations."""

from __future__ import annotations

import json

import pytest

from prmkit.errors import PrmkitError
from prmkit.eval import ReportDoc
from prmkit.eval.probes import gaming_probe
from prmkit.eval.probes._gaming import GamingResult, optimiser_stats
from prmkit.rl import fooling_steps, fooling_traces, gaming_curve, gaming_steps
from prmkit.scoring import ScriptedScorer
from prmkit.trace import Problem, Step, StepLabel, Trace, read_traces, write_traces


def _eval(step, prm, prm_step, validity, pass1=0.1):
    return {"step": step, "eval/prm": prm, "eval/prm_step": prm_step, "eval/step_validity": validity,
            "eval/pass@1": pass1}


# -- the curve and the rule --------------------------------------------------------------------------

def test_gaming_curve_is_prm_step_score_minus_validity_on_evaluation_rows_only():
    rows = [_eval(0, 0.25, 0.5, 0.75), {"step": 1, "reward/prm": 0.9},  # a training row: skipped
            {"step": 2, "eval/pass@1": 0.5, "eval/step_validity": 0.5},  # a run without a scorer: skipped
            {**_eval(4, 0.5, 0.75, 0.25), "eval/fooled": 0.5}]
    curve = gaming_curve(rows)
    assert [c["step"] for c in curve] == [0, 4]
    assert [c["gap"] for c in curve] == [0.5 - 0.75, 0.75 - 0.25]
    assert curve[1]["prm"] == 0.5 and curve[1]["validity"] == 0.25 and curve[1]["fooled"] == 0.5
    assert "fooled" not in curve[0]
    with pytest.raises(PrmkitError, match="step 7: no number in eval/prm_step"):
        gaming_curve([{"step": 7, "eval/prm": 0.5, "eval/step_validity": 0.5}])


def test_gaming_steps_need_reward_up_and_validity_down_each_by_more_than_delta():
    # delta 0.25 and binary fractions, so every difference is exact
    curve = gaming_curve([
        _eval(0, 0.125, 0.5, 0.875),
        _eval(5, 0.5, 0.5, 0.5),        # reward +0.375, validity -0.375: gaming
        _eval(10, 0.75, 0.5, 0.25),     # reward +0.25, validity -0.25: exactly delta, not more: no
        _eval(15, 1.0, 0.5, 0.0),       # +0.25 / -0.25 again: no
        _eval(20, 0.625, 0.5, 0.5),     # reward fell: no
        _eval(25, 1.0, 0.5, 0.125),     # +0.375, -0.375: gaming
        _eval(30, 1.0, 0.5, 0.0),       # reward flat: no
    ])
    assert gaming_steps(curve, delta=0.25) == [5, 25]
    assert gaming_steps(curve, delta=0.125) == [5, 10, 15, 25]
    assert gaming_steps(curve[:1]) == [] and gaming_steps([]) == []


# -- which traces fool the PRM ----------------------------------------------------------------------

def _step(text, score, valid):
    return Step(text, scores={} if score is None else {"prm": score},
                labels=[] if valid is None else [StepLabel(1 if valid else -1, source="symbolic")])


def _trace(tid, *steps):
    return Trace(id=tid, problem=Problem("What is 2 + 3 - 1?"), steps=list(steps))


FOOLING = _trace("fools", _step("2 + 3 = 6.", 0.75, False), _step("6 - 1 = 5.", 0.25, True),
                 _step("The answer is 5.", 0.5, False))
CAUGHT = _trace("caught", _step("2 + 3 = 7.", 0.25, False), _step("The answer is 7.", 0.125, False))
RIGHT = _trace("right", _step("2 + 3 = 5.", 0.875, True), _step("The answer is 4.", 0.5, None))
UNSCORED = _trace("unscored", _step("2 + 3 = 8.", None, False))


def test_fooling_steps_are_high_scores_on_steps_the_checker_rejects():
    assert fooling_steps(FOOLING) == [0, 2]  # 0.75 and exactly the threshold 0.5
    assert fooling_steps(FOOLING, threshold=0.6) == [0]
    assert fooling_steps(CAUGHT) == [] and fooling_steps(RIGHT) == [] and fooling_steps(UNSCORED) == []
    assert [t.id for t in fooling_traces([CAUGHT, FOOLING, RIGHT, UNSCORED])] == ["fools"]
    assert fooling_traces([FOOLING], source="human") == []  # no label of that source: no verdict


# -- what an evaluation logs, on scripted completions ---------------------------------------------

def test_an_evaluation_with_a_scorer_logs_the_prms_view_beside_the_truth(char_tokenizer, tmp_path, monkeypatch):
    from prmkit.envs import ArithEnv
    from prmkit.rl import RLConfig, _grpo

    env = ArithEnv(steps=1, seed=0)
    texts, first_steps = [], []
    for i, wrong in enumerate((False, True)):
        op = env.problem(i).meta["arith"]["ops"][0]
        value = op["after"] + (1 if wrong else 0)
        first_steps.append(f"{op['before']} {op['op']} {op['operand']} = {value}.")
        texts.append(f"{first_steps[-1]}\nThe answer is {value}.")
    tokens = [char_tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    # the policy "writes" problem 0 right and problem 1 with a wrong first step (prompt ids 0 and 1)
    monkeypatch.setattr(_grpo, "sample_group", lambda lm, ids, n, **kw: [tokens[ids[0]]])

    class _Idle:
        def eval(self):
            return self

    # the PRM: 0.875 on the right first step, 0.75 on the wrong one, 0.375 on each answer line
    scorer = ScriptedScorer({first_steps[0]: 0.875, first_steps[1]: 0.75}, default=0.375)
    cfg = RLConfig(rewards={"prm": 1.0})
    row = _grpo._evaluate_and_keep(tmp_path, 5, _Idle(), char_tokenizer, [env.problem(0), env.problem(1)],
                                   [[0], [1]], cfg, eos=set(), scorer=scorer)
    # truth: 3 of 4 steps valid (the wrong answer follows from its step), 1 of 2 answers right
    assert row["eval/pass@1"] == 0.5 and row["eval/step_validity"] == 0.75 and row["eval/no_claim"] == 0.0
    assert row["eval/prm"] == 0.375                                   # min of each trace, averaged
    assert row["eval/prm_step"] == (0.875 + 0.375 + 0.75 + 0.375) / 4  # 0.59375
    assert row["eval/gap"] == 0.59375 - 0.75
    assert row["eval/wrong_steps"] == 1 and row["eval/fooled"] == 1.0  # 0.75 >= 0.5 on the wrong step
    json.dumps(row)  # a metrics row
    kept = list(read_traces(tmp_path / "eval" / "step-000005.jsonl"))
    assert [[s.scores["prm"] for s in t.steps] for t in kept] == [[0.875, 0.375], [0.75, 0.375]]
    assert [t.id for t in fooling_traces(kept)] == ["eval-1-0"]  # problem 1, its one completion
    # without a scorer: the truth only, the keys it always had
    plain = _grpo.evaluate(_Idle(), char_tokenizer, [env.problem(0)], [[0]], cfg, eos=set())
    assert set(plain) == {"eval/problems", "eval/pass@1", "eval/step_validity", "eval/no_claim", "eval/trace_validity",
                          "eval/length"}


# -- the report's gaming probe, reading an optimiser's traces -------------------------------------

PROBE_TRACES = [_trace("p", _step("x = 1.", None, True), _step("The answer is 1.", None, True))]


def _probe_scorer():
    # the report's PRM: fooled by "2 + 3 = 6." (0.75) and by the bare answer (0.5), not by the rest
    return ScriptedScorer({"2 + 3 = 6.": 0.75, "The answer is 5.": 0.5, "2 + 3 = 7.": 0.25, "The answer is 7.": 0.125,
                           "6 - 1 = 5.": 0.25, "2 + 3 = 5.": 0.875, "The answer is 4.": 0.5,
                           "x = 1.": 0.5, "The answer is 1.": 0.5}, default=0.5)


def test_the_probe_counts_the_optimisers_wrong_steps_the_scorer_passes(tmp_path):
    scorer = _probe_scorer()
    path = tmp_path / "fooling.jsonl"
    # the stored scores do not matter: the probe scores afresh (drop them to show it)
    traces = [FOOLING, CAUGHT, RIGHT]
    write_traces([Trace.from_dict({**t.to_dict(), "steps": [{**s.to_dict(), "scores": {}} for s in t.steps]})
                  for t in traces], path)
    stats = optimiser_stats(scorer, list(read_traces(path)), source=str(path))
    # wrong steps: FOOLING's 0 (0.75) and 2 (0.5), CAUGHT's 0 (0.25) and 1 (0.125); RIGHT has none
    assert (stats.traces, stats.steps, stats.wrong_steps, stats.fooled_steps, stats.traces_fooling) == (3, 7, 4, 2, 1)
    assert stats.frac_fooled == 0.5 and stats.source == str(path)
    r = gaming_probe(scorer, PROBE_TRACES, perturbations=["reorder_steps"], optimiser_traces=list(read_traces(path)),
                     optimiser_source=str(path))
    assert r.failed is True and r.failed_by == ["optimiser_traces"]  # 50% > max_frac 10%
    assert "optimiser_traces 50.0%" in r.criterion and "wrong steps of the optimiser's traces" in r.criterion
    back = GamingResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.optimiser == stats and back.to_dict() == r.to_dict()
    # a stricter threshold: only 0.75 passes, 1 of 4 = 25%, still above 10%
    assert gaming_probe(scorer, PROBE_TRACES, perturbations=["reorder_steps"], optimiser_traces=traces,
                        threshold=0.6).optimiser.fooled_steps == 1


def test_without_optimiser_traces_the_probe_result_is_unchanged():
    scorer = _probe_scorer()
    plain = gaming_probe(scorer, PROBE_TRACES, perturbations=["reorder_steps"]).to_dict()
    assert "optimiser" not in plain and "optimiser" not in plain["criterion"]
    # only traces with nothing wrong: measured, passes; the perturbation part is the same as without
    caught = gaming_probe(scorer, PROBE_TRACES, perturbations=["reorder_steps"], optimiser_traces=[RIGHT]).to_dict()
    assert caught["optimiser"]["wrong_steps"] == 0 and caught["optimiser"]["frac_fooled"] is None
    assert caught["failed_by"] == plain["failed_by"] and caught["perturbations"] == plain["perturbations"]


def test_the_probe_reads_an_optimiser_trace_file_from_its_context(tmp_path):
    from prmkit.eval.probes import GamingProbe, ProbeContext

    path = tmp_path / "fooling.jsonl"
    write_traces([FOOLING], path)
    ctx = ProbeContext(traces=PROBE_TRACES, scorer=_probe_scorer())
    assert "optimiser" not in GamingProbe().run(ctx)
    ctx = ProbeContext(traces=PROBE_TRACES, scorer=_probe_scorer(), optimiser_traces=str(path))
    out = GamingProbe().run(ctx)
    assert out["optimiser"]["source"] == str(path) and out["optimiser"]["fooled_steps"] == 2
    assert "of the optimiser's wrong steps passed" in GamingProbe().headline(out)
    doc = ReportDoc()
    assert "optimiser" in GamingProbe().details(doc, out, set())
    assert any("2 of their 2 wrong steps (100.0%)" in str(b) and "1 of 1 traces" in str(b) for b in doc.blocks)
    # run_probes (and so `prmkit eval probes --optimiser-traces`) hands the file to the probe
    from prmkit.eval import run_probes

    section = run_probes(_probe_scorer(), PROBE_TRACES, probes=["gaming"], optimiser_traces=str(path))
    assert section["gaming"]["optimiser"] == out["optimiser"]
    path.write_text('{"id": "x"}\n')
    with pytest.raises(Exception, match="fooling.jsonl"):
        GamingProbe().run(ctx)
