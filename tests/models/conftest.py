"""Tokenizers of the four kinds PRMs ship with, one slow tokenizer, and tiny random-init models that
mimic each published PRM convention: all built locally from a fixed corpus and seed (no downloads).

Tokenizers (session fixture ``tokenizers_by_kind``; all ``PreTrainedTokenizerFast`` except ``slow``):

- ``bpe``: byte-level BPE (GPT-2's pre-tokenizer) with ChatML specials, ``<extra_0>`` and a ChatML
  template; ``qwen2``: the same kind trained with Qwen's pre-tokenizer, as ``transformers.Qwen2Tokenizer``;
- ``wordpiece``: BERT style, lowercasing, ``[CLS] ... [SEP]``;
- ``sentencepiece``: Llama / Mistral style BPE with a Metaspace pre-tokenizer, byte fallback and a
  ``<s>`` BOS added by a TemplateProcessing post-processor;
- ``char``: :func:`prmkit.models.build_char_tokenizer`;
- ``slow``: a pure-Python ``PreTrainedTokenizer`` (greedy longest match over characters and a few
  multi-character pieces, spaces dropped, ``<s>`` first), which :func:`prmkit.models.align` aligns by
  encoding prefixes.

Tiny models: one per published convention in ``TINY`` (architecture class and tokenizer convention of
the published checkpoints, hidden size 32, 2 layers, seeded), saved with its tokenizer in a session
temporary folder; ``tiny_model(name)`` loads it with plain ``transformers``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from tiny_models import build_tiny  # noqa: E402
from tiny_tokenizers import (  # noqa: E402
    SEED,
    gpt2_style_tokenizer,
    qwen_tokenizer,
    sentencepiece_tokenizer,
    wordpiece_tokenizer,
)

from prmkit.models import build_char_tokenizer  # noqa: E402
from prmkit.models._backbones import CHARS  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The models here are tiny: one thread is fastest, and several fight over a shared machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class SlowTokenizer(transformers.PreTrainedTokenizer):
    """A pure-Python tokenizer: greedy longest match over characters and a few longer pieces; spaces
    that no piece covers are dropped (as WordPiece drops whitespace); ``<s>`` goes first."""

    PIECES = (" ки", "\n\n", "12", "Step")
    vocab_files_names: dict = {}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, **kw):
        self._vocab: dict[str, int] = {}
        for t in ("<pad>", "<unk>", "<s>", "</s>", *self.PIECES, *CHARS):
            self._vocab.setdefault(t, len(self._vocab))
        self._inv = {i: t for t, i in self._vocab.items()}
        kw.setdefault("special_tokens_pattern", "bos")
        super().__init__(pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>", **kw)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    def _tokenize(self, text, **kwargs):
        out, i = [], 0
        while i < len(text):
            n = next((len(p) for p in self.PIECES if text.startswith(p, i)), 1)
            if text[i:i + n] != " ":
                out.append(text[i:i + n])
            i += n
        return out

    def _convert_token_to_id(self, token):
        return self._vocab.get(token, self._vocab["<unk>"])

    def _convert_id_to_token(self, index):
        return self._inv.get(index, "<unk>")

    def convert_tokens_to_string(self, tokens):
        return "".join(tokens)


@pytest.fixture(scope="session")
def tokenizers_by_kind():
    """``{"bpe", "qwen2", "wordpiece", "sentencepiece", "char", "slow"}`` -> tokenizer."""
    return {"bpe": gpt2_style_tokenizer(), "qwen2": qwen_tokenizer(), "wordpiece": wordpiece_tokenizer(),
            "sentencepiece": sentencepiece_tokenizer(), "char": build_char_tokenizer(),
            "slow": SlowTokenizer()}


# -- tiny models --------------------------------------------------------------------------------------


#: Convention -> the architecture class of its tiny stand-in.
TINY = {"qwen2.5-math-prm": "Qwen2ForTokenClassification", "skywork-prm": "Qwen2ForTokenClassification",
        "math-shepherd": "MistralForCausalLM", "rlhflow": "LlamaForCausalLM",
        "prmkit": "BertForTokenClassification"}


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory):
    """Convention name -> folder of its tiny model and tokenizer (``save_pretrained``)."""
    out = {}
    for i, name in enumerate(TINY):
        torch.manual_seed(SEED + i)
        model, tok = build_tiny(name)
        path = tmp_path_factory.mktemp(name.replace(".", "_"))
        model.save_pretrained(path)
        tok.save_pretrained(path)
        out[name] = path
    return out


@pytest.fixture(scope="session")
def tiny_model(tiny_folders):
    """``tiny_model(name)`` -> ``(model, tokenizer)`` loaded with plain transformers (eval mode), once per
    session: tests must not change their weights."""
    cache = {}

    def load(name: str):
        if name not in cache:
            path = tiny_folders[name]
            tok = transformers.AutoTokenizer.from_pretrained(path)
            auto = (transformers.AutoModelForCausalLM if TINY[name].endswith("CausalLM")
                    else transformers.AutoModelForTokenClassification)
            model = auto.from_pretrained(path).eval()
            assert type(model).__name__ == TINY[name]
            cache[name] = model, tok
        return cache[name]

    return load
