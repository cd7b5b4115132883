"""A PRM checked by a calculator, judged against its parts (issue 14): ``StoredScorer`` serves scores
already on the traces, so the check is applied after the fact with the same result as around the
model; ``checked_bon_report`` compares the combination with majority, the ORM, the PRM alone and the
calculator alone; the report renders it; the demo keeps running folders of older settings."""

from __future__ import annotations

import json

import pytest

from prmkit.errors import PrmkitError
from prmkit.eval import (
    BonMethod,
    bon_choices,
    bon_report,
    checked_bon_report,
    headline_sentence,
    write_report,
)
from prmkit.scoring import CalculatorScorer, ScriptedScorer, StoredScorer, score_traces
from prmkit.trace import Problem, Step, Trace


def _trace(tid: str, pid: str, answer: str, texts: list[str], prm: list[float], orm: float = 0.5) -> Trace:
    p = Problem(f"question {pid}", answer="10", id=pid)
    steps = [Step(x, scores={"prm": s}) for x, s in zip(texts, prm, strict=True)]
    return Trace(tid, p, steps, final_answer=answer, outcome="correct" if answer == "10" else "incorrect",
                 meta={"scores": {"orm": orm}})


# Three problems, two candidates each (answer 10 is right):
#   p1: "a" right, no slip, PRM 0.3;      "b" wrong via the slip 2 * 4 = 9, PRM 0.8
#   p2: "c" right, PRM 0.6;               "d" wrong without a slip (a wrong quantity), PRM 0.7
#   p3: "e" wrong via the slip 3 + 3 = 7, PRM 0.9;  "f" right, PRM 0.2
# At N = 2: the PRM alone picks b, d, e: 0 of 3. With the calculator, b and e score 0: it picks a,
# d, f: 2 of 3. The calculator alone scores every unflagged candidate 1.0, so in p2 it ties c and d,
# and a tie goes to the earlier candidate, c: 3 of 3 — the PRM's ranking of c and d cost a point.
def _problems() -> list[Trace]:
    return [
        _trace("a", "p1", "10", ["2 * 5 = 10.", "The answer is 10."], [0.3, 0.9], orm=0.9),
        _trace("b", "p1", "9", ["2 * 4 = 9.", "The answer is 9."], [0.8, 0.9], orm=0.1),
        _trace("c", "p2", "10", ["4 + 6 = 10.", "The answer is 10."], [0.6, 0.9], orm=0.2),
        _trace("d", "p2", "12", ["6 + 6 = 12.", "The answer is 12."], [0.7, 0.9], orm=0.8),
        _trace("e", "p3", "7", ["3 + 3 = 7.", "The answer is 7."], [0.9, 0.9], orm=0.3),
        _trace("f", "p3", "10", ["5 + 5 = 10.", "The answer is 10."], [0.2, 0.9], orm=0.7),
    ]


def _checked(traces: list[Trace]) -> list[Trace]:
    score_traces(CalculatorScorer(StoredScorer("prm")), traces, "prm+calculator", aggregate="min")
    score_traces(CalculatorScorer(), traces, "calculator", aggregate="min")
    return traces


def test_stored_scores_checked_after_the_fact_equal_the_check_around_the_model():
    texts = {"2 * 5 = 10.": 0.3, "2 * 4 = 9.": 0.8, "The answer is 10.": 0.9, "The answer is 9.": 0.6}
    model = ScriptedScorer(texts)
    traces = [_trace(t.id, t.problem.id, t.final_answer, [s.text for s in t.steps], [0.0] * len(t.steps))
              for t in _problems()[:2]]
    for t in traces:
        for s in t.steps:
            s.scores.clear()
    around = CalculatorScorer(model).score(traces)
    score_traces(model, traces, "prm")
    after = CalculatorScorer(StoredScorer("prm")).score(traces)
    assert after == around == [[0.3, 0.9], [0.0, 0.6]]


def test_stored_scorer_multiplies_keys_and_refuses_unscored_traces():
    t = Trace("t", Problem("q"), [Step("a", scores={"x": 0.5, "y": 0.4}), Step("b", scores={"y": 0.5}),
                                  Step("c")])
    assert StoredScorer("x", "y").score([t]) == [[pytest.approx(0.2), 0.5, None]]
    assert StoredScorer("x").name == "x" and StoredScorer("x", "y").name == "x×y"
    bare = Trace("bare", Problem("q"), [Step("a")])
    with pytest.raises(PrmkitError, match="trace bare: no step has scores under 'prm'"):
        StoredScorer("prm").score([bare])
    assert StoredScorer("prm", missing="none").score([bare]) == [[None]]
    with pytest.raises(PrmkitError, match="at least one score key"):
        StoredScorer()
    with pytest.raises(PrmkitError, match="missing must be"):
        StoredScorer("prm", missing="skip")


