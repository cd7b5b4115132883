"""Label alignment: one token position per step, for every tokenizer kind (property tests) and by hand.

The properties, for random problems and steps over the four fast tokenizer kinds (byte-level BPE in
GPT-2's and Qwen's pre-tokenizer styles, WordPiece, SentencePiece-style, characters) and a slow one:

- an accepted trace has exactly one position per step, strictly increasing; by offsets, each label
  token lies in its step's own stretch of text (after the previous tag) and ends at or before the end
  of its tag, and it is the last token that starts before that end;
- a tag string inside a step's text creates no extra position;
- ``max_length`` keeps a prefix of the untruncated positions and drops whole trailing steps;
- a rejected trace raises :class:`AlignmentError` naming the step, exactly where some step has no
  token of its own or its last token runs past its tag.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from prmkit.models import AlignmentError, Convention, align, build_char_tokenizer, get_convention

KINDS = ["bpe", "qwen2", "wordpiece", "sentencepiece", "char", "slow"]

#: Plain conventions with each kind of tag: newline, none (the step's own last characters), a space
#: plus a word, a special token; and the two chat conventions where the tokenizer has a template.
PLAIN = {
    "prmkit": get_convention("prmkit"),
    "trl": get_convention("trl"),
    "math-shepherd": get_convention("math-shepherd"),
    "untagged": Convention("untagged", tag="", joiner="\n"),
    "extra_0": Convention("extra_0", tag="<extra_0>"),
}
CHAT = {"qwen2.5-math-prm": get_convention("qwen2.5-math-prm"), "rlhflow": get_convention("rlhflow")}

# Fragments that stress tokenizers: separators and tags inside steps, spaces at either end, digits,
# non-ASCII (×, ки, accents, a byte-fallback euro sign), special-token text.
FRAGMENTS = ["a", "Step", "x", "The answer is", "12", "7", "0.5", "=", "+", "-", ".", "?", " ", "  ",
             "\n", "\n\n", "\t", "×", "ки", " ки", "é", "€", "<extra_0>", "<s>", "[SEP]", "user",
             "\u00a0"]
step_text = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=5).map("".join),
    st.text(min_size=0, max_size=4),
)
problem_text = st.one_of(st.sampled_from(["What is 2 + 3?", "Q", "", " 12 × 3 "]), st.text(max_size=5))

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def conventions_for(tok) -> list[str]:
    return list(PLAIN) + (list(CHAT) if getattr(tok, "chat_template", None) else [])


def lead_of(tok, conv) -> int:
    """How many special tokens the tokenizer puts before the text (BOS / CLS)."""
    if not conv.add_special_tokens:
        return 0
    ids = tok("x", add_special_tokens=True)["input_ids"]
    bare = tok("x", add_special_tokens=False)["input_ids"]
    return next(k for k in range(len(ids)) if ids[k:k + len(bare)] == bare)


def reference(tok, r, add_special_tokens: bool, upto: int | None = None):
    """Ids and (fast tokenizers) character spans of ``r.text[:upto]`` as the model should see them: the
    whole text tokenised at once, or piece by piece where the rendering has pieces."""
    end = len(r.text) if upto is None else upto
    if r.pieces is None:
        chunks, special = [(0, end)], add_special_tokens
    else:
        assert not add_special_tokens  # no registered convention tokenises pieces with them
        chunks, special = [(a, b) for a, b in r.pieces if b <= end], False
    ids, spans = [], []
    for a, b in chunks:
        enc = tok(r.text[a:b], add_special_tokens=special, return_offsets_mapping=tok.is_fast)
        ids += enc["input_ids"]
        if tok.is_fast:
            spans += [(s0 + a, s1 + a) for s0, s1 in enc["offset_mapping"]]
    return ids, spans if tok.is_fast else None


def expected_failure(r, spans) -> int | None:
    """The first step that cannot get a position by offsets (None: every step can): its stretch of
    text, from the previous tag's end to its own tag's end, must hold the start of a token, and the
    last such token must end by the tag's end."""
    prev = 0
    for i, (_, a1) in enumerate(r.anchors):
        own = [t for t, (s0, s1) in enumerate(spans) if s1 > s0 and prev <= s0 < a1]
        if not own or spans[own[-1]][1] > a1:
            return i
        prev = a1
    return None


