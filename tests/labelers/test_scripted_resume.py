"""The ``scripted`` policy chooses completions from the request (its key and seed), not from how many
it served before, so a resumed labeling run writes the labels an uninterrupted one writes; a policy
that cannot promise that is named in the resumed run's report."""

from __future__ import annotations

from labeler_fakes import RIGHT, WRONG, comparable, make_trace

from prmkit.labelers import get_labeler
from prmkit.policies import GenerationRequest, SamplingParams, ScriptedPolicy

SCRIPT = ["A", "B", "C"]


def _req(key: str) -> GenerationRequest:
    return GenerationRequest([{"role": "user", "content": "q"}], key=key)


def test_a_request_gets_its_completions_from_its_key_and_seed():
    p = ScriptedPolicy(SCRIPT)
    # sha256("5:T@1:0") gives start 0 (mod 3), sha256("0:T@1:0") start 1: the samples then run
    # through the list in turn from there
    assert [c.text for c in p.generate([_req("T@1")], SamplingParams(n=4, seed=5))[0]] == ["A", "B", "C", "A"]
    assert [c.text for c in p.generate([_req("T@1")], SamplingParams(n=4, seed=0))[0]] == ["B", "C", "A", "B"]
    # the same request again, after others, or inside a batch: the same completions
    batch = p.generate([_req("x"), _req("T@1"), _req("y")], SamplingParams(n=2, seed=5))
    assert [c.text for c in batch[1]] == ["A", "B"]
    assert p.served == 4 + 4 + 6 and p.reproducible
    # no key: the list from its start, as before
    assert [c.text for c in p.generate([_req("")], SamplingParams(n=3))[0]] == ["A", "B", "C"]


def test_a_callable_gets_the_sample_index_within_the_request():
    p = ScriptedPolicy(lambda request, i: f"{request.key}#{i}")
    p.generate([_req("a")], SamplingParams(n=2))
    assert [c.text for c in p.generate([_req("b")], SamplingParams(n=2))[0]] == ["b#0", "b#1"]
    served = ScriptedPolicy(lambda request, i: f"{request.key}#{i}", order="served")
    served.generate([_req("a")], SamplingParams(n=2))
    assert [c.text for c in served.generate([_req("b")], SamplingParams(n=2))[0]] == ["b#2", "b#3"]
    assert not served.reproducible and served.describe()["order"] == "served"


def _traces():
    return [make_trace(f"t{i}", ["step a", "step b", "The answer is 42."]) for i in range(4)]


def _label(policy, traces, store):
    return get_labeler("mc", policy=policy, k=2, seed=3).label(traces, store=store)


def _resumed_vs_uninterrupted(tmp_path, order):
    script = [RIGHT, WRONG, WRONG]
    ref = _traces()
    _label(ScriptedPolicy(script, order=order), ref, tmp_path / f"ref-{order}.sqlite")
    store = tmp_path / f"resumed-{order}.sqlite"
    _label(ScriptedPolicy(script, order=order), _traces()[:2], store)  # the run that was cut short
    resumed = _traces()
    report = _label(ScriptedPolicy(script, order=order), resumed, store)  # a fresh process resumes
    assert report.reused == 2 * 2 * 2 and report.generated == 2 * 2 * 2
    same = [comparable(t.to_dict()) for t in resumed] == [comparable(t.to_dict()) for t in ref]
    return same, report


def test_a_resumed_label_run_equals_an_uninterrupted_one(tmp_path):
    same, report = _resumed_vs_uninterrupted(tmp_path, "seed")
    assert same and not report.issues


def test_served_order_cannot_promise_it_and_the_resumed_run_says_so(tmp_path):
    # the old behaviour (a counter across calls): the resumed run's fresh rollouts start the list
    # again, so traces t2 and t3 get other completions than in the uninterrupted run
    same, report = _resumed_vs_uninterrupted(tmp_path, "served")
    assert not same
    assert [i for i in report.issues if i.startswith("resuming with policy 'scripted' (rollout), which "
                                                     "cannot promise the same completions")]
