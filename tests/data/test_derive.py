"""Error injection: each type's exact wrong trace on a fixed arith and a fixed GSM8K-style problem (worked
out by hand below), labels by construction, the symbolic checker agreeing on the first wrong step,
determinism, ``derive_file`` and ``prmkit data derive``; at the end, the types for word problems of
issue 47 (misread_rate, premature_answer) on more GSM8K-style problems, the plausibility of injected
answers and the hard negatives (plausible errors only, correct traces reshaped to the wrong traces'
step counts)."""

from __future__ import annotations

import copy
import json

import pytest

from prmkit.cli import main
from prmkit.data import (
    ERROR_TYPES,
    PLAUSIBLE_FACTOR,
    DeriveReport,
    derive_file,
    derive_traces,
    inject_errors,
    plausible,
    read,
)
from prmkit.envs import ArithConfig, ArithEnv, SymbolicChecker
from prmkit.errors import PrmkitError
from prmkit.generate import load_problems
from prmkit.trace import Problem, Step, StepLabel, Trace, read_traces

# arith-5-0: "Zoe has 3 pencils. Raj has 20 books. [x4] She gives 10 pencils to the teacher. [x2]"
# given 3, 4, 10, 2; distractor 20; true path 3 -> 12 -> 2 -> 4.
ZOE = ArithEnv(ArithConfig(steps=3, distractors=1, seed=5)).problem(0)
Z = ["The pencils become four times as many: 3 * 4 = 12.", "She gives away 10: 12 - 10 = 2.",
     "The pencils become twice as many: 2 * 2 = 4.", "The answer is 4."]
# Each type at seed 0: (steps, first wrong step, final answer). Later steps continue from the wrong value.
ARITH = {
    # 12 -> 15 (3 units off); 15 - 10 = 5; 5 * 2 = 10
    "arithmetic_slip": ([Z[0].replace("= 12", "= 15"), "She gives away 10: 15 - 10 = 5.",
                         "The pencils become twice as many: 5 * 2 = 10.", "The answer is 10."], 0, "10"),
    # gives away, but adds: 12 + 10 = 22; 22 * 2 = 44
    "wrong_operation": ([Z[0], "She gives away 10: 12 + 10 = 22.", "The pencils become twice as many: 22 * 2 = 44.",
                         "The answer is 44."], 1, "44"),
    # the distractor 20 instead of 4: 3 * 20 = 60; 60 - 10 = 50; 50 * 2 = 100
    "wrong_operand": (["The pencils become four times as many: 3 * 20 = 60.", "She gives away 10: 60 - 10 = 50.",
                       "The pencils become twice as many: 50 * 2 = 100.", "The answer is 100."], 0, "100"),
    # "gives away 10" left out: the doubling uses the un-updated 12
    "dropped_step": ([Z[0], "The pencils become twice as many: 12 * 2 = 24.", "The answer is 24."], 1, "24"),
    # x4 twice: 12 * 4 = 48; 48 - 10 = 38; 38 * 2 = 76
    "duplicated_step": ([Z[0], "The pencils become four times as many: 12 * 4 = 48.",
                         "She gives away 10: 48 - 10 = 38.", "The pencils become twice as many: 38 * 2 = 76.",
                         "The answer is 76."], 1, "76"),
    # 8 is neither given (3, 4, 10, 2, 20) nor derived (12, 2, 4): 3 * 8 = 24; 14; 28
    "invented_quantity": (["The pencils become four times as many: 3 * 8 = 24.", "She gives away 10: 24 - 10 = 14.",
                           "The pencils become twice as many: 14 * 2 = 28.", "The answer is 28."], 0, "28"),
    # 12 x 100 = 1200; 1190; 2380
    "unit_scale_slip": ([Z[0].replace("= 12", "= 1200"), "She gives away 10: 1200 - 10 = 1190.",
                         "The pencils become twice as many: 1190 * 2 = 2380.", "The answer is 2380."], 0, "2380"),
    # every step right; the answer states 3 (given, never derived)
    "unsupported_answer": (Z[:3] + ["The answer is 3."], 3, "3"),
    # 3 * 3 = 9 (another quantity), and the next step goes on from the true 12
    "right_answer_wrong_step": (["The pencils become four times as many: 3 * 3 = 9."] + Z[1:], 0, "4"),
    # "twice as large" read the wrong way round: 2 / 2 = 1 ("four times": 3 / 4 is not a whole number)
    "misread_rate": (Z[:2] + ["The pencils become twice as many: 2 / 2 = 1.", "The answer is 1."], 2, "1"),
    # stops after the first step (seed 0 draws it; after the second, "The answer is 2." is the other)
    "premature_answer": ([Z[0], "The answer is 12."], 1, "12"),
}

