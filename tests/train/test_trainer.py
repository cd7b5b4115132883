"""The PRM / ORM trainer on the ``tiny`` backbone: it learns, its loss is the documented one, gradient
accumulation and resuming change nothing, checkpoints are plain transformers folders, and every trace
left out is accounted for."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import load_file

from prmkit.errors import PrmkitError
from prmkit.models import RewardModel
from prmkit.trace import Problem, Step, StepLabel, Trace, read_traces, write_traces
from prmkit.train import (
    DataReport,
    _trainer,
    encode_traces,
    evaluate_encoded,
    length_batches,
    load_config,
    position_loss,
    train,
)

#: Invariant tests compare numbers to 1e-6: fp32 (bf16 has its own tests below).
QUIET = ["progress=false", "log_every=1", "precision=fp32"]


def config(marker_files, out, *overrides, **values):
    """The ``tiny`` shipped config on the marker data, no held-out split unless asked."""
    values.setdefault("train", [str(marker_files["train"])])
    return load_config("tiny", [*QUIET, "eval_fraction=0", *overrides], output_dir=str(out), **values)


def weights(folder) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


# -- the loss ------------------------------------------------------------------------------------------

def test_position_loss_two_classes_soft_targets_by_hand():
    ln3 = math.log(3)
    logits = torch.tensor([[0.0, ln3], [5.0, -5.0], [ln3, 0.0]], requires_grad=True)
    targets = torch.tensor([0.75, float("nan"), 1.0])
    loss, n = position_loss(logits, targets)
    # row 0: P(correct) = 3/4 against target 3/4; row 1 has no label; row 2: P(correct) = 1/4, target 1
    expected = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) - math.log(0.25)
    assert n == 2
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    loss.backward()
    # d loss / d logit_1 = P(correct) - target: zero where the soft target is met, none where masked
    assert logits.grad.flatten().tolist() == pytest.approx([0, 0, 0, 0, 0.75, -0.75], abs=1e-6)


def test_position_loss_one_output_is_binary_cross_entropy():
    logits = torch.tensor([[math.log(3)], [7.0], [0.0]])
    loss, n = position_loss(logits, torch.tensor([0.75, float("nan"), 0.0]))
    # sigmoid(ln 3) = 3/4 against 3/4; sigmoid(0) = 1/2 against 0
    assert n == 2
    assert float(loss) == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) + math.log(2),
                                         abs=1e-6)


def test_position_loss_without_labels_is_zero_and_differentiable():
    logits = torch.zeros(2, 2, requires_grad=True)
    loss, n = position_loss(logits, torch.tensor([float("nan"), float("nan")]))
    loss.backward()
    assert (loss.item(), n) == (0.0, 0)
    assert logits.grad.abs().sum() == 0


# -- learning ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prm_run(marker_files, tmp_path_factory):
    """A PRM trained for 8 steps on the 48 marker traces, evaluated on the 24 held-out ones."""
    out = tmp_path_factory.mktemp("prm") / "model"
    cfg = config(marker_files, out, "lr=2e-2", "max_steps=8", eval=[str(marker_files["eval"])])
    logs: list[str] = []
    return cfg, train(cfg, log=logs.append), logs


def _steps(path) -> list[Step]:
    return [s for t in read_traces(path) for s in t.steps]


def test_prm_learns_the_marker(prm_run, marker_files):
    cfg, result, logs = prm_run
    assert result.eval["auroc"] >= 0.9
    assert result.steps == 8 and result.resumed_from is None
    train_steps, eval_steps = _steps(marker_files["train"]), _steps(marker_files["eval"])
    right = sum(s.labels[0].value == 1 for s in train_steps)
    assert result.train_data["used"] == 48 and result.train_data["labelled"] == len(train_steps)
    assert result.train_data["positive_fraction"] == pytest.approx(right / len(train_steps))
    assert result.eval["eval_positions"] == len(eval_steps) and result.eval["eval_traces"] == 24
    losses = [h["loss"] for h in result.history if "loss" in h]
    assert len(losses) == 8 and result.eval["eval_loss"] < losses[0]
    assert any(line.startswith("train: 48/48 traces used") for line in logs)


def test_orm_trains_and_reports_accuracy(marker_files, tmp_path):
    cfg = config(marker_files, tmp_path / "orm", "kind=orm", "lr=2e-2", "max_steps=4",
                 eval=[str(marker_files["eval"])])
    result = train(cfg, log=lambda *a: None)
    # one position per trace; marker_traces makes every third trace (k = 0, 3, ...) correct
    assert result.train_data["outcome_rules"] == {"outcome": 48}
    assert result.train_data["labelled"] == 48
    assert result.train_data["positive_fraction"] == pytest.approx(16 / 48)
    assert result.eval["eval_positions"] == 24
    # the reported accuracy is the saved model's: threshold its scores by hand
    rm = RewardModel.from_pretrained(str(tmp_path / "orm"))
    assert rm.kind == "orm"
    held = list(read_traces(marker_files["eval"]))
    scores = [s[0] for s in rm.score(held)]
    hits = sum((p >= 0.5) == (t.outcome == "correct") for p, t in zip(scores, held, strict=True))
    assert result.eval["accuracy"] == pytest.approx(hits / 24)


def test_soft_labels_reach_the_loss(marker_files, tmp_path, monkeypatch):
    seen: list[torch.Tensor] = []
    real = _trainer.position_loss

    def spy(logits, targets):
        seen.append(targets.detach().clone())
        return real(logits, targets)

    monkeypatch.setattr(_trainer, "position_loss", spy)
    cfg = config(marker_files, tmp_path / "soft", "soft_labels=true", "label_source=mc_soft", "max_steps=2",
                 train=[str(marker_files["soft"])])
    result = train(cfg, log=lambda *a: None)
    values = [s.labels[0].value for s in _steps(marker_files["soft"])]
    assert result.train_data["positive_fraction"] == pytest.approx(sum(values) / len(values))
    fed = {round(v, 6) for t in seen for v in t.tolist()}
    assert len(seen) == 2 and fed <= {0.0, 0.1, 0.2, 0.3, 0.7, 0.8, 0.9, 1.0}
    assert fed & {0.1, 0.2, 0.3, 0.7, 0.8, 0.9}  # probabilities, not 0/1 verdicts
    # without soft_labels the same labels are binarized at 0.5
    seen.clear()
    train(config(marker_files, tmp_path / "hard", "label_source=mc_soft", "max_steps=1",
                 train=[str(marker_files["soft"])]), log=lambda *a: None)
    assert {v for t in seen for v in t.tolist()} == {0.0, 1.0}


# -- gradient accumulation -------------------------------------------------------------------------------

def test_gradient_accumulation_equals_one_big_batch(marker_files, tmp_path, monkeypatch):
    batches: list[list[str]] = []
    real = RewardModel.collate

    def spy(self, batch):
        batches.append([e.trace_id for e in batch])
        return real(self, batch)

    monkeypatch.setattr(RewardModel, "collate", spy)
    four = [str(marker_files["four"])]
    runs = {}
    for bs, accum in ((4, 1), (2, 2)):
        batches.clear()
        out = tmp_path / f"b{bs}x{accum}"
        train(config(marker_files, out, f"batch_size={bs}", f"grad_accum={accum}", "bucketing=false",
                     "max_steps=1", "lr=1e-2", train=four), log=lambda *a: None)
        runs[bs] = ([len(b) for b in batches], sorted(i for b in batches for i in b), weights(out))
    assert runs[4][0] == [4] and runs[2][0] == [2, 2]
    assert runs[4][1] == runs[2][1] == ["t0", "t1", "t2", "t3"]  # the same traces in the one step
    # Adam's first step moves each weight by lr * g / (|g| + eps): where |g| is near eps it magnifies
    # the float rounding of gradients summed in another order (4 rows vs 2 + 2) by up to lr / eps.
    # Measured: 2.4e-6 (the head applied to the label rows only). A wrong accumulation moves weights ~lr.
    assert max_diff(runs[4][2], runs[2][2]) < 1e-5
    fresh = RewardModel.from_backbone("tiny").model.state_dict()
    assert float((fresh["score.weight"] - runs[4][2]["score.weight"]).abs().max()) > 1e-4  # it trained


# -- resuming ------------------------------------------------------------------------------------------

LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"}


@pytest.mark.parametrize("lora", [None, LORA], ids=["full", "lora"])
def test_resume_continues_exactly(marker_files, tmp_path, monkeypatch, lora):
    """Checkpoints hold the weights (or the LoRA adapter and head), the optimizer and the data position."""
    args = ("lr=2e-2", "max_steps=4", "save_every=2")
    whole = train(config(marker_files, tmp_path / "whole", *args, lora=lora), log=lambda *a: None)

    calls = {"n": 0}
    real = _trainer.position_loss

    def interrupt_third_step(logits, targets):
        calls["n"] += 1
        if calls["n"] == 3:  # one micro-batch per optimizer step: the third step
            raise KeyboardInterrupt
        return real(logits, targets)

    out = tmp_path / "interrupted"
    monkeypatch.setattr(_trainer, "position_loss", interrupt_third_step)
    with pytest.raises(KeyboardInterrupt):
        train(config(marker_files, out, *args, lora=lora), log=lambda *a: None)
    monkeypatch.setattr(_trainer, "position_loss", real)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-2"]
    saved = {p.name for p in (out / "checkpoint-2").iterdir()}
    assert ({"adapter"} if lora else {"model.safetensors", "prmkit_rm.json"}) <= saved
    assert not [n for n in saved if n.endswith((".bin", ".pt", ".pkl"))]  # the optimizer too: safetensors
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert (state["step"], state["epoch"], state["pos"]) == (2, 0, 2)

    # a changed key setting is refused, every difference listed
    with pytest.raises(PrmkitError) as info:
        train(config(marker_files, out, "lr=1e-2", "max_steps=4", "save_every=2", "seed=1", lora=lora),
              log=lambda *a: None)
    assert "lr: checkpoint has 0.02, config has 0.01" in str(info.value)
    assert "seed: checkpoint has 0, config has 1" in str(info.value)

    logs: list[str] = []
    resumed = train(config(marker_files, out, *args, lora=lora), log=logs.append)
    assert resumed.resumed_from == str(out / "checkpoint-2")
    assert any(line.startswith(f"resuming from {out / 'checkpoint-2'} (step 2)") for line in logs)
    assert resumed.steps == 4
    assert max_diff(weights(tmp_path / "whole"), weights(out)) < 1e-6
    assert [h["step"] for h in resumed.history] == [h["step"] for h in whole.history] == [1, 2, 3, 4]
    assert [h["loss"] for h in resumed.history] == pytest.approx([h["loss"] for h in whole.history], abs=1e-6)
    assert not list(out.glob("checkpoint-*"))  # a finished run leaves only the final model


# -- checkpoints -----------------------------------------------------------------------------------------

def _plain_transformers_scores(folder, traces) -> list[list[float]]:
    """P(correct) per step with plain transformers: the ``prmkit`` convention written by hand
    (problem, newline, every step followed by a newline), read at each step's newline."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForTokenClassification.from_pretrained(folder).eval()
    out = []
    for t in traces:
        text = t.problem.text + "\n" + "".join(s.text + "\n" for s in t.steps)
        ids = tok(text, return_tensors="pt")["input_ids"]
        newlines = [i for i, c in enumerate(ids[0].tolist()) if c == tok.convert_tokens_to_ids("\n")][1:]
        assert len(newlines) == len(t.steps)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0]
        out.append(torch.softmax(logits[newlines], dim=-1)[:, 1].tolist())
    return out


