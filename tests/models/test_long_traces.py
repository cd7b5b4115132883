"""``long=``: how a PRM treats steps past ``max_length`` reaches it from every door (the constructor,
``from_pretrained``, the ``model`` scorer's ``-s long=...``), and on real ProcessBench traces with the
default PRM's tokenizer (SmolLM2's) at the default ``max_length`` 512 no step is left unscored.
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