MIA = Problem("Mia buys 3 boxes of 12 pencils. She gives 8 pencils to her brother and shares the rest equally "
              "among 4 friends. How many pencils does each friend get?", answer="7", id="mia",
              solution="Mia has 3*12=<<3*12=36>>36 pencils.\nAfter giving 8 away she has 36-8=<<36-8=28>>28 "
                       "pencils.\nEach friend gets 28/4=<<28/4=7>>7 pencils.\n#### 7")
M = ["Mia has 3*12=36 pencils.", "After giving 8 away she has 36-8=28 pencils.", "Each friend gets 28/4=7 pencils.",
     "The answer is 7."]
GSM8K = {
    "arithmetic_slip": (M[:2] + ["Each friend gets 28/4=6 pencils.", "The answer is 6."], 2, "6"),
    # 36 + 8 = 44; 44 / 4 = 11
    "wrong_operation": ([M[0], "After giving 8 away she has 36+8=44 pencils.", "Each friend gets 44/4=11 pencils.",
                         "The answer is 11."], 1, "11"),
    # the problem's 8 in place of 28
    "wrong_operand": (M[:2] + ["Each friend gets 8/4=2 pencils.", "The answer is 2."], 2, "2"),
    # the giving step left out: 36 / 4 = 9
    "dropped_step": ([M[0], "Each friend gets 36/4=9 pencils.", "The answer is 9."], 1, "9"),
    # x12 twice: 432; 424; 106
    "duplicated_step": ([M[0], "Mia has 36*12=432 pencils.", "After giving 8 away she has 432-8=424 pencils.",
                         "Each friend gets 424/4=106 pencils.", "The answer is 106."], 1, "106"),
    # 32 is not in the problem (3, 12, 8, 4) nor derived (36, 28, 7): 24; 6
    "invented_quantity": ([M[0], "After giving 8 away she has 32-8=24 pencils.", "Each friend gets 24/4=6 pencils.",
                           "The answer is 6."], 1, "6"),
    "unit_scale_slip": (M[:2] + ["Each friend gets 28/4=70 pencils.", "The answer is 70."], 2, "70"),
    "unsupported_answer": (M[:3] + ["The answer is 8."], 3, "8"),
    # 28 -> 30, and the last step still divides the true 28
    "right_answer_wrong_step": ([M[0], "After giving 8 away she has 36-8=30 pencils."] + M[2:], 1, "7"),
    # stops after the first step: its 36 stated as the answer
    "premature_answer": ([M[0], "The answer is 36."], 1, "36"),
    # misread_rate does not apply: Mia's problem states no rate ("among 4 friends" is a count); see
    # tests/data/test_derive_hard.py for the problems it is tested on
}


def values(t: Trace) -> list[int | None]:
    return [None if lab is None else lab.value for lab in t.labels()]


def without_times(t: Trace) -> dict:
    d = t.to_dict()
    for p in d["provenance"]:
        p.pop("time", None)
    return d


def one(problem: Problem, error_type: str, seed: int = 0) -> Trace:
    ts = list(inject_errors([problem], error_types=[error_type], correct_fraction=0.0, seed=seed))
    assert len(ts) == 1
    return ts[0]


def check_trace(t: Trace, error_type: str, steps: list[str], wrong: int, final: str, answer: str, seed: int = 0):
    assert [s.text for s in t.steps] == steps
    assert values(t) == [1] * wrong + [-1] + [None] * (len(steps) - wrong - 1)
    assert t.final_answer == final
    assert t.outcome == ("correct" if final == answer else "incorrect")
    assert (error_type == "right_answer_wrong_step") == (t.outcome == "correct")
    bad = t.steps[wrong].labels[0]
    assert (bad.source, bad.labeler, bad.args) == ("synthetic", "derived", {"seed": seed, "error_type": error_type})
    assert bad.meta["verdict"] == error_type and bad.meta["reason"] == t.meta["derived"]["edit"]
    assert t.meta["derived"]["error_type"] == error_type and t.meta["derived"]["step"] == wrong
    assert t.meta["derived"]["kind"] == "corrupted"
    prov = t.provenance[-1]
    assert prov.stage == "derive" and prov.args["seed"] == seed and prov.args["error_type"] == error_type
    assert prov.args["error_types"] == [error_type]
    assert t.text == "\n".join(steps)
    t.check_spans()


