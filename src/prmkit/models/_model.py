"""One scoring interface over every PRM family, and the ORM: ``RewardModel.score(traces)``.

A :class:`RewardModel` is a ``transformers`` model, its tokenizer, a :class:`Convention` (how traces
are written and where scores are read) and a ``kind``:

- ``"prm"``: one probability per step, read at each step's label position;
- ``"orm"``: one probability per trace (outcome supervision), read at the last step's position of the
  same rendering, so PRM and ORM see exactly the same tokens.

A PRM scores every step of a trace longer than ``max_length`` by default (``long="window"``): the
steps past the first ``max_length`` tokens are each scored in a window of their own (see
:meth:`RewardModel.score`).

The class is assembled from its seams, one module each: encoding and windows
(``_encoding.EncodingMixin``), the forward pass (``_forward.ForwardMixin``) and checkpoints
(``_persistence.PersistenceMixin``); this module holds the state they share and the scoring that
runs them in turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prmkit._weights import PICKLE_WEIGHTS, check_safe_weights
from prmkit.errors import PrmkitError
from prmkit.models._conventions import Convention, get_convention
from prmkit.models._encoding import ERRORS, LONG, Encoded, EncodingMixin
from prmkit.models._forward import SCORE_AUTO, ForwardMixin, _torch
from prmkit.models._persistence import RM_CONFIG, PersistenceMixin, _is_encoder, merged_shipped_folder
from prmkit.models._precision import PRECISIONS
from prmkit.provenance import ScoreProvenance
from prmkit.trace import Trace
from prmkit.trace_queries import write_scores

__all__ = ["RewardModel", "Encoded", "RM_CONFIG", "LONG", "ERRORS", "SCORE_AUTO", "load_reward_model",
           "check_safe_weights", "PICKLE_WEIGHTS", "position_limit", "shipped_model_folder"]


class RewardModel(EncodingMixin, ForwardMixin, PersistenceMixin):
    """A PRM or ORM behind one interface: :meth:`score` returns per-step (PRM) or per-trace (ORM)
    probabilities that the step (trace) is correct.

    ``max_length`` bounds every input. ``long`` says what a PRM does with the steps past it:
    ``"window"`` (the default) scores each of them in a window of its own (:meth:`encode_windows`),
    ``"truncate"`` leaves them unscored (``None``). An ORM rejects traces that do not fit either way
    (:class:`AlignmentError`): it judges the whole solution, and a window would show it a shorter one.

    ``precision`` (scoring): ``fp32`` (the default: reproducible scores), ``bf16`` (bfloat16 autocast
    where the hardware has it natively, else fp32; see :attr:`precision_used`) or ``auto``
    (:data:`SCORE_AUTO`: bf16 where native). Only the computation changes, never the weights;
    ``benchmarks/score_precision.py`` measures the speed and the largest step-score difference.
    """

    def __init__(self, model: Any, tokenizer: Any, *, convention: Convention | str | None = None,
                 kind: str = "prm", max_length: int | None = None, name: str | None = None,
                 precision: str = "fp32", long: str = "window") -> None:
        if kind not in ("prm", "orm"):
            raise PrmkitError(f"kind must be 'prm' or 'orm', got {kind!r}")
        if long not in LONG:
            raise PrmkitError(f"long must be one of {', '.join(LONG)}, got {long!r}")
        self.long = long
        if precision not in PRECISIONS:
            raise PrmkitError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.precision = precision
        self.model = model
        self.tokenizer = tokenizer
        self.convention = get_convention(convention)
        self.kind = kind
        limit = position_limit(getattr(model, "config", None))
        if max_length is not None and max_length < 1:
            raise PrmkitError(f"max_length must be at least 1, got {max_length}")
        if max_length is not None and limit is not None and max_length > limit:
            raise PrmkitError(f"max_length={max_length}: this model reads 1 to {limit} tokens (its position "
                              "limit, max_position_embeddings); give a max_length in that range")
        self.max_length = max_length
        self.name = name or getattr(getattr(model, "config", None), "_name_or_path", None) or "reward-model"
        #: The folder (or hub id) :meth:`from_pretrained` read (a shipped model's merged cache for ``"default"``);
        #: None for a model built in memory.
        self.folder: str | None = None
        self.verdict_ids: tuple[int, int] | None = None
        if self.convention.head == "lm_token":
            self.verdict_ids = (self._single_token(self.convention.bad), self._single_token(self.convention.good))
        if getattr(tokenizer, "pad_token_id", None) is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        if getattr(model, "config", None) is not None and getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        self._causal = not (getattr(getattr(model, "config", None), "is_encoder_decoder", False)
                            or _is_encoder(getattr(model, "config", None)))

    @property
    def is_causal(self) -> bool:
        """A decoder: a position sees only what comes before it."""
        return self._causal

    def score(self, traces: Sequence[Trace], *, batch_size: int = 8, progress: bool = False,
              errors: str = "raise") -> list[list[float | None]]:
        """Per trace: P(correct) of every step (PRM), or a one-element list with P(trace correct) (ORM).
        Batches are formed by length; the result does not depend on the batch size (tested).

        A PRM's steps past ``max_length``: with ``long="window"`` (the default) each is scored in a
        window of up to ``max_length`` tokens holding the problem and the steps right before it
        (:meth:`encode_windows`: exact for a decoder while the window holds every earlier step, an
        approximation once it must leave some out, or cut the step itself); with
        ``long="truncate"`` they score ``None``.
        The windows run after every trace's first ``max_length`` tokens, in batches of their own, so
        the scores of traces that fit do not depend on whether long ones came with them.

        ``errors``: what a trace that cannot be encoded does (see :meth:`encode_each`). ``"raise"``
        (the default) raises for the whole call, before any model work; ``"skip"`` gives that trace
        ``None`` in place of its list and scores the others exactly as without it (tested);
        :meth:`score_each` returns the reasons too. ``"raise"`` stays the default because every
        consumer of :class:`~prmkit.scoring.StepScorer` (search, selection, RL rewards, evaluation)
        takes a list per trace: a ``None`` they did not ask for would fail far from its cause.

        >>> rm.score(traces, errors="skip")  # doctest: +SKIP
        [[0.91, 0.12], None, [0.88]]
        """
        if errors != "skip":
            parts, _ = self.encode_each(traces, errors=errors)  # before the model runs: a refusal costs nothing
            return self._score_parts(parts, batch_size, progress)
        return [s for s, _ in self.score_each(traces, batch_size=batch_size, progress=progress)]

    def score_each(self, traces: Sequence[Trace], *, batch_size: int = 8, progress: bool = False
                   ) -> list[tuple[list[float | None] | None, str | None]]:
        """Per trace ``(scores, None)`` as :meth:`score` gives them, or ``(None, reason)`` for one that
        cannot be encoded (the reason names the trace; see :meth:`encode_each`). One call for all:
        the others are batched as if the refused traces were not there, so their scores equal
        scoring them alone. The shape of :meth:`~prmkit.serve.RemoteScorer.score_each`.

        >>> [why for _, why in rm.score_each(traces)]  # doctest: +SKIP
        [None, "trace 'q7': not even the first step fits in max_length=512", None]
        """
        parts, reasons = self.encode_each(traces, errors="skip")
        scores = self._score_parts(parts, batch_size, progress)
        return [(None, why) if why is not None else (s, None) for s, why in zip(scores, reasons, strict=True)]

    def _score_parts(self, parts: Sequence[Sequence[Encoded]], batch_size: int,
                     progress: bool) -> list[list[float | None]]:
        _torch()  # a clear error where torch is missing
        from prmkit._progress import BatchProgress, progress_bar

        whole = [e for p in parts for e in p if not e.is_window]
        windows = [e for p in parts for e in p if e.is_window]
        was_training = self.model.training
        self.model.eval()
        try:
            with (self.precision_used.inference(self.device),
                  progress_bar(len(whole) + len(windows), "scoring", enabled=progress) as advance):
                done = BatchProgress(len(whole) + len(windows), unit="inputs")  # within a stage's batch
                first = self._position_probs(whole, batch_size, advance, done)
                rest = self._position_probs(windows, batch_size, advance, done)
        finally:
            self.model.train(was_training)
        return self.join_scores(parts, first, rest)

    def describe(self) -> dict[str, Any]:
        """Provenance of the scores: model, kind, convention and the precision scoring computes in."""
        return self.score_provenance(self.kind).to_dict()

    def score_provenance(self, key: str) -> ScoreProvenance:
        """The ``score`` provenance entry of scores written under ``key``."""
        return ScoreProvenance(key, model=self.name, kind=self.kind, convention=self.convention.name,
                               precision=self.precision_used.used)

    def score_traces(self, traces: Sequence[Trace], key: str | None = None, **kw: Any) -> list[Trace]:
        """Score and write the results into the traces: ``step.scores[key]`` (PRM) or
        ``trace.meta["scores"][key]`` (ORM); ``key`` defaults to ``kind``. With ``errors="skip"`` a
        trace that cannot be encoded is left as it was (no scores, no provenance entry)."""
        key = key or self.kind
        for t, s in zip(traces, self.score(traces, **kw), strict=True):
            if s is None:
                continue
            write_scores(t, s, kind=self.kind, key=key)
            t.add_provenance(self.score_provenance(key))
        return list(traces)


def position_limit(config: Any) -> int | None:
    """The longest input a model's positions were built for: ``max_position_embeddings`` (GPT-2's
    ``n_positions``), times the RoPE scaling factor where the config sets one; None if it says none."""
    n = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    rope = getattr(config, "rope_scaling", None) or getattr(config, "rope_parameters", None)
    factor = rope.get("factor") if isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) not in (
        None, "default") else None
    return int(n * factor) if isinstance(factor, (int, float)) and factor > 1 else n


def load_reward_model(path: str, **kwargs: Any) -> RewardModel:
    """Shorthand for :meth:`RewardModel.from_pretrained`."""
    return RewardModel.from_pretrained(path, **kwargs)


def shipped_model_folder(name: str) -> str:
    """A folder :meth:`RewardModel.from_pretrained` loads for the shipped model ``name``: its LoRA
    adapter merged into the base its record names, cached under ``$PRMKIT_CACHE/models`` on first
    use (written to a temporary folder, renamed when complete)."""
    return merged_shipped_folder(RewardModel, name)
