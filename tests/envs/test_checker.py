"""The symbolic step checker on hand-written steps with hand-derived verdicts."""

from __future__ import annotations

from fractions import Fraction

import pytest

from prmkit import Problem, Step, Trace
from prmkit.envs._checker import SymbolicChecker, numbers_in_text


@pytest.mark.parametrize("text, derived, verdict", [
    ("3 + 5 = 8", [], "correct"),
    ("3 x 5 = 15 apples", [], "correct"),
    ("3 × 5 = 16 apples", [], "arithmetic_error"),
    ("16 - 3 - 4 = 9", [16, 4], "correct"),
    ("16 - 3 - 4 = 9", [], "unknown_quantity"),       # 16 and 4 are not quantities of this problem
    ("so he has 8 left", [8], "correct"),
    ("so he has 8 left", [], "unknown_quantity"),
    ("She sells 48/2 = <<48/2=24>>24 clips", [], "correct"),
    ("She sells 48/2 = <<48/2=25>>25 clips", [], "arithmetic_error"),
    ("Let's add the numbers.", [], "no_claim"),
    ("Step 2: 3 * 5 = 15", [], "correct"),            # "2" names the step, it is not a quantity
    ("(3 + 5) * 2 = 16", [], "correct"),
    ("3 + 5 * 2 = 16", [], "arithmetic_error"),       # precedence: 3 + 10 = 13
    ("5 / 2 = 2.5", [], "correct"),
    ("48 / 5 = 9.6", [], "correct"),
    ("48 / 5 = 9.5", [], "arithmetic_error"),
    ("3 + 5 = 8, then 8 * 2 = 16", [], "correct"),     # a result is usable within the same step
])
def test_verdicts(text, derived, verdict):
    c = SymbolicChecker(given=[3, 5, 48, 2])
    assert c.check_step(text, derived=derived).verdict == verdict


def test_rounded_result_accepted_to_its_precision():
    c = SymbolicChecker(given=[10, 3])
    assert c.check_step("10 / 3 = 3.33").verdict == "correct"
    assert c.check_step("10 / 3 = 3.3").verdict == "correct"
    assert c.check_step("10 / 3 = 3.4").verdict == "arithmetic_error"
    assert c.check_step("10 / 3 = 3").verdict == "arithmetic_error"  # an integer claim is exact


def test_trace_order_matters_and_labels_attach():
    p = Problem("Tom has 3 apples and buys 5 more. Then he doubles them. How many?")
    c = SymbolicChecker.for_problem(p)
    assert c.given == {Fraction(3), Fraction(5), Fraction(2)}  # "doubles" counts as 2
    t = Trace("t", p, [Step("8 * 2 = 16"), Step("3 + 5 = 8"), Step("8 * 2 = 16"),
                       Step("The answer is 16.")])
    checks = c.label(t)
    # 8 is used before it is derived; afterwards it is known.
    assert [k.verdict for k in checks] == ["unknown_quantity", "correct", "correct", "correct"]
    assert [s.label("symbolic").value for s in t.steps] == [-1, 1, 1, 1]
    assert t.steps[0].labels[0].meta["verdict"] == "unknown_quantity"
    assert t.provenance[-1].stage == "label"


def test_strict_path_flags_wrong_operation():
    c = SymbolicChecker(given=[9, 11, 3], values=[20, 60], strict_path=True)
    assert [k.verdict for k in c.check_steps(["9 + 11 = 20", "20 * 3 = 60"])] == ["correct"] * 2
    assert c.check_steps(["9 - 3 = 6"])[0].verdict == "wrong_value"
    loose = SymbolicChecker(given=[9, 11, 3], values=[20, 60])
    assert loose.check_steps(["9 - 3 = 6"])[0].verdict == "correct"


def test_numbers_in_text():
    assert numbers_in_text("He pays $1,200.50 for 3 dozen eggs, twice.") == [
        Fraction("1200.50"), Fraction(3), Fraction(12), Fraction(2)]


@pytest.mark.parametrize("steps, verdicts", [
    (["3 + 5 = 8", "The answer is 8."], ["correct", "correct"]),
    (["3 + 5 = 8", "The answer is 5."], ["correct", "unsupported_answer"]),    # 5 is known, not derived
    (["The answer is 8."], ["unknown_quantity"]),                              # 8 is nowhere
    (["The answer is 5."], ["unsupported_answer"]),                            # given, not derived
    (["3 + 5 = 8", "So he has 8 left.", "The answer is: $\\boxed{8}$"], ["correct"] * 3),
    (["3 + 5 = 8", "The answer is 8 + 2 = 10."], ["correct", "correct"]),      # a computation: checked as one
])
def test_final_answer_must_be_what_was_derived(steps, verdicts):
    c = SymbolicChecker(given=[3, 5, 2])
    assert [k.verdict for k in c.check_steps(steps)] == verdicts


def test_path_values_accept_reorderings_that_reach_the_answer():
    from prmkit.envs._checker import path_values

    add_two = {"start": 10, "values": [15, 22],
               "ops": [{"op": "+", "operand": 5}, {"op": "+", "operand": 7}]}
    assert path_values(add_two) == [15, 17, 22]  # 10 + 7 = 17 first is as valid
    mixed = {"start": 9, "values": [20, 60],
             "ops": [{"op": "+", "operand": 11}, {"op": "*", "operand": 3}]}
    assert path_values(mixed) == [20, 60]  # 9 * 3 + 11 = 38 is not the answer: not a valid path
    c = SymbolicChecker(given=[10, 5, 7], values=path_values(add_two), strict_path=True)
    assert [k.verdict for k in c.check_steps(["10 + 7 = 17", "17 + 5 = 22"])] == ["correct"] * 2


def test_a_solution_that_stops_early_has_a_wrong_answer_step():
    """Every step valid, one operation left out: the answer line is the first wrong step (strict mode
    only, where the true answer is known); after an earlier wrong step it keeps its own verdict."""
    from prmkit.envs import ArithConfig, ArithEnv

    p = ArithEnv(ArithConfig(steps=2, seed=3)).problem(0)
    first, _second, _ = p.solution.split("\n")
    stopped = [first, f"The answer is {p.meta['arith']['values'][0]}."]
    checks = SymbolicChecker.for_problem(p, strict_path=True).check_steps(stopped)
    assert [c.verdict for c in checks] == ["correct", "wrong_answer"]
    assert "the problem's answer is " + p.answer in checks[1].reason
    # Not strict: nothing knows the true answer, so the line follows from the steps and passes.
    assert SymbolicChecker.for_problem(p).check_steps(stopped)[1].verdict == "correct"
    # The whole reference solution passes.
    assert all(c.ok for c in SymbolicChecker.for_problem(p, strict_path=True).check_steps(p.solution.split("\n")))
    # After a wrong step, a consistent answer line is not flagged again.
    value = p.meta["arith"]["values"][0]
    slipped = [first.replace(f"= {value}.", f"= {value + 1}."), f"The answer is {value + 1}."]
    verdicts = [c.verdict for c in SymbolicChecker.for_problem(p, strict_path=True).check_steps(slipped)]
    assert verdicts[0] == "arithmetic_error" and verdicts[1] == "correct"
