"""Typed provenance entries: lossless round trips, entries written before read and written back
exactly, and every writer's entry byte for byte the dict it wrote before the entries were typed."""

from __future__ import annotations

import json

import pytest

from prmkit.envs import PromptBuilder
from prmkit.generate import sample_traces
from prmkit.labelers import JudgeLabeler, MCLabeler
from prmkit.policies import SamplingParams, ScriptedPolicy
from prmkit.provenance import (
    STAGE_ENTRIES,
    GenerateProvenance,
    GuidedProvenance,
    LabelArgs,
    LabelProvenance,
    PolicyRef,
    PromptRef,
    SamplingRef,
    ScoreProvenance,
    SearchProvenance,
    SelectProvenance,
    TrainProvenance,
    parse,
)
from prmkit.scoring import score_traces
from prmkit.search import ScriptedScorer, SearchConfig, beam_search, reject, select_file
from prmkit.trace import Problem, Provenance, Step, Trace, read_traces

HF = PolicyRef("hf", "my-org/policy-1b", adapter="runs/lora", extra={"device": "cpu", "dtype": "float32"})

#: One entry of each kind with every field set, and a key no field knows.
ENTRIES = [
    GenerateProvenance("hf", policy=HF, sampling={"n": 4, "seed": 0}, prompt={"shots": 2},
                       splitter="newline", extra={"later": 1}),
    LabelProvenance("consensus", args={"k": 8}, policies={"rollout": HF, "judge": None},
                    extra={"later": [1]}),
    LabelProvenance("symbolic", extra={"strict_path": True}),
    ScoreProvenance("prm", scorer="prefix_caching", model="prmkit-prm:tiny", kind="prm", convention="prmkit",
                    precision="fp32", aggregate="min", extra={"batch_size": 8}),
    SearchProvenance("beam", policy=HF, scorer="prm", kind="prm", settings={"beam_width": 2, "seed": 0},
                     select="bon"),
    GuidedProvenance("reject", policy=HF, scorer="prm", settings={"threshold": 0.5}),
    SelectProvenance("majority"),
    TrainProvenance(name="prmkit-prm:tiny", kind="prm", convention={"name": "prmkit"}, max_length=None,
                    train_config={"kind": "prm", "model": "tiny", "train": ["t.jsonl"], "label_source": "mc"},
                    steps=10, extra={"eval": None, "optimizer": "adamw"}),
    HF,
    SamplingRef(n=4, max_new_tokens=80, temperature=0.7, top_p=1.0, stop=["\n\n"], seed=None, extra={"later": 1}),
    PromptRef("arith", shots=2, system="Solve it.", extra={"later": True}),
]


def _from_dict(entry, d):
    return type(entry).from_dict(d) if isinstance(entry, (TrainProvenance, PolicyRef, SamplingRef, PromptRef)) \
        else type(entry).from_dict(d, entry.name)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: type(e).__name__)
def test_round_trip_is_lossless(entry):
    d = entry.to_dict()
    back = _from_dict(entry, json.loads(json.dumps(d)))
    assert back == entry
    assert json.dumps(back.to_dict()) == json.dumps(d)  # the same keys, in the same order


