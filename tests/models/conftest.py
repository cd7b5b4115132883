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

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

from prmkit.models import build_char_tokenizer  # noqa: E402
from prmkit.models._backbones import CHARS  # noqa: E402

SEED = 0

CORPUS = [
    "Tom has 3 apples and buys 5 more. 3 + 5 = 8. The answer is 8.",
    "She gives away 4: 12 - 4 = 8.\nThe answer is 8.",
    "Step 1: 2 * 3 = 6 ки\nStep 2: 6 + 1 = 7 ки\nThe answer is 7 ки",
    "Step 1: 4 × 2 = 8 ки\nStep 2: 8 - 5 = 3 ки\nSo the result is 3. ки",
    "What is 12 + 30? Let us add the tens first, then the units. + - + -",
    "Step 1: x = 2  \n\nStep 2: y = x + 1 \n\n\nSo y = 3.\n\n",
] * 10

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

#: Llama-3's chat template without its date/tool preamble (RLHFlow's PRMs use Llama-3.1's); like the
#: original it trims each message.
LLAMA3 = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
          "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The models here are tiny: one thread is fastest, and several fight over a shared machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# -- tokenizers ---------------------------------------------------------------------------------------
def byte_level_bpe(specials: list[str], **kw):
    """GPT-2 / Llama-3 style: byte-level BPE (GPT-2's pre-tokenizer regex) trained on ``CORPUS``."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1, special_tokens=specials,
                            show_progress=False)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, **kw)


def gpt2_style_tokenizer():
    """The ``bpe`` kind: GPT-2 style byte-level BPE with ChatML specials, ``<extra_0>`` and ChatML."""
    tok = byte_level_bpe(QWEN_SPECIALS, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                         additional_special_tokens=["<|im_start|>", "<|im_end|>", "<extra_0>"])
    tok.chat_template = CHATML
    return tok


def qwen_tokenizer():
    """``transformers.Qwen2Tokenizer`` (what ``AutoTokenizer`` gives for a Qwen2 checkpoint) over a
    byte-level BPE trained with Qwen's own pre-tokenizer: digits one by one, punctuation merged with
    the newlines after it (``".\n"`` is one token, as in Qwen's vocabulary), runs of newlines together."""
    from tokenizers import Regex
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=400, min_frequency=1, show_progress=False, special_tokens=QWEN_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    spec = json.loads(tk.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in spec["merges"]]
    tok = transformers.Qwen2Tokenizer(vocab=spec["vocab"], merges=merges, eos_token="<|im_end|>",
                                      additional_special_tokens=QWEN_SPECIALS[1:])
    tok.chat_template = CHATML
    return tok


def llama3_tokenizer():
    tok = byte_level_bpe(LLAMA3_SPECIALS, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                         additional_special_tokens=["<|start_header_id|>", "<|end_header_id|>"])
    tok.chat_template = LLAMA3
    return tok


def wordpiece_tokenizer():
    """BERT style: lowercase WordPiece, ``[CLS] text [SEP]``."""
    from tokenizers import BertWordPieceTokenizer

    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1, show_progress=False,
                           special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tk = wp._tokenizer  # its post-processor is set at construction only when the vocabulary has [CLS]
    tk.post_processor = processors.BertProcessing(("[SEP]", tk.token_to_id("[SEP]")),
                                                  ("[CLS]", tk.token_to_id("[CLS]")))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]")


def sentencepiece_tokenizer():
    """Llama / Mistral style: Metaspace (``▁``) pieces, byte fallback ``<0xNN>``, ``<s>`` added in front.

    Newlines are split off before the Metaspace step so that no piece spans one (as in Mistral's
    vocabulary, where ``ки``, ``+`` and ``-`` after a space are single pieces).
    """
    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("\n", "isolated"),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")])
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    tk.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, min_frequency=1, show_progress=False,
                                                       special_tokens=["<unk>", "<s>", "</s>"]))
    spec = json.loads(tk.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):  # SentencePiece's byte fallback pieces
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    tk = Tokenizer.from_str(json.dumps(spec))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>",
                                                unk_token="<unk>")


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
def _small(**kw):
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=512, **kw)


def _build(name: str):
    """(model, tokenizer) of a tiny stand-in for convention ``name``'s published checkpoints."""
    T = transformers
    if name in ("qwen2.5-math-prm", "skywork-prm"):
        tok = qwen_tokenizer()
        if name == "skywork-prm":
            tok.bos_token = "<|endoftext|>"  # Skywork's prepare_input starts with tokenizer.bos_token
        cfg = T.Qwen2Config(vocab_size=len(tok), num_key_value_heads=2, pad_token_id=tok.pad_token_id,
                            num_labels=2 if name == "qwen2.5-math-prm" else 1, **_small())
        return T.Qwen2ForTokenClassification(cfg), tok
    if name == "math-shepherd":
        tok = sentencepiece_tokenizer()
        cfg = T.MistralConfig(vocab_size=len(tok), num_key_value_heads=2, bos_token_id=tok.bos_token_id,
                              eos_token_id=tok.eos_token_id, tie_word_embeddings=False, **_small())
        return T.MistralForCausalLM(cfg), tok
    if name == "rlhflow":
        tok = llama3_tokenizer()
        cfg = T.LlamaConfig(vocab_size=len(tok), num_key_value_heads=2, bos_token_id=tok.bos_token_id,
                            eos_token_id=tok.eos_token_id, tie_word_embeddings=False, **_small())
        return T.LlamaForCausalLM(cfg), tok
    if name == "prmkit":
        tok = wordpiece_tokenizer()
        cfg = T.BertConfig(vocab_size=len(tok), num_labels=2, pad_token_id=tok.pad_token_id, **_small())
        return T.BertForTokenClassification(cfg), tok
    raise KeyError(name)


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
        model, tok = _build(name)
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
