"""The result-check probe: does a PRM score a step lower when only its written result is changed?

Hand-made arith traces; the scorers are scripted, so every expected count is derived in a comment.
"""

from __future__ import annotations

import random
import re

import pytest

from prmkit.eval import change_result, claimed_result, result_check_probe, run_probes
from prmkit.search import ScriptedScorer
from prmkit.trace import Problem, Step, StepLabel, Trace

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def checks_arithmetic(trace: Trace) -> list[float]:
    """0.9 for a step whose ``a op b = c`` holds (or that claims nothing), else 0.1: a verifier."""
    out = []
    for s in trace.steps:
        m = re.search(r"(\d+) ([-+*]) (\d+) = (\d+)", s.text)
        out.append(0.9 if m is None or OPS[m[2]](int(m[1]), int(m[3])) == int(m[4]) else 0.1)
    return out


def by_kind(trace: Trace) -> list[float]:
    """0.2 for any subtraction, 0.8 for anything else, right or wrong: what the shipped PRM mostly does."""
    return [0.2 if " - " in s.text else 0.8 for s in trace.steps]


def arith(i: int, valid: bool = True) -> Trace:
    a, b = 10 + i, 3 + i % 5
    steps = [Step(f"She buys {b}: {a} + {b} = {a + b}.", labels=[StepLabel(1)]),
             Step(f"She gives away {b}: {a + b} - {b} = {a}.", labels=[StepLabel(1 if valid else -1)]),
             Step(f"The answer is {a}.", labels=[StepLabel(1)])]
    return Trace(id=f"t{i}", problem=Problem(f"Ann has {a}. She buys {b}, gives {b}.", answer=str(a), id=f"p{i}"),
                 steps=steps, final_answer=str(a), outcome="correct")


def test_claimed_result_is_the_last_number_after_an_equals_sign():
    assert claimed_result("5 + 3 = 8, then 8 * 2 = 16.").group(1) == "16"
    assert claimed_result("Total = $1,250.50 in all").group(1) == "1,250.50"
    assert claimed_result("x = -4.").group(1) == "-4"
    assert claimed_result("The answer is 8.") is None and claimed_result("a == b") is None


def test_change_result_cuts_after_the_step_and_moves_only_its_result():
    t = arith(0)                                   # 10 + 3 = 13 ; 13 - 3 = 10 ; answer 10
    new = change_result(t, 1, random.Random(0))
    assert [s.text for s in new.steps][:1] == ["She buys 3: 10 + 3 = 13."]
    assert len(new.steps) == 2 and new.steps[1].text.startswith("She gives away 3: 13 - 3 = ")
    moved = int(claimed_result(new.steps[1].text).group(1))
    assert moved != 10 and abs(moved - 10) in (1, 2, 3, 10) and moved >= 0
    assert new.id == "t0~change_result@1" and new.final_answer is None and new.outcome == "unknown"
    assert all(s.scores == {} for s in new.steps) and new.text == "\n".join(s.text for s in new.steps)
    new.check_spans()
    assert t.steps[1].text == "She gives away 3: 13 - 3 = 10." and len(t.steps) == 3  # the original untouched
    assert change_result(t, 2) is None             # "The answer is 10." writes no "= N"
    with pytest.raises(Exception, match="no step 3"):
        change_result(t, 3)


def test_change_result_never_goes_below_zero_and_keeps_the_number_format():
    t = Trace(id="z", problem=Problem("q"), steps=[Step("4 - 4 = 0."), Step("It costs = 1,204.50 in all.")])
    for seed in range(40):
        assert int(claimed_result(change_result(t, 0, random.Random(seed)).steps[0].text).group(1)) > 0
        got = claimed_result(change_result(t, 1, random.Random(seed)).steps[1].text).group(1)
        assert re.fullmatch(r"\d,\d{3}\.50", got) and got != "1,204.50"


def test_a_verifier_passes_and_a_step_type_scorer_fails():
    traces = [arith(i) for i in range(24)]
    good = result_check_probe(ScriptedScorer(checks_arithmetic), traces)
    # every trace has two valid result-writing steps; whichever is drawn, 0.9 (as written) > 0.1
    assert (good.n, good.caught, good.ties, good.accuracy, good.failed) == (24, 24, 0, 1.0, False)
    assert good.mean_drop == pytest.approx(0.8) and good.to_dict()["measured"] is True
    blind = result_check_probe(ScriptedScorer(by_kind), traces)
    # the changed step keeps its operation, so its score is the same: every pair a tie, accuracy 0.5
    assert (blind.n, blind.caught, blind.ties, blind.accuracy, blind.failed) == (24, 0, 24, 0.5, True)
    assert "fewer than 90%" in blind.criterion


def test_only_valid_labelled_steps_are_changed():
    # Step 1 labelled wrong in every trace: only step 0 (an addition) can be drawn. A scorer that
    # scores additions by their result and everything else alike is then perfect on the probe.
    def additions_only(t):
        return [0.9 if "+" not in s.text else checks_arithmetic(t)[k] for k, s in enumerate(t.steps)]
    traces = [arith(i, valid=False) for i in range(24)]
    r = result_check_probe(ScriptedScorer(additions_only), traces)
    assert (r.n, r.caught, r.accuracy) == (24, 24, 1.0)
    unlabelled = [Trace(id=f"u{i}", problem=Problem("q"), steps=[Step("1 + 1 = 2.")]) for i in range(30)]
    r = result_check_probe(ScriptedScorer(checks_arithmetic), unlabelled)
    assert r.n == 0 and r.failed is None and r.criterion.startswith("cannot measure: 0 valid steps")


def test_too_few_pairs_cannot_measure_and_max_traces_bounds_the_work():
    traces = [arith(i) for i in range(24)]
    r = result_check_probe(ScriptedScorer(by_kind), traces, max_traces=5)
    assert r.n == 5 and r.failed is None and "needs 20" in r.criterion


def test_each_trace_draws_its_own_step_whatever_the_order():
    traces = [arith(i) for i in range(24)]

    class Recorder(ScriptedScorer):
        seen: list[str] = []

        def score(self, ts):
            self.seen.extend(t.id for t in ts)
            return super().score(ts)

    a, b = Recorder(checks_arithmetic), Recorder(checks_arithmetic)
    a.seen, b.seen = [], []
    result_check_probe(a, traces, seed=3)
    result_check_probe(b, list(reversed(traces)), seed=3)
    assert sorted(a.seen) == sorted(b.seen)        # the same (trace, step) pairs, in another order
    c = Recorder(checks_arithmetic)
    c.seen = []
    result_check_probe(c, traces, seed=4)
    assert sorted(c.seen) != sorted(a.seen)        # another seed draws other steps


def test_run_probes_reports_it_and_leaves_it_out_without_a_scorer():
    traces = [arith(i) for i in range(24)]
    d = run_probes(ScriptedScorer(checks_arithmetic), traces)
    assert d["result_check"]["accuracy"] == 1.0 and d["result_check"]["failed"] is False
    for t in traces:
        for s in t.steps:
            s.scores = {"prm": 0.5}
    assert "result_check" not in run_probes(None, traces, score=False)
