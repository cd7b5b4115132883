"""Step checkers (issue 47, item 3): hand-derived steps per checker (right steps not flagged, each kind of
wrong step flagged with its reason, unreadable steps not flagged), the registry and its entry-point
group, and the combining scorer (a PRM's scores with the flagged steps set; batched = one at a time)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import prmkit._registry as registry_module
from prmkit.errors import PrmkitError
from prmkit.scoring import (
    CHECKERS,
    CalculatorChecker,
    CalculatorScorer,
    CheckedScorer,
    CheckFlag,
    ProvenanceChecker,
    ScriptedScorer,
    StepChecker,
    SympyChecker,
    check_trace,
    get_checker,
    get_scorer,
    load_scorer,
    register_checker,
)
from prmkit.trace import Problem, Step, Trace


def reasons(flags: list[CheckFlag]) -> list[str]:
    return [f.reason for f in flags]


# -- calculator ------------------------------------------------------------------------------------------
def test_calculator_checker_reads_equations_and_gsm8k_annotations():
    c = CalculatorChecker()
    assert c.check("", [], "17 * 3 = 51, then 51 - 18 = 33.") == []
    assert reasons(c.check("", [], "17 * 3 = 54.")) == ["17 * 3 = 54, but 17 * 3 is 51"]
    assert reasons(c.check("", [], "10 / 4 = 2.4")) == ["10 / 4 = 2.4, but 10 / 4 is 2.5"]
    # a GSM8K annotation is checked; the text around it is read as written (no 2/3 = 40)
    assert c.check("", [], "60 students x 2/3 = <<60*2/3=40>>40 students") == []
    assert reasons(c.check("", [], "Natalia sold 48/2 = <<48/2=25>>25 clips.")) == ["48/2 = 25, but 48/2 is 24"]
    assert reasons(c.check("", [], "It costs $<<12/60=0.3>>0.3 a minute.")) == ["12/60 = 0.3, but 12/60 is 0.2"]
    # an annotation the calculator cannot read, and no equation at all: no evidence
    assert c.check("", [], "So <<x=5>>5 and <<2+=4>>4.") == []
    assert c.check("", [], "The answer is 51.") == []


def test_the_calculator_scorer_does_not_read_annotations():
    # -s check=calculator is unchanged by the checker: golden outputs pin it
    t = Trace("t", Problem("q"), [Step("48/2 = <<48/2=25>>25 clips.")])
    assert CalculatorScorer().score([t]) == [[1.0]]
    assert CheckedScorer(None, "calculator").score([t]) == [[0.0]]


# -- sympy -----------------------------------------------------------------------------------------------
SYMPY_RIGHT = [
    "So $\\frac{3}{4} \\cdot 8 = 6$ and $2^{10} = 1024$.",
    "We get \\(\\sqrt{50} = 5\\sqrt{2}\\) and \\(\\frac{6}{8} = \\frac{3}{4} = 0.75\\).",
    "Then $x = 3 + 4 = 7$, so $y = 2(7) - 3 = 11$.",
    "$\\sqrt{2} = 1.414$ to three places.",  # a decimal: the value cut or rounded to its digits
    "The area is $\\pi (3)^2 = 9\\pi$.",
    "$1{,}000 \\times 3 = 3{,}000$ and $\\dfrac{1}{2} + \\dfrac{1}{3} = \\dfrac{5}{6}$.",
    "$5 \\text{ cm} = 50 \\text{ mm}$",  # different units: not compared
    "Solve $2x + 3 = 7$: $(x-2)(x-3) = 0$ and $(x+1)^2 = x^2 + 2x + 1$.",  # equations, not claims
    "$0 = -12$, a contradiction.",  # two bare numbers: not a computation
    "$\\sin 30^\\circ = \\frac{1}{2}$ and $7 \\equiv 1 \\pmod 3$, $x \\approx 3.1$.",  # left alone
    "$110_2 = 6$ and $f(3) = 10$ and $e = \\frac{16}{5}$.",  # subscripts, unknown functions, variables
    "$2\\frac{1}{3} = 3$",  # a mixed number or a product: ambiguous, not read
    "Prices $5 and $10 = total.",  # dollar signs, not math
    "$\\frac{1}{0} = 2$ and $\\sqrt{ = 3$",  # unparseable or undefined: no evidence
]


@pytest.mark.parametrize("text", SYMPY_RIGHT)
def test_sympy_leaves_right_and_unreadable_steps_alone(text):
    assert SympyChecker().check("", [], text) == []


def test_sympy_flags_wrong_equalities_with_the_value():
    c = SympyChecker()
    assert reasons(c.check("", [], "So $\\frac{3}{4} \\cdot 8 = 5$.")) == [
        "\\frac{3}{4} \\cdot 8 = 5, but \\frac{3}{4} \\cdot 8 is 6"]
    assert reasons(c.check("", [], "Then \\(x = 3 + 4 = 8\\).")) == ["3 + 4 = 8, but 3 + 4 is 7"]
    assert reasons(c.check("", [], "$\\frac{80(81)}{2} = 3380$")) == [
        "\\frac{80(81)}{2} = 3380, but \\frac{80(81)}{2} is 3240"]
    assert reasons(c.check("", [], "$\\sqrt{50} = 5\\sqrt{3}$")) == ["\\sqrt{50} = 5\\sqrt{3}, but \\sqrt{50} is "
                                                                     "7.07107"]
    assert reasons(c.check("", [], "$\\sqrt{2} = 1.42$")) == ["\\sqrt{2} = 1.42, but \\sqrt{2} is 1.41421"]
    assert reasons(c.check("", [], "$2^{10} = 1000$")) == ["2^{10} = 1000, but 2^{10} is 1024"]


def test_sympy_symbolic_simplifications_only_when_asked():
    wrong = "Expanding, $f(x) = (x+1)^2 = x^2 + x + 1$."
    assert SympyChecker().check("", [], wrong) == []  # off by default: substitutions under conditions
    assert [f.checker for f in SympyChecker(symbolic=True).check("", [], wrong)] == ["sympy"]
    assert SympyChecker(symbolic=True).check("", [], "$f(x) = (x+1)^2 = x^2 + 2x + 1$") == []


# -- provenance ------------------------------------------------------------------------------------------
PROBLEM = "Tom has 15 apples and gives away a third of them. Each apple costs $2.50. How much is left?"


@pytest.mark.parametrize("step", [
    "A third of 15 is 15 / 3 = 5, so 15 - 5 = 10 are left.",
    "He keeps 10 apples.",  # 15 - 5: one operation on explained numbers
    "They are worth 10 * 2.50 = 25 dollars.",
    "In cents that is 2,500 cents.",  # 25 * 100
    "1. First, note there are 60 minutes in an hour and 12 months in a year.",  # constants, list marker
    "On the 3rd day he squares it: x^2.",  # ordinals and exponents are not quantities
])
def test_provenance_explains_numbers_from_the_problem_earlier_steps_and_the_step(step):
    earlier = ["A third of 15 is 5."]
    assert ProvenanceChecker().check(PROBLEM, earlier, step) == []


def test_provenance_flags_an_invented_number_with_its_reason():
    c = ProvenanceChecker()
    assert reasons(c.check(PROBLEM, [], "He gives away 41 apples.")) == [
        "41 is not in the problem, an earlier step, or computed in this step"]
    # an earlier step's number is explained; the same step first is not
    assert c.check(PROBLEM, ["He then buys 41 more."], "He gives away 41 apples.") == []
    # without one-operation derivations, a number worked out in the head is unexplained
    strict = ProvenanceChecker(one_operation=False, constants=())
    assert reasons(strict.check(PROBLEM, [], "He keeps 10 apples.")) == [
        "10 is not in the problem, an earlier step, or computed in this step"]
    assert strict.check(PROBLEM, [], "A third is 15 / 3 = 5; he keeps 15 - 5 = 10 apples.") == []


def test_provenance_reads_number_words_and_percentages():
    c = ProvenanceChecker(constants=(), one_operation=False)
    problem = "A dozen eggs cost twenty dollars; 25% are broken."
    assert c.check(problem, [], "12 eggs for 20 dollars, 0.25 of them broken.") == []
    assert reasons(c.check(problem, [], "13 eggs")) == ["13 is not in the problem, an earlier step, or computed "
                                                        "in this step"]
    assert c.check(problem, [], "[asy] draw((0,0)--(3.7,9)); [/asy]") == []  # figures hold no quantities


# -- registry --------------------------------------------------------------------------------------------
def test_the_registry_and_its_entry_point_group(monkeypatch, tmp_path):
    assert {"calculator", "sympy", "provenance"} <= set(CHECKERS)
    assert CHECKERS.group == "prmkit.checkers"
    assert registry_module.ENTRY_POINT_GROUPS["prmkit.checkers"] == "prmkit.scoring.CHECKERS"
    for name in ("calculator", "sympy", "provenance"):
        assert isinstance(get_checker(name), StepChecker) and get_checker(name).name == name
    with pytest.raises(PrmkitError, match="unknown check 'abacus'; known: calculator, provenance, sympy"):
        get_checker("abacus")

    (tmp_path / "prmkit_checker_plugin.py").write_text(
        "from prmkit.scoring import CheckFlag\n"
        "class Oops:\n"
        "    name = 'oops'\n"
        "    def check(self, problem, previous_steps, step):\n"
        "        return [CheckFlag(self.name, 'says oops')] if 'oops' in step else []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = SimpleNamespace(name="oops", value="prmkit_checker_plugin:Oops", group="prmkit.checkers",
                         dist=SimpleNamespace(name="prmkit-checker-plugin"))
    monkeypatch.setattr(registry_module, "_entry_points", lambda group: (ep,) if group == ep.group else ())
    for field, value in (("_scanned", False), ("_entries", dict(CHECKERS._entries)),
                         ("_plugins", dict(CHECKERS._plugins))):
        monkeypatch.setattr(CHECKERS, field, value)
    assert CHECKERS.plugin("oops").distribution == "prmkit-checker-plugin"
    t = Trace("t", Problem("q"), [Step("fine"), Step("oops")])
    assert [[str(f) for f in fl] for fl in check_trace(t, "oops")] == [[], ["oops: says oops"]]
    register_checker("oops2", "prmkit_checker_plugin:Oops")
    assert get_checker("oops2").name == "oops"


# -- the combining scorer --------------------------------------------------------------------------------
def _trace(tid, texts, problem="Ann has 3 bags of 4 apples."):
    return Trace(id=tid, problem=Problem(problem), steps=[Step(t) for t in texts])


TRACES = [
    _trace("a", ["3 * 4 = 12 apples.", "She eats $\\frac{1}{2} \\cdot 12 = 5$.", "The answer is 7."]),
    _trace("b", ["3 * 4 = 13 apples.", "The answer is 13."]),
    _trace("c", ["She buys 41 more.", "The answer is 53."]),
    _trace("d", ["3 * 4 = 12 apples.", "The answer is 12."]),
]


def test_checked_scorer_alone_and_around_a_prm():
    alone = CheckedScorer(None, "calculator,sympy,provenance")
    assert alone.name == "calculator+sympy+provenance"
    assert alone.score(TRACES) == [[1.0, 0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0]]
    assert alone.checks == {"steps": 9, "flagged": 3, "calculator": 1, "sympy": 1, "provenance": 1}
    flags = alone.flags(TRACES[:1])[0]
    assert [str(f) for f in flags[1]] == ["sympy: \\frac{1}{2} \\cdot 12 = 5, but \\frac{1}{2} \\cdot 12 is 6"]

    base = ScriptedScorer({"3 * 4 = 12 apples.": 0.9, "The answer is 7.": 0.6, "The answer is 12.": 0.8},
                          default=0.5)
    checked = CheckedScorer(base, ["sympy", "calculator"])
    assert checked.name == "scripted+sympy+calculator"
    plain = base.score(TRACES)
    got = checked.score(TRACES)
    # only the steps a checker flags change; the others keep the PRM's scores exactly
    assert got == [[0.9, 0.0, 0.6], [0.0, 0.5], [0.5, 0.5], [0.9, 0.8]]
    assert all(g == p for grow, prow in zip(got, plain, strict=True) for g, p in zip(grow, prow, strict=True)
               if g != 0.0)
    # batched = one at a time
    assert [checked.score([t])[0] for t in TRACES] == got
    assert CheckedScorer(base, "provenance", flagged=0.25).score(TRACES[2:3]) == [[0.25, 0.5]]


def test_checked_scorer_by_name_and_refusals():
    assert get_scorer("checks", checks="sympy").score(TRACES[:1]) == [[1.0, 0.0, 1.0]]
    assert load_scorer("checks", options={"checks": "calculator,provenance"}).name == "calculator+provenance"
    with pytest.raises(PrmkitError, match="ORM"):
        CheckedScorer(ScriptedScorer({}, kind="orm"), "sympy")
    with pytest.raises(PrmkitError, match="flagged"):
        CheckedScorer(None, "sympy", flagged=-1)
    with pytest.raises(PrmkitError, match="unknown check 'abacus'"):
        get_scorer("model", path="unused", check="calculator,abacus")
    with pytest.raises(PrmkitError, match="empty check name"):
        get_scorer("checks", checks="sympy,,calculator")
    with pytest.raises(PrmkitError, match="-s check=sympy"):
        get_scorer("checks", checks="sympy", precision="bf16")


def test_a_checkpoint_with_several_checks(make_rm, mixed_traces, tmp_path):
    rm = make_rm("prmkit")
    rm.save_pretrained(tmp_path / "prm")
    # -s check=calculator stays the calculator scorer itself
    assert isinstance(load_scorer("model", tmp_path / "prm", {"check": "calculator"}), CalculatorScorer)
    checked = load_scorer("model", tmp_path / "prm", {"check": "calculator,sympy,provenance"})
    assert isinstance(checked, CheckedScorer) and checked.kind == "prm"
    plain = load_scorer("model", tmp_path / "prm").score(mixed_traces)
    flags = checked.flags(mixed_traces)
    got = checked.score(mixed_traces)
    for row, want, fl in zip(got, plain, flags, strict=True):
        assert row == [0.0 if f else b for b, f in zip(want, fl, strict=True)]
    assert checked.checks["calculator"] > 0


def test_prmkit_score_with_checks(tmp_path, capsys):
    from cli_run import run

    from prmkit.trace import read_traces, write_traces

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces(TRACES, src)
    code, _, err = run(["score", src, out, "--scorer", "checks", "-s", "checks=calculator,sympy"], capsys)
    assert code == 0, err
    assert [[s.scores["prm"] for s in t.steps] for t in read_traces(out)] == [[1.0, 0.0, 1.0], [0.0, 1.0],
                                                                            [1.0, 1.0], [1.0, 1.0]]


def test_a_trace_the_prm_refuses_is_reported_and_the_others_checked():
    from prmkit.scoring import score_each

    class Refusing(ScriptedScorer):
        def score(self, traces):
            if any(t.id == "b" for t in traces):
                raise PrmkitError("trace 'b' is too long")
            return [[0.5] * len(t.steps) for t in traces]

    got = score_each(CheckedScorer(Refusing({}), "calculator,sympy"), TRACES[:2])
    assert got == [([0.5, 0.0, 0.5], None), (None, "trace 'b' is too long")]


def test_prmkit_eval_processbench_with_checks(tmp_path, capsys):
    import json

    from cli_run import run

    rows = [  # label: the first wrong step, -1 none
        {"id": "m-0", "generator": "g", "problem": "Compute 3/4 of 8.", "final_answer_correct": False, "label": 0,
         "steps": ["$\\frac{3}{4} \\cdot 8 = 5$.", "The answer is 5."]},  # flagged where it is wrong: a hit
        {"id": "m-1", "generator": "g", "problem": "Add 2 and 3.", "final_answer_correct": False, "label": 0,
         "steps": ["We multiply: $2 \\cdot 3 = 6$.", "The answer is 6."]},  # a wrong operation: unseen, a miss
        {"id": "m-2", "generator": "g", "problem": "Add 2 and 3.", "final_answer_correct": True, "label": -1,
         "steps": ["$2 + 3 = 5$.", "The answer is 5."]},  # right and not flagged: a hit
    ]
    (tmp_path / "math.json").write_text(json.dumps(rows))
    code, out, err = run(["eval", "processbench", tmp_path / "math.json", "--scorer", "checks",
                          "-s", "checks=calculator,sympy,provenance"], capsys)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("math "))
    assert line.split()[1:4] == ["50.0", "100.0", "66.7"]  # error acc 1/2, correct acc 1/1, F1 2/3