def test_checked_report_against_its_parts_by_hand():
    traces = _checked(_problems())
    picks = bon_choices(traces, [BonMethod("checked", "bon", "prm+calculator", "min"),
                                 BonMethod("prm", "bon", "prm", "min")])
    assert picks == {"checked": {"p1": 0, "p2": 1, "p3": 1}, "prm": {"p1": 1, "p2": 1, "p3": 0}}
    r = checked_bon_report(traces, bootstrap=400, seed=0).to_dict()
    # At N = 2 (all candidates) each replicate is a resample of the 3 problems: the accuracies are
    # means over resamples of the per-problem results above, near their means (sd of one replicate
    # at most 0.29, so 400 replicates put the average within 0.05).
    acc = {name: m["acc"][-1] for name, m in r["bon"]["methods"].items()}
    assert acc["PRM (min)"] == 0.0 and acc["oracle (pass@N)"] == 1.0
    assert acc["PRM+calculator (min)"] == pytest.approx(2 / 3, abs=0.05)
    assert acc["calculator alone"] == 1.0
    assert acc["ORM"] == pytest.approx(2 / 3, abs=0.05)  # a, d, f
    h = r["summary"]["headline"]
    assert h["main"] == "PRM+calculator (min)" and h["n"] == 2
    assert list(h["versus"]) == ["majority", "ORM", "PRM (min)", "calculator alone"]
    assert h["versus"]["PRM (min)"]["acc_diff"] == pytest.approx(2 / 3, abs=0.05)
    assert h["versus"]["calculator alone"]["acc_diff"] == pytest.approx(-1 / 3, abs=0.05)
    # Without ORM scores the ORM is named, not compared; without the check alone, it is left out.
    bare = _checked(_problems())
    for t in bare:
        t.meta.pop("scores")
        for s in t.steps:
            s.scores.pop("calculator")
    r2 = checked_bon_report(bare, bootstrap=50).to_dict()
    assert "ORM" not in r2["bon"]["methods"] and "calculator alone" not in r2["bon"]["methods"]
    assert r2["summary"]["headline"]["versus"]["ORM"] is None
    assert "ORM not evaluated" in headline_sentence(r2["summary"])


def test_bon_report_with_given_methods_uses_only_them():
    traces = _checked(_problems())
    methods = [BonMethod("checked", "bon", "prm+calculator", "min"), BonMethod("majority", "majority")]
    r = bon_report(traces, bootstrap=50, main="checked", rivals=("majority",), extra_comparisons=(),
                   methods=methods).to_dict()
    assert list(r["bon"]["methods"]) == ["checked", "majority"]
    assert r["summary"]["headline"]["main"] == "checked"


def test_the_report_renders_the_checked_section_after_best_of_n(tmp_path):
    traces = _checked(_problems())
    results = bon_report(traces, bootstrap=50).to_dict()
    results["checked"] = checked_bon_report(traces, bootstrap=50).to_dict()
    paths = write_report(results, tmp_path)
    md = paths["markdown"].read_text()
    assert md.index("## Best-of-N\n") < md.index("## Best-of-N with a calculator check") < md.index("PRM+calculator (min)")
    assert "calculator alone" in md and "Paired comparisons" in md
    assert json.loads(paths["json"].read_text())["checked"]["summary"]["headline"]["main"] == "PRM+calculator (min)"


def test_a_demo_folder_started_before_a_new_setting_resumes(tmp_path):
    import prmkit.demo as demo

    cfg = demo.DEMO_PRESETS["quick"]
    demo._Stages(tmp_path, cfg, overwrite=False)
    old = json.loads((tmp_path / "demo_settings.json").read_text())
    del old["calculator_check"]  # as a release without the setting wrote it
    (tmp_path / "demo_settings.json").write_text(json.dumps(old))
    demo._Stages(tmp_path, cfg, overwrite=False)  # the default: the same run
    import dataclasses

    with pytest.raises(PrmkitError, match=r"other settings \(calculator_check\)"):
        demo._Stages(tmp_path, dataclasses.replace(cfg, calculator_check=False), overwrite=False)