#: Entries as prmkit wrote them before they were typed (from tests/golden and the writers' code).
OLD = [
    ("generate", "golden", {"policy": {"backend": "golden", "model": "golden-scripted"},
                            "sampling": {"max_new_tokens": 80, "n": 8, "seed": 0, "stop": [],
                                         "temperature": 0.7, "top_p": 1.0},
                            "prompt": {"source": "arith", "shots": 2, "system": "Solve."},
                            "splitter": "newline"}),
    ("generate", "openai_compat", {"policy": {"backend": "openai_compat", "base_url": "http://x/v1",
                                              "model": "qwen", "mode": "chat"}, "splitter": "newline"}),
    ("label", "mc", {"args": {"k": 2, "seed": 0, "sources": ["mc_hard", "mc_soft"]},
                     "rollout_policy": {"backend": "golden", "model": "golden-scripted"}}),
    ("label", "consensus", {"args": {}, "rollout_policy": None,
                            "judge_policy": {"backend": "hf", "model": "j", "adapter": None}}),
    ("label", "symbolic", {"strict_path": True}),
    ("score", "prm", {"scorer": "prefix_caching", "model": "prmkit-prm:tiny", "kind": "prm",
                      "convention": "prmkit", "batch_size": 8, "max_cached_tokens": 16384,
                      "min_saved_tokens": 32, "precision": "fp32", "aggregate": "min"}),
    ("score", "orm", {"backend": "scripted", "name": "scripted", "kind": "orm", "aggregate": None}),
    ("score", "prm", {"model": "prmkit-prm:tiny", "kind": "prm", "convention": "prmkit", "precision": "fp32"}),
    ("search", "beam", {"policy": {"backend": "scripted", "model": "tree"}, "scorer": "scripted", "kind": "prm",
                        "beam_width": 2, "expansions": 2, "max_depth": 3, "select": "bon"}),
    ("guided", "reject", {"policy": {"backend": "scripted", "model": "m"}, "scorer": "scripted",
                          "threshold": 0.5, "budget": 5}),
    ("select", "majority", {"aggregate": None, "key": None}),
    ("select", "argmax", {"aggregate": "min", "key": "prm"}),
]


@pytest.mark.parametrize(("stage", "name", "args"), OLD, ids=[f"{s}-{n}" for s, n, _ in OLD])
def test_old_entries_are_read_and_written_back_exactly(stage, name, args):
    entry = Provenance(stage, name, args).typed
    assert isinstance(entry, STAGE_ENTRIES[stage]) and entry.name == name
    assert json.dumps(entry.to_dict()) == json.dumps(args)
    again = type(entry).from_dict(entry.to_dict(), name)
    assert again == entry


def test_old_entries_read_as_fields():
    gen, oai, mc, cons, sym, prefix, orm, rm, search, guided, none, argmax = (
        parse(s, n, a) for s, n, a in OLD)
    assert (gen.policy.backend, gen.policy.model, gen.policy.adapter, gen.splitter) == (
        "golden", "golden-scripted", None, "newline")
    assert gen.sampling.n == 8 and gen.prompt.shots == 2
    assert oai.policy.model == "qwen" and oai.policy.extra == {"base_url": "http://x/v1", "mode": "chat"}
    assert mc.args["k"] == 2 and mc.policies["rollout"].model == "golden-scripted" and mc.judge_policy is None
    assert cons.policies["rollout"] is None and cons.judge_policy.model == "j"
    assert sym.args is None and sym.policies == {} and sym.extra == {"strict_path": True}
    assert (prefix.scorer, prefix.model, prefix.kind, prefix.convention, prefix.precision, prefix.aggregate) == (
        "prefix_caching", "prmkit-prm:tiny", "prm", "prmkit", "fp32", "min")
    assert prefix.extra == {"batch_size": 8, "max_cached_tokens": 16384, "min_saved_tokens": 32}
    assert (orm.kind, orm.model, orm.aggregate, orm.extra) == ("orm", None, None,
                                                               {"backend": "scripted", "name": "scripted"})
    assert (rm.model, rm.scorer, rm.aggregate) == ("prmkit-prm:tiny", None, None)
    assert (search.kind, search.scorer, search.select, search.policy.model) == ("prm", "scripted", "bon", "tree")
    assert search.settings == {"beam_width": 2, "expansions": 2, "max_depth": 3}
    assert guided.settings == {"threshold": 0.5, "budget": 5} and guided.policy.backend == "scripted"
    assert (none.aggregate, none.key, argmax.aggregate, argmax.key) == (None, None, "min", "prm")


