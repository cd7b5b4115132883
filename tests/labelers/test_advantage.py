"""Advantage labels: Q(prefix + step) - Q(prefix) from exact success rates; shared rollouts with mc."""

from __future__ import annotations

from labeler_fakes import RulePolicy, make_trace

from prmkit.labelers import AdvantageLabeler, LabelStore, MCLabeler
from prmkit.trace import binarize

STEPS = ["a = 1", "b = 2", "c = 3", "The answer is 7."]
TABLE = {"T@0": 2, "T@1": 3, "T@2": 1, "T@3": 0}


def test_advantages_are_exact_differences_of_success_rates():
    # Q = [2/4, 3/4, 1/4, 0/4, 0 (the trace's own wrong answer)]
    t = make_trace("T", STEPS)
    pol = RulePolicy(TABLE)
    report = AdvantageLabeler(pol, k=4).label([t])
    assert [lab.value for lab in t.labels("advantage")] == [0.25, -0.5, -0.25, 0.0]
    assert all(lab.kind == "soft" and lab.labeler == "advantage" for lab in t.labels("advantage"))
    assert t.steps[1].label("advantage").meta == {"prefix": 1, "q_prefix": 0.75, "q_step": 0.25}
    assert report.rollouts == 16
    assert [req.key for req, _ in pol.requests] == ["T@0", "T@1", "T@2", "T@3"]
    assert pol.requests[0][0].prefix == ""
    # binarize at 0: a step is wrong when it lowered the prover's success.
    assert [binarize(lab, threshold=0.0) for lab in t.labels("advantage")] == [True, False, False, True]


def test_advantage_reuses_the_rollouts_mc_made():
    with LabelStore(":memory:") as store:
        MCLabeler(RulePolicy(TABLE), k=4, seed=3).label([make_trace("T", STEPS)], store=store)
        pol = RulePolicy(TABLE)
        report = AdvantageLabeler(pol, k=4, seed=3).label([make_trace("T", STEPS)], store=store)
    assert (report.rollouts, report.generated, report.reused) == (16, 4, 12)
    assert [req.key for req, _ in pol.requests] == ["T@0"]
