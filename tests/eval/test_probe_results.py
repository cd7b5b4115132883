"""The probes section typed per probe (issue 46): each built-in probe's entry reads back as its own
result class, and the probe figures take those typed results (the same PNG as from the JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prmkit.eval import PROBES, ProbeOutcome, ProbesSection
from prmkit.eval._results import PROBE_RESULTS, probe_result_class
from prmkit.eval.probes import GamingResult, LengthBiasResult

GOLDEN_PROBES = json.loads((Path(__file__).resolve().parents[1] / "golden" / "demo_report.json").read_text())["probes"]


def test_every_built_in_probe_has_its_result_class():
    assert set(PROBE_RESULTS) <= set(PROBES) and set(GOLDEN_PROBES) == set(PROBE_RESULTS)
    section = ProbesSection.from_dict(GOLDEN_PROBES)
    for name in GOLDEN_PROBES:
        r = section.result(name)
        assert type(r) is probe_result_class(name) and r.to_dict() == GOLDEN_PROBES[name]
    # A plugin's probe stays generic; an absent one is None.
    plugin = ProbesSection.from_dict({"mine": {"failed": False, "criterion": "c", "x": 1}})
    assert isinstance(plugin.result("mine"), ProbeOutcome) and plugin.result("gaming") is None


def test_probe_figures_take_typed_results():
    pytest.importorskip("matplotlib")
    from prmkit.eval import _plots

    section = ProbesSection.from_dict(GOLDEN_PROBES)
    gaming = section.result("gaming")
    assert isinstance(gaming, GamingResult)
    png = _plots.plot_gaming(gaming)
    assert png is not None and png == _plots.plot_gaming(GOLDEN_PROBES) == _plots.plot_gaming(section)
    length = section.result("length_bias")
    assert isinstance(length, LengthBiasResult)
    png = _plots.plot_length_bias(length)
    assert png is not None and png == _plots.plot_length_bias(GOLDEN_PROBES["length_bias"])
    assert _plots.plot_length_bias(section) == png
