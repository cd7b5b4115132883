"""Training a PRM around a tool check (issue 14): with ``tool_check: calculator`` the labels from the
first step whose written arithmetic is wrong are left out of the loss (the check settles those when
the PRM is used with it), counted, and a trace the tool settles whole is rejected with that reason."""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.models import RewardModel
from prmkit.trace import Problem, Step, StepLabel, Trace
from prmkit.train import DataReport, encode_traces, load_config, train
from prmkit.train._data import tool_settled


def _t(tid, steps, labels) -> Trace:
    return Trace(tid, Problem("q?"), [Step(s, labels=[StepLabel(v)] if v is not None else [])
                                      for s, v in zip(steps, labels, strict=True)])


TRACES = [
    _t("clean", ["1+1=2", "2+3=5"], [1, 1]),                  # nothing flagged: both labels kept
    _t("semantic", ["1+1=2", "2+4=6"], [1, -1]),              # wrong quantity, right sum: kept
    _t("slip", ["1+1=2", "2+3=6", "6+1=7"], [1, -1, -1]),     # flagged at 1: labels 1 and 2 go
    _t("first", ["1+1=3", "3+1=4"], [-1, -1]),               # flagged at 0: nothing left
]


def test_tool_settled_finds_the_first_flagged_step():
    assert [tool_settled(t, "calculator") for t in TRACES] == [None, None, 1, 0]
    with pytest.raises(PrmkitError, match="unknown tool check 'abacus'; known: calculator"):
        tool_settled(TRACES[0], "abacus")


def test_labels_the_calculator_settles_are_left_out_and_counted():
    rm = RewardModel.from_backbone("tiny", max_length=64)
    plain = encode_traces(rm, TRACES)
    report = DataReport()
    checked = encode_traces(rm, TRACES, tool_check="calculator", report=report)
    assert [e.trace_id for e in checked] == ["clean", "semantic", "slip"]
    assert [e.targets for e in checked] == [[1.0, 1.0], [1.0, 0.0], [1.0, None, None]]
    assert [e.targets for e in plain][:3] == [[1.0, 1.0], [1.0, 0.0], [1.0, 0.0, 0.0]]
    # the encoded text is the same: only targets change
    assert [e.input_ids for e in checked] == [e.input_ids for e in plain][:3]
    assert report.settled == 4 and report.labelled == 5
    assert report.rejected == {"every labelled step settled by the calculator": 1}
    assert "4 labelled steps left to the tool check" in report.summary()
    assert report.to_dict()["settled_by_tool"] == 4


def test_config_refuses_an_unknown_tool_and_an_orm_with_one(tmp_path):
    with pytest.raises(PrmkitError, match="tool_check: must be calculator or null, got 'abacus'"):
        load_config("tiny", ["tool_check=abacus"], train=["x.jsonl"])
    with pytest.raises(PrmkitError, match="an ORM has none to leave to it"):
        load_config("tiny", ["tool_check=calculator", "kind=orm"], train=["x.jsonl"])


def test_a_run_with_the_check_trains_on_what_is_left(marker_files, tmp_path):
    # the marker data's wrong steps are all false equations: the calculator settles every one, so
    # the run sees only right steps (and rejects traces that are wrong from the first step)
    cfg = load_config("tiny", ["progress=false", "precision=fp32", "eval_fraction=0", "max_steps=2",
                               "tool_check=calculator"], train=[str(marker_files["train"])],
                      output_dir=str(tmp_path / "run"))
    result = train(cfg, log=lambda *a, **k: None)
    data = result.train_data
    assert data["settled_by_tool"] > 0 and data["positive_fraction"] == 1.0
