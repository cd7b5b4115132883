"""The character tokenizer of the ``tiny`` backbone: decoding gives the text back, before and after
``save_pretrained``, and the ids are the ones trained models were built with."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from prmkit.models import build_char_tokenizer, resolve_backbone
from prmkit.models._backbones import CHARS

TEXTS = ["a b", "ab", "  two  spaces  ", "Step 1: 2+2=4\n\nStep 2: 4×3=12 ки\n", "\t\r\n\x0b\x0c", ""]


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


@pytest.mark.parametrize("text", TEXTS)
def test_decode_gives_the_text_back(tok, text):
    assert tok.decode(tok.encode(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=CHARS, max_size=60))
def test_decode_gives_any_printable_text_back(text):
    tok = build_char_tokenizer()
    assert tok.decode(tok.encode(text)) == text


def test_special_tokens_are_kept_or_skipped(tok):
    ids = tok.encode("<|im_start|>user\na b<|im_end|>\n")
    assert tok.decode(ids) == "<|im_start|>user\na b<|im_end|>\n"
    assert tok.decode(ids, skip_special_tokens=True) == "user\na b\n"
    # a character outside the vocabulary comes back as <unk>, a special like the rest
    assert tok.decode(tok.encode("a€b")) == "a<unk>b"
    assert tok.decode(tok.encode("a€b"), skip_special_tokens=True) == "ab"


def test_the_ids_are_unchanged(tok):
    # the 7 specials, then string.printable in order (digits, letters, punctuation, whitespace), then ки×÷−
    assert tok.encode("0a к\n") == [7, 17, 101, 107, 103]


def test_the_tiny_backbone_folder_decodes_the_same(tmp_path, monkeypatch, tok):
    monkeypatch.setenv("PRMKIT_CACHE", str(tmp_path))
    folder = resolve_backbone("tiny")
    # a new folder name, so caches written with the decoder-less tokenizer are not reused
    assert folder == str(tmp_path / "backbones" / "tiny-llama-char-v2")
    loaded = AutoTokenizer.from_pretrained(folder)
    for text in [*TEXTS, "<|im_start|>a b<|im_end|>"]:
        ids = loaded.encode(text)
        assert ids == tok.encode(text)
        assert loaded.decode(ids) == tok.decode(ids) == text
        assert loaded.decode(ids, skip_special_tokens=True) == tok.decode(ids, skip_special_tokens=True)