def test_final_folder_is_plain_transformers(prm_run, marker_files):
    cfg, result, _ = prm_run
    folder = result.output_dir
    from pathlib import Path

    names = {p.name for p in Path(folder).iterdir()}
    assert {"model.safetensors", "config.json", "prmkit_rm.json", "train_config.yaml",
            "metrics.jsonl"} <= names
    assert not [n for n in names if n.endswith((".bin", ".pt", ".pth", ".pkl", ".pickle"))]
    assert not [n for n in names if n.startswith("checkpoint-")]
    info = json.loads((Path(folder) / "prmkit_rm.json").read_text())
    assert (info["kind"], info["convention"]["name"], info["steps"], info["processes"]) == ("prm", "prmkit", 8, 1)
    assert load_config(str(Path(folder) / "train_config.yaml")) == cfg

    held = list(read_traces(marker_files["eval"]))
    plain = _plain_transformers_scores(folder, held)
    rm = RewardModel.from_pretrained(folder)
    ours = rm.score(held)
    assert [len(s) for s in plain] == [len(t.steps) for t in held]
    for a, b in zip(plain, ours, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    # and the saved model is the one that was evaluated in training
    reloaded = evaluate_encoded(rm, encode_traces(rm, held))
    assert reloaded["eval_loss"] == pytest.approx(result.eval["eval_loss"], abs=1e-5)
    assert reloaded["auroc"] == result.eval["auroc"]


def test_lora_run_saves_merged_weights(marker_files, tmp_path, monkeypatch):
    held = list(read_traces(marker_files["eval"]))[:8]
    at_eval: dict[str, object] = {}
    real = _trainer.evaluate_encoded

    def spy(rm, encoded, **kw):  # the in-memory (unmerged LoRA) model at the final evaluation
        at_eval["lora"] = any("lora_" in n for n, _ in rm.model.named_parameters())
        at_eval["scores"] = rm.score(held)
        return real(rm, encoded, **kw)

    monkeypatch.setattr(_trainer, "evaluate_encoded", spy)
    out = tmp_path / "lora"
    cfg = config(marker_files, out, "lr=2e-2", "max_steps=3", "eval_fraction=0.2",
                 lora=LORA)
    result = train(cfg, log=lambda *a: None)
    assert at_eval["lora"] is True and result.eval is not None

    names = {p.name for p in out.iterdir()}
    assert not {"adapter_config.json", "adapter_model.safetensors"} & names
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert not [k for k in keys if "lora" in k or "modules_to_save" in k or "base_layer" in k]

    plain = _plain_transformers_scores(out, held)
    reloaded = RewardModel.from_pretrained(str(out)).score(held)
    for a, b, c in zip(plain, reloaded, at_eval["scores"], strict=True):
        assert a == pytest.approx(c, abs=1e-5) and b == pytest.approx(c, abs=1e-5)

    # the adapters were merged into the linear layers; the embeddings (not adapted) are untouched
    base = RewardModel.from_backbone("tiny").model.state_dict()
    saved = weights(out)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert float((saved[q] - base[q]).abs().max()) > 1e-6
    assert torch.equal(saved["model.embed_tokens.weight"], base["model.embed_tokens.weight"])



def test_a_diverged_lora_run_says_so_and_saves_no_model(marker_files, tmp_path):
    """A learning rate of 1e30 makes the adapter's product overflow: the merge (into a copy of each base
    weight) finds weights that are not finite, and the run ends with that error instead of saving them."""
    out = tmp_path / "diverged"
    cfg = config(marker_files, out, "lr=1e30", "max_steps=2", "save_every=0", lora=LORA)
    with pytest.raises(PrmkitError, match="not finite .NaN or inf.: the run diverged"):
        train(cfg, log=lambda *a: None)
    assert not (out / "model.safetensors").exists() and not (out / "prmkit_rm.json").exists()


# -- data accounting -------------------------------------------------------------------------------------

def _t(tid, steps, labels=None, problem="q?", **kw) -> Trace:
    labels = labels if labels is not None else [1] * len(steps)
    return Trace(tid, Problem(problem), [Step(s, labels=[StepLabel(v)] if v is not None else [])
                                         for s, v in zip(steps, labels, strict=True)], **kw)


def test_rejected_and_truncated_traces_are_counted():
    # character tokenizer, no special tokens: "q?\n" is 3 tokens, "1+1=2\n" 6, so max_length=16 keeps
    # two such steps (their newlines at 8 and 14); the third newline would be at 20
    rm = RewardModel.from_backbone("tiny", max_length=16)
    step = "1+1=2"
    traces = [
        _t("ok", [step, step]),
        _t("cut", [step, step, step, step], [1, -1, 1, -1]),
        _t("unlabelled", [step, step], [None, None]),
        _t("late-label", [step, step, step], [None, None, 1]),
        _t("long-problem", [step], problem="x" * 20),
        Trace("empty", Problem("q?"), []),
    ]
    report = DataReport()
    encoded = encode_traces(rm, traces, report=report)
    assert [e.trace_id for e in encoded] == ["ok", "cut"]
    assert encoded[1].targets == [1.0, 0.0] and encoded[1].positions == [8, 14]
    assert report.to_dict() == {
        "traces": 6, "used": 2, "positions": 4, "labelled": 4, "positive_fraction": 0.75,
        "dropped_steps": 2, "truncated_traces": 1,
        "rejected": {"no step labels": 1, "every labelled step cut by max_length": 1,
                     "not even the first step fits in max_length=16": 1, "no steps": 1},
        "outcome_rules": {}, "tokens": 30, "settled_by_tool": 0,
    }
    assert "2 trailing steps of 1 traces cut by max_length" in report.summary()

    soft = DataReport()
    assert encode_traces(rm, traces[:1], label_source="mc_soft", report=soft) == []
    assert soft.rejected == {"no step labels from 'mc_soft'": 1}

    with pytest.raises(PrmkitError, match="cannot encode ORM targets for a PRM"):
        encode_traces(rm, traces, kind="orm")
    rm.kind = "orm"
    orm = DataReport()
    encoded = encode_traces(rm, [_t("a", [step], outcome="correct"), _t("b", [step, step], [1, -1]),
                                 _t("c", [step], [None]), _t("d", [step] * 3, outcome="incorrect")],
                            report=orm)
    assert [(e.trace_id, e.targets, e.positions) for e in encoded] == [("a", [1.0], [8]), ("b", [0.0], [14])]
    assert orm.outcome_rules == {"outcome": 1, "steps": 1}
    assert orm.rejected == {"no outcome (auto)": 1,
                            "longer than max_length=16; an ORM needs the whole trace": 1}


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 300), max_size=200), batch_size=st.integers(1, 9),
       seed=st.integers(0, 2**16), bucketing=st.booleans(), window=st.integers(1, 8))
