"""Encoding a trace for a reward model: token ids, the label positions of its steps (of its last step
for an ORM), and for a PRM windows over the steps of a long trace past ``max_length``.

:class:`EncodingMixin` is :class:`~prmkit.models.RewardModel`'s encoding half: everything here turns
traces into :class:`Encoded` inputs, and scores read at those inputs back into per-trace lists; no
model runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.models._align import Aligned, AlignmentError, align
from prmkit.models._conventions import Convention
from prmkit.trace import Trace

#: How a PRM scores the steps of a trace past ``max_length``: ``window`` (the default: each in a
#: window of its own, so every step gets a score) or ``truncate`` (they score ``None``).
#: ProcessBench with SmolLM2's tokenizer at max_length 512 (``benchmarks/long_traces.py``): truncating
#: leaves 26.9% of MATH's labelled first wrong steps unscored (GSM8K: 1.0%); windows leave 1.3% (the
#: problem alone is longer than 512 tokens), for 2.2x the tokens of one pass over each whole trace
#: (1.1x the attention pairs), and score 26% of them approximately (earlier steps left out). Windows
#: are the default because they keep max_length a bound on every input (memory, and the positions
#: the PRM was trained at) and work for any model (an encoder's 512 positions too); a decoder whose
#: positions allow it reads whole traces exactly, for fewer tokens, with a larger max_length
#: (2048: no MATH first wrong step cut).
LONG = ("window", "truncate")

#: What :meth:`RewardModel.score` does with a trace it cannot encode: ``raise`` (the default) or
#: ``skip`` (``None`` for that trace; :meth:`RewardModel.score_each` says why).
ERRORS = ("raise", "skip")


@dataclass
class Encoded:
    """A trace ready for the model: token ids, label positions, and (training) targets per position.

    ``n_steps``: the steps of the trace; ``dropped``: trailing ones ``max_length`` cut from this input.
    ``positions[i]`` labels step ``first_step + i``. A window (:meth:`RewardModel.encode_windows`)
    holds steps ``window_from`` .. ``first_step`` of its trace after the problem and has one position,
    that of step ``first_step``; ``clipped`` characters were cut from the start of a step too long to
    fit even alone with the problem. ``window_from`` is None for a trace read from its start.
    """

    input_ids: list[int]
    positions: list[int]
    targets: list[float | None] | None
    n_steps: int
    dropped: int
    trace_id: str | None = None
    first_step: int = 0
    window_from: int | None = None
    clipped: int = 0

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def is_window(self) -> bool:
        """A window of a long trace: it scores one step the trace's first input does not reach."""
        return self.window_from is not None


