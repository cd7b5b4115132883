"""Consensus keeps the steps where MC (hard) and the judge agree and counts the rest."""

from __future__ import annotations

from labeler_fakes import JudgePolicy, RulePolicy, make_trace

from prmkit.labelers import ConsensusLabeler, get_labeler

STEPS = ["a = 1", "b = 2", "c = 3", "The answer is 7."]


def test_consensus_keeps_agreeing_steps_and_reports_the_dropped():
    # mc_hard: [+1, +1, -1, -1] (prefix 3 and the wrong final answer fail)
    # judge:   [+1, -1, -1, +1] -> agree on steps 0 and 2
    t = make_trace("T", STEPS)
    u = make_trace("U", STEPS)  # the judge never answers in format: every step dropped (missing)
    judge = JudgePolicy({"T": ["Step 1: correct\nStep 2: incorrect\nStep 3: incorrect\nStep 4: correct"],
                         "U": ["no idea"]})
    lab = ConsensusLabeler(RulePolicy({"T@1": 1, "T@2": 2, "U@1": 1}), judge_policy=judge, k=2,
                           retries=1)
    report = lab.label([t, u])
    assert [x.value if x else None for x in t.labels("consensus")] == [1, None, -1, None]
    assert [x.value for x in t.labels("mc_hard")] == [1, 1, -1, -1]
    assert [x.value for x in t.labels("judge")] == [1, -1, -1, 1]
    assert u.labels("consensus") == [None] * 4
    assert report.counts["consensus_kept"] == 2
    assert report.counts["consensus_dropped_disagree"] == 2
    assert report.counts["consensus_dropped_missing"] == 4
    assert t.meta["labeling"]["consensus"]["dropped"] == 2
    kept = t.steps[0].label("consensus")
    assert kept.rollouts == 2 + 1 and kept.model == "rule-policy"
    assert kept.meta == {"mc_soft": 0.5, "judge_model": "fake-judge"}
    assert t.steps[0].label("mc_hard").labeler == "mc" and t.steps[0].label("judge").labeler == "judge"
    assert report.rollouts == 12 and report.judge_calls == 1 + 2


def test_components_can_be_dropped():
    t = make_trace("T", STEPS)
    table = {"T@1": 1, "T@2": 1, "T@3": 1}
    get_labeler("consensus", policy=RulePolicy(table), judge_policy=JudgePolicy(), k=1,
                keep_components=False).label([t])
    assert {x.source for s in t.steps for x in s.labels} == {"consensus"}
    assert [len(s.labels) for s in t.steps] == [1, 1, 1, 0]
