"""``causal=True`` on an encoder backbone: a step's score cannot read later steps (what a PRM should
see), the setting survives save / load, also in plain transformers, and a backbone that would ignore
it is refused."""

from __future__ import annotations

import pytest
from tiny_tokenizers import wordpiece_tokenizer

from prmkit.errors import PrmkitError
from prmkit.models import RewardModel
from prmkit.trace import Problem, Step, Trace

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

STEPS = ["two plus two is four", "so four", "the answer is four"]


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    tok = wordpiece_tokenizer()
    torch.manual_seed(0)
    # Wide random weights, so that a later token visibly moves an earlier position's output when
    # attention is bidirectional (with the default 0.02 the change is ~1e-6 and proves nothing).
    cfg = transformers.BertConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, hidden_size=32,
                                  intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  max_position_embeddings=512, initializer_range=0.5)
    path = tmp_path_factory.mktemp("bert")
    transformers.BertModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def traces():
    full = Trace(id="full", problem=Problem("two plus two"), steps=[Step(s) for s in STEPS])
    prefix = Trace(id="prefix", problem=Problem("two plus two"), steps=[Step(s) for s in STEPS[:2]])
    return full, prefix


@pytest.mark.parametrize("causal", [False, True])
def test_prefix_scores_do_not_depend_on_later_steps_only_when_causal(bert_folder, causal):
    torch.set_num_threads(1)
    rm = RewardModel.from_backbone(str(bert_folder), causal=causal, seed=1)
    full, prefix = traces()
    a, b = rm.score([full])[0], rm.score([prefix])[0]
    gap = max(abs(x - y) for x, y in zip(a[:2], b, strict=True))
    if causal:
        assert rm.is_causal and gap < 1e-5
    else:
        assert not rm.is_causal and gap > 1e-3  # the bidirectional encoder reads the third step


def test_causal_survives_save_and_load(bert_folder, tmp_path):
    rm = RewardModel.from_backbone(str(bert_folder), causal=True, seed=1)
    full, _ = traces()
    before = rm.score([full])[0]
    rm.save_pretrained(tmp_path / "rm")
    again = RewardModel.from_pretrained(str(tmp_path / "rm"))
    assert again.is_causal
    assert again.score([full])[0] == pytest.approx(before, abs=1e-6)
    plain = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "rm")
    assert plain.config.is_decoder  # plain transformers loads the same causal model


def test_a_backbone_that_ignores_is_decoder_is_refused(tmp_path):
    tok = wordpiece_tokenizer()
    cfg = transformers.DistilBertConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, dim=32,
                                        hidden_dim=64, n_layers=1, n_heads=4, initializer_range=0.5)
    transformers.DistilBertModel(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(PrmkitError, match="attends in both directions"):
        RewardModel.from_backbone(str(tmp_path), causal=True)
