"""Dense step rewards on the policy's own tokens, whatever tokenizer the PRM uses.

A PRM scores steps, which are character spans of the completion text; the policy is trained on its
own tokens. So the mapping goes through characters: each step's reward is placed on the policy token
that covers the step's last character, and every other token gets 0. The PRM's tokenizer never
enters it, so policy and PRM may tokenize differently (a character tokenizer and a byte-level BPE in
the tests).

Where the policy tokens come from:

- ``token_ids`` given (the ids the policy actually generated, TRL's ``completion_ids``): each token's
  character end is the length of the text decoded from the tokens up to it, so the rewards line up
  with exactly those ids, even where re-tokenizing the text would split it differently;
- otherwise the text is tokenized (``add_special_tokens=False``) with the tokenizer's offset mapping
  (a fast tokenizer).

A step whose last character no token covers (cut off by a length limit) gets no position; two steps
whose last characters fall in one token share it, and their rewards add up (``collisions`` counts
them). Unscored steps (``None``) add nothing.

>>> from prmkit.models import build_char_tokenizer
>>> from prmkit.trace import Step
>>> d = place_step_rewards("ab\\ncd", [Step("ab", span=(0, 2)), Step("cd", span=(3, 5))], [0.5, -1.0],
...                        build_char_tokenizer())
>>> d.rewards, d.positions
([0.0, 0.5, 0.0, 0.0, -1.0], [1, 4])
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.rl._rewards import PRMReward, completion_text
from prmkit.trace import Step

__all__ = ["DenseRewards", "place_step_rewards", "token_char_ends", "DenseStepReward"]


@dataclass
class DenseRewards:
    """Per-token rewards of one completion. ``rewards[k]``: token ``k``'s reward. ``positions[i]``:
    the token that carries step ``i``'s reward (None: no token covers it). ``token_ids``: the tokens
    the rewards are for."""

    rewards: list[float]
    positions: list[int | None]
    token_ids: list[int]
    collisions: int = 0


def token_char_ends(tokenizer: Any, token_ids: Sequence[int]) -> list[int]:
    """The character end of every token in the text ``decode(token_ids)``: the length of the text
    decoded from the tokens up to and including it. A token that ends inside a multi-byte character
    decodes to a replacement character until the character is complete, so ends are clamped to
    never decrease."""
    ends, last = [], 0
    for k in range(1, len(token_ids) + 1):
        text = tokenizer.decode(list(token_ids[:k]), skip_special_tokens=True,
                                clean_up_tokenization_spaces=False)
        last = max(last, len(text.rstrip("\ufffd")))
        ends.append(last)
    return ends


def _spans(text: str, tokenizer: Any, token_ids: Sequence[int] | None
           ) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and their ``[start, end)`` character spans in ``text``."""
    if token_ids is not None:
        ids = list(token_ids)
        ends = token_char_ends(tokenizer, ids)
        decoded = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if decoded != text:
            raise PrmkitError("token_ids do not decode to the completion text "
                              f"({decoded[:40]!r}... vs {text[:40]!r}...)")
        return ids, list(zip([0, *ends[:-1]], ends, strict=True))
    if not getattr(tokenizer, "is_fast", False):
        raise PrmkitError("placing step rewards needs the tokenizer's character offsets: use a fast "
                          "tokenizer, or pass the generated token_ids")
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def place_step_rewards(text: str, steps: Sequence[Step], step_rewards: Sequence[float | None],
                       tokenizer: Any, *, token_ids: Sequence[int] | None = None) -> DenseRewards:
    """Put each step's reward on the policy token covering the step's last character (module docs).
    ``steps`` carry their character ``span`` in ``text`` (as every prmkit splitter makes them)."""
    if len(steps) != len(step_rewards):
        raise PrmkitError(f"{len(step_rewards)} rewards for {len(steps)} steps")
    ids, spans = _spans(text, tokenizer, token_ids)
    rewards = [0.0] * len(ids)
    # Tokens with an empty span (special tokens) cover nothing; the rest are in text order.
    real = [k for k, (a, b) in enumerate(spans) if b > a]
    starts = [spans[k][0] for k in real]
    positions: list[int | None] = []
    used: set[int] = set()
    collisions = 0
    for step, r in zip(steps, step_rewards, strict=True):
        if step.span is None:
            raise PrmkitError(f"step {step.text[:30]!r} has no character span")
        last = step.span[1] - 1
        j = bisect.bisect_right(starts, last) - 1
        pos = real[j] if j >= 0 and spans[real[j]][0] <= last < spans[real[j]][1] else None
        positions.append(pos)
        if pos is None:
            continue
        if pos in used:
            collisions += 1
        used.add(pos)
        if r is not None:
            rewards[pos] += float(r)
    return DenseRewards(rewards, positions, ids, collisions)


class DenseStepReward:
    """Per-token rewards from a PRM for a trainer that takes them (token-level PPO / REINFORCE):
    ``fn(prompts, completions, completion_ids=None, **kwargs) -> list[list[float] | None]``, one
    reward per policy token (see the module docs), None for an unscorable completion.

    ``tokenizer`` is the *policy's*. The step rewards are the PRM's step scores, ``scale * p + shift``
    (``shift=-0.5`` centres them; 0 and 1 by default, so a reward is P(step correct)).
    ``truncation`` and ``stats`` / ``last_stats``: as :class:`PRMReward`'s (an unscored step adds
    nothing under ``score_prefix``).
    """

    def __init__(self, scorer: Any, tokenizer: Any, *, splitter: str = "newline", scale: float = 1.0,
                 shift: float = 0.0, name: str | None = None, truncation: str = "score_prefix",
                 problem_from: str = "last-user", end_markers: Sequence[str] = (), think: str = "keep") -> None:
        if scorer.kind != "prm":
            raise PrmkitError(f"dense step rewards need a PRM; scorer {scorer.name!r} is an "
                              f"{scorer.kind.upper()}")
        self.__name__ = name or "prm_dense"
        self._traces = PRMReward(scorer, splitter=splitter, truncation=truncation, name=self.__name__,
                                 problem_from=problem_from, tokenizer=tokenizer, end_markers=end_markers,
                                 think=think)
        self.tokenizer = tokenizer
        self.scale = scale
        self.shift = shift

    @property
    def stats(self) -> Any:
        """What could not be scored, over every call (see :class:`PRMReward`)."""
        return self._traces.stats

    @property
    def last_stats(self) -> Any:
        """The same for the last call."""
        return self._traces.last_stats

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 completion_ids: Sequence[Sequence[int]] | None = None, **kwargs: Any
                 ) -> list[list[float] | None]:
        traces = self._traces.traces(prompts, completions)
        out: list[list[float] | None] = []
        resolved = self._traces.resolve(traces, kwargs.get("log_metric"))
        for k, (t, scores) in enumerate(zip(traces, resolved, strict=True)):
            if t is None or scores is None:
                out.append(None)
                continue
            step_rewards = [None if s is None else self.scale * s + self.shift for s in scores]
            ids = completion_ids[k] if completion_ids is not None else None
            # The completion as the policy wrote it: the steps' spans point into it (the splitter blanks
            # think tags and end markers in place), and its end markers are policy tokens too.
            out.append(place_step_rewards(completion_text(completions[k]), t.steps, step_rewards, self.tokenizer,
                                          token_ids=ids).rewards)
        return out
