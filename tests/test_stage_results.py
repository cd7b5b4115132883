"""The stages' own reports follow the Result protocol (issue 46): each is a Result, reads back from
its dict to an equal report (``from_dict(to_dict(x)) == x``), writes the same dict again, and has lines
for a terminal."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from prmkit._result import Result
from prmkit.data import DeriveReport, ExportReport, ImportReport
from prmkit.envs import AgentRunReport, SpecRunReport
from prmkit.errors import FormatError
from prmkit.eval import BonReport, bon_report
from prmkit.labelers import LabelReport
from prmkit.monitor import MonitorRunReport
from prmkit.scoring import ScoreReport
from prmkit.search import SearchFileReport, SelectFileReport, select_problems
from prmkit.trace import Problem, Step, Trace
from prmkit.train import DataReport, TrainResult


def _traces() -> list[Trace]:
    out = []
    for p, answers in (("p1", [("5", 0.9), ("6", 0.2), ("6", 0.3)]), ("p2", [("1", 0.4), (None, 0.8)])):
        prob = Problem(f"{p}?", answer=answers[0][0], id=p)
        for i, (a, s) in enumerate(answers):
            out.append(Trace(id=f"{p}-{i}", problem=prob, steps=[Step("x", scores={"prm": s})], final_answer=a,
                             outcome="unknown" if a is None else ("correct" if a == prob.answer else "incorrect")))
    return out


def _import_report() -> ImportReport:
    bad = FormatError("no steps", path="a.jsonl", line=3, field="steps")
    bad.record_id = "r7"  # type: ignore[attr-defined]
    return ImportReport(records=5, traces=4, skipped=[bad],
                        issues=[FormatError("error_steps past the end", path="a.jsonl", line=4)])


def _reports() -> dict[str, Result]:
    traces = _traces()
    sel = select_problems(traces, "bon", key="prm")
    return {
        "label": LabelReport("mc", traces=3, labelled=2, steps=7, unlabelled_steps=1,
                             labels=Counter({"mc_hard": 6}), rollouts=12, generated=8, reused=4, tokens=300,
                             seconds=1.5, skipped=[("t3", "no steps")], counts=Counter({"budget_exhausted": 1}),
                             issues=["t2: judge unparseable"]),
        "agent_run": AgentRunReport(traces=8, exploited=2, passed=5, stopped=1, guard_seconds=0.25),
        "spec_run": SpecRunReport("s.jsonl", traces=4, rates={
            "surface": {"allowed": 1, "disallowed": 1, "over_refusal": 1.0, "under_refusal": 0.0},
            "empty": {"allowed": 0, "disallowed": 2, "over_refusal": None, "under_refusal": 0.5}}),
        "selection": sel,
        "select_file": SelectFileReport(sel, [select_problems(traces, "majority")], "prm", out="o.jsonl",
                                        written=2, partial=1, candidates=5),
        "search_file": SearchFileReport("o.jsonl", "beam", problems=4, judged=3, right=2, generated_tokens=900,
                                        scored_tokens=400, options={"beam_width": 2}),
        "train": TrainResult("runs/prm", 8, 4.0, 1200, 1300, {"used": 6}, None,
                             {"eval_loss": 0.25, "auroc": 0.875, "eval_traces": 4}, [{"step": 8, "loss": 0.3}],
                             precision={"requested": "auto", "used": "fp32"}, optimizer="fused"),
        "train_data": DataReport(traces=6, used=2, positions=4, labelled=4, positive=3.0, dropped_steps=2,
                                 truncated_traces=1, rejected=Counter({"no steps": 1}), tokens=30, settled=1),
        "derive": DeriveReport(items=5, problems=4, traces=6, correct=2, by_type=Counter({"arith": 4}),
                               skipped=Counter({"no reference solution": 1}), fallbacks=Counter({"swap": 1}),
                               short=1),
        "import": _import_report(),
        "export": ExportReport("trl_stepwise", traces=4, lossy=2, dropped=Counter({"id": 2, "meta.x": 1}),
                               unreadable=1, first_unreadable="ValueError: bad"),
        "monitor_run": MonitorRunReport(traces=4, flagged={"rule": 1}, stopped={"rule": 1}, seconds={"rule": 0.5}),
        "bon_report": bon_report(traces, bootstrap=20),
        "score": ScoreReport("o.jsonl", "scripted", "prm", "prm", "min", traces=3, scored=2, mean_score=0.5,
                             skipped=[("t1", "no steps")], invalid=1, partial=1, seconds=0.5),
    }


@pytest.mark.parametrize("name", list(_reports()))
def test_a_stage_report_round_trips_through_its_dict(name):
    x = _reports()[name]
    d = x.to_dict()
    back = type(x).from_dict(json.loads(json.dumps(d)))
    assert isinstance(x, Result)
    assert back == x and back.to_dict() == d
    assert x.lines() and all(isinstance(s, str) and s for s in x.lines())
    assert x.kind == name


def test_read_back_reports_keep_their_types():
    r = _reports()
    label = LabelReport.from_dict(r["label"].to_dict())
    assert label.skipped == [("t3", "no steps")] and isinstance(label.labels, Counter)
    imported = ImportReport.from_dict(r["import"].to_dict())
    assert [str(e) for e in imported.skipped] == ["a.jsonl:3: steps — no steps"]
    assert imported.skipped_rows()[0]["id"] == "r7"
    sel = type(r["selection"]).from_dict(r["selection"].to_dict())
    assert sel.accuracy == r["selection"].accuracy == 0.5 and sel.selections[0].trace.id == "p1-0"
    train = TrainResult.from_dict(json.loads(json.dumps(r["train"].to_dict())))
    assert train.lines() == ["8 optimizer steps in 4 s (300 tokens/s): runs/prm",
                             "final eval: eval_loss 0.2500, auroc 0.8750"]  # ints (eval_traces) left out
    assert train.tokens_per_s == 300.0 and TrainResult.from_dict({**r["train"].to_dict(), "eval": None}).eval_line() is None
    old = {("kind" if k == "scorer_kind" else k): v for k, v in r["score"].to_dict().items()}
    assert ScoreReport.from_dict(old) == r["score"] and r["score"].scorer_kind == "prm"  # a dict from before the rename
    bon = BonReport.from_dict(r["bon_report"].to_dict())
    assert bon.curves.lines() == r["bon_report"].curves.lines()
    # An old training summary (no "positive" key) reads the sum back from the fraction.
    assert DataReport.from_dict({"labelled": 49, "positive_fraction": 1 / 49}).positive == 1.0


def test_a_malformed_report_is_refused_naming_the_field():
    with pytest.raises(FormatError, match=r"import.skipped\[0\]"):
        ImportReport.from_dict({"records": 1, "skipped": ["oops"]})
    with pytest.raises(FormatError, match="bon_report.bon"):
        BonReport.from_dict({"bon": {"ns": [1]}})
