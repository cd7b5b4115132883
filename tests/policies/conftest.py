"""A tiny causal LM and tokenizer built locally from a config with a fixed seed (no downloads)."""

from __future__ import annotations

import pytest

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

CORPUS = [
    "Tom has 3 apples and buys 5 more. 3 + 5 = 8. The answer is 8.",
    "She gives away 4: 12 - 4 = 8.\nThe answer is 8.",
    "Step 1: 2 * 3 = 6\nStep 2: 6 + 1 = 7\nThe answer is 7.",
] * 20


def build_tiny_lm(path, seed: int = 0, vocab_size: int = 320):
    """Save a 2-layer Llama with a byte-level BPE tokenizer trained on a few lines to ``path``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    tok.chat_template = CHATML
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(cfg)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    return str(build_tiny_lm(tmp_path_factory.mktemp("tiny_lm")))
