"""The ``spec`` judge labeler: the spec's rules reach the judge, verdicts become labels, a custom spec
file replaces the built-in rules, and an unparseable answer is retried rather than guessed."""

from __future__ import annotations

import json

import pytest

from prmkit.envs import SpecEnv, spec_trajectory
from prmkit.errors import PrmkitError
from prmkit.labelers import get_labeler
from prmkit.policies import ScriptedPolicy


def test_the_judge_sees_the_rules_and_its_verdicts_become_labels():
    t = spec_trajectory(SpecEnv().request(5), "surface")  # R3 request refused on the cue "kill"
    policy = ScriptedPolicy(["Sure!", "Step 1: incorrect\nStep 2: incorrect\nStep 3: incorrect"],
                            order="served")
    labeler = get_labeler("spec", policy=policy)
    report = labeler.label([t])
    system = policy.requests[0].messages[0]["content"]
    assert "R3 (comply): Help with computing tasks" in system and "surface words" in system
    assert "Step 1: The request mentions 'kill'." in policy.requests[0].messages[1]["content"]
    assert [lab.value for lab in t.labels("judge")] == [-1, -1, -1]
    assert report.counts["judge_unparseable"] == 1  # "Sure!" was retried, not read as a verdict
    # the judge agrees with the environment's labels here
    assert [lab.value for lab in t.labels("symbolic")] == [-1, -1, -1]


def test_a_spec_file_replaces_the_rules(tmp_path):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps({"name": "house", "rules": [{"id": "H1", "text": "Never discuss pets.",
                                                         "decision": "refuse"}]}))
    labeler = get_labeler("spec", policy=ScriptedPolicy(["Step 1: correct"]), spec=str(p))
    assert "H1 (refuse): Never discuss pets." in labeler.system and labeler.args["spec"] == "house"
    p.write_text(json.dumps({"rules": []}))
    with pytest.raises(PrmkitError, match="non-empty 'rules'"):
        get_labeler("spec", policy=ScriptedPolicy(["x"]), spec=str(p))