@pytest.mark.parametrize("error_type", ERROR_TYPES)
def test_each_type_on_an_arith_problem(error_type):
    assert ZOE.solution.split("\n") == Z and ZOE.meta["arith"]["distractors"] == [20]
    steps, wrong, final = ARITH[error_type]
    t = one(ZOE, error_type)
    check_trace(t, error_type, steps, wrong, final, "4")
    assert t.id == f"arith-5-0:derived:0:{error_type}" and t.source == "derived:arith"


@pytest.mark.parametrize("error_type", sorted(GSM8K))
def test_each_type_on_a_gsm8k_style_problem(error_type):
    steps, wrong, final = GSM8K[error_type]
    check_trace(one(MIA, error_type), error_type, steps, wrong, final, "7")


def first_checker_error(t: Trace) -> tuple[int | None, list]:
    t = copy.deepcopy(t)
    for s in t.steps:
        s.labels = []
    checks = SymbolicChecker.for_problem(t.problem, strict_path=True).label(t)
    return next((i for i, c in enumerate(checks) if not c.ok), None), checks


@pytest.mark.parametrize("error_type", ERROR_TYPES)
def test_the_checker_finds_the_injected_step(error_type):
    """The injected step is really the first wrong one: the symbolic checker (strict path) says so,
    on the fixed problem and on 40 others of 1-5 steps with a distractor."""
    first, checks = first_checker_error(one(ZOE, error_type))
    assert first == ARITH[error_type][1]
    problems = ArithEnv(ArithConfig(steps=(1, 5), distractors=1, seed=11)).problems(40)
    made = 0
    for t in inject_errors(problems, error_types=[error_type], correct_fraction=0.0, per_problem=2):
        assert first_checker_error(t)[0] == t.meta["derived"]["step"], [s.text for s in t.steps]
        made += 1
    # an arith multiple read inverted rarely divides evenly ("three times" -> /3): 9 of the 40 allow it
    assert made >= (5 if error_type == "misread_rate" else 20)


def test_checker_verdicts_by_type():
    """What the checker calls each type on the fixed problem (the error-mix report maps these back)."""
    got = {et: first_checker_error(one(ZOE, et))[1][ARITH[et][1]].verdict for et in ERROR_TYPES}
    assert got == {"arithmetic_slip": "arithmetic_error", "wrong_operation": "wrong_value",
                   # the checker knows arith's given numbers, not its distractors
                   "wrong_operand": "unknown_quantity", "dropped_step": "wrong_value",
                   "duplicated_step": "wrong_value", "invented_quantity": "unknown_quantity",
                   "unit_scale_slip": "arithmetic_error", "unsupported_answer": "unsupported_answer",
                   "right_answer_wrong_step": "wrong_value", "misread_rate": "wrong_value",
                   "premature_answer": "wrong_answer"}


def test_later_steps_continue_consistently():
    """After the wrong step every equation is computed right from the values the text states, and
    the answer line gives the last one; right_answer_wrong_step keeps the reference's later steps."""
    problems = ArithEnv(ArithConfig(steps=(2, 5), distractors=1, seed=3)).problems(30)
    checker = SymbolicChecker(given=[])
    for t in inject_errors(problems, per_problem=9, correct_fraction=0.0):
        k = t.meta["derived"]["step"]
        later = [s.text for s in t.steps[k + 1:]]
        if t.meta["derived"]["error_type"] == "right_answer_wrong_step":
            assert later == t.problem.solution.split("\n")[k + 1:]
            continue
        comps = [c for text in later for c in checker.computations(text)]
        assert all(c.ok for c in comps)
        last = comps[-1].claimed if comps else None
        if t.meta["derived"]["error_type"] != "unsupported_answer" and last is not None:
            assert t.final_answer == str(last)


def test_deterministic_and_per_problem():
    problems = ArithEnv(ArithConfig(steps=(2, 4), distractors=1, seed=2)).problems(8)
    a = [without_times(t) for t in inject_errors(problems, per_problem=3, seed=4)]
    b = [without_times(t) for t in inject_errors(problems, per_problem=3, seed=4)]
    assert a == b
    # a problem's traces do not depend on the other problems
    alone = [without_times(t) for t in inject_errors(problems[5:6], per_problem=3, seed=4)]
    assert alone == [d for d in a if d["meta"]["derived"]["from"] == problems[5].id]
    c = [without_times(t) for t in inject_errors(problems, per_problem=3, seed=5)]
    assert a != c


