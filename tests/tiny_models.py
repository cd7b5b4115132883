"""Tiny random-init stand-ins for the published PRM conventions (architecture class and tokenizer
convention of the published checkpoints, hidden size 32, 2 layers), shared by the model tests'
fixtures and the README test. Importable because ``tests/conftest.py`` puts this folder on
``sys.path``.
"""

from __future__ import annotations

from tiny_tokenizers import llama3_tokenizer, qwen_tokenizer, sentencepiece_tokenizer, wordpiece_tokenizer


def _small(positions: int, **kw):
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=positions, **kw)


def build_tiny(name: str, positions: int = 512):
    """(model, tokenizer) of a tiny stand-in for convention ``name``'s published checkpoints, random
    init from torch's current seed (set it first), reading up to ``positions`` tokens."""
    import transformers as T

    if name in ("qwen2.5-math-prm", "skywork-prm"):
        tok = qwen_tokenizer()
        if name == "skywork-prm":
            tok.bos_token = "<|endoftext|>"  # Skywork's prepare_input starts with tokenizer.bos_token
        cfg = T.Qwen2Config(vocab_size=len(tok), num_key_value_heads=2, pad_token_id=tok.pad_token_id,
                            num_labels=2 if name == "qwen2.5-math-prm" else 1, **_small(positions))
        return T.Qwen2ForTokenClassification(cfg), tok
    if name == "math-shepherd":
        tok = sentencepiece_tokenizer()
        cfg = T.MistralConfig(vocab_size=len(tok), num_key_value_heads=2, bos_token_id=tok.bos_token_id,
                              eos_token_id=tok.eos_token_id, tie_word_embeddings=False, **_small(positions))
        return T.MistralForCausalLM(cfg), tok
    if name == "rlhflow":
        tok = llama3_tokenizer()
        cfg = T.LlamaConfig(vocab_size=len(tok), num_key_value_heads=2, bos_token_id=tok.bos_token_id,
                            eos_token_id=tok.eos_token_id, tie_word_embeddings=False, **_small(positions))
        return T.LlamaForCausalLM(cfg), tok
    if name == "prmkit":
        tok = wordpiece_tokenizer()
        cfg = T.BertConfig(vocab_size=len(tok), num_labels=2, pad_token_id=tok.pad_token_id, **_small(positions))
        return T.BertForTokenClassification(cfg), tok
    raise KeyError(name)
