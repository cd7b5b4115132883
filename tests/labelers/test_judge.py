"""The judge: a strict parser, retries, unparseable answers counted and never guessed."""

from __future__ import annotations

import pytest
from labeler_fakes import JudgePolicy, make_trace

from prmkit.labelers import JudgeLabeler, JudgeParseError, LabelStore, parse_verdicts

STEPS = ["a = 1", "b BAD", "The answer is 7."]


@pytest.mark.parametrize("text, expected", [
    ("Step 1: correct\nStep 2: incorrect\nStep 3: correct", [True, False, True]),
    ("  step 1 : CORRECT.\n\nStep 2: Incorrect\nStep 3:correct  ", [True, False, True]),
    ("Step 3: correct\nStep 1: correct\nStep 2: correct", [True, True, True]),
])
def test_parser_accepts_the_format(text, expected):
    assert parse_verdicts(text, 3) == expected


@pytest.mark.parametrize("text, why", [
    ("Sure! Step 1: correct\nStep 2: correct\nStep 3: correct", "line 1 is not"),
    ("Step 1: correct\nStep 2: wrong\nStep 3: correct", "line 2 is not"),
    ("Step 1: correct\nStep 2: correct", "no verdict for step 3"),
    ("Step 1: correct\nStep 1: incorrect\nStep 2: correct\nStep 3: correct", "step 1 judged twice"),
    ("Step 1: correct\nStep 2: correct\nStep 3: correct\nStep 4: correct", "names step 4"),
    ("", "no verdict for steps 1, 2, 3"),
    ("Step 1: correct, Step 2: correct, Step 3: correct", "line 1 is not"),
    ("**Step 1:** correct\nStep 2: correct\nStep 3: correct", "line 1 is not"),
])
def test_parser_rejects_everything_else(text, why):
    with pytest.raises(JudgeParseError, match=why):
        parse_verdicts(text, 3)


def test_extra_text_can_be_allowed_but_a_bad_step_line_never():
    text = "Let me check.\nStep 1: correct\nStep 2: incorrect\nStep 3: correct\nDone."
    assert parse_verdicts(text, 3, allow_extra_text=True) == [True, False, True]
    with pytest.raises(JudgeParseError):
        parse_verdicts("Step 1: correct\nStep 2: maybe\nStep 3: correct", 3, allow_extra_text=True)


def test_judge_labels_each_step_and_shows_it_the_steps():
    t = make_trace("T", STEPS)
    pol = JudgePolicy()
    report = JudgeLabeler(pol, retries=0).label([t])
    assert [lab.value for lab in t.labels("judge")] == [1, -1, 1]
    lab = t.steps[1].label("judge")
    assert (lab.labeler, lab.model, lab.rollouts, lab.meta) == ("judge", "fake-judge", 1, {"attempts": 1})
    user = pol.requests[0].messages[-1]["content"]
    assert "Step 1: a = 1\nStep 2: b BAD\nStep 3: The answer is 7." in user
    assert "exactly 3 lines" in user
    assert report.judge_calls == 1 and report.rollouts == 0
    assert t.meta["labeling"]["judge"]["judge_calls"] == 1


def test_unparseable_answers_are_retried_then_left_unlabelled():
    ts = [make_trace("A", STEPS), make_trace("B", STEPS)]
    pol = JudgePolicy({"A": ["All good!", "Step 1: correct\nStep 2: correct\nStep 3: incorrect"],
                       "B": ["hmm", "Step 1: fine", "Step 1: correct"]})
    report = JudgeLabeler(pol, retries=2).label(ts)
    assert [lab.value for lab in ts[0].labels("judge")] == [1, 1, -1]
    assert ts[0].steps[0].label("judge").meta == {"attempts": 2}
    assert ts[0].steps[0].label("judge").rollouts == 2
    assert ts[1].labels("judge") == [None, None, None]  # never guessed
    assert report.counts["judge_unparseable"] == 1 + 3
    assert report.counts["judge_failed"] == 1
    assert report.judge_calls == 5 and report.unlabelled_steps == 3
    assert len(report.issues) == 1 and report.issues[0].startswith("B: judge answer unparseable")
    assert ts[1].meta["labeling"]["judge"]["unparseable"][1].startswith("line 1 is not")
    # Each attempt is its own request key (its own seed), asked once: no regenerated attempts.
    assert [r.key for r in pol.requests] == ["A@judge#0", "B@judge#0", "A@judge#1", "B@judge#1",
                                             "B@judge#2"]
    assert report.wasted == 0


def test_judge_calls_are_stored_and_reused():
    pol = JudgePolicy({"A": ["nope", "Step 1: correct\nStep 2: correct\nStep 3: correct"]})
    with LabelStore(":memory:") as store:
        JudgeLabeler(pol).label([make_trace("A", STEPS)], store=store)
        again = JudgePolicy({"A": ["Step 1: incorrect"]})
        t = make_trace("A", STEPS)
        report = JudgeLabeler(again).label([t], store=store)
        assert sorted(r.prefix for r in store.rollouts()) == [-2, -1]
    assert again.requests == [] and report.reused == 2
    assert [lab.value for lab in t.labels("judge")] == [1, 1, 1]