def test_missing_unknown_and_mistyped_keys():
    # A value of another type than the field's is not taken as the field: it stays where it was.
    e = ScoreProvenance.from_dict({"kind": 3, "model": "m", "new": [1]}, "prm")
    assert (e.kind, e.model, e.scorer, e.extra) == (None, "m", None, {"kind": 3, "new": [1]})
    assert json.dumps(e.to_dict()) == '{"kind": 3, "model": "m", "new": [1]}'
    assert GenerateProvenance.from_dict({"policy": "hf"}, "hf").policy is None
    # Missing keys are None and stay missing; a key read as null is written back as null.
    assert LabelProvenance.from_dict({}, "x").to_dict() == {}
    assert SelectProvenance.from_dict({}, "m").to_dict() == {}
    assert SelectProvenance("m").to_dict() == {"aggregate": None, "key": None}  # what select writes
    assert ScoreProvenance("orm", kind="orm").to_dict() == {"kind": "orm"}
    assert ScoreProvenance.from_dict({"kind": "orm", "aggregate": None}, "orm").to_dict() == {
        "kind": "orm", "aggregate": None}
    assert parse("import", "prm800k", {"path": "x"}) is None  # stages a reader only names
    assert TrainProvenance.from_dict({"kind": "prm", "steps": True}).steps is None  # a bool is no count


def test_train_record_reads_the_trainers_file():
    info = {"kind": "orm", "convention": {"name": "prmkit", "head": "classifier"}, "max_length": 1024,
            "name": "prmkit-orm:smollm2",
            "train_config": {"kind": "orm", "model": "smollm2", "convention": "prmkit",
                             "train": ["a.jsonl", "b.jsonl"], "label_source": None},
            "train_data": {"traces": 3}, "eval_data": None, "eval": None, "steps": 10, "processes": 1,
            "precision": {"used": "fp32"}, "optimizer": "adamw"}
    rec = TrainProvenance.from_dict(info)
    assert (rec.name, rec.kind, rec.convention_name, rec.max_length, rec.steps) == (
        "prmkit-orm:smollm2", "orm", "prmkit", 1024, 10)
    assert (rec.base_model, rec.label_source, rec.data) == ("smollm2", None, ["a.jsonl", "b.jsonl"])
    assert json.dumps(rec.to_dict()) == json.dumps(info)
    # What RewardModel.save_pretrained writes for the trainer: its identity first, in this order.
    from dataclasses import replace

    built = replace(TrainProvenance(train_config=info["train_config"], steps=10, extra={
        k: info[k] for k in ("train_data", "eval_data", "eval", "processes", "precision", "optimizer")}),
        name=info["name"], kind="orm", convention=info["convention"], max_length=1024)
    assert json.dumps(built.to_dict()) == json.dumps(info)
    bare = TrainProvenance(name="m", kind="prm", convention={"name": "prmkit"}, max_length=None)
    assert bare.to_dict() == {"kind": "prm", "convention": {"name": "prmkit"}, "max_length": None, "name": "m"}
    assert (bare.base_model, bare.data, TrainProvenance(convention="prmkit").convention_name) == (
        None, [], "prmkit")


def test_add_provenance_takes_an_entry_or_the_old_arguments():
    entry = ENTRIES[0]
    t = Trace(id="t", problem=Problem("q"), steps=[Step("a")])
    t.add_provenance(entry)
    t.add_provenance("generate", "hf", entry.to_dict())
    new, old = t.provenance
    assert (new.stage, new.name, new.args) == (old.stage, old.name, old.args) == (
        "generate", "hf", entry.to_dict())
    assert new.typed == entry and new.version
    back = Trace.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back.provenance[0].typed == entry
    with pytest.raises(TypeError):
        t.add_provenance(entry, "other")
    with pytest.raises(TypeError):
        t.add_provenance("generate")


# -- every writer writes what it wrote before ------------------------------------------------------------

PROBLEM = Problem("Tom has 2 apples and buys 1. How many?", answer="3", id="tom")
GOOD = "Tom has 2 apples.\nHe buys 1: 2 + 1 = 3.\nThe answer is 3."
SCORES = {"Tom has 2 apples.": 0.9, "He buys 1: 2 + 1 = 3.": 0.8, "The answer is 3.": 0.7}


def _same(prov: Provenance, expected: dict) -> None:
    assert json.dumps(prov.args) == json.dumps(expected)  # nested key order included