def test_per_problem_gives_different_types_and_correct_fraction():
    ts = list(inject_errors([ZOE], per_problem=len(ERROR_TYPES), correct_fraction=1.0))
    assert values(ts[0]) == [1, 1, 1, 1] and ts[0].outcome == "correct" and ts[0].id == "arith-5-0:derived:correct"
    wrong = ts[1:]
    assert sorted(t.meta["derived"]["error_type"] for t in wrong) == sorted(ERROR_TYPES)
    assert len({tuple(s.text for s in t.steps) for t in wrong}) == len(ERROR_TYPES)
    # twice as many slots as types: every trace still different
    many = list(inject_errors([ZOE], per_problem=2 * len(ERROR_TYPES), correct_fraction=0.0))
    assert len(many) == 2 * len(ERROR_TYPES) and len({tuple(s.text for s in t.steps) for t in many}) == len(many)
    # the correct trace comes with about the asked share of problems
    problems = ArithEnv(ArithConfig(steps=2)).problems(60)
    report = DeriveReport()
    list(inject_errors(problems, correct_fraction=0.5, report=report))
    assert 15 <= report.correct <= 45 and report.traces == 60 + report.correct


def test_a_type_that_does_not_apply_falls_back():
    one_step = ArithEnv(ArithConfig(steps=1, seed=1)).problem(0)
    report = DeriveReport()
    assert one_step.solution == "She finds 11 more: 9 + 11 = 20.\nThe answer is 20."
    ts = list(inject_errors([one_step], error_types=["dropped_step", "arithmetic_slip"], correct_fraction=0.0,
                            per_problem=2, report=report))
    # a one-step solution has no later step to use a dropped result: both slots get a slip
    assert [t.meta["derived"]["error_type"] for t in ts] == ["arithmetic_slip"] * 2
    assert report.fallbacks == {"dropped_step": 1} and report.short == 0
    report = DeriveReport()
    assert list(inject_errors([one_step], error_types=["dropped_step"], report=report)) == []
    assert report.skipped == {"no error type applies": 1}


def test_bad_arguments():
    with pytest.raises(PrmkitError, match="unknown error type.*'nope'.*known: arithmetic_slip"):
        list(inject_errors([ZOE], error_types=["nope"]))
    with pytest.raises(PrmkitError, match="per_problem"):
        list(inject_errors([ZOE], per_problem=0))
    with pytest.raises(PrmkitError, match="correct_fraction"):
        list(inject_errors([ZOE], correct_fraction=2))


def test_derive_traces_with_error_types():
    counts: dict[str, int] = {}
    ts = derive_traces([ZOE, MIA], pairs=True, error_types=["wrong_operation"], counts=counts)
    assert counts == {"items": 2, "no_solution": 0, "correct": 2, "corrupted": 2, "uncorruptible": 0}
    assert [s.text for s in ts[1].steps] == ARITH["wrong_operation"][0]
    assert [s.text for s in ts[3].steps] == GSM8K["wrong_operation"][0]


def gsm8k_rows(tmp_path):
    path = tmp_path / "mini.jsonl"
    rows = [{"question": MIA.text, "answer": MIA.solution},
            {"question": "Say hi.", "answer": "Hello.\n#### hi"}]  # no number anywhere: nothing to inject
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    return path


def test_derive_file(tmp_path):
    src, out = gsm8k_rows(tmp_path), tmp_path / "out" / "derived.jsonl"
    report = derive_file(src, out, error_types=["dropped_step", "unsupported_answer"], per_problem=2,
                         correct_fraction=0.0, seed=0)
    ts = {t.meta["derived"]["error_type"]: t for t in read_traces(out)}
    assert sorted(ts) == ["dropped_step", "unsupported_answer"]
    assert all(t.id.startswith("mini.jsonl:1:derived:") for t in ts.values())
    # the giving step left out: the last step divides one of its inputs, 36 or 8, in place of 28
    assert [s.text for s in ts["dropped_step"].steps] in (
        GSM8K["dropped_step"][0], [M[0], "Each friend gets 8/4=2 pencils.", "The answer is 2."])
    assert (report.items, report.problems, report.traces, report.correct) == (3, 1, 2, 0)
    assert report.skipped["no error type applies"] == 1  # "Say hi." states no number to change
    assert sum(n for r, n in report.skipped.items() if r.startswith("unreadable record")) == 1
    assert not list(out.parent.glob("*.partial*"))
    with pytest.raises(PrmkitError, match="must not overwrite the input"):
        derive_file(src, src)
    with pytest.raises(PrmkitError, match="no such file"):
        derive_file(tmp_path / "absent.jsonl", out)


