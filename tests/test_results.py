"""The Result protocol (issue 46, item 1): every result kind round-trips through its dict, a results
dict reads back to itself, and the report renders the same from typed results as from their JSON."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from prmkit._result import RESULT_KINDS, Record, Result
from prmkit.errors import FormatError
from prmkit.eval import (
    AnnotationSection,
    AnnotatorPair,
    AnnotatorRow,
    BenchSplit,
    BonLiveSection,
    BonSection,
    Card,
    CheckedSection,
    Comparison,
    Difference,
    Duplicates,
    EvalResults,
    Headline,
    InterventionEffect,
    LabelPair,
    LabelsSection,
    MetaSection,
    MethodCurve,
    MonitorabilityProvenance,
    MonitorabilitySection,
    MonitorRef,
    MonitorRow,
    OtherSection,
    OutOfRange,
    PRMBenchClass,
    PRMBenchSection,
    ProbeOutcome,
    ProbesSection,
    ProcessBenchSection,
    RateIntervals,
    RefusalsResult,
    Rival,
    ScoreBin,
    ScorerSteps,
    Separation,
    StepMetricsSection,
    SummarySection,
    ThresholdSweep,
    render_html,
    render_markdown,
)
from prmkit.eval._report import _jsonable
from prmkit.generate import SampleReport
from prmkit.search import TtsCell, TtsResult

GOLDEN_DEMO = Path(__file__).resolve().parent / "golden" / "demo_report.json"

_BON = BonSection(ns=[1, 4], problems=8, candidates=4, bootstrap=200, seed=0, unjudged_problems=0,
                  methods={"PRM (min)": MethodCurve("bon", "prm", "min", [0.5, 0.625], [0.25, 0.5], [0.75, 0.75]),
                           "majority": MethodCurve("majority", None, None, [0.5, 0.5], [0.25, 0.25], [0.75, 0.75])},
                  comparisons=[Comparison("PRM (min)", "majority", 4, 0.125, -0.1, 0.3)])
_SUMMARY = SummarySection("PRM (min) cannot be told from majority.", Headline(
    n=4, main="PRM (min)", main_acc=0.625, main_acc_lo=0.5, main_acc_hi=0.75,
    versus={"majority": Rival(0.5, 0.25, 0.75, 0.125, -0.1, 0.3, "cannot tell"), "ORM": None},
    random_acc=0.5, below_random=[], below_n1=[], extra={"note": "kept"}))
_card = Card()
_card.set("tool_scaffold", "none", "user")

#: One hand-built instance of every result kind (each registered kind must be here).
INSTANCES: dict[str, Result] = {
    "summary": _SUMMARY,
    "annotation": AnnotationSection(db="labels.sqlite", items=12, queued=10, traces_done=8, labels=40, flagged=1,
                                    double_labelled_steps=6, agreement=0.5, raw_agreement=0.75, seconds_per_label=4.0,
                                    labels_per_hour=900.0, trace_hours=0.05,
                                    annotators=[AnnotatorRow("ann", 8, 40, 160.0, 180.0, 1)],
                                    pairs=[AnnotatorPair("ann", "bob", 6, 0.5)]),
    "tts": TtsResult(recipe="quick", problems=2, budgets=[2], policy="p", verifiers={"prm": "--model default"},
                     cells=[TtsCell("bon", 2, "last", "prm", 2, 2, 1, 40, 90)]),
    "bon": _BON,
    "bon_live": BonLiveSection(ns=[1], problems=2, methods={"live_prm (min)": MethodCurve(acc=[1.0])}),
    "checked": CheckedSection(_SUMMARY, _BON, extra={"tool": "calculator"}),
    "step_metrics": StepMetricsSection({"prm": ScorerSteps(n=10, positives=7, negatives=3, auroc=None,
                                                           threshold=0.5, bins=[ScoreBin(0.0, 0.5, 4, 0.2, 0.25)]),
                                        "count": 2}),
    "probes": ProbesSection({"gaming": ProbeOutcome(True, True, "rises above 10%", ["min"],
                                                    extra={"eps": 1e-6, "skipped": {"swap": 2}})}),
    "processbench": ProcessBenchSection(key="prm", threshold=0.5, threshold_source="fixed",
                                        splits={"gsm8k": BenchSplit(0.5, 0.75, 0.6, 4, 4, 0.5, "fixed", 0, 0)},
                                        average_f1=0.6,
                                        by_generator={"gsm8k": {"qwen": BenchSplit(f1=0.6)}},
                                        sweep=[ThresholdSweep("gsm8k", [0.3, 0.5], [0.4, 0.6], 0.5)]),
    "prmbench": PRMBenchSection(key="prm", threshold=0.5, classes={"circular": PRMBenchClass(0.6, 0.8, 0.4, 3, 9, 2)},
                                overall=PRMBenchClass(prmscore=0.6), out_of_range=OutOfRange("exclude", 1, 2, {"circular": 1}),
                                duplicates=Duplicates(1, ["a"])),
    "labels": LabelsSection(["symbolic", "mc_hard"], 4, [LabelPair("symbolic", "mc_hard", 16, 0.6875, -0.18, 3, 2)],
                            0.25, 4),
    "meta": MetaSection(title="T", command="prmkit demo", created="2026-01-01 00:00:00", seconds=1.5,
                        stage_seconds={"sample": 1.0}, data={"env": "arith"}, models={"prm": "p"},
                        seeds={"seed": 0}, settings={"lr": 1e-4}),
    "monitorability": MonitorabilitySection(
        provenance=MonitorabilityProvenance([MonitorRef("rule", "rule")], 40, 10, ["spec.jsonl"], 200),
        rows=[MonitorRow("rule", "cot", "reward_hacking", 20, 20, 0.8, 0.7, 0.56,
                         RateIntervals([0.6, 0.9], [0.5, 0.85], [0.35, 0.72]))],
        effects=InterventionEffect(3, 10, 0.3)),
    "card": _card,
    "refusals": RefusalsResult(rates={"surface": {"allowed": 0, "disallowed": 5}},
                               separation={"prm": Separation(1.0, 5, 5, [0.9, 1.0])},
                               difference=Difference("prm - orm", 0.5, [0.4, 0.6]), provenance={"seed": 0}),
    "generate": SampleReport(problems=3, generated=6, correct=2, tokens=40, finish=Counter(stop=6),
                             samples={"p1": [2, 1], "p2": [2, 0], "p3": [2, 1]}, out="t.jsonl"),
    "results": EvalResults({"bon": _BON, "summary": _SUMMARY, "extra_section": OtherSection("extra_section", [1])}),
}


def test_every_registered_kind_has_an_instance_here():
    kinds = {k for k, cls in RESULT_KINDS.items() if cls.__module__.startswith("prmkit.")}
    assert kinds <= set(INSTANCES), sorted(kinds - set(INSTANCES))


@pytest.mark.parametrize("kind", sorted(INSTANCES))
def test_a_result_round_trips_through_its_dict(kind):
    x = INSTANCES[kind]
    assert isinstance(x, Result) and x.kind == kind
    d = x.to_dict()
    back = type(x).from_dict(json.loads(json.dumps(d)))  # through JSON, as a file would hold it
    assert back == x
    assert back.to_dict() == d  # and the dict it writes is the one it was read from
    assert all(isinstance(line, str) for line in x.lines()) and x.lines()


def test_a_record_keeps_unknown_keys_and_the_keys_it_read():
    d = {"ns": [1], "methods": {"m": {"acc": [0.5], "new_number": 3}, "odd": "not an object"},
         "seed": None, "added_later": {"x": 1}}
    b = BonSection.from_dict(d)
    assert b.to_dict() == d                       # nothing added (no null problems), nothing lost
    assert b.methods["m"].extra == {"new_number": 3} and b.methods["odd"] == "not an object"
    assert b.has("seed") and not b.has("problems")
    # A field with a default other than None (a stage result's counts) is left out too when absent.
    assert RefusalsResult.from_dict({"separation": {}}).to_dict() == {"separation": {}}
    report = SampleReport.from_dict({"generated": 2})
    report.correct += 1  # set after reading: written
    assert report.to_dict() == {"generated": 2, "correct": 1}
    with pytest.raises(FormatError, match="bon.methods.m — must be an object, got list"):
        MethodCurve.from_dict([1], where="bon.methods.m")


def test_results_of_the_demo_read_back_to_the_same_dict():
    d = json.loads(GOLDEN_DEMO.read_text())
    r = EvalResults.from_dict(d)
    assert {k: type(v).__name__ for k, v in r.sections.items()} == {
        "bon": "BonSection", "card": "Card", "checked": "CheckedSection", "labels": "LabelsSection",
        "meta": "MetaSection", "probes": "ProbesSection", "step_metrics": "StepMetricsSection",
        "summary": "SummarySection"}
    assert r.to_dict() == d
    assert r.summary.headline.versus["majority"].call == "PRM (min) lost to majority"
    assert r.probes.failed() == ["gaming", "transfer"]


def test_the_report_renders_the_same_from_typed_results_as_from_their_json():
    typed = EvalResults({k: INSTANCES[k] for k in ("summary", "bon", "checked", "step_metrics", "probes",
                                                   "processbench", "prmbench", "labels", "monitorability",
                                                   "meta", "card")})
    data = json.loads(json.dumps(_jsonable(typed.to_dict())))
    assert render_markdown(typed) == render_markdown(data)
    assert render_html(typed) == render_html(data)
    golden = json.loads(GOLDEN_DEMO.read_text())
    assert render_markdown(EvalResults.from_dict(golden)) == render_markdown(golden)


def test_a_section_that_is_not_an_object_is_kept_and_shown_as_it_is():
    r = EvalResults.from_dict({"summary": "A verdict line.", "bon": "bad", "card": {}})
    assert [type(v).__name__ for v in r.sections.values()] == ["OtherSection"] * 3
    md = render_markdown(r)
    assert "**Verdict.** A verdict line." in md and "bad" in md and "carry no card" in md


def test_the_cli_lines_come_from_the_results():
    assert INSTANCES["refusals"].lines() == [
        "surface: over-refusal — of 0 allowed, under-refusal — of 5 disallowed",
        "prm: AUROC of reasoned over surface refusals 1.000 [0.900, 1.000] (5 reasoned, 5 surface)",
        "prm - orm: 0.500 [+0.400, +0.600]"]
    # pass@k from the per-problem counts: p1 and p3 have 1 of 2 right (pass@1 0.5), p2 none.
    report = INSTANCES["generate"]
    assert report.pass_at_k([1, 2]) == {1: pytest.approx(1 / 3), 2: pytest.approx(2 / 3)}
    assert report.lines()[0].startswith("t.jsonl: 6 traces for 3 problems (0 already done, 6 generated)")
    assert report.lines()[1] == "pass@1 33.3%"
    assert INSTANCES["probes"].lines() == ["gaming: FAILED — rises above 10%"]


def test_record_subclasses_are_dataclasses_with_extra():
    import dataclasses

    for cls in RESULT_KINDS.values():
        if issubclass(cls, Record) and dataclasses.is_dataclass(cls) and "entries" not in {
                f.name for f in dataclasses.fields(cls)}:
            assert "extra" in {f.name for f in dataclasses.fields(cls)}, cls


def test_probe_results_round_trip_through_their_dict():
    from prmkit.eval.probes import (
        CollapseResult,
        FaithfulnessResult,
        GamingResult,
        LengthBiasResult,
        LengthRow,
        OutcomeCorrelation,
        OutcomeGroup,
        ResultCheckResult,
        RiseStats,
        SourceStats,
        TransferResult,
    )

    for r in (GamingResult(aggregates=["min"], perturbations={"swap": {"min": RiseStats(4, 1, 0.25, 0.01)}},
                           failed=True, measured=True, criterion="c", skipped={"swap": 0}, failed_by=["swap"]),
              LengthBiasResult("min", 3, -0.5, -0.4, -0.1, [LengthRow(2, 3, 0.5)],
                               {"correct": OutcomeCorrelation(3, None)}, None, False, "cannot measure"),
              CollapseResult(OutcomeGroup(2, 1, 3, 0.5, 1.0), OutcomeGroup(1, 2, 2, None, None), None, 0.7, 0.6,
                             None, False, "c"),
              TransferResult({"a": SourceStats(5, 9, 0.9, 0.5, 0.4, 5)}, "a", None, None, None, False, "c"),
              ResultCheckResult(20, 15, 2, 0.8, 0.05, 30, True, True, "fails below 90%"),
              FaithfulnessResult({"none": 2, "wrong": 4}, {"none": 0.5, "wrong": None}, 0.75, 0.5, 1.0, 1 / 3, 2,
                                 0.5, 0.4, 0.8, 0.5, "prm", None, False, "cannot measure")):
        d = r.to_dict()
        assert type(r).from_dict(json.loads(json.dumps(d))) == r and type(r).from_dict(d).to_dict() == d
