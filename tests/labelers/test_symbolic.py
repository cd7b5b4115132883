"""The symbolic labeler is the SymbolicChecker ground truth, with the labelers' provenance."""

from __future__ import annotations

from prmkit.envs import ArithConfig, ArithEnv, SymbolicChecker
from prmkit.generate import completion_to_trace
from prmkit.labelers import SymbolicLabeler
from prmkit.policies import Completion


def arith_traces():
    p = ArithEnv(ArithConfig(steps=3, seed=1)).problem(0)
    right = completion_to_trace(p, Completion(p.solution), trace_id="r", source="ref", label=False)
    lines = p.solution.splitlines()
    o = p.meta["arith"]["ops"][1]
    lines[1] = f"Then {o['before']} {o['op']} {o['operand']} = {o['after'] + 1}."
    wrong = completion_to_trace(p, Completion("\n".join(lines)), trace_id="w", source="ref",
                                label=False)
    return right, wrong


def test_symbolic_labels_match_the_checker():
    right, wrong = arith_traces()
    report = SymbolicLabeler().label([right, wrong])
    assert [x.value for x in right.labels("symbolic")] == [1, 1, 1, 1]
    assert wrong.first_error("symbolic") == 1
    assert wrong.steps[1].label("symbolic").meta["verdict"] == "arithmetic_error"
    lab = wrong.steps[0].label("symbolic")
    assert (lab.labeler, lab.args, lab.rollouts, lab.time is not None) == (
        "symbolic", {"strict_path": True}, 0, True)
    assert wrong.provenance[-1].name == "symbolic"
    assert report.rollouts == 0 and report.counts["verdict_arithmetic_error"] == 1
    expected = SymbolicChecker.for_problem(wrong.problem, strict_path=True).check_steps(
        [s.text for s in wrong.steps])
    assert [x.value for x in wrong.labels("symbolic")] == [1 if c.ok else -1 for c in expected]