def test_derive_file_skips_wrong_references_and_repeated_problems(tmp_path):
    ok = Trace("good", Problem("2 and 3?", answer="5"), [Step("2+3=5"), Step("The answer is 5.")],
               final_answer="5", outcome="correct")
    wrong = Trace("bad", Problem("2 and 3?", answer="5"), [Step("2+3=6", labels=[StepLabel(-1)])],
                  final_answer="6", outcome="incorrect")
    # policy samples of one arith problem: its reference solution is used, once
    samples = [Trace(f"s{i}", ZOE, [Step("anything")]) for i in range(3)]
    report = derive_file([ok, wrong, *samples], tmp_path / "o.jsonl", error_types=["wrong_operation"],
                         correct_fraction=0.0)
    ts = list(read_traces(tmp_path / "o.jsonl"))
    assert [t.meta["derived"]["from"] for t in ts] == ["good", "arith-5-0"]
    assert [s.text for s in ts[1].steps] == ARITH["wrong_operation"][0]
    assert report.skipped == {"not a correct reference (a wrong step or answer)": 1, "problem already derived": 2}


def run_cli(argv, capsys):
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_round_trip(tmp_path, capsys):
    src = gsm8k_rows(tmp_path)
    code, out, _ = run_cli(["data", "derive", str(src), str(tmp_path / "cli.jsonl"), "-e", "wrong_operation",
                            "--error-type", "duplicated_step", "--per-problem", "2", "--seed", "3"], capsys)
    assert code == 0 and "2 wrong" in out and "by error type: duplicated_step 1, wrong_operation 1" in out
    assert "did not apply" not in out  # "Say hi." allows no error: skipped, not a fallback
    want = tmp_path / "api.jsonl"
    derive_file(src, want, error_types=["wrong_operation", "duplicated_step"], per_problem=2, seed=3)
    assert [without_times(t) for t in read_traces(tmp_path / "cli.jsonl")] == \
        [without_times(t) for t in read_traces(want)]


def test_cli_env_arith(tmp_path, capsys):
    code, out, _ = run_cli(["data", "derive", "--env", "arith", "--problems", "6", "--steps", "2-5",
                            "--distractors", "1", "--env-seed", "101", str(tmp_path / "e.jsonl")], capsys)
    assert code == 0 and "from 6 of 6 problems" in out
    problems, _ = load_problems(env="arith", n=6, steps="2-5", distractors=1, env_seed=101)
    derive_file(problems, tmp_path / "api.jsonl")
    assert [without_times(t) for t in read_traces(tmp_path / "e.jsonl")] == \
        [without_times(t) for t in read_traces(tmp_path / "api.jsonl")]
    code, _, err = run_cli(["data", "derive", "--env", "arith", "a.jsonl", "b.jsonl"], capsys)
    assert code != 0 and "give only OUT" in err
    code, _, err = run_cli(["data", "derive", str(tmp_path / "e.jsonl"), str(tmp_path / "x.jsonl"), "-e", "nope"],
                           capsys)
    assert code != 0 and "unknown error type" in err


@pytest.mark.realdata
@pytest.mark.slow
def test_gsm8k_test_rows(shared_data):
    refs = [t for _, t in zip(range(150), read(shared_data / "gsm8k" / "test.jsonl"), strict=False)]
    report = DeriveReport()
    ts = list(inject_errors(refs, per_problem=3, correct_fraction=0.0, report=report))
    assert report.problems == 150 and not report.skipped and report.short == 0
    assert set(report.by_type) == set(ERROR_TYPES)
    by_id = {r.id: r for r in refs}
    for t in ts:
        d = t.meta["derived"]
        k, et = d["step"], d["error_type"]
        ref = by_id[d["from"]]
        clean = [s.text.replace("<<", "\0").split("\0")[0] for s in ref.steps]  # text before any annotation
        assert values(t) == [1] * k + [-1] + [None] * (len(t.steps) - k - 1)
        assert "<<" not in t.text and ">>" not in t.text
        # the steps before the wrong one are the reference's (annotations stripped)
        for i in range(k if et != "dropped_step" else d["dropped"]):
            assert t.steps[i].text.startswith(clean[i])
        assert (t.outcome == "correct") == (et == "right_answer_wrong_step"), (et, t.final_answer, ref.final_answer)


