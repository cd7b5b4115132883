"""Fan-out: a process pool and Ray give the labels the inline run gives; errors say what to do."""

from __future__ import annotations

import os
import sys

import pytest
from labeler_fakes import RulePolicy, comparable, make_trace

from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.labelers import MCLabeler, PolicySpec, get_labeler, make_executor

SPEC = PolicySpec("labeler_fakes:RulePolicy", {"p": 0.5})


def batch():
    return [make_trace(f"t{i}", ["a", "b BAD" if i == 1 else "b", "c", "The answer is 7."])
            for i in range(4)]


def labels(ts):
    return [comparable(t.to_dict()) for t in ts]


def test_a_process_pool_labels_like_the_inline_run():
    inline, pooled = batch(), batch()
    get_labeler("binary", policy=SPEC, k=3, seed=2, workers=0).label(inline)
    with get_labeler("binary", policy=SPEC, k=3, seed=2, workers=2) as lab:
        report = lab.label(pooled)
        assert lab._executors["rollout"].kind == "process"
    assert labels(pooled) == labels(inline)
    assert report.rollouts > 0


def test_a_built_policy_runs_inline_and_cannot_be_shipped():
    assert make_executor(RulePolicy()).kind == "inline"
    with pytest.raises(PrmkitError, match="pass a PolicySpec"):
        make_executor(RulePolicy(), workers=2)
    with pytest.raises(PrmkitError, match="cannot be sent to worker processes"):
        make_executor(PolicySpec("scripted", {"completions": lambda req, i: "x"}), workers=1)


def test_ray_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "prmkit\[ray\]"'):
        MCLabeler(SPEC, k=1, ray_address="auto").label([make_trace("t", ["a", "The answer is 4."])])


@pytest.mark.slow
def test_ray_actors_label_like_the_inline_run(monkeypatch):
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install \"prmkit[ray]\"")
    # A local Ray instance started here (its workers import the fakes through PYTHONPATH); the
    # labeler joins it by address.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        inline, remote = batch(), batch()
        get_labeler("mc", policy=SPEC, k=2, seed=4, workers=0).label(inline)
        with get_labeler("mc", policy=SPEC, k=2, seed=4, workers=2, ray_address=address) as lab:
            report = lab.label(remote)
            assert lab._executors["rollout"].kind == "ray"
        assert labels(remote) == labels(inline)
        assert report.rollouts == 4 * 2 * 3
    finally:
        ray.shutdown()


class BatchingRulePolicy(RulePolicy):
    """RulePolicy that records how many requests each generate call carried."""

    request_batch = 5

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls: list[int] = []

    def generate(self, requests, params):
        self.calls.append(len(requests))
        return super().generate(requests, params)


@pytest.mark.parametrize("method", ["mc", "binary"])
def test_inline_batches_requests_and_labels_like_one_at_a_time(method):
    one, many = batch(), batch()
    get_labeler(method, policy=RulePolicy(p=0.5), k=3, seed=2).label(one)
    pol = BatchingRulePolicy(p=0.5)
    get_labeler(method, policy=pol, k=3, seed=2).label(many)
    assert labels(many) == labels(one)
    # Requests went to the policy together (up to its request_batch), not one by one.
    assert max(pol.calls) > 1 and max(pol.calls) <= 5
    assert sum(pol.calls) == len(pol.requests)