def check_accepted(r, a, tok, conv) -> None:
    """The invariants of an accepted trace (see the module docstring)."""
    n = len(r.anchors)
    assert a.n_steps == n and a.kept == n and a.dropped == 0
    assert all(p < q for p, q in zip(a.positions, a.positions[1:], strict=False))
    assert 0 <= a.positions[0] and a.positions[-1] < len(a.input_ids)
    ids, spans = reference(tok, r, conv.add_special_tokens)
    assert a.input_ids == ids
    if tok.is_fast:
        prev = 0
        for i, (p, (_, a1)) in enumerate(zip(a.positions, r.anchors, strict=True)):
            s0, s1 = spans[p]
            assert prev <= s0 < a1, f"step {i}: label token {r.text[s0:s1]!r} outside its own text"
            assert s1 <= a1, f"step {i}: label token {r.text[s0:s1]!r} covers text after the tag"
            later = [s for s in spans[p + 1:] if s[1] > s[0]]
            assert not later or later[0][0] >= a1, f"step {i}: a later token starts before the tag ends"
            if r.label_tokens is not None:
                assert spans[p + 1][0] == r.label_tokens[i]
            prev = a1
    else:
        lead = lead_of(tok, conv)
        for p, (_, a1) in zip(a.positions, r.anchors, strict=True):
            assert ids[lead:p + 1] == reference(tok, r, False, upto=a1)[0]


def align_or_error(r, tok, conv, **kw):
    try:
        return align(r, tok, add_special_tokens=conv.add_special_tokens, trace_id="t", **kw), None
    except AlignmentError as e:
        return None, e


# -- properties ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data(), problem=problem_text, steps=st.lists(step_text, min_size=1, max_size=4))
def test_one_position_per_step(tokenizers_by_kind, kind, data, problem, steps):
    tok = tokenizers_by_kind[kind]
    conv = {**PLAIN, **CHAT}[data.draw(st.sampled_from(conventions_for(tok)), label="convention")]
    r = conv.render(problem, steps, tok)
    a, err = align_or_error(r, tok, conv)
    event(f"{conv.name}: {'rejected' if err else 'accepted'}")
    if tok.is_fast and r.label_tokens is None:
        _, spans = reference(tok, r, conv.add_special_tokens)
        assert (err.step if err else None) == expected_failure(r, spans), err
    if err is not None:
        assert err.reason and err.trace_id == "t" and 0 <= err.step < len(steps)
        return
    check_accepted(r, a, tok, conv)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data(), parts=st.lists(st.tuples(step_text, step_text), min_size=1, max_size=3))
def test_tag_inside_a_step_adds_no_position(tokenizers_by_kind, kind, data, parts):
    tok = tokenizers_by_kind[kind]
    name = data.draw(st.sampled_from([c for c in conventions_for(tok) if c not in ("untagged", "rlhflow")]))
    conv = {**PLAIN, **CHAT}[name]
    steps = [f"Step {i}: {a}{conv.tag}{b}." for i, (a, b) in enumerate(parts)]
    r = conv.render("Q", steps, tok)
    assert r.text.count(conv.tag) >= 2 * len(steps)
    a, err = align_or_error(r, tok, conv)
    if err is None:
        check_accepted(r, a, tok, conv)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data(), problem=problem_text, steps=st.lists(step_text, min_size=1, max_size=4))
