"""The calculator check of written arithmetic: equations read and judged by hand, what it must not read,
and the scorer alone and around a PRM (unflagged steps keep the PRM's scores exactly)."""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.scoring import CalculatorScorer, ScriptedScorer, check_arithmetic, get_scorer, load_scorer
from prmkit.trace import Problem, Step, Trace

# (text, [(expression, written, ok)]) — each value worked out by hand
READ = [
    ("The cookies become three times as many: 17 * 3 = 51.", [("17 * 3", "51", True)]),
    ("He gives away 18: 51 - 18 = 35.", [("51 - 18", "35", False)]),
    ("Total: 2 + 48 + 3150 + 1300 = 3500 pounds.", [("2 + 48 + 3150 + 1300", "3500", False)]),  # 4500
    ("$1,200 x 3 = $3,600", [("$1,200 x 3", "3,600", True)]),
    ("(80,000 + 50,000) * 2.5 = 130,000 * 2.5 = 325,000",
     [("(80,000 + 50,000) * 2.5", "130,000 * 2.5", True), ("130,000 * 2.5", "325,000", True)]),
    ("0.20 × $85.98 = $17.19.", [("0.20 × $85.98", "17.19", True)]),  # 17.196 cut to cents
    ("0.20 × $85.98 = $17.20.", [("0.20 × $85.98", "17.20", True)]),  # ... or rounded
    ("0.20 × $85.98 = $17.21.", [("0.20 × $85.98", "17.21", False)]),
    ("10 / 4 = 2.5 and 12 ÷ 5 = 2", [("10 / 4", "2.5", True), ("12 ÷ 5", "2", False)]),
    ("9 × (3/5) = 27/5 = 5.4", [("9 × (3/5)", "27/5", True), ("27/5", "5.4", True)]),
    ("1 * (2/3) = 2/3 liters", [("1 * (2/3)", "2/3", True)]),
]

# pieces of larger expressions, percentages, exponents, LaTeX, variables, non-equations: no verdict
NOT_READ = [
    "He has 17 apples. The answer is 51.",
    "x = 5 and 7 = 7",
    "2x + 4 + 1 = 7",
    "3 \\times 4 + 2 = 14",
    "10^8 - 1 = 99,999,999",
    "6c^4 - 225c^2 + 1352 = 0",
    "k(7 - 8) = 2\\mathbf{i}",
    "50 + 50 = 100%",
    "2 + 3 = 5x",
    "(2 + 3 = 5",
    "4 / 0 = 1",
]


@pytest.mark.parametrize(("text", "expected"), READ)
def test_equations_read_and_judged(text, expected):
    assert [(e.expression, e.written, e.ok) for e in check_arithmetic(text)] == expected


@pytest.mark.parametrize("text", NOT_READ)
def test_what_the_calculator_does_not_read(text):
    assert check_arithmetic(text) == []


def test_long_lines_are_read_or_left_without_trouble():
    # one regex over sums of many operands used to backtrack for seconds on 200 characters
    assert check_arithmetic(" + ".join(["1"] * 5000) + " apples") == []
    assert check_arithmetic(" + ".join(["1"] * 5000) + " = 5000") == []  # past 200 tokens: not read
    assert [e.ok for e in check_arithmetic(" + ".join(["1"] * 50) + " = 50")] == [True]
    assert check_arithmetic("(" * 150 + "1 + 1" + ")" * 150 + " = 2") == []


def _trace(tid, texts):
    return Trace(id=tid, problem=Problem("q"), steps=[Step(t) for t in texts])


TRACES = [
    _trace("a", ["9 * 4 = 36.", "36 - 15 = 22.", "The answer is 22."]),
    _trace("b", ["9 * 4 = 36.", "36 - 15 = 21.", "The answer is 21."]),
    _trace("c", ["Nothing to compute.", "The answer is 3."]),
]


def test_the_calculator_alone():
    calc = CalculatorScorer()
    assert (calc.kind, calc.name) == ("prm", "calculator")
    assert calc.score(TRACES) == [[1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0]]
    assert calc.checks == {"steps": 8, "with_equations": 4, "flagged": 1}
    assert CalculatorScorer(flagged=0.25).score(TRACES[:1]) == [[1.0, 0.25, 1.0]]