@pytest.mark.realdata
def test_math_rows_skip_what_does_not_parse(shared_data):
    rows = [t for _, t in zip(range(30), read(shared_data / "math500" / "test.jsonl"), strict=False)]
    report = DeriveReport()
    ts = list(inject_errors(rows, correct_fraction=0.0, report=report))
    assert report.items == 30 and report.problems + report.skipped["no error type applies"] == 30
    assert report.problems > 0 and len(ts) == report.problems
    for t in ts:
        k = t.meta["derived"]["step"]
        assert values(t) == [1] * k + [-1] + [None] * (len(t.steps) - k - 1)


# "half as many": 48/2 = 24 in May, 72 in all.
NOA = Problem("Noa sold 48 cups of lemonade in April and half as many in May. How many cups did she sell in "
              "April and May?", answer="72", id="noa",
              solution="Noa sold 48/2=<<48/2=24>>24 cups in May.\nShe sold 48+24=<<48+24=72>>72 cups in all.\n#### 72")
# "$12 an hour" for 50 minutes: 12/60 = 0.2 a minute, 10 in all.
IVO = Problem("Ivo earns $12 an hour. He works 50 minutes. How much does he earn?", answer="10", id="ivo",
              solution="He earns 12/60=<<12/60=0.2>>0.2 dollars per minute.\nIn 50 minutes he earns "
                       "0.2*50=<<0.2*50=10>>10 dollars.\n#### 10")


@pytest.mark.parametrize(("problem", "error_type", "steps", "wrong", "final"), [
    # "half as many" read the wrong way round: 48*2 = 96 in May, 48+96 = 144 in all
    (NOA, "misread_rate", ["Noa sold 48*2=96 cups in May.", "She sold 48+96=144 cups in all.", "The answer is 144."],
     0, "144"),
    # the hour-to-minute conversion inverted: 12*60 = 720 a minute, 720*50 = 36000 (the 12 before the
    # operator is left as it is: only an operand after its operator is inverted)
    (IVO, "misread_rate", ["He earns 12*60=720 dollars per minute.", "In 50 minutes he earns 720*50=36000 dollars.",
                           "The answer is 36000."], 0, "36000"),
    # stops after May's sales: the answer line (step 1) states 24
    (NOA, "premature_answer", ["Noa sold 48/2=24 cups in May.", "The answer is 24."], 1, "24"),
    (IVO, "premature_answer", ["He earns 12/60=0.2 dollars per minute.", "The answer is 0.2."], 1, "0.2"),
])
def test_new_types_on_gsm8k_style_problems(problem, error_type, steps, wrong, final):
    t = one(problem, error_type)
    check_trace(t, error_type, steps, wrong, final, problem.answer)
    assert len(list(inject_errors([problem], error_types=[error_type], per_problem=5, correct_fraction=0.0))) == 1


def test_misread_rate_names_the_relation_and_needs_one():
    assert "'half' inverted: /2 -> *2" in one(NOA, "misread_rate").meta["derived"]["edit"]
    assert "'60 for hour' inverted" in one(IVO, "misread_rate").meta["derived"]["edit"]
    # Mia's problem states no rate, multiple or time unit: nothing to misread
    report = DeriveReport()
    assert list(inject_errors([MIA], error_types=["misread_rate"], report=report)) == []
    assert report.skipped == {"no error type applies": 1}


def test_plausible():
    assert PLAUSIBLE_FACTOR == 3
    # within a factor 3 (21 and 7/3 ≈ 2.33 at the edges), whole where the answer is, same sign
    assert [plausible(g, "7") for g in ("11", "21", "22", "3", "2", "70", "7.5", "-2", "x", None)] == \
        [True, True, False, True, False, False, False, False, False, False]
    assert plausible("0.5", "0.25") and plausible("-6", "-4") and plausible("1,200", "1000")
    assert plausible("2.5", "1.5")                 # a decimal answer allows a decimal one
    assert plausible("3", r"\frac{1}{2}") is None  # not a plain number: nothing to compare


