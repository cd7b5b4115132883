"""The ``arith`` environment: determinism, knobs, and reference solutions that check out."""

from __future__ import annotations

import pytest

from prmkit.envs import ArithConfig, ArithEnv
from prmkit.envs._checker import SymbolicChecker
from prmkit.errors import PrmkitError


def test_problems_are_a_pure_function_of_index():
    env = ArithEnv(ArithConfig(steps=(2, 4), seed=7))
    many = env.problems(30)
    assert env.problem(17) == many[17]
    assert ArithEnv(ArithConfig(steps=(2, 4), seed=7)).problems(30, start=10)[7] == many[17]
    assert env.problem(0) != ArithEnv(ArithConfig(steps=(2, 4), seed=8)).problem(0)


@pytest.mark.parametrize("steps", [1, 2, 3, 6, (1, 6)])
@pytest.mark.parametrize("ops", [("+",), ("+", "-"), ("+", "-", "*", "/")])
def test_reference_solution_checks_out_and_values_chain(steps, ops):
    env = ArithEnv(ArithConfig(steps=steps, ops=ops, distractors=2, seed=1))
    lo, hi = env.config.step_range
    for p in env.problems(40):
        meta = p.meta["arith"]
        assert lo <= len(meta["ops"]) <= hi
        assert all(o["op"] in ops for o in meta["ops"])
        value = meta["start"]
        for o in meta["ops"]:
            value = {"+": value + o["operand"], "-": value - o["operand"],
                     "*": value * o["operand"], "/": value // o["operand"]}[o["op"]]
            assert value == o["after"] and value >= 0
            if o["op"] == "/":
                assert o["before"] % o["operand"] == 0
        assert p.answer == str(value)
        lines = p.solution.split("\n")
        assert lines[-1] == f"The answer is {value}."
        checks = SymbolicChecker.for_problem(p, strict_path=True).check_steps(lines)
        assert [c.verdict for c in checks] == ["correct"] * len(lines), (p.text, lines)
        for d in meta["distractors"]:
            assert d not in meta["given"] and d not in meta["values"]
            assert f"{d} " in p.text


def test_config_errors_reported_together():
    with pytest.raises(PrmkitError) as e:
        ArithConfig(steps=(0, 9), ops=("^",), max_operand=2)
    msg = str(e.value)
    assert "steps" in msg and "ops" in msg and "max_operand" in msg
