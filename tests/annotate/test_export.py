"""Exported human labels: prmkit traces with StepLabel(source="human", labeler=...), PRM800K and TRL
stepwise through prmkit's exporters, and the training data path reading them (a tiny PRM trains on
them in the slow tier)."""

from __future__ import annotations

import json

import pytest
from annotate_traces import scored_traces

from prmkit.annotate import Store, export_labels, summary_of
from prmkit.data import read
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace, read_traces


@pytest.fixture()
def labelled(tmp_path):
    """a1: ann and bob rate both steps (they differ on step 1); a2: ann stops at its first wrong step
    (step 1 of 3); b1: bob rates step 0 and does not finish; b2: nobody."""
    store = Store(tmp_path / "labels.sqlite")
    ids = dict(zip(["a1", "a2", "b1", "b2"], store.add_traces(scored_traces()), strict=True))
    store.set_queue([(i, 2, None) for i in ids.values()], strategy="file order")
    ann, _ = store.add_user("ann")
    bob, _ = store.add_user("bob")
    store.rate(ann, ids["a1"], 0, 1, seconds=4.0)
    store.rate(ann, ids["a1"], 1, 1, seconds=6.0)
    store.finish(ann, ids["a1"], note="easy", trace_seconds=12.0)
    store.rate(bob, ids["a1"], 0, 1, seconds=2.0)
    store.rate(bob, ids["a1"], 1, 0, seconds=3.0)
    store.finish(bob, ids["a1"], flag="unclear")
    store.rate(ann, ids["a2"], 0, 1, seconds=5.0)
    store.rate(ann, ids["a2"], 1, -1, seconds=5.0)
    store.finish(ann, ids["a2"])
    store.rate(bob, ids["b1"], 0, 1, seconds=1.0)
    return store


def test_prmkit_export_has_one_human_label_per_annotator(labelled, tmp_path):
    result = export_labels(labelled.path, tmp_path / "human.jsonl")
    assert (result.traces, result.labels, result.unfinished) == (2, 6, 1)
    a1, a2 = read_traces(tmp_path / "human.jsonl")
    assert (a1.id, a2.id) == ("a1", "a2")
    labs = [[(lab.source, lab.labeler, lab.value, lab.cost["seconds"]) for lab in s.labels] for s in a1.steps]
    assert sorted(labs[0]) == [("human", "ann", 1, 4.0), ("human", "bob", 1, 2.0)]
    assert sorted(labs[1]) == [("human", "ann", 1, 6.0), ("human", "bob", 0, 3.0)]
    assert all(lab.time for s in a1.steps for lab in s.labels)
    assert a1.meta["annotate"]["ann"]["note"] == "easy" and a1.meta["annotate"]["bob"]["flag"] == "unclear"
    assert a1.meta["annotate"]["ann"]["seconds"] == 12.0
    assert [s.scores["prm"] for s in a1.steps] == [0.9, 0.8]  # scores kept, mc_soft labels dropped
    assert [len(s.labels) for s in a2.steps] == [1, 1, 0]  # stopped at the first wrong step
    assert a2.first_error("human") == 1
    prov = a1.provenance[-1]
    assert (prov.stage, prov.args["annotators"], prov.args["double_labelled_steps"]) == ("annotate", ["ann", "bob"], 2)
    assert prov.args["agreement"] == pytest.approx(-1 / 3) and prov.args["seconds_per_label"] == pytest.approx(26 / 7)


def test_keep_labels_and_unfinished(labelled, tmp_path):
    export_labels(labelled.path, tmp_path / "all.jsonl", keep_labels=True, include_unfinished=True)
    traces = {t.id: t for t in read_traces(tmp_path / "all.jsonl")}
    assert sorted(traces) == ["a1", "a2", "b1"]
    assert [lab.source for lab in traces["b1"].steps[0].labels] == ["mc_soft", "human"]


