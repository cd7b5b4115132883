"""The ``arith`` environment: determinism, knobs, and reference solutions that check out."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize("cfg", [ArithConfig(), ArithConfig(steps=(2, 5), max_operand=30, ops=("+", "*"),
                                                            distractors=2, seed=7)], ids=["default", "range"])
def test_config_round_trips_as_itself(cfg):
    """What a problem's meta records (to_dict, through JSON) reads back as the same config."""
    import json

    back = ArithConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back == cfg and type(back.steps) is type(cfg.steps) and type(back.ops) is tuple
    assert ArithEnv(back).problems(3) == ArithEnv(cfg).problems(3)


@pytest.mark.parametrize("d, says", [
    ({"steps": 3, "level": 2}, "unknown field(s) level"),
    ({"steps": "3"}, "field 'steps'"),
    ({"steps": [2, 5, 7]}, "field 'steps'"),
    ({"max_operand": 2.5}, "field 'max_operand'"),
    ({"seed": True}, "field 'seed'"),
    ({"ops": "+-"}, "field 'ops'"),
    ({"steps": 9}, "steps must lie within 1–6"),
    ([3], "expected an object"),
])
def test_config_from_a_bad_dict_names_the_field(d, says):
    with pytest.raises(PrmkitError, match="^where: .*" + re.escape(says)):
        ArithConfig.from_dict(d, where="where")
