"""``long=``: how a PRM treats steps past ``max_length`` reaches it from every door (the constructor,
``from_pretrained``, the ``model`` scorer's ``-s long=...``), and on real ProcessBench traces with the
default PRM's tokenizer (SmolLM2's) at ``max_length`` 512 (the training length) no step is left unscored.
A ``max_length`` given on load overrides the checkpoint's and reads a long trace whole (the steps
that fitted score as before), up to the model's position limit.
The windows' scores themselves are tested in ``tests/scoring/test_long_traces.py``."""

from __future__ import annotations

import pytest

from prmkit.errors import MissingDependencyError
from prmkit.models import RewardModel, resolve_backbone

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def test_long_reaches_the_model_from_every_door(tiny_folders):
    from prmkit.scoring import PrefixCachingScorer, load_scorer

    path = str(tiny_folders["qwen2.5-math-prm"])
    assert RewardModel.from_pretrained(path, device="cpu", dtype="float32").long == "window"
    assert RewardModel.from_pretrained(path, device="cpu", dtype="float32", long="truncate").long == "truncate"
    scorer = load_scorer("model", path, {"long": "truncate", "device": "cpu", "dtype": "float32"})
    assert isinstance(scorer, PrefixCachingScorer) and scorer.rm.long == "truncate"
    plain = load_scorer("model", path, {"long": "truncate", "cache": False, "device": "cpu"})
    assert isinstance(plain, RewardModel) and plain.long == "truncate"


@pytest.mark.realdata
def test_processbench_math_every_step_scored_at_512(shared_data):
    """The first four ProcessBench MATH traces whose labelled wrong step lies past 512 tokens of the
    ``prmkit`` rendering with SmolLM2's tokenizer: truncating leaves that step unscored, windows score
    every step (math-9's step 6, 414 tokens after a 109-token problem, cut from its start to fit),
    batched as one at a time. A tiny seeded Llama with SmolLM2's vocabulary stands in for the weights."""
    from prmkit.data import read

    try:
        tok = transformers.AutoTokenizer.from_pretrained(resolve_backbone("smollm2"))
    except MissingDependencyError as e:
        pytest.skip(str(e))
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                   num_labels=2, pad_token_id=tok.pad_token_id or 0)
    model = transformers.LlamaForTokenClassification(cfg).eval()
    truncating = RewardModel(model, tok, max_length=512, long="truncate")
    rm = RewardModel(model, tok, max_length=512)
    picked = []
    for t in read(shared_data / "processbench" / "math.json"):
        wrong = t.first_error()
        if wrong is not None and wrong >= 0 and wrong >= len(truncating.encode(t).positions):
            picked.append(t)
        if len(picked) == 4:
            break
    assert len(picked) == 4
    assert all(s[t.first_error()] is None for s, t in zip(truncating.score(picked), picked, strict=True))
    got = rm.score(picked, batch_size=4)
    for s, t in zip(got, picked, strict=True):
        assert len(s) == len(t.steps) and None not in s
        assert s == pytest.approx(rm.score([t])[0], abs=1e-5)
    inputs = [e for t in picked for e in rm.encode_all(t)]
    assert all(len(e) <= 512 for e in inputs)
    assert [(e.trace_id, e.first_step) for e in inputs if e.clipped] == [("math-9", 6)]


CAUSAL = ["qwen2.5-math-prm", "skywork-prm", "math-shepherd", "rlhflow"]
PROBLEM = "Tom has 3 apples and buys 5 more. How many apples does he have?"
STEPS = ["Tom starts with 3 apples.", "He buys 5 more apples.", "So 3 + 5 = 8.", "Check: 8 - 5 = 3.",
         "That matches the start.", "Step 6: 8 apples in all.", "No apples were eaten.", "The answer is 8."]


def _saved_with(tiny_folders, tmp_path, name: str, max_length: int) -> str:
    """A copy of the tiny ``name`` checkpoint whose ``prmkit_rm.json`` says ``max_length`` (as the
    shipped models' says 4096)."""
    import json
    import shutil

    from prmkit.models import RM_CONFIG

    folder = tmp_path / name.replace(".", "_")
    shutil.copytree(tiny_folders[name], folder)
    (folder / RM_CONFIG).write_text(json.dumps({"convention": name, "kind": "prm", "max_length": max_length}))
    return str(folder)


@pytest.mark.parametrize("name", CAUSAL)
def test_a_longer_max_length_on_load_reads_a_long_trace_whole(name, tiny_folders, tmp_path):
    """A checkpoint saved with a max_length that cuts a trace after 3 of its 8 steps: overriding it on
    load (``from_pretrained(max_length=...)``, ``-s max_length=...``) reads the trace in one pass with
    every step scored, and the 3 steps that fitted score as before (a decoder's step reads only what
    comes before it)."""
    from prmkit.scoring import load_scorer
    from prmkit.trace import Problem, Step, Trace

    t = Trace(id="long", problem=Problem(PROBLEM), steps=[Step(s) for s in STEPS])
    probe = RewardModel.from_pretrained(str(tiny_folders[name]), convention=name, device="cpu", dtype="float32")
    verdict = 1 if probe.render(t).label_tokens is not None else 0
    full = probe.encode(t)
    old = full.positions[2] + 1 + verdict
    path = _saved_with(tiny_folders, tmp_path, name, old)

    saved = RewardModel.from_pretrained(path, device="cpu", dtype="float32", long="truncate")
    assert saved.max_length == old
    before = saved.score([t])[0]
    assert before[3:] == [None] * 5 and None not in before[:3]

    rm = RewardModel.from_pretrained(path, device="cpu", dtype="float32", max_length=len(full))
    assert rm.max_length == len(full) and [e.is_window for e in rm.encode_all(t)] == [False]
    got = rm.score([t])[0]
    assert len(got) == len(STEPS) and None not in got
    assert got[:3] == pytest.approx(before[:3], abs=1e-5)
    assert got == pytest.approx(probe.score([t])[0], abs=1e-5)  # the same as with no limit at all

    scorer = load_scorer("model", path, {"max_length": len(full), "device": "cpu", "dtype": "float32"})
    assert scorer.rm.max_length == len(full)
    assert scorer.score([t])[0] == pytest.approx(got, abs=1e-4)


def test_a_max_length_past_the_model_positions_is_refused(tiny_folders):
    """The tiny Qwen2 has 512 positions: 512 loads, 513 is refused with the limit named (past it a
    learned position table has no row, and RoPE positions were never trained)."""
    from prmkit.errors import PrmkitError

    path = str(tiny_folders["qwen2.5-math-prm"])
    assert RewardModel.from_pretrained(path, device="cpu", max_length=512).max_length == 512
    with pytest.raises(PrmkitError, match=r"max_length=513: .* 1 to 512 tokens"):
        RewardModel.from_pretrained(path, device="cpu", max_length=513)


def test_position_limit():
    from types import SimpleNamespace

    from prmkit.models._model import position_limit

    assert position_limit(SimpleNamespace(max_position_embeddings=8192)) == 8192
    assert position_limit(SimpleNamespace(n_positions=1024)) == 1024
    assert position_limit(SimpleNamespace(max_position_embeddings=8192,
                                          rope_parameters={"rope_type": "default", "rope_theta": 1e5})) == 8192
    assert position_limit(SimpleNamespace(max_position_embeddings=32768,
                                          rope_scaling={"rope_type": "yarn", "factor": 4.0})) == 131072
    assert position_limit(SimpleNamespace()) is None and position_limit(None) is None
