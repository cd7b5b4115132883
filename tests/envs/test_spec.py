"""The safety-spec environment: the spec format and its errors, labels by construction, refusal rates
by hand, the separation measure, and the CLI."""

from __future__ import annotations

import json

import pytest

from prmkit.cli import main
from prmkit.envs import (
    DEFAULT_SPEC,
    SPEC_ORGANISMS,
    Spec,
    SpecEnv,
    load_spec,
    refusal_rates,
    spec_trajectory,
)
from prmkit.errors import PrmkitError
from prmkit.eval import auroc
from prmkit.trace import read_traces


def _values(t):
    return [s.labels[0].value for s in t.steps]


def test_labels_by_construction_on_an_allowed_request_with_a_scary_cue():
    r = SpecEnv().request(5)  # template 5: "How do I kill a hung ... process on Linux?" (R3, comply)
    assert (r.rule, r.decision, r.cue) == ("R3", "comply", "kill") and "kill a hung" in r.text
    got = {o: spec_trajectory(r, o) for o in SPEC_ORGANISMS}
    assert _values(got["reasoned"]) == [1, 1, 1] and got["reasoned"].final_answer == "comply"
    assert _values(got["surface"]) == [-1, -1, -1] and got["surface"].final_answer == "refuse"
    assert got["surface"].steps[0].text == "The request mentions 'kill'."
    assert _values(got["inconsistent"]) == [1, 1, -1] and got["inconsistent"].outcome == "incorrect"
    wrong = got["wrong_rule"]
    assert _values(wrong)[:2] == [-1, -1] and wrong.meta["spec"]["cited"] != "R3"
    assert [s.kind for s in wrong.steps] == ["plan", "reasoning", "final"]


def test_a_surface_refusal_of_a_disallowed_request_is_right_in_outcome_and_wrong_in_process():
    r = SpecEnv().request(1)  # "How can I get into my ex's ... account?" (R1, refuse)
    s, ok = spec_trajectory(r, "surface"), spec_trajectory(r, "reasoned")
    assert s.outcome == ok.outcome == "correct" and s.final_answer == ok.final_answer == "refuse"
    assert _values(s) == [-1, -1, 1] and _values(ok) == [1, 1, 1]
    # the process labels rank the reasoned refusal above the surface one; the outcome cannot
    assert auroc([min(_values(ok)), min(_values(s))], [True, False]) == 1.0
    assert auroc([float(t.outcome == "correct") for t in (ok, s)], [True, False]) == 0.5


def test_refusal_rates_by_hand():
    # the first 10 requests: one per template, 5 allowed (R3 x3, R4 x2) and 5 disallowed, all with a cue
    traces = [spec_trajectory(r, o) for r in SpecEnv().requests(10) for o in ("reasoned", "surface",
                                                                               "inconsistent")]
    rates = refusal_rates(traces)
    assert rates["reasoned"] == {"allowed": 5, "disallowed": 5, "over_refusal": 0.0, "under_refusal": 0.0}
    assert (rates["surface"]["over_refusal"], rates["surface"]["under_refusal"]) == (1.0, 0.0)
    assert (rates["inconsistent"]["over_refusal"], rates["inconsistent"]["under_refusal"]) == (1.0, 1.0)


def test_spec_files_and_their_errors(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text("name: mine\nrules:\n" + "".join(
        f"  - {{id: {r.id}, text: {json.dumps(r.text)}, decision: {r.decision}}}\n" for r in DEFAULT_SPEC.rules))
    assert load_spec(p).rules == DEFAULT_SPEC.rules
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [ {id: A, text: 'it's'} ]\n")
    with pytest.raises(PrmkitError, match="bad.yaml:1: not valid YAML"):
        load_spec(bad)
    for data, why in (({"rules": []}, "non-empty 'rules'"), ([], "expected an object"),
                      ({"rules": [{"id": "A", "text": "t", "decision": "maybe"}]}, "refuse or comply"),
                      ({"rules": [{"id": "A", "text": "t", "decision": "refuse"},
                                  {"id": "A", "decision": "comply"}]}, "used twice; rules\\[1\\].text")):
        with pytest.raises(PrmkitError, match=why):
            Spec.from_dict(data)
    with pytest.raises(PrmkitError, match="need rules R1"):
        SpecEnv(spec=Spec.from_dict({"rules": [{"id": "X", "text": "t", "decision": "refuse"}]}))


def test_cli_agent_spec(tmp_path, capsys):
    out = tmp_path / "spec.jsonl"
    main(["agent", "spec", "-o", str(out), "--requests", "10"])
    said = capsys.readouterr().out
    assert "surface: over-refusal 100% of 5 allowed, under-refusal 0% of 5 disallowed" in said
    assert f"wrote 40 trajectories to {out}" in said
    traces = list(read_traces(out))
    assert len(traces) == 40 and all(len(t.steps) == 3 and all(s.labels for s in t.steps) for t in traces)
