"""Tokenizer builders shared by the model and scoring tests: byte-level BPE (GPT-2 style and Qwen2's
pre-tokenizer), Llama-3 style BPE with its chat template, WordPiece and SentencePiece-style BPE, all
trained locally on a fixed corpus (no downloads). ``tests/conftest.py`` puts this folder on
``sys.path`` (pytest's importlib mode does not let one conftest import another).
"""

from __future__ import annotations

import json

import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

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

    # The vocabulary is built, not trained: the WordPiece trainer breaks frequency ties in hash order, so
    # its vocabulary (and every id) changed from one process to the next, and with it a random model's
    # outputs (tests/models/test_causal.py's bidirectional gap measured 0.0009 to 0.42). Here: the special
    # tokens, every character alone and as a continuation, then every whole word, each group sorted.
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    probe = BertWordPieceTokenizer(lowercase=True)._tokenizer
    words = {w for text in CORPUS
             for w, _ in probe.pre_tokenizer.pre_tokenize_str(probe.normalizer.normalize_str(text))}
    chars = sorted({c for w in words for c in w})
    tokens = specials + chars + [f"##{c}" for c in chars] + sorted(words - set(chars))
    wp = BertWordPieceTokenizer({t: i for i, t in enumerate(tokens)}, lowercase=True)
    tk = wp._tokenizer  # its post-processor is set at construction, the vocabulary having [CLS]
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
