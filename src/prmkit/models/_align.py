"""From step character spans to token positions: exactly one label position per step, for any tokenizer.

A :class:`Rendered` input is the model's text plus, for every step, an *anchor*: the character span
whose last token carries that step's label (the step tag / separator written after the step, or the
template text in front of a ``+``/``-`` verdict). :func:`align` tokenises the whole text once and picks,
for each step, the last token that starts inside the text up to the anchor's end. The rules:

- the label token must end at or before the anchor's end, so it never covers (and, in a decoder,
  never sees) anything written after the step;
- every step gets its own token (positions strictly increase), so a step that tokenises to nothing
  (whitespace under WordPiece, say) rejects the trace instead of sharing a label with its neighbour;
- positions come from the characters the renderer wrote, never from searching for the separator's
  token id, so a separator string inside a step's own text creates no extra position;
- over-long inputs lose whole trailing steps (counted in :attr:`Aligned.dropped`), never shifted
  labels; when not even the first step fits, the trace is rejected.

Fast tokenizers (``return_offsets_mapping``) are aligned by character offsets; others by encoding each
prefix and checking that it is a prefix of the whole encoding. A rendering cut into ``pieces`` (tokenised
one at a time) is aligned by counting each piece's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prmkit.errors import PrmkitError

__all__ = ["AlignmentError", "Aligned", "Rendered", "align"]


class AlignmentError(PrmkitError):
    """A trace whose steps cannot each get exactly one label position; ``reason`` says why."""

    def __init__(self, reason: str, *, trace_id: str | None = None, step: int | None = None) -> None:
        self.reason = reason
        self.trace_id = trace_id
        self.step = step
        where = f"trace {trace_id!r}" if trace_id is not None else "trace"
        if step is not None:
            where += f" step {step}"
        super().__init__(f"{where}: {reason}")


@dataclass
class Rendered:
    """Model input text and, per step, the ``(start, end)`` character span of its label anchor.

    ``label_tokens`` (LM-token conventions only) gives, per step, the character index of the verdict
    token that the label position predicts (RLHFlow's assistant ``+``); the aligner checks that it is a
    single token right after the position.

    ``pieces`` (optional): ``(start, end)`` character spans that cover the text in order and are
    tokenised one at a time, their ids joined (as Skywork's and TRL's preprocessing do), so no token
    crosses a piece boundary; every anchor must end where a piece ends.
    """

    text: str
    anchors: list[tuple[int, int]]
    label_tokens: list[int] | None = None
    pieces: list[tuple[int, int]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Aligned:
    """Token ids and one label position per kept step.

    ``dropped`` trailing steps did not fit in ``max_length``; ``positions[i]`` belongs to step ``i``.
    """

    input_ids: list[int]
    positions: list[int]
    n_steps: int
    dropped: int = 0

    @property
    def kept(self) -> int:
        return len(self.positions)


def _is_fast(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "is_fast", False))


def _encode(tokenizer: Any, text: str, add_special_tokens: bool, offsets: bool) -> Any:
    return tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=offsets,
                     return_attention_mask=False, verbose=False)


def _positions_by_offsets(r: Rendered, tokenizer: Any, add_special_tokens: bool,
                          trace_id: str | None) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    enc = _encode(tokenizer, r.text, add_special_tokens, True)
    ids = list(enc["input_ids"])
    spans = [tuple(o) for o in enc["offset_mapping"]]
    # Token starts ascend in every tokenizer we know; tokens with an empty span (BOS, CLS, ...) are
    # template tokens that no character maps to and never carry a label.
    positions: list[int] = []
    t = 0
    last = -1
    for i, (a0, a1) in enumerate(r.anchors):
        while t < len(spans) and (spans[t][0] < a1 or spans[t][1] <= spans[t][0]):
            if spans[t][1] > spans[t][0]:
                last = t
            t += 1
        if last < 0 or (positions and last <= positions[-1]):
            raise AlignmentError("no token of its own ends this step (it tokenises to nothing, or "
                                 "merges into the previous step's label token)", trace_id=trace_id, step=i)
        s0, s1 = spans[last]
        if s1 > a1:
            raise AlignmentError(
                f"its label token {r.text[s0:s1]!r} runs past the end of the step tag {r.text[a0:a1]!r} "
                "into the text after it (choose a separator the tokenizer keeps as its own token)",
                trace_id=trace_id, step=i)
        positions.append(last)
    return ids, positions, spans


def _positions_by_prefix(r: Rendered, tokenizer: Any, add_special_tokens: bool,
                         trace_id: str | None) -> tuple[list[int], list[int]]:
    ids = list(_encode(tokenizer, r.text, add_special_tokens, False)["input_ids"])
    bare = list(_encode(tokenizer, r.text, False, False)["input_ids"])
    lead = next((k for k in range(len(ids) - len(bare) + 1) if ids[k:k + len(bare)] == bare), None)
    if lead is None:
        raise AlignmentError("the tokenizer's special tokens do not wrap the text; cannot align",
                             trace_id=trace_id)
    positions: list[int] = []
    for i, (_, a1) in enumerate(r.anchors):
        prefix = list(_encode(tokenizer, r.text[:a1], False, False)["input_ids"])
        if not prefix or bare[:len(prefix)] != prefix:
            raise AlignmentError("the text up to this step's tag does not tokenise to a prefix of the "
                                 "whole input (the tag merges with what follows)", trace_id=trace_id, step=i)
        pos = lead + len(prefix) - 1
        if positions and pos <= positions[-1]:
            raise AlignmentError("no token of its own ends this step", trace_id=trace_id, step=i)
        positions.append(pos)
    return ids, positions


def _positions_by_pieces(r: Rendered, tokenizer: Any, add_special_tokens: bool,
                         trace_id: str | None) -> tuple[list[int], list[int]]:
    assert r.pieces is not None
    ids: list[int] = []
    upto: dict[int, int] = {}  # character end of a piece -> number of tokens through it
    for s0, s1 in r.pieces:
        ids += list(_encode(tokenizer, r.text[s0:s1], False, False)["input_ids"])
        upto[s1] = len(ids)
    lead = 0
    if add_special_tokens:  # wrap the joined ids the way the tokenizer wraps any text
        full = list(_encode(tokenizer, "a", True, False)["input_ids"])
        bare = list(_encode(tokenizer, "a", False, False)["input_ids"])
        lead = next((k for k in range(len(full) - len(bare) + 1)
                     if bare and full[k:k + len(bare)] == bare), -1)
        if lead < 0:
            raise AlignmentError("the tokenizer's special tokens do not wrap the text; cannot align",
                                 trace_id=trace_id)
        ids = full[:lead] + ids + full[lead + len(bare):]
    positions: list[int] = []
    for i, (_, a1) in enumerate(r.anchors):
        if a1 not in upto:
            raise AlignmentError("its tag does not end a piece of the rendering", trace_id=trace_id, step=i)
        pos = lead + upto[a1] - 1
        if pos < lead or (positions and pos <= positions[-1]):
            raise AlignmentError("no token of its own ends this step (it tokenises to nothing)",
                                 trace_id=trace_id, step=i)
        positions.append(pos)
    return ids, positions


def align(r: Rendered, tokenizer: Any, *, max_length: int | None = None, add_special_tokens: bool = True,
          trace_id: str | None = None) -> Aligned:
    """Tokenise ``r.text`` and return one label position per step (see the module docstring).

    Raises :class:`AlignmentError` when a step cannot get a position of its own, or when not even
    the first step fits in ``max_length``.
    """
    if not r.anchors:
        raise AlignmentError("it has no steps", trace_id=trace_id)
    spans: list[tuple[int, int]] | None = None
    if r.pieces is not None:
        ids, positions = _positions_by_pieces(r, tokenizer, add_special_tokens, trace_id)
    elif _is_fast(tokenizer):
        ids, positions, spans = _positions_by_offsets(r, tokenizer, add_special_tokens, trace_id)
    else:
        ids, positions = _positions_by_prefix(r, tokenizer, add_special_tokens, trace_id)
    if r.label_tokens is not None:
        _check_label_tokens(r, ids, positions, spans, trace_id)
    n = len(positions)
    if max_length is not None and len(ids) > max_length:
        limit = max_length - (1 if r.label_tokens is not None else 0)  # keep the verdict token too
        positions = [p for p in positions if p < limit]
        if not positions:
            raise AlignmentError(f"not even the first step fits in max_length={max_length}",
                                 trace_id=trace_id)
        ids = ids[:max_length]
    return Aligned(input_ids=ids, positions=positions, n_steps=n, dropped=n - len(positions))


def _check_label_tokens(r: Rendered, ids: list[int], positions: list[int],
                        spans: list[tuple[int, int]] | None, trace_id: str | None) -> None:
    """LM-token conventions: the token right after each position must start at the verdict.

    (Without offsets the prefix check above already proved a token boundary at the anchor's end,
    which renderers put right before the verdict.)
    """
    assert r.label_tokens is not None
    for i, (pos, c) in enumerate(zip(positions, r.label_tokens, strict=True)):
        if pos + 1 >= len(ids):
            raise AlignmentError("no verdict token follows the label position", trace_id=trace_id, step=i)
        if spans is not None and spans[pos + 1][0] != c:
            s0, s1 = spans[pos + 1]
            raise AlignmentError(f"the verdict at character {c} is not the token after the label "
                                 f"position (that token is {r.text[s0:s1]!r})", trace_id=trace_id, step=i)