def test_trl_and_prm800k_exports(labelled, tmp_path):
    export_labels(labelled.path, tmp_path / "trl.jsonl", format="trl")
    rows = [json.loads(x) for x in (tmp_path / "trl.jsonl").read_text().splitlines()]
    # a1: the latest label of step 1 is bob's 0 (okay -> right); a2: cut after its first wrong step
    assert [(r["prompt"], r["labels"]) for r in rows] == [("What is 3 + 4?", [True, True]),
                                                          ("What is 3 + 4?", [True, False])]
    export_labels(labelled.path, tmp_path / "prm800k.jsonl", format="prm800k")
    back = list(read(tmp_path / "prm800k.jsonl", "prm800k"))
    assert [[s.label().value if s.label() else None for s in t.steps] for t in back] == [[1, 0], [1, -1, None]]
    with pytest.raises(PrmkitError, match="--format must be one of prmkit, prm800k, trl"):
        export_labels(labelled.path, tmp_path / "x.jsonl", format="csv")


def test_the_training_data_path_reads_the_human_labels(labelled, tmp_path):
    from prmkit.train import step_targets

    export_labels(labelled.path, tmp_path / "human.jsonl")
    targets = [step_targets(t, source="human") for t in read_traces(tmp_path / "human.jsonl")]
    assert targets == [[1.0, 1.0], [1.0, 0.0, None]]


def test_summary_counts_agreement_and_cost(labelled):
    s = summary_of(labelled.path)
    # double-labelled steps: a1 step 0 (1, 1) and step 1 (1, 0); raw agreement 1/2.
    # Fleiss over rows (-1, 0, +1) counts (0,0,2) and (0,1,1): P = (1 + 0) / 2 = 1/2, shares (0, 1/4, 3/4),
    # P_e = 1/16 + 9/16 = 5/8, kappa = (1/2 - 5/8) / (3/8) = -1/3
    assert (s.double_labelled_steps, s.raw_agreement) == (2, 0.5)
    assert s.agreement == pytest.approx(-1 / 3)
    assert (s.labels, s.traces_done, s.flagged) == (7, 2, 1)
    # 7 labels in 4 + 6 + 2 + 3 + 5 + 5 + 1 = 26 s
    assert s.seconds_per_label == pytest.approx(26 / 7) and s.labels_per_hour == pytest.approx(7 / 26 * 3600)
    assert [(p.a, p.b, p.steps) for p in s.pairs] == [("ann", "bob", 2)]
    assert "Fleiss' kappa -0.333 over 2 double-labelled steps" in "\n".join(s.lines())
    assert type(s).from_dict(s.to_dict()) == s


@pytest.mark.slow
def test_a_tiny_prm_trains_on_exported_labels(tmp_path, monkeypatch):
    """Annotators (simulated through the store) label marker traces; the export trains a PRM through
    `prmkit train prm`, reading the human labels (20 s: the tiny backbone is built once here)."""
    for name in ("torch", "transformers", "accelerate", "yaml"):
        pytest.importorskip(name)
    from prmkit.cli import main

    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    traces = [Trace(f"t{k}", Problem(f"{k}+1+1?", id=f"p{k}"),
                    [Step(f"{k}+1={k + 1}"), Step(f"{k + 1}+1={k + 3} wrong" if k % 2 else f"{k + 1}+1={k + 2}")])
              for k in range(12)]
    store = Store(tmp_path / "labels.sqlite")
    ids = store.add_traces(traces)
    ann, _ = store.add_user("ann")
    for i, t in zip(ids, traces, strict=True):
        for j, s in enumerate(t.steps):
            store.rate(ann, i, j, -1 if s.text.endswith("wrong") else 1, seconds=1.0)
        store.finish(ann, i)
    export_labels(store.path, tmp_path / "human.jsonl")
    out = tmp_path / "prm"
    main(["train", "prm", "--config", "tiny", f"train=[{tmp_path / 'human.jsonl'}]", f"output_dir={out}",
          "max_steps=2", "progress=false", "label_source=human", "eval_fraction=0"])
    info = json.loads((out / "prmkit_rm.json").read_text())
    assert info["train_data"]["traces"] == 12 and info["train_data"]["labelled"] == 24