def test_generate_and_symbolic_entries(tmp_path):
    policy, params = ScriptedPolicy([GOOD], model_id="m"), SamplingParams(n=1, seed=0)
    prompts = PromptBuilder("dataset", shots=0)
    sample_traces([PROBLEM], policy, tmp_path / "g.jsonl", params=params, prompts=prompts, progress=False)
    t = next(read_traces(tmp_path / "g.jsonl"))
    gen, sym = t.provenance
    assert (gen.stage, gen.name, sym.stage, sym.name) == ("generate", "scripted", "label", "symbolic")
    _same(gen, {"policy": policy.describe(), "sampling": params.to_dict(), "prompt": prompts.describe(),
                "splitter": "newline"})
    _same(sym, {"strict_path": False})  # strict only where the problem's intermediate values are known


def _trace() -> Trace:
    return Trace(id="t", problem=PROBLEM, steps=[Step(s) for s in GOOD.splitlines()], final_answer="3")


@pytest.mark.parametrize("kind", ["prm", "orm"])
def test_score_entry(kind):
    scorer = ScriptedScorer(SCORES, kind=kind)
    t = _trace()
    score_traces(scorer, [t], aggregate="min")
    _same(t.provenance[-1], {**scorer.describe(), "aggregate": "min" if kind == "prm" else None})


def test_search_guided_and_select_entries(tmp_path):
    prompts = PromptBuilder("dataset", shots=0)
    policy = ScriptedPolicy(["The answer is 3."], model_id="m")
    r = beam_search(PROBLEM, policy, ScriptedScorer({"The answer is 3.": 0.5}), prompts, beam_width=1,
                    expansions=1, max_depth=1)
    expected = {"policy": policy.describe(), "scorer": "scripted", "kind": "prm", "beam_width": 1,
                "expansions": 1, **SearchConfig(max_depth=1).to_dict(), "select": "bon"}
    _same(r.trace.provenance[-1], expected)
    assert json.dumps(r.args) == json.dumps(expected)

    policy = ScriptedPolicy([GOOD], model_id="m")
    g = reject(PROBLEM, policy, ScriptedScorer(SCORES), prompts, threshold=0.5, budget=1)
    _same(g.trace.provenance[-1], {"policy": policy.describe(), "scorer": "scripted", "threshold": 0.5,
                                   "budget": 1, "batch": 1, "aggregate": "min", "max_new_tokens": 256,
                                   "temperature": 0.7, "seed": 0})

    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text(json.dumps(g.trace.to_dict()) + "\n")
    select_file(inp, method="majority", out=out)
    _same(next(read_traces(out)).provenance[-1], {"aggregate": None, "key": None})


def test_labeler_entries():
    rollout = ScriptedPolicy(["The answer is 3."], model_id="roll")
    t = _trace()
    labeler = MCLabeler(rollout, k=1, seed=0)
    labeler.label([t])
    _same(t.provenance[-1], {"args": dict(labeler.args), "rollout_policy": rollout.describe()})
    judge = ScriptedPolicy(["Step 1: correct\nStep 2: correct\nStep 3: correct"], model_id="judge-7b")
    labeler = JudgeLabeler(judge)
    labeler.label([t])
    _same(t.provenance[-1], {"args": dict(labeler.args), "judge_policy": judge.describe()})
    assert t.provenance[-1].typed.judge_policy.model == "judge-7b"


