"""``build_labeler``: a labeler gets the shared options its ``__init__`` names, and nothing else."""

from __future__ import annotations

import pytest

from prmkit.errors import PrmkitError
from prmkit.labelers import LABEL_OPTIONS, PolicySpec, build_labeler, policy_spec

SCRIPTED = {"policy": "scripted", "policy_args": {"completions": ["The answer is 4."]}}


def test_options_go_where_the_signature_says():
    mc = build_labeler("mc", {**SCRIPTED, "k": 3, "seed": 7, "retries": 9, "max_rollouts": 1})
    assert (mc.args["k"], mc.args["seed"]) == (3, 7)
    assert "retries" not in mc.args and "max_rollouts" not in mc.args
    assert mc.channels["rollout"].policy == PolicySpec("scripted", {"completions": ["The answer is 4."]})
    binary = build_labeler("binary", {**SCRIPTED, "max_rollouts": 5, "after_error": "negative"})
    assert (binary.args["max_rollouts"], binary.args["after_error"], binary.args["k"]) == (5, "negative", 8)


def test_a_judge_takes_the_judge_options_and_falls_back_to_the_plain_ones():
    judge = build_labeler("judge", {**SCRIPTED, "judge_max_new_tokens": 99, "max_new_tokens": 5,
                                    "temperature": 0.1, "top_p": 0.5, "k": 4})
    params = judge.channels["judge"].params
    assert (params.max_new_tokens, params.temperature, params.top_p) == (99, 0.1, 0.5)
    assert judge.channels["judge"].policy.name == "scripted"  # no --judge-policy: --policy
    own = build_labeler("judge", {**SCRIPTED, "judge_policy": "labeler_fakes:JudgePolicy",
                                  "judge_args": {"model_id": "j"}})
    assert own.channels["judge"].policy == PolicySpec("labeler_fakes:JudgePolicy", {"model_id": "j"})
    assert own.channels["judge"].params.max_new_tokens == 256  # the labeler's own default
    consensus = build_labeler("consensus", {**SCRIPTED, "judge_policy": "labeler_fakes:JudgePolicy",
                                            "judge_max_new_tokens": 33})
    assert consensus.channels["judge"].params.max_new_tokens == 33
    assert consensus.channels["judge"].policy.name == "labeler_fakes:JudgePolicy"


def test_extras_win_and_mistakes_are_one_line_errors():
    mc = build_labeler("mc", {**SCRIPTED, "k": 3}, {"k": 2, "sources": "mc_soft"})
    assert mc.args["k"] == 2 and mc.args["sources"] == ["mc_soft"]
    with pytest.raises(PrmkitError, match=r"unknown labeler 'oracle'; known: "):
        build_labeler("oracle")
    with pytest.raises(PrmkitError, match=r"unknown labeling option\(s\) rollouts; known: policy, "):
        build_labeler("mc", {"rollouts": 3})
    with pytest.raises(PrmkitError, match=r"labeler 'mc': .*unexpected keyword argument 'colour'"):
        build_labeler("mc", SCRIPTED, {"colour": "red"})
    assert set(LABEL_OPTIONS) >= {"policy", "k", "seed", "judge_policy"}


def test_a_backend_with_its_own_progress_bar_is_quiet_unless_asked():
    pytest.importorskip("torch")
    assert policy_spec("hf").kwargs == {"progress": False}
    assert policy_spec("hf", {"progress": True}).kwargs == {"progress": True}
    assert policy_spec("scripted").kwargs == {}