class EncodingMixin:
    """:class:`~prmkit.models.RewardModel`'s encoding: :meth:`encode`, :meth:`encode_all`,
    :meth:`encode_windows`, :meth:`encode_each` and :meth:`join_scores`."""

    # What RewardModel sets in __init__ (is_causal: its property).
    tokenizer: Any
    convention: Convention
    kind: str
    max_length: int | None
    long: str
    is_causal: bool

    def _single_token(self, text: str) -> int:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise PrmkitError(f"convention {self.convention.name!r}: verdict {text!r} is {len(ids)} tokens "
                              "for this tokenizer; it must be exactly one")
        return ids[0]

    def render(self, trace: Trace, verdicts: list[bool] | None = None):
        return self.convention.render(trace.problem.text, [s.text for s in trace.steps], self.tokenizer,
                                      verdicts=verdicts)

    def encode(self, trace: Trace, targets: Sequence[float | None] | None = None) -> Encoded:
        """Token ids and label positions of ``trace`` (one per step for a PRM, one for an ORM).

        ``targets`` (training): per step for a PRM, one value for an ORM. Raises
        :class:`AlignmentError` when the trace cannot be aligned.
        """
        verdicts = None
        if self.convention.chat == "turns" and targets is not None and self.kind == "prm":
            verdicts = [t is None or t >= 0.5 for t in targets]  # teacher forcing, as RLHFlow trained
        r = self.render(trace, verdicts)
        a: Aligned = align(r, self.tokenizer, max_length=self.max_length,
                           add_special_tokens=self.convention.add_special_tokens, trace_id=trace.id)
        positions = a.positions
        tg = list(targets) if targets is not None else None
        if self.kind == "orm":
            if a.dropped:
                raise AlignmentError(f"longer than max_length={self.max_length}; an ORM needs the whole "
                                     "trace", trace_id=trace.id)
            positions = positions[-1:]
            if tg is not None and len(tg) != 1:
                raise PrmkitError(f"an ORM takes one target per trace, got {len(tg)}")
        elif tg is not None:
            if len(tg) != a.n_steps:
                raise PrmkitError(f"trace {trace.id!r}: {len(tg)} targets for {a.n_steps} steps")
            tg = tg[:len(positions)]
        ids = a.input_ids
        if self.is_causal:  # nothing after the last label position can change a decoder's scores
            ids = ids[:positions[-1] + 1 + (1 if r.label_tokens is not None else 0)]
        return Encoded(ids, positions, tg, a.n_steps, a.dropped, trace.id)

    def encode_all(self, trace: Trace) -> list[Encoded]:
        """Every input :meth:`score` runs for ``trace``: :meth:`encode`, then (a PRM with
        ``long="window"``) one window per step it cuts (:meth:`encode_windows`). Where not even the
        first step fits with the problem, every step is scored in a window; :class:`AlignmentError`
        only when none can be (the problem alone is too long)."""
        windowed = self.kind == "prm" and self.long == "window" and self.max_length is not None
        try:
            first = self.encode(trace)
        except AlignmentError:
            if not windowed or self._window(trace, 0, 0) is not None:
                raise  # not a matter of length
            windows = self.encode_windows(trace, 0)
            if not windows:
                raise
            return windows
        if not windowed or not first.dropped:
            return [first]
        return [first, *self.encode_windows(trace, first.n_steps - first.dropped)]

    def encode_windows(self, trace: Trace, start: int) -> list[Encoded]:
        """One input per step ``start``, ``start + 1``, ... of ``trace`` (those past ``max_length``):
        the problem, then as many of the steps right before that step as fit in ``max_length``
        tokens, then the step, rendered by the convention as a trace of its own (:attr:`Encoded.is_window`;
        its one position is that step's label position).

        In a decoder a step's score depends only on the problem and the steps up to it, so a window
        that holds every earlier step scores exactly as the whole trace would. A step past
        ``max_length`` never has such a window (the problem and its earlier steps did not fit): its
        window leaves out the earliest steps, and its score is an approximation, that of the same
        solution without them. In an encoder (bidirectional) a step in the first ``max_length`` tokens
        also reads the steps after it, a step in a window does not. A step too long to fit even alone
        with the problem is cut from its start, at a word, to the longest end that fits
        (:attr:`Encoded.clipped`); only where the problem leaves no room at all does it stay ``None``.
        """
        # Token counts of the whole rendering give a first guess at each window's first step; the
        # guess is then checked (and moved) by rendering the window itself.
        full = align(self.render(trace), self.tokenizer, add_special_tokens=self.convention.add_special_tokens,
                     trace_id=trace.id).positions
        out: list[Encoded] = []
        for k in range(start, len(trace.steps)):
            alone = self._window(trace, k, k)
            if alone is None:
                if (clipped := self._clipped(trace, k)) is not None:
                    out.append(clipped)
                continue
            need = len(alone)
            j = next((j for j in range(1, k) if need + full[k - 1] - full[j - 1] <= self.max_length), k)
            w = self._window(trace, j, k)
            while w is None:  # the guess was short: leave out one more step
                j += 1
                w = self._window(trace, j, k)
            while j > 0 and (more := self._window(trace, j - 1, k)) is not None:
                j, w = j - 1, more  # the guess left room: take one more earlier step
            out.append(w)
        return out

    def _clipped(self, trace: Trace, k: int) -> Encoded | None:
        """Step ``k`` alone after the problem, cut from its start at a word to the longest end that
        fits (a binary search: a shorter end never needs more tokens); None if not even its last word
        does."""
        text = trace.steps[k].text
        cuts = [i for i in range(1, len(text)) if text[i - 1].isspace() and not text[i].isspace()]
        cuts = cuts or list(range(1, len(text)))
        lo, hi, best = 0, len(cuts) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            w = self._window(trace, k, k, clip=cuts[mid])
            if w is None:
                lo = mid + 1
            else:
                best, hi = w, mid - 1
        return best

    def _window(self, trace: Trace, j: int, k: int, clip: int = 0) -> Encoded | None:
        """Steps ``j .. k`` of ``trace`` after its problem (step ``k`` without its first ``clip``
        characters), labelled at step ``k`` only; None when that label (and its verdict token) does
        not fit in ``max_length``. Truncation as :func:`align`'s."""
        assert self.max_length is not None
        texts = [s.text for s in trace.steps[j:k + 1]]
        texts[-1] = texts[-1][clip:]
        r = self.convention.render(trace.problem.text, texts, self.tokenizer)
        a = align(r, self.tokenizer, add_special_tokens=self.convention.add_special_tokens, trace_id=trace.id)
        verdict = 1 if r.label_tokens is not None else 0
        last = a.positions[-1]
        if last >= self.max_length - verdict:
            return None
        ids = a.input_ids[:self.max_length]
        if self.is_causal:
            ids = ids[:last + 1 + verdict]
        return Encoded(ids, [last], None, len(trace.steps), 0, trace.id, first_step=k, window_from=j, clipped=clip)

    def join_scores(self, parts: Sequence[Sequence[Encoded]], whole: Sequence[Sequence[float]],
                    windows: Sequence[Sequence[float]]) -> list[list[float | None]]:
        """Per trace its scores, from the inputs :meth:`encode_all` made for it (``parts``) and the
        probabilities at the positions of every input that is not a window (``whole``) and of every
        window (``windows``), each in the order of ``parts``. A trace with no inputs (one
        :meth:`encode_each` refused) gets ``None``."""
        results: list[list[float | None]] = []
        at_whole, at_window = iter(whole), iter(windows)
        for ins in parts:
            if not ins:  # a trace :meth:`encode_each` could not encode: it ran nothing
                results.append(None)  # type: ignore[arg-type]
                continue
            if self.kind == "orm":
                results.append(list(next(at_whole)))
                continue
            scores: list[float | None] = [None] * ins[0].n_steps
            for e in ins:
                for i, p in enumerate(next(at_window if e.is_window else at_whole)):
                    scores[e.first_step + i] = p
            results.append(scores)
        if next(at_whole, None) is not None or next(at_window, None) is not None:
            raise PrmkitError("more scores than inputs")
        return results

    def encode_each(self, traces: Sequence[Trace], *, errors: str = "raise"
                    ) -> tuple[list[list[Encoded]], list[str | None]]:
        """:meth:`encode_all` of every trace, and per trace ``None`` or why it cannot be encoded.

        ``errors="raise"`` raises at the first trace that cannot be encoded, before any model work
        (a :class:`PrmkitError` naming the trace, whatever the tokenizer raised, chained);
        ``"skip"`` gives that trace no inputs (``[]``) and a reason that names it: no steps, the
        problem alone longer than ``max_length`` (an ORM: the trace), a step the tokenizer gives no
        token of its own, text the tokenizer cannot take (a lone surrogate, say).
        """
        if errors not in ERRORS:
            raise PrmkitError(f"errors must be one of {', '.join(map(repr, ERRORS))}, got {errors!r}")
        parts: list[list[Encoded]] = []
        reasons: list[str | None] = []
        for t in traces:
            try:
                parts.append(self.encode_all(t))
                reasons.append(None)
            except Exception as e:  # encoding is per-trace work: whatever it raises is this trace's
                why = _unencodable(t, e)
                if errors == "skip":
                    parts.append([])
                    reasons.append(why)
                elif isinstance(e, AlignmentError) and str(e) == why:
                    raise
                else:
                    raise PrmkitError(why) from e
        return parts, reasons


def _unencodable(trace: Trace, e: Exception) -> str:
    """Why ``trace`` cannot be encoded, naming it: prmkit's own refusals as they read, anything else
    (a tokenizer that cannot take the text) with its type."""
    if isinstance(e, AlignmentError) and e.trace_id is not None:
        return str(e)
    what = str(e) if isinstance(e, PrmkitError) else f"the tokenizer cannot encode it ({type(e).__name__}: {e})"
    return f"trace {trace.id!r}: {what}"