def test_truncation_keeps_a_prefix_of_whole_steps(tokenizers_by_kind, kind, data, problem, steps):
    tok = tokenizers_by_kind[kind]
    conv = {**PLAIN, **CHAT}[data.draw(st.sampled_from(conventions_for(tok)), label="convention")]
    r = conv.render(problem, steps, tok)
    full, err = align_or_error(r, tok, conv)
    if err is not None:
        return
    m = data.draw(st.integers(1, len(full.input_ids) + 1), label="max_length")
    # The label position must fit, and in LM-token conventions the verdict token after it too.
    fits = [p for p in full.positions if p + (2 if r.label_tokens is not None else 1) <= m]
    cut, err = align_or_error(r, tok, conv, max_length=m)
    if not fits:
        assert err is not None and "max_length" in err.reason
        return
    assert err is None
    assert cut.positions == fits == full.positions[:len(fits)]
    assert cut.n_steps == len(steps) and cut.dropped == len(steps) - len(fits)
    assert cut.input_ids == full.input_ids[:m]


# -- rejections, built deliberately -----------------------------------------------------------------
def test_whitespace_step_under_wordpiece_is_rejected(tokenizers_by_kind):
    tok = tokenizers_by_kind["wordpiece"]
    r = get_convention("prmkit").render("what is 2 + 3?", ["2 + 3 = 5", " \t ", "the answer is 5"])
    with pytest.raises(AlignmentError) as e:
        align(r, tok, trace_id="t7")
    assert e.value.step == 1 and e.value.trace_id == "t7"
    assert "tokenises to nothing" in e.value.reason
    assert "trace 't7' step 1" in str(e.value)


def test_whitespace_step_in_pieces_is_rejected(tokenizers_by_kind):
    tok = tokenizers_by_kind["wordpiece"]
    r = get_convention("trl").render("what is 2 + 3?", ["2 + 3 = 5", " "], tok)
    assert r.pieces is not None
    with pytest.raises(AlignmentError) as e:
        align(r, tok, add_special_tokens=False)
    assert e.value.step == 1 and "tokenises to nothing" in e.value.reason


def test_tag_merging_with_the_next_step_is_rejected(tokenizers_by_kind):
    # The slow tokenizer has a "\n\n" piece: an empty second step puts its newline right after the
    # first step's, the two merge, and the first step's text no longer ends on a token boundary.
    tok = tokenizers_by_kind["slow"]
    r = get_convention("prmkit").render("Q", ["a", ""])
    assert r.text == "Q\na\n\n"
    with pytest.raises(AlignmentError) as e:
        align(r, tok)
    assert e.value.step == 0 and "prefix" in e.value.reason


def test_label_token_running_past_the_tag_is_rejected():
    # Greedy longest match with "\nb" in the vocabulary: step "a"'s tag "\n" merges with the next
    # step's "b", so the step's last token would also cover text after its tag.
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "Q": 1, "\n": 2, "a": 3, "b": 4, "\nb": 5}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(
        models.WordPiece(vocab, unk_token="<unk>", continuing_subword_prefix="")), unk_token="<unk>")
    r = get_convention("prmkit").render("Q", ["a", "b"])
    assert tok.convert_ids_to_tokens(tok(r.text)["input_ids"]) == ["Q", "\n", "a", "\nb", "\n"]
    with pytest.raises(AlignmentError) as e:
        align(r, tok)
    assert e.value.step == 0 and "runs past" in e.value.reason
    # The same steps without a tag (each step's own last character is its anchor) align.
    r = Convention("untagged", tag="", joiner="\n").render("Q", ["a", "b"])
    assert align(r, tok).positions == [2, 3]


def test_nothing_fits(tokenizers_by_kind):
    tok = tokenizers_by_kind["sentencepiece"]  # <s> first: max_length=1 holds no text at all
    r = get_convention("prmkit").render("Q", ["a", "b"])
    with pytest.raises(AlignmentError, match="not even the first step fits"):
        align(r, tok, max_length=1)
    with pytest.raises(AlignmentError, match="no steps"):
        align(type(r)(r.text, []), tok)