def test_length_batches_cover_every_index_once(lengths, batch_size, seed, bucketing, window):
    batches = length_batches(lengths, batch_size, seed=seed, bucketing=bucketing, window=window)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(1 <= len(b) <= batch_size for b in batches)
    assert len(batches) <= math.ceil(len(lengths) / batch_size) + math.ceil(len(lengths) / (batch_size * window))
    assert batches == length_batches(lengths, batch_size, seed=seed, bucketing=bucketing, window=window)


def test_bucketing_pads_less():
    rng = random.Random(0)
    lengths = [rng.randint(10, 500) for _ in range(256)]

    def padding(batches):
        real = sum(lengths[i] for b in batches for i in b)
        return 1 - real / sum(len(b) * max(lengths[i] for i in b) for b in batches)

    plain = padding(length_batches(lengths, 8, seed=0, bucketing=False))
    bucketed = padding(length_batches(lengths, 8, seed=0, bucketing=True))
    assert plain > 0.3 and bucketed < 0.05  # one window of 64 batches holds all 256: sorted by length
    assert length_batches(lengths, 8, seed=0) != length_batches(lengths, 8, seed=1)


# -- a random sample of the training traces ---------------------------------------------------------------

def test_a_sample_of_the_traces_trains_as_a_file_of_that_sample(marker_files, tmp_path):
    """``sample_traces=N``: N traces drawn with the seed after the held-out split, trained as a file
    holding exactly those traces (in the drawn order) is trained: the same weights."""
    from prmkit.train._data import split_by_problem

    logs: list[str] = []
    sampled = train(config(marker_files, tmp_path / "sampled", "max_steps=2", "batch_size=4", "grad_accum=1",
                           "sample_traces=12", "eval_fraction=0.25"), log=logs.append)
    pool, held = split_by_problem(list(read_traces(marker_files["train"])), 0.25, 0)
    assert held and sampled.train_data["used"] == 12
    assert f"a random sample of 12 of the {len(pool)} training traces (seed 0)" in logs
    picked = random.Random(0).sample(pool, 12)
    assert len({t.id for t in picked} & {t.id for t in held}) == 0
    write_traces(picked, tmp_path / "picked.jsonl")
    by_file = train(config(marker_files, tmp_path / "by_file", "max_steps=2", "batch_size=4", "grad_accum=1",
                           train=[str(tmp_path / "picked.jsonl")]), log=lambda *a: None)
    assert by_file.train_data["used"] == 12
    assert max_diff(weights(tmp_path / "sampled"), weights(tmp_path / "by_file")) == 0.0


def test_a_sample_larger_than_the_corpus_is_refused(marker_files, tmp_path):
    too_many = r"sample_traces: 49 asked for, but there are only 48 training traces"
    with pytest.raises(PrmkitError, match=too_many):
        train(config(marker_files, tmp_path / "m", "max_steps=1", "sample_traces=49"), log=lambda *a: None)
    none = r"sample_traces: must be at least 1 \(or null: every trace\), got 0"
    with pytest.raises(PrmkitError, match=none):
        config(marker_files, tmp_path / "n", "sample_traces=0")
