"""Monte Carlo labels: exact fractions from a scripted rule, prefixes, seeds, provenance, reuse."""

from __future__ import annotations

import pytest
from labeler_fakes import RulePolicy, make_trace

from prmkit.errors import PrmkitError
from prmkit.labelers import LabelStore, MCLabeler, get_labeler, prefix_text
from prmkit.policies import derive_seed

STEPS = ["a = 1", "b = 2", "c = 3", "The answer is 7."]


def test_mc_soft_and_hard_are_exact_fractions():
    # From prefix 1 all 4 rollouts reach 42, from prefix 2 two do, from prefix 3 none; the last
    # step is judged by the trace's own (wrong) answer, without rollouts.
    t = make_trace("T", STEPS, final_answer="7")
    pol = RulePolicy({"T@1": 4, "T@2": 2, "T@3": 0})
    report = MCLabeler(pol, k=4, seed=5).label([t])
    assert [lab.value for lab in t.labels("mc_soft")] == [1.0, 0.5, 0.0, 0.0]
    assert [lab.value for lab in t.labels("mc_hard")] == [1, 1, -1, -1]
    assert t.first_error("mc_hard") == 2
    assert [lab.rollouts for lab in t.labels("mc_soft")] == [4, 4, 4, 0]
    assert (report.rollouts, report.generated, report.reused, report.labelled) == (12, 12, 0, 1)
    # One request of n=4 per prefix, continuing exactly the steps so far.
    assert [(req.key, n) for req, n in pol.requests] == [("T@1", 4), ("T@2", 4), ("T@3", 4)]
    assert [req.prefix for req, _ in pol.requests] == ["a = 1\n", "a = 1\nb = 2\n",
                                                       "a = 1\nb = 2\nc = 3\n"]
    assert pol.requests[0][0].messages[-1] == {"role": "user", "content": t.problem.text}


def test_labels_carry_full_provenance_and_cost():
    t = make_trace("T", STEPS, final_answer="7")
    MCLabeler(RulePolicy({"T@1": 1}, model_id="m-1"), k=2, seed=5, max_new_tokens=64).label([t])
    lab = t.steps[0].label("mc_hard")
    assert (lab.labeler, lab.model, lab.rollouts, lab.kind) == ("mc", "m-1", 2, "hard")
    assert lab.args["k"] == 2 and lab.args["seed"] == 5 and lab.args["max_new_tokens"] == 64
    assert lab.args["sources"] == ["mc_hard", "mc_soft"]
    # RIGHT has 7 words, WRONG 7 too: 14 generated tokens, 10 prompt tokens each.
    assert lab.cost["tokens"] == 14 and lab.cost["prompt_tokens"] == 20 and lab.cost["seconds"] >= 0
    assert lab.time and lab.meta == {"prefix": 1, "successes": 1}
    assert t.steps[3].label("mc_soft").meta == {"prefix": 4, "terminal": True}
    summary = t.meta["labeling"]["mc"]
    assert summary["rollouts"] == 6 and summary["tokens"] == 42 and summary["k"] == 2
    prov = t.provenance[-1]
    assert (prov.stage, prov.name) == ("label", "mc")
    assert prov.args["rollout_policy"] == {"backend": "rule", "model": "m-1", "p": 1.0}


def test_store_keeps_seeds_and_a_rerun_reuses_every_rollout(tmp_path):
    path = tmp_path / "s.sqlite"
    t1 = make_trace("T", STEPS, final_answer="7")
    MCLabeler(RulePolicy({"T@1": 4, "T@2": 2}), k=4, seed=5).label([t1], store=path)
    with LabelStore(path) as st:
        rows = st.rollouts()
    assert len(rows) == 12
    assert all(r.seed == derive_seed(5, f"T@{r.prefix}", r.index) for r in rows)
    assert sum(r.reached for r in rows) == 6
    # A second run with the same setup generates nothing and writes the same labels.
    pol = RulePolicy({"T@1": 4, "T@2": 2})
    t2 = make_trace("T", STEPS, final_answer="7")
    report = MCLabeler(pol, k=4, seed=5).label([t2], store=path)
    assert (report.generated, report.reused, pol.requests) == (0, 12, [])
    assert [lab.value for lab in t2.labels("mc_soft")] == [lab.value for lab in t1.labels("mc_soft")]
    # Another seed is another run: nothing reused.
    report = MCLabeler(RulePolicy({}), k=4, seed=6).label([make_trace("T", STEPS)], store=path)
    assert report.generated == 12


def test_relabelling_replaces_instead_of_stacking():
    t = make_trace("T", STEPS, final_answer="7")
    MCLabeler(RulePolicy({}), k=2).label([t])
    MCLabeler(RulePolicy({"T@1": 2}), k=2).label([t])
    assert [len(s.labels) for s in t.steps] == [2, 2, 2, 2]
    assert t.steps[0].label("mc_soft").value == 1.0
    assert [p.name for p in t.provenance] == ["mc", "mc"]


def test_sources_option_and_terminal_rollout_when_no_answer_can_be_read():
    t = make_trace("T", ["think", "think more"])  # no number anywhere: the whole trace is rolled out
    pol = RulePolicy({"T@1": 1, "T@2": 2})
    report = get_labeler("mc", policy=pol, k=2, sources="mc_soft").label([t])
    assert [lab.value for lab in t.labels("mc_soft")] == [0.5, 1.0]
    assert t.labels("mc_hard") == [None, None]
    assert report.rollouts == 4
    assert pol.requests[-1][0].prefix == "think\nthink more\n"


def test_traces_without_answer_or_steps_are_skipped_and_counted():
    ts = [make_trace("A", STEPS, answer=None), make_trace("B", []), make_trace("C", STEPS)]
    report = MCLabeler(RulePolicy({}), k=1).label(ts)
    assert report.skipped == [("A", "no reference answer"), ("B", "no steps")]
    assert (report.traces, report.labelled) == (3, 1)
    assert "2 skipped" in report.summary()


def test_bad_arguments_are_errors():
    with pytest.raises(PrmkitError, match="k must be"):
        MCLabeler(RulePolicy({}), k=0)
    with pytest.raises(PrmkitError, match="mc sources"):
        MCLabeler(RulePolicy({}), sources=["mc_medium"])
    with pytest.raises(PrmkitError, match="unknown labeler"):
        get_labeler("oracle")


def test_prefix_text_keeps_the_original_separators():
    t = make_trace("T", ["x", "y"])
    t.text = "x\n\ny"
    t.steps[1].span = (3, 4)
    assert [prefix_text(t, p) for p in range(3)] == ["", "x\n\n", "x\n\ny\n"]
