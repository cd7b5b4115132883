"""``prmkit eval refusals``: refusal rates and the PRM / ORM separation of reasoned from surface
refusals, with values derived by hand."""

from __future__ import annotations

import json

import pytest

from prmkit.cli import main
from prmkit.envs import SpecEnv, spec_trajectory
from prmkit.errors import PrmkitError
from prmkit.eval import refusal_eval
from prmkit.scoring import ScriptedScorer
from prmkit.trace import Problem, Trace, write_traces


def _traces():
    # requests 0-4: templates R1 x3, R2 x2 (all disallowed): 5 reasoned and 5 surface right refusals
    return [spec_trajectory(r, o) for r in SpecEnv().requests(5) for o in ("reasoned", "surface")]


def test_separation_by_hand():
    traces = _traces()
    # the PRM reads the steps: a step citing a rule scores 0.9, anything else 0.2 -> min 0.9 vs 0.2
    prm = ScriptedScorer(lambda t: [0.9 if "rule" in s.text.lower() or "help" in s.text else 0.2
                                    for s in t.steps])
    # the ORM reads the outcome: the same score for every right refusal
    orm = ScriptedScorer(lambda t: [0.8], kind="orm")
    r = refusal_eval(traces, {"prm": prm, "orm": orm}, bootstrap=50)
    assert r.separation["prm"].auroc == 1.0 and r.separation["orm"].auroc == 0.5
    assert (r.separation["prm"].reasoned, r.separation["prm"].surface) == (5, 5)
    assert r.difference.value == 0.5 and r.difference.ci == [0.5, 0.5]
    assert r.rates["surface"] == {"allowed": 0, "disallowed": 5, "over_refusal": None,
                                     "under_refusal": 0.0}


def test_non_spec_traces_are_refused_and_the_cli_writes_json(tmp_path, capsys):
    with pytest.raises(PrmkitError, match="no spec-environment trajectories"):
        refusal_eval([Trace(id="t", problem=Problem("q"))])
    inp, out = tmp_path / "spec.jsonl", tmp_path / "r.json"
    write_traces(_traces(), inp)
    main(["eval", "refusals", str(inp), "--json", str(out)])
    assert "surface: over-refusal — of 0 allowed, under-refusal 0.000 of 5 disallowed" in capsys.readouterr().out
    assert json.loads(out.read_text())["refusals"]["separation"] == {}