def test_plausibility_is_recorded_and_kept_with_hard_negatives():
    # Hand-derived: Noa's misread 144 is within 3x of 72, its premature 24 just is (72/3); Ivo's
    # 36000 and 0.2 (sizes below 1 count as 1, 10x off) are not; Mia's premature 36 and 28 are not.
    assert [one(p, et).meta["derived"]["plausible"] for p, et in
            [(NOA, "misread_rate"), (NOA, "premature_answer"), (IVO, "misread_rate"), (IVO, "premature_answer"),
             (MIA, "premature_answer")]] == [True, True, False, False, False]
    report = DeriveReport()
    assert list(inject_errors([IVO, MIA], error_types=["misread_rate", "premature_answer"], hard_negatives=True,
                              correct_fraction=0.0, report=report)) == []
    assert report.skipped == {"no plausible error applies": 2}
    # the property, on 15 arith problems: every wrong trace records plausible(final answer, answer);
    # with hard negatives each one is plausible, and some were not without
    problems = ArithEnv(ArithConfig(steps=(2, 5), distractors=1, seed=3)).problems(15)
    for hard in (False, True):
        ts = list(inject_errors(problems, per_problem=2, correct_fraction=0.0, hard_negatives=hard))
        got = [t.meta["derived"]["plausible"] for t in ts]
        assert got == [plausible(t.final_answer, t.problem.answer) for t in ts]
        assert all(got) if hard else 0 < got.count(False) < len(got)


def test_correct_traces_take_the_wrong_traces_step_counts():
    # Mia at seed 0: the wrong trace drops the giving step (3 steps), so the correct one merges two
    # steps, the second said by its equation alone, every step still +1
    (right, bad) = inject_errors([MIA], correct_fraction=1.0, hard_negatives=True, seed=0)
    assert bad.meta["derived"]["error_type"] == "dropped_step" and len(bad.steps) == 3
    assert [s.text for s in right.steps] == ["Mia has 3*12=36 pencils. So 36-8 = 28.",
                                             "Each friend gets 28/4=7 pencils.", "The answer is 7."]
    assert values(right) == [1, 1, 1] and right.outcome == "correct"
    assert right.meta["derived"]["reshaped"] == {"merged": 1, "restated": 0}
    assert right.provenance[-1].args["hard_negatives"] is True
    right.check_spans()
    # a duplicated step (5 steps): the correct trace says one equation again, after its step
    (right, bad) = inject_errors([MIA], error_types=["duplicated_step"], correct_fraction=1.0, hard_negatives=True,
                                 seed=0)
    assert len(bad.steps) == 5 and [s.text for s in bad.steps][2] == "After giving 8 away she has 28-8=20 pencils."
    assert [s.text for s in right.steps] == ["Mia has 3*12=36 pencils.", "After giving 8 away she has 36-8=28 pencils.",
                                             "Each friend gets 28/4=7 pencils.", "So 28/4 = 7.", "The answer is 7."]
    assert values(right) == [1] * 5 and right.meta["derived"]["reshaped"] == {"merged": 0, "restated": 1}
    # without hard negatives the correct trace is the reference, as before
    plain = next(inject_errors([MIA], correct_fraction=1.0, seed=0))
    assert [s.text for s in plain.steps] == M
    assert "reshaped" not in plain.meta["derived"] and "hard_negatives" not in plain.provenance[-1].args


def test_hard_negatives_are_deterministic_and_round_trip(tmp_path):
    problems = [NOA, IVO, MIA, ZOE, *ArithEnv(ArithConfig(steps=(2, 4), distractors=1, seed=2)).problems(3)]
    a = [without_times(t) for t in inject_errors(problems, per_problem=2, seed=4, hard_negatives=True)]
    assert a == [without_times(t) for t in inject_errors(problems, per_problem=2, seed=4, hard_negatives=True)]
    assert a != [without_times(t) for t in inject_errors(problems, per_problem=2, seed=5, hard_negatives=True)]
    assert any("reshaped" in d["meta"]["derived"] for d in a)
    # through the trace JSON and a file, every field kept
    ts = list(inject_errors(problems, per_problem=2, seed=4, hard_negatives=True))
    assert [Trace.from_dict(json.loads(json.dumps(t.to_dict()))).to_dict() for t in ts] == [t.to_dict() for t in ts]
    derive_file(problems, tmp_path / "h.jsonl", per_problem=2, seed=4, hard_negatives=True)
    assert [without_times(t) for t in read_traces(tmp_path / "h.jsonl")] == a


def test_cli_hard_negatives(tmp_path, capsys):
    src = tmp_path / "mini.jsonl"
    src.write_text("".join(json.dumps({"question": p.text, "answer": p.solution}) + "\n" for p in (NOA, IVO, MIA)))
    code, out, _ = run_cli(["data", "derive", str(src), str(tmp_path / "cli.jsonl"), "-e", "misread_rate",
                            "-e", "premature_answer", "--hard-negatives", "--seed", "2"], capsys)
    # Noa's two errors are plausible; Ivo's and Mia's are not (see above)
    assert code == 0 and "from 1 of 3 problems; 2 skipped (2× no plausible error applies)" in out
    derive_file(src, tmp_path / "api.jsonl", error_types=["misread_rate", "premature_answer"], hard_negatives=True,
                seed=2)
    assert [without_times(t) for t in read_traces(tmp_path / "cli.jsonl")] == \
        [without_times(t) for t in read_traces(tmp_path / "api.jsonl")]