# -- by hand ------------------------------------------------------------------------------------------
def test_pieces_follow_trl_tokenize_row(tokenizers_by_kind):
    tok = tokenizers_by_kind["sentencepiece"]
    r = get_convention("trl").render("What is 2 + 3?", ["2 + 3 = 5.", "The answer is 5."], tok)
    assert r.text == "<s>What is 2 + 3?2 + 3 = 5.\nThe answer is 5.\n"
    a = align(r, tok, add_special_tokens=False)
    # TRL: [bos] + prompt ids + each step's ids + the separator's ids, every part encoded alone.
    sep = tok.encode("\n", add_special_tokens=False)
    ids = [tok.bos_token_id] + tok.encode("What is 2 + 3?", add_special_tokens=False)
    at = []
    for step in ["2 + 3 = 5.", "The answer is 5."]:
        ids += tok.encode(step, add_special_tokens=False) + sep
        at.append(len(ids) - 1)
    assert a.input_ids == ids and a.positions == at
    # Encoded alone, the newline gets SentencePiece's dummy prefix, as Llama's does in TRL.
    assert tok.convert_ids_to_tokens(sep) == ["▁", "\n"]
    assert tok.convert_ids_to_tokens(ids[:2]) == ["<s>", "▁What"]


def test_char_tokenizer_positions_by_hand():
    tok = build_char_tokenizer()
    r = get_convention("prmkit").render("ab", ["c", "de"])
    assert r.text == "ab\nc\nde\n" and r.anchors == [(4, 5), (7, 8)]
    # One token per character and no special tokens added: positions are the newlines' indices.
    # Ids: 7 specials, then string.printable ("0".."9" = 7..16, "a" = 17, ...); "\n" is printable[96].
    a = align(r, tok)
    assert a.input_ids == [17, 18, 103, 19, 103, 20, 21, 103]
    assert a.positions == [4, 7] and a.dropped == 0
    cut = align(r, tok, max_length=7)
    assert cut.positions == [4] and cut.dropped == 1 and cut.input_ids == [17, 18, 103, 19, 103, 20, 21]


def test_char_tokenizer_chat_positions_by_hand():
    tok = build_char_tokenizer()
    conv = Convention("qwen-like", chat="assistant", tag="<extra_0>")
    r = conv.render("ab", ["c", "de"], tok)
    assert r.text == ("<|im_start|>user\nab<|im_end|>\n"
                      "<|im_start|>assistant\nc<extra_0>de<extra_0><|im_end|>\n")
    # <|im_start|> u s e r \n a b <|im_end|> \n = 0..9; <|im_start|> = 10, "assistant" = 11..19,
    # "\n" = 20, "c" = 21, <extra_0> = 22, "d" "e" = 23, 24, <extra_0> = 25.
    a = align(r, tok)
    assert a.positions == [22, 25]
    assert a.input_ids[22] == a.input_ids[25] == tok.convert_tokens_to_ids("<extra_0>")
    # The tag inside a step: "c<extra_0>d" then "e" -> ... "\n" = 20, c = 21, <extra_0> = 22, d = 23,
    # <extra_0> = 24, e = 25, <extra_0> = 26. Searching for the tag's id would find three "steps".
    r = conv.render("ab", ["c<extra_0>d", "e"], tok)
    a = align(r, tok)
    assert a.positions == [24, 26]
    tag = tok.convert_tokens_to_ids("<extra_0>")
    assert [i for i, x in enumerate(a.input_ids) if x == tag] == [22, 24, 26]


def test_slow_tokenizer_positions_by_hand(tokenizers_by_kind):
    tok = tokenizers_by_kind["slow"]
    r = get_convention("math-shepherd").render("Q", ["Step 1 ки", "12 = 12"])
    assert r.text == "Q Step 1 ки ки\n12 = 12 ки"
    # <s> Q Step 1 " ки" " ки" \n 12 = 12 " ки"  (spaces outside pieces are dropped)
    #  0  1   2   3   4    5    6  7  8  9   10
    assert tok.convert_ids_to_tokens(tok(r.text)["input_ids"]) == [
        "<s>", "Q", "Step", "1", " ки", " ки", "\n", "12", "=", "12", " ки"]
    assert align(r, tok).positions == [5, 10]
