"""The demo's "Seconds" counts every run of its folder (issue 15, item 13): a resumed run's report
shows the time of the earlier runs too, and each stage's time from the run that ran it."""

from __future__ import annotations

import json

import pytest

import prmkit.demo as demo


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(demo._Stages, "clock", staticmethod(lambda: now[0]))
    return now


def test_seconds_are_summed_over_resumed_runs(tmp_path, clock):
    cfg = demo.DEMO_PRESETS["quick"]
    first = demo._Stages(tmp_path, cfg, overwrite=False)
    with first.timed("sample"):
        clock[0] += 10
    first.mark("sample")
    clock[0] += 5  # then killed inside the next stage: those 5 s are lost with it
    assert first.seconds() == 15

    second = demo._Stages(tmp_path, cfg, overwrite=False)  # the rerun, which resumes
    assert second.seconds() == 10  # the first run up to its last finished stage
    assert not second.done("train") and second.done("sample")
    with second.timed("train"):
        clock[0] += 7
    with second.timed("evaluate"):
        clock[0] += 3
    assert second.seconds() == 20
    assert second.times == {"sample": 10, "train": 7, "evaluate": 3}
    saved = json.loads((tmp_path / "demo_times.json").read_text())
    assert saved == {"seconds": 20, "stage_seconds": {"sample": 10, "train": 7, "evaluate": 3}}

    third = demo._Stages(tmp_path, cfg, overwrite=False)  # a rerun of a finished folder adds its own
    with third.timed("evaluate"):
        clock[0] += 4
    assert third.seconds() == 24 and third.times["evaluate"] == 4

    fresh = demo._Stages(tmp_path, cfg, overwrite=True)  # --overwrite starts the count afresh
    assert fresh.seconds() == 0 and fresh.times == {}


def test_the_report_shows_seconds_to_a_tenth_whatever_their_size(tmp_path):
    from prmkit.eval import write_report

    meta = {"title": "t", "seconds": 421.25, "stage_seconds": {"sample": 165.83, "train ORM": 18.0,
                                                               "Monte Carlo": 37.1}}
    md = write_report({"meta": meta}, tmp_path)["markdown"].read_text()
    assert "| Seconds | 421.2 |" in md
    assert "| sample | 165.8 |" in md and "| train ORM | 18.0 |" in md and "| Monte Carlo | 37.1 |" in md