@pytest.mark.realdata
def test_gsm8k_train_hard_negatives(shared_data):
    refs = [t for _, t in zip(range(60), read(shared_data / "gsm8k" / "train.jsonl"), strict=False)]
    report = DeriveReport()
    ts = list(inject_errors(refs, per_problem=2, correct_fraction=0.5, hard_negatives=True, report=report))
    assert report.problems >= 55 and "premature_answer" in report.by_type
    for t in ts:
        d = t.meta["derived"]
        if d["kind"] == "correct":
            assert values(t) == [1] * len(t.steps) and t.outcome == "correct"
        else:
            assert d["plausible"] is True and plausible(t.final_answer, t.problem.answer)
            assert values(t) == [1] * d["step"] + [-1] + [None] * (len(t.steps) - d["step"] - 1)


def test_a_value_the_problem_also_states_is_not_continued_on_a_guess():
    """Sam keeps 12-8 = 4 apples and buys 4 bags: a slip of the 4 kept would have to decide whether
    "4*3" means the apples kept or the bags (read by hand on GSM8K train: "4 pieces" rewritten with a
    slipped 4), and likewise for the 12 bought (12 apples in the problem). Such errors are not made:
    only the last step, whose result nothing uses, gets a slip."""
    sam = Problem("Sam has 12 apples and gives 8 away. Then he buys 4 bags of 3 apples each. How many apples does "
                  "he have?", answer="16", id="sam",
                  solution="Sam keeps 12-8=<<12-8=4>>4 apples.\nHe buys 4*3=<<4*3=12>>12 apples.\n"
                           "He has 4+12=<<4+12=16>>16 apples.\n#### 16")
    ts = list(inject_errors([sam], error_types=["arithmetic_slip"], per_problem=20, correct_fraction=0.0))
    assert sorted(t.final_answer for t in ts) == ["13", "14", "15", "17", "18", "19"]
    assert all(t.meta["derived"]["step"] == 2 and [s.text for s in t.steps[:2]] == ["Sam keeps 12-8=4 apples.",
                                                                                 "He buys 4*3=12 apples."] for t in ts)


def test_no_shipped_config_trains_on_evaluation_files():
    """GSM8K test (and its Socratic twin), MATH-500, ProcessBench and PRMBench's test files are for
    evaluation only (docs/data.md): no shipped training config trains or selects on one."""
    import yaml

    from prmkit.train import example_configs

    held_out = ("gsm8k/test", "test_socratic", "math500", "processbench", "_test_")
    configs = example_configs()
    assert "public-prm" in configs
    for path in configs.values():
        cfg = yaml.safe_load(path.read_text()) or {}
        for key in ("train", "eval"):  # eval: what a run is judged and picked on while it trains
            files = cfg.get(key) or []
            for entry in [files] if isinstance(files, str) else files:
                assert not any(h in str(entry) for h in held_out), f"{path.name}: {key} names {entry}"


def test_limit_derives_the_first_records_as_a_whole_run_does(tmp_path, capsys):
    """``--limit N`` reads only the first N records; what it makes is what a whole run makes of them
    (the draws of a problem do not depend on the problems after it)."""
    problems, _ = load_problems(env="arith", n=6, steps="2-5", distractors=1, env_seed=101)
    whole = tmp_path / "whole.jsonl"
    derive_file(problems, whole, per_problem=2, seed=3)
    part = tmp_path / "part.jsonl"
    report = derive_file(problems, part, per_problem=2, seed=3, limit=2)
    first_two = {p.id for p in problems[:2]}
    expected = [without_times(t) for t in read_traces(whole) if t.problem.id in first_two]
    assert report.problems == 2 and expected
    assert [without_times(t) for t in read_traces(part)] == expected
    with pytest.raises(PrmkitError, match="limit must be >= 1"):
        derive_file(problems, part, limit=0)
    code, _, err = run_cli(["data", "derive", "--env", "arith", "--problems", "6", "--limit", "0",
                            str(tmp_path / "c.jsonl")], capsys)
    assert code != 0 and "--limit" in err
