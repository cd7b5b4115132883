"""The original derivation (``error_types=None``: one arithmetic slip, later steps unchanged): texts,
labels, the changed number, answer and outcome rules. Typed error injection: tests/data/test_derive.py."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from prmkit.data import derive_traces, gsm8k_derived_traces, read, strip_calculations
from prmkit.envs import ArithConfig, ArithEnv
from prmkit.errors import PrmkitError
from prmkit.eval import arith_derived_traces
from prmkit.trace import Problem, Trace
from prmkit.trace_queries import is_correct

R1 = {"question": "Tom has 4 bags of 6 apples. He eats 5. How many are left?",
      "answer": "He has 4*6=<<4*6=24>>24 apples.\nAfter eating 5 he has 24-5=<<24-5=19>>19 apples.\n#### 19"}
# decimals with a bare leading point, and thousands separators
R2 = {"question": "A pen costs $.25 and a book $1,200. What do 3 pens and the book cost?",
      "answer": "Three pens cost 3*.25=$<<3*.25=.75>>.75.\n"
                "Together they cost 1,200+.75=$<<1200+.75=1200.75>>1,200.75.\n#### 1200.75"}
CLEAN = {"R1": ["He has 4*6=24 apples.", "After eating 5 he has 24-5=19 apples.", "The answer is 19."],
         "R2": ["Three pens cost 3*.25=$.75.", "Together they cost 1,200+.75=$1,200.75.",
                "The answer is 1200.75."]}


@pytest.fixture()
def gsm8k_file(tmp_path):
    path = tmp_path / "mini.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (R1, R2)))
    return path


def values(t: Trace) -> list[int | None]:
    return [None if lab is None else lab.value for lab in t.labels()]


def without_times(t: Trace) -> dict:
    d = t.to_dict()
    for p in d["provenance"]:
        p.pop("time", None)
    return d


def test_strip_calculations():
    assert strip_calculations("1,200+.75=$<<1200+.75=1200.75>>1,200.75.") == "1,200+.75=$1,200.75."


def test_correct_traces_are_the_clean_reference(gsm8k_file):
    counts: dict[str, int] = {}
    ts = gsm8k_derived_traces(gsm8k_file, corrupt_fraction=0.0, counts=counts)
    assert counts == {"items": 2, "no_solution": 0, "correct": 2, "corrupted": 0, "uncorruptible": 0}
    for t, name, answer in zip(ts, ("R1", "R2"), ("19", "1200.75"), strict=True):
        assert [s.text for s in t.steps] == CLEAN[name]
        assert values(t) == [1, 1, 1]
        lab = t.steps[0].labels[0]
        assert (lab.source, lab.labeler, lab.kind, lab.args) == ("synthetic", "derived", "hard", {"seed": 0})
        assert (t.final_answer, t.outcome, is_correct(t)) == (answer, "correct", True)
        assert t.meta["derived"]["kind"] == "correct" and t.source == "derived:gsm8k"
        assert t.provenance[-1].stage == "derive"
        assert t.text == "\n".join(CLEAN[name])
        t.check_spans()
    assert [t.id for t in ts] == ["mini.jsonl:1:derived:correct", "mini.jsonl:2:derived:correct"]


def check_corrupted(t: Trace, clean: list[str]) -> tuple[int, bool]:
    """The rules of one corrupted trace; returns (changed step, whether the answer changed)."""
    d = t.meta["derived"]
    k, original, changed = d["step"], d["original"], d["changed"]
    a, b = d["span"]
    # the step is the clean step with exactly its result replaced
    assert t.steps[k].text == clean[k][:a] + changed + clean[k][a + len(original):]
    assert clean[k][a:a + len(original)] == original and t.steps[k].text[a:b] == changed
    # a nearby number written the same way: 1 to 3 units of its last decimal place away
    places = len(original.split(".")[1]) if "." in original else 0
    diff = abs(Decimal(changed.replace(",", "")) - Decimal(original.replace(",", "")))
    assert diff in {Decimal(n).scaleb(-places) for n in (1, 2, 3)}
    assert ("," in changed) == ("," in original) and changed.startswith(".") == original.startswith(".")
    # before: +1, the step: -1, after: unlabelled
    assert values(t) == [1] * k + [-1] + [None] * (len(clean) - k - 1)
    # later steps keep their text, except the answer line when it repeats the changed result
    assert [s.text for s in t.steps[k + 1:-1]] == clean[k + 1:-1]
    return k, d["answer_changed"]


def test_corrupted_traces_follow_the_rules(gsm8k_file):
    seen = set()
    for seed in range(12):
        ts = gsm8k_derived_traces(gsm8k_file, seed=seed, pairs=True)
        assert [t.meta["derived"]["kind"] for t in ts] == ["correct", "corrupted"] * 2
        for t, name, answer in ((ts[1], "R1", "19"), (ts[3], "R2", "1200.75")):
            k, answer_changed = check_corrupted(t, CLEAN[name])
            seen.add((name, k))
            # only the last reasoning step's result is the final answer in both records
            assert answer_changed == (k == 1)
            if k == 1:
                new = t.meta["derived"]["changed"].replace(",", "")
                assert t.steps[-1].text == f"The answer is {new}."
                assert (t.final_answer, t.outcome) == (new, "incorrect")
            else:
                # right answer, wrong step: the error is not carried to the answer
                assert t.steps[-1].text == CLEAN[name][-1]
                assert (t.final_answer, t.outcome) == (answer, "correct")
    assert seen == {("R1", 0), ("R1", 1), ("R2", 0), ("R2", 1)}


def test_deterministic_for_a_seed_and_per_problem(gsm8k_file):
    a = [without_times(t) for t in gsm8k_derived_traces(gsm8k_file, seed=5)]
    b = [without_times(t) for t in gsm8k_derived_traces(gsm8k_file, seed=5)]
    assert a == b
    # a problem's traces do not depend on the others: R2 alone gets what it got beside R1
    only_r2 = [without_times(t) for t in gsm8k_derived_traces(gsm8k_file, seed=5) if "mini.jsonl:2" in t.id]
    assert [d for d in a if d["id"].startswith("mini.jsonl:2")] == only_r2
    many = {json.dumps([without_times(t) for t in gsm8k_derived_traces(gsm8k_file, seed=s, pairs=True)],
                       sort_keys=True) for s in range(6)}
    assert len(many) > 1


def test_limit_and_fractions(gsm8k_file):
    assert len(gsm8k_derived_traces(gsm8k_file, limit=1, pairs=True)) == 2
    ts = gsm8k_derived_traces(gsm8k_file, corrupt_fraction=1.0)
    assert [t.meta["derived"]["kind"] for t in ts] == ["corrupted", "corrupted"]
    with pytest.raises(PrmkitError, match="corrupt_fraction"):
        derive_traces([], corrupt_fraction=1.5)
    with pytest.raises(PrmkitError, match="takes Problems and Traces"):
        derive_traces(["a problem"])


def test_problems_with_and_without_solutions():
    counts: dict[str, int] = {}
    problems = [Problem("No solution here.", answer="3", id="n"),
                Problem("2 and 3?", answer="5", id="g", solution="2+3=<<2+3=5>>5\n#### 5"),
                Problem("Say hi.", answer="hi", id="w", solution="Hello.\nThe answer is hi.")]
    ts = derive_traces(problems, corrupt_fraction=1.0, counts=counts)
    # "n" skipped; "g" corrupted (its "#### 5" becomes the answer line); "w" states no computed
    # result, so it keeps its correct trace
    assert counts == {"items": 3, "no_solution": 1, "correct": 1, "corrupted": 1, "uncorruptible": 1}
    g, w = ts
    assert g.id == "g:derived:corrupted" and g.source == "derived:reference"
    assert values(g) == [-1, None] and g.outcome == "incorrect"
    assert g.steps[0].text == f"2+3={g.meta['derived']['changed']}" and g.meta["derived"]["expr"] == "2+3"
    assert [s.text for s in w.steps] == ["Hello.", "The answer is hi."] and values(w) == [1, 1]


def test_arith_derived_traces():
    config = ArithConfig(steps=3, ops=("+", "-", "*"), seed=1)
    problems = ArithEnv(config).problems(12)
    ts = arith_derived_traces(config, 12, seed=2, pairs=True)
    assert len(ts) == 24
    answer_changed = set()
    for p, good, bad in zip(problems, ts[::2], ts[1::2], strict=True):
        lines = p.solution.split("\n")
        assert [s.text for s in good.steps] == lines and values(good) == [1, 1, 1, 1]
        assert (good.final_answer, good.outcome) == (p.answer, "correct")
        k, changed_answer = check_corrupted(bad, lines)
        d = bad.meta["derived"]
        assert d["original"] == str(p.meta["arith"]["values"][k])          # the true intermediate value
        assert int(d["changed"]) >= 0 and bad.source == "derived:arith"
        # "... = N." ends every operation line: N is what changed
        assert bad.steps[k].text.endswith(f"= {d['changed']}.")
        # the last operation's result is the answer: changing it changes the answer
        assert changed_answer == (k == 2)
        if k == 2:
            assert bad.steps[3].text == f"The answer is {d['changed']}." and bad.outcome == "incorrect"
        else:
            assert bad.steps[3].text == lines[3] and bad.outcome == "correct"
        answer_changed.add(changed_answer)
    assert answer_changed == {True, False}


def test_arith_default_fraction_mixes_kinds():
    counts: dict[str, int] = {}
    ts = arith_derived_traces(ArithConfig(steps=2), 40, counts=counts)
    assert len(ts) == 40 and counts["correct"] + counts["corrupted"] == 40
    # about half corrupted (each problem draws on its own); far from 0 and 40
    assert 10 <= counts["corrupted"] <= 30


@pytest.mark.realdata
def test_gsm8k_test_split(shared_data):
    path = shared_data / "gsm8k" / "test.jsonl"
    counts: dict[str, int] = {}
    ts = gsm8k_derived_traces(path, limit=50, pairs=True, counts=counts)
    assert counts == {"items": 50, "no_solution": 0, "correct": 50, "corrupted": 50, "uncorruptible": 0}
    refs = {t.id: t for t in read(path, "gsm8k") if int(t.id.rsplit(":", 1)[1]) <= 50}
    for t in ts:
        d = t.meta["derived"]
        if d["kind"] == "correct":
            assert t.outcome == "correct" and is_correct(t)
            continue
        assert [lab.value for lab in t.labels() if lab is not None].count(-1) == 1
        raw = refs[d["from"]].steps[d["step"]]
        if "calculations" in raw.meta:
            true = Decimal(raw.meta["calculations"][-1]["result"])    # the annotation's result
        else:
            # a few steps compute without an annotation ("... 25-2 = 23 jewels."): the number after
            # "=", at the same place in the raw step (nothing was stripped from it)
            a = d["span"][0]
            assert d["expr"] is None and raw.text[a:a + len(d["original"])] == d["original"]
            assert "=" in raw.text[:a]
            true = Decimal(d["original"].replace(",", ""))
        assert Decimal(d["original"].replace(",", "")) == true
        assert Decimal(d["changed"].replace(",", "")) != true
        assert d["changed"] in t.steps[d["step"]].text and "<<" not in t.steps[d["step"]].text