def test_around_a_prm_only_flagged_steps_change():
    base = ScriptedScorer({"9 * 4 = 36.": 0.9, "36 - 15 = 22.": 0.8, "36 - 15 = 21.": 0.3,
                           "The answer is 22.": 0.7, "The answer is 21.": 0.6}, default=0.5)
    checked = CalculatorScorer(base)
    assert checked.name == "scripted+calculator"
    # the slip 36 - 15 = 22 loses its 0.8; every other step keeps the PRM's score exactly
    assert checked.score(TRACES) == [[0.9, 0.0, 0.7], [0.9, 0.3, 0.6], [0.5, 0.5]]
    # batched = one at a time
    assert [checked.score([t])[0] for t in TRACES] == checked.score(TRACES)


def test_bad_arguments_are_refused():
    with pytest.raises(PrmkitError, match="ORM"):
        CalculatorScorer(ScriptedScorer({}, kind="orm"))
    with pytest.raises(PrmkitError, match="flagged"):
        CalculatorScorer(flagged=2)
    with pytest.raises(PrmkitError, match="unknown check 'abacus'"):
        get_scorer("model", path="unused", check="abacus")
    with pytest.raises(PrmkitError, match="-s check=calculator"):
        get_scorer("calculator", precision="bf16")


def test_by_name():
    assert get_scorer("calculator").score(TRACES[:1]) == [[1.0, 0.0, 1.0]]
    assert load_scorer("calculator").name == "calculator"


def test_prmkit_score_with_the_calculator(tmp_path, capsys):
    from cli_run import run

    from prmkit.trace import read_traces, write_traces

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces(TRACES, src)
    code, _, err = run(["score", src, out, "--scorer", "calculator"], capsys)
    assert code == 0, err
    assert [[s.scores["prm"] for s in t.steps] for t in read_traces(out)] == [[1.0, 0.0, 1.0], [1.0, 1.0, 1.0],
                                                                            [1.0, 1.0]]


def test_a_checkpoint_with_the_calculator_check(make_rm, mixed_traces, tmp_path):
    rm = make_rm("prmkit")
    rm.save_pretrained(tmp_path / "prm")
    checked = load_scorer("model", tmp_path / "prm", {"check": "calculator"})
    assert isinstance(checked, CalculatorScorer) and checked.kind == "prm"
    plain = load_scorer("model", tmp_path / "prm").score(mixed_traces)
    got = checked.score(mixed_traces)
    slips = {"3 + 5 = 9.", "Step 1: 3 + 5 = 7"}
    for t, row, want in zip(mixed_traces, got, plain, strict=True):
        for step, a, b in zip(t.steps, row, want, strict=True):
            assert a == (0.0 if step.text in slips else b)
    assert checked.checks["flagged"] == 4  # two slip steps, in each of the two problems


def test_the_prefix_caches_token_counts_stay_visible_through_the_check(make_rm, mixed_traces):
    from prmkit.scoring import PrefixCachingScorer

    inner = PrefixCachingScorer(make_rm("prmkit"))
    checked = CalculatorScorer(inner)
    checked.score(mixed_traces)
    assert checked.stats is inner.stats and checked.stats.to_dict()["tokens_computed"] > 0
    assert CalculatorScorer().stats is None


def test_served_with_the_check(tmp_path):
    from starlette.testclient import TestClient

    from prmkit.serve import ServeConfig, create_app

    base = ScriptedScorer({"3 + 5 = 9.": 0.9, "The answer is 9.": 0.8}, default=0.5)
    app = create_app(CalculatorScorer(base), ServeConfig(aggregate="min"))
    with TestClient(app) as client:
        reply = client.post("/get_reward", json={"query": ["Q: 3 + 5?\nA: 3 + 5 = 9.\nThe answer is 9.<|im_end|>"],
                                                 "prompts": ["Q: 3 + 5?\nA:"]}).json()
        metrics = client.get("/metrics").text
    assert reply["rewards"] == [0.0] and reply["step_scores"] == [[0.0, 0.8]]
    assert "prmkit_scorer_calls_total 1" in metrics


def test_a_trace_the_prm_refuses_is_reported_and_the_others_checked():
    from prmkit.scoring import score_each

    def base(trace):
        if trace.id == "b":
            raise PrmkitError("trace 'b' is too long")
        return [0.5] * len(trace.steps)

    class Refusing(ScriptedScorer):
        def score(self, traces):
            return [base(t) for t in traces]

    got = score_each(CalculatorScorer(Refusing({})), TRACES)
    assert got == [([0.5, 0.0, 0.5], None), (None, "trace 'b' is too long"), ([0.5, 0.5], None)]