def test_reward_model_folder_and_score_entries(tmp_path, monkeypatch):
    """prmkit_rm.json and the score entry of a reward model, as written before they were typed."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from prmkit.eval import card_from_provenance
    from prmkit.models import RewardModel

    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path / "cache"))
    rm = RewardModel.from_backbone("tiny", head_init="zero")
    rm.name = "prmkit-prm:tiny"
    extra = {"train_data": {"traces": 2}, "eval_data": None, "eval": None}
    config = {"kind": "prm", "model": "tiny", "train": ["t.jsonl"], "label_source": "symbolic"}
    rm.save_pretrained(tmp_path / "prm", record=TrainProvenance(
        train_config=config, steps=3, extra={**extra, "processes": 1, "optimizer": "adamw"}))
    old = {"kind": rm.kind, "convention": rm.convention.to_dict(), "max_length": rm.max_length,
           "name": rm.name, "train_config": config, **extra, "steps": 3, "processes": 1, "optimizer": "adamw"}
    assert (tmp_path / "prm" / "prmkit_rm.json").read_text() == json.dumps(old, indent=2, default=str) + "\n"
    rm.save_pretrained(tmp_path / "bare")
    bare = {"kind": rm.kind, "convention": rm.convention.to_dict(), "max_length": rm.max_length, "name": rm.name}
    assert (tmp_path / "bare" / "prmkit_rm.json").read_text() == json.dumps(bare, indent=2) + "\n"

    t = _trace()
    rm.score_traces([t])
    _same(t.provenance[-1], {"model": rm.name, "kind": "prm", "convention": rm.convention.name,
                             "precision": rm.precision_used.used})
    card = card_from_provenance([t], model_dirs=[tmp_path / "prm"])
    assert card["base_model"].value == "tiny = tiny test backbone (random init) (PRM backbone)"
    assert card["process_reward_model"].value == (
        "prmkit-prm:tiny (at prm; convention prmkit; trained on t.jsonl; label source symbolic)")
    assert str(tmp_path) not in card["process_reward_model"].value  # no absolute path of this machine


def test_sampling_and_prompt_are_typed_and_written_as_their_dicts():
    """A generate entry built from the dicts SamplingParams and PromptBuilder give is typed, and its
    args are those dicts, key for key and in their order (what generate wrote before they were typed)."""
    params = SamplingParams(n=3, max_new_tokens=16, temperature=0.0, stop=("\n\n",), seed=None)
    prompt = PromptBuilder("arith", shots=1).describe()
    entry = GenerateProvenance("scripted", sampling=params.to_dict(), prompt=prompt)
    assert isinstance(entry.sampling, SamplingRef) and isinstance(entry.prompt, PromptRef)
    assert (entry.sampling.n, entry.sampling.temperature, entry.sampling.stop, entry.sampling.seed) == (
        3, 0.0, ["\n\n"], None)
    assert (entry.prompt.source, entry.prompt.shots) == ("arith", 1)
    d = entry.to_dict()
    assert d["sampling"] == params.to_dict() and list(d["sampling"]) == list(params.to_dict())
    assert d["prompt"] == prompt and list(d["prompt"]) == list(prompt)
    # a value of another type than the field's is kept as read, not lost
    odd = GenerateProvenance.from_dict({"sampling": {"n": "four"}, "prompt": {"shots": 2.5}}, "x")
    assert odd.sampling.n is None and odd.sampling.extra == {"n": "four"} and odd.prompt.extra == {"shots": 2.5}
    assert odd.to_dict() == {"sampling": {"n": "four"}, "prompt": {"shots": 2.5}}


def test_label_args_are_typed_where_labelers_share_them():
    # What setup_rollouts records for binary (its own settings first), and a plugin's own settings.
    written = {"max_rollouts": 16, "after_error": "negative", "policy": {"name": "golden", "model": "m"},
               "k": 4, "max_new_tokens": 64, "temperature": 0.7, "top_p": 1.0, "seed": 0, "shots": None,
               "answer_method": "sympy", "my_plugin_threshold": 0.3}
    e = Provenance("label", "binary", {"args": written, "rollout_policy": None}).typed
    a = e.args
    assert isinstance(a, LabelArgs)
    assert (a.k, a.seed, a.max_rollouts, a.after_error, a.policy.model) == (4, 0, 16, "negative", "m")
    assert a.extra == {"my_plugin_threshold": 0.3} and a["my_plugin_threshold"] == 0.3 and "shots" in a
    assert json.dumps(e.to_dict()) == json.dumps({"args": written, "rollout_policy": None})
    # A value of another type than the field's (a plugin's k as a list) stays as it was written.
    odd = LabelArgs.from_dict({"k": [1, 2], "seed": True})
    assert (odd.k, odd.seed, odd.extra) == (None, None, {"k": [1, 2], "seed": True})
    assert odd.to_dict() == {"k": [1, 2], "seed": True}
    # A labeler builds its entry from its args dict: the same dict is written.
    assert LabelProvenance("mc", args={"k": 2, "seed": 0}).to_dict() == {"args": {"k": 2, "seed": 0}}
