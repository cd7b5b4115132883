"""One scoring interface over every PRM family, and the ORM: ``RewardModel.score(traces)``.

A :class:`RewardModel` is a ``transformers`` model, its tokenizer, a :class:`Convention` (how traces
are written and where scores are read) and a ``kind``:

- ``"prm"``: one probability per step, read at each step's label position;
- ``"orm"``: one probability per trace (outcome supervision), read at the last step's position of the
  same rendering, so PRM and ORM see exactly the same tokens.

A PRM scores every step of a trace longer than ``max_length`` by default (``long="window"``): the
steps past the first ``max_length`` tokens are each scored in a window of their own (see
:meth:`RewardModel.score`).

Checkpoints are plain ``save_pretrained`` folders (safetensors) that ``transformers`` loads without
prmkit (``AutoModelForTokenClassification`` for classifier heads, ``AutoModelForCausalLM`` for
LM-token heads); ``prmkit_rm.json`` beside them records the convention and kind. Only safetensors
weights are read: a folder whose weights are pickle files only (``pytorch_model.bin``, ``*.pt``, ...)
is refused unless ``allow_pickle=True`` (``--allow-pickle``), since unpickling can run any code.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prmkit._jsonio import publish_into
from prmkit._weights import PICKLE_WEIGHTS, check_safe_weights
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.models._align import Aligned, AlignmentError, align
from prmkit.models._conventions import Convention, get_convention
from prmkit.models._precision import PRECISIONS, Precision, resolve_precision
from prmkit.models._shipped import SHIPPED_MODELS, is_complete, merged_cache_folder, publish, shipped_asset
from prmkit.provenance import ScoreProvenance, TrainProvenance
from prmkit.trace import Trace
from prmkit.traces import write_scores

__all__ = ["RewardModel", "Encoded", "RM_CONFIG", "LONG", "ERRORS", "load_reward_model",
           "check_safe_weights", "PICKLE_WEIGHTS"]

#: The file in a checkpoint folder that tells prmkit how to use the model (transformers ignores it).
RM_CONFIG = "prmkit_rm.json"

#: What scoring's ``precision="auto"`` computes in where bf16 is native. Scoring's default stays
#: ``fp32``: bf16 scored 1.9x faster on SmolLM2 but moved step scores by up to 0.004 and breaks the
#: invariants scores are tested on (cached = plain and batched = alone within 1e-4), see
#: ``benchmarks/score_precision.py``.
SCORE_AUTO = "bf16"

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


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "hf", "reward models") from None
    return torch


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


class RewardModel:
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

    # -- construction ---------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path: str, *, convention: Convention | str | dict | None = None,
                        kind: str | None = None, device: str | None = None, dtype: str | None = None,
                        trust_remote_code: bool = False, max_length: int | None = None,
                        precision: str = "fp32", long: str = "window",
                        allow_pickle: bool = False) -> RewardModel:
        """Load a checkpoint (prmkit's, or a published PRM with ``convention=`` its registered name).

        A folder with ``prmkit_rm.json`` brings its own convention, kind and max length; arguments
        override them. ``max_length`` may be anything up to the model's position limit
        (``max_position_embeddings``: 8192 for SmolLM2, so the shipped models too; a larger value is
        refused). A longer one reads long traces whole in one pass instead of in windows (for fewer
        tokens, see ``benchmarks/long_traces.py``); the steps that fit either way score the same (a
        decoder), a trace that fits either way costs the same, and the memory of the longest batch
        grows with the longest trace. ``long``: what a PRM does past
        ``max_length`` (see the class). On the command line: ``-s max_length=4096``.
        ``path`` may also name a shipped model (``default``, ``default-orm``: :data:`SHIPPED_MODELS`).
        ``allow_pickle``: also read pickle weight files (``pytorch_model.bin``, ``*.pt``, ``*.pth``,
        ``*.ckpt``) where a folder has no safetensors; only for a checkpoint you trust.

        >>> rm = RewardModel.from_pretrained("default", max_length=4096)  # doctest: +SKIP
        """
        from prmkit.models._backbones import resolve_backbone

        path = shipped_model_folder(path) if path in SHIPPED_MODELS else resolve_backbone(path)
        saved: dict[str, Any] = {}
        cfg_file = Path(path) / RM_CONFIG
        if cfg_file.is_file():
            saved = json.loads(cfg_file.read_text())
        conv = get_convention(convention if convention is not None else saved.get("convention"))
        kind = kind or saved.get("kind", "prm")
        max_length = max_length or saved.get("max_length")
        model, tok = _load(path, conv, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
        rm = cls(model, tok, convention=conv, kind=kind, max_length=max_length, name=saved.get("name", path),
                 precision=precision, long=long)
        rm.folder = str(path)
        return rm

    @classmethod
    def from_backbone(cls, backbone: str, *, convention: Convention | str | dict | None = None,
                      kind: str = "prm", num_labels: int | None = None, device: str | None = None,
                      dtype: str | None = None, trust_remote_code: bool = False,
                      max_length: int | None = None, seed: int = 0,
                      head_init: str = "random", causal: bool = False, precision: str = "fp32",
                      allow_pickle: bool = False) -> RewardModel:
        """A new reward model on a pretrained backbone (a fresh head for ``classifier`` conventions),
        ready to train. ``backbone`` is a path, hub id or one of ``smollm2``, ``minilm``, ``tiny``.

        ``causal``: an encoder backbone (BERT-like) attends only to earlier tokens (its config's
        ``is_decoder``), so a step's score cannot read later steps or the final answer — what a PRM
        should see. It is saved in the checkpoint's ``config.json``, so plain ``transformers`` loads
        the same causal model. Refused for an encoder that ignores the setting (checked by a forward
        pass); a decoder is causal already. ``allow_pickle``: as in :meth:`from_pretrained`."""
        from prmkit.models._backbones import resolve_backbone

        torch = _torch()
        conv = get_convention(convention)
        path = resolve_backbone(backbone)
        torch.manual_seed(seed)  # anything a backbone initialises at random
        model, tok = _load(path, conv, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                           num_labels=num_labels or conv.num_labels or 2, causal=causal,
                           allow_pickle=allow_pickle)
        if causal and getattr(model.config, "model_type", None) in (_masked_lm_types() or ()):
            _check_causal(model, path)
        if head_init not in ("random", "zero"):
            raise PrmkitError(f"head_init must be 'random' or 'zero', got {head_init!r}")
        if head_init == "zero" and conv.head == "classifier" and not _has_trained_head(path):
            _zero_head(model)
        return cls(model, tok, convention=conv, kind=kind, max_length=max_length, name=backbone,
                   precision=precision)

    def _single_token(self, text: str) -> int:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise PrmkitError(f"convention {self.convention.name!r}: verdict {text!r} is {len(ids)} tokens "
                              "for this tokenizer; it must be exactly one")
        return ids[0]

    # -- encoding -------------------------------------------------------------------------------------
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

    @property
    def is_causal(self) -> bool:
        """A decoder: a position sees only what comes before it."""
        return self._causal

    # -- forward --------------------------------------------------------------------------------------
    @property
    def device(self):
        return next(self.model.parameters()).device

    @property
    def precision_used(self) -> Precision:
        """What :meth:`score` computes in on this model's device (``precision`` resolved)."""
        return resolve_precision(self.precision, self.device, auto=SCORE_AUTO, shape=self.compute_shape())

    def compute_shape(self) -> tuple[int, int, int] | None:
        """``(rows, hidden, intermediate)`` of this backbone's products, for ``auto``'s probe
        (:func:`~prmkit.policies.choose_compute`); None where the config does not say."""
        cfg = getattr(self.model, "config", None)
        hidden = getattr(cfg, "hidden_size", None)
        if not isinstance(hidden, int):
            return None
        inter = getattr(cfg, "intermediate_size", None)
        return (64, hidden, inter if isinstance(inter, int) else 4 * hidden)

    def collate(self, batch: Sequence[Encoded]) -> dict[str, Any]:
        """Right-padded tensors plus the flat (row, position) index of every label position."""
        torch = _torch()
        width = max(len(e) for e in batch)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        rows, cols, targets = [], [], []
        for i, e in enumerate(batch):
            ids[i, :len(e)] = torch.tensor(e.input_ids)
            mask[i, :len(e)] = 1
            rows += [i] * len(e.positions)
            cols += e.positions
            if e.targets is not None:
                targets += [float("nan") if t is None else float(t) for t in e.targets]
        out = {"input_ids": ids, "attention_mask": mask, "rows": torch.tensor(rows, dtype=torch.long),
               "cols": torch.tensor(cols, dtype=torch.long)}
        if targets:
            out["targets"] = torch.tensor(targets, dtype=torch.float32)
        return out

    def position_logits(self, input_ids, attention_mask, rows, cols, *, gather_first: bool = True):
        """Logits at the label positions: ``[N, 2]`` (class 1 = correct) or ``[N, 1]`` (sigmoid).

        Inputs are right-padded (:meth:`collate`); a decoder then needs no padding mask, since no real
        token attends to a later (pad) one, and the plain causal attention kernel is faster.

        ``gather_first`` (the default): run the backbone, take its hidden states at the label
        positions, and apply the head to those rows only — for an ``lm_token`` convention only the two
        verdict tokens' columns of the output embedding. The same numbers as the model's own forward
        pass with the head at every position (``gather_first=False``; tested, logits and gradients),
        without the work on unlabelled positions. Models whose token-classification forward is not
        backbone -> dropout -> head (see :meth:`_classifier_parts`) always take the full path.
        """
        torch = _torch()
        if self.is_causal:
            attention_mask = None
        # The head's few rows run outside autocast, in the weights' own type: bf16 would round the
        # hidden states to 8 bits of mantissa right before the scores, for no measurable time.
        exact = torch.autocast(device_type=input_ids.device.type, enabled=False)
        if self.verdict_ids is not None:
            h = self._hidden(input_ids, attention_mask)[rows, cols]
            out_emb = self.model.get_output_embeddings()
            idx = list(self.verdict_ids)
            with exact:
                logits = h.to(out_emb.weight.dtype) @ out_emb.weight[idx].T
                if getattr(out_emb, "bias", None) is not None:
                    logits = logits + out_emb.bias[idx]
            return logits
        parts = self._classifier_parts() if gather_first else None
        if parts is not None:
            dropout, head = parts
            h = self._hidden(input_ids, attention_mask)[rows, cols]
            with exact:
                return head(dropout(h.to(next(head.parameters()).dtype)))
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        logits = out.logits if hasattr(out, "logits") else out[0]
        return logits[rows, cols]

    def _hidden(self, input_ids, attention_mask):
        """The backbone's last hidden states; a decoder builds no KV cache (nothing reuses it here)."""
        backbone = getattr(self.model, self.model.base_model_prefix)
        kw = {"use_cache": False} if _takes(backbone, "use_cache") else {}
        return backbone(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state

    def _classifier_parts(self):
        """``(dropout, head)`` of a token classifier whose forward is backbone -> dropout -> head
        (transformers' generic one, BERT's), recognised by its class name and exactly those three
        children; None for anything else (remote code, a head with extra layers, a value head)."""
        model = self.model
        torch = _torch()
        if not type(model).__name__.endswith("ForTokenClassification"):
            return None
        children = dict(model.named_children())
        prefix = getattr(model, "base_model_prefix", None)
        head = next((n for n in ("score", "classifier") if n in children), None)
        if head is None or set(children) != {prefix, "dropout", head}:
            return None
        if not isinstance(children["dropout"], torch.nn.Dropout):
            return None
        return children["dropout"], children[head]

    @staticmethod
    def probabilities(logits):
        """P(correct) from position logits (softmax class 1, or sigmoid of a single output)."""
        torch = _torch()
        if logits.shape[-1] == 1:
            return torch.sigmoid(logits[:, 0].float())
        return torch.softmax(logits.float(), dim=-1)[:, 1]

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

    def _position_probs(self, encoded: Sequence[Encoded], batch_size: int, advance: Any,
                        done: Any = None) -> list[list[float]]:
        """P(correct) at every position of every input: length-sorted, right-padded batches."""
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out: list[list[float]] = [[] for _ in encoded]
        dev = self.device
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            batch = self.collate([encoded[i] for i in idx])
            p = self.probabilities(self.position_logits(
                batch["input_ids"].to(dev), batch["attention_mask"].to(dev),
                batch["rows"].to(dev), batch["cols"].to(dev))).tolist()
            at = 0
            for i in idx:
                k = len(encoded[i].positions)
                out[i] = p[at:at + k]
                at += k
            advance(len(idx))
            if done is not None:
                done.add(len(idx))
        return out

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

    # -- saving ---------------------------------------------------------------------------------------
    def save_pretrained(self, path: str | os.PathLike, *, record: TrainProvenance | None = None) -> None:
        """A plain transformers folder (safetensors) plus ``prmkit_rm.json``: the model's kind,
        convention, max_length and name, with what ``record`` adds (the trainer's config and steps)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written into a staging folder beside ``path``, then moved in with ``prmkit_rm.json`` last:
        # a failure (a full disk) leaves what ``path`` held as it was.
        stage = path.with_name(f".tmp-{path.name}-{os.getpid()}")
        shutil.rmtree(stage, ignore_errors=True)
        try:
            stage.mkdir()
            with _quiet_transformers():
                self.model.save_pretrained(stage)
                self.tokenizer.save_pretrained(stage)
            info = replace(record or TrainProvenance(), name=self.name, kind=self.kind,
                           convention=self.convention.to_dict(), max_length=self.max_length)
            (stage / RM_CONFIG).write_text(json.dumps(info.to_dict(), indent=2, default=str) + "\n")
            publish_into(stage, path, last=RM_CONFIG)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _unencodable(trace: Trace, e: Exception) -> str:
    """Why ``trace`` cannot be encoded, naming it: prmkit's own refusals as they read, anything else
    (a tokenizer that cannot take the text) with its type."""
    if isinstance(e, AlignmentError) and e.trace_id is not None:
        return str(e)
    what = str(e) if isinstance(e, PrmkitError) else f"the tokenizer cannot encode it ({type(e).__name__}: {e})"
    return f"trace {trace.id!r}: {what}"


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


def _takes(module: Any, name: str) -> bool:
    """Whether ``module``'s forward has a parameter ``name``."""
    return name in _forward_params(type(module))


@functools.lru_cache(maxsize=64)
def _forward_params(cls: type) -> frozenset[str]:
    return frozenset(inspect.signature(cls.forward).parameters)


def _has_trained_head(path: str) -> bool:
    try:
        from transformers import AutoConfig

        archs = getattr(AutoConfig.from_pretrained(path), "architectures", None) or []
    except (OSError, ValueError):
        return False
    return any(a.endswith("ForTokenClassification") for a in archs)


def _zero_head(model: Any) -> None:
    torch = _torch()
    for name in ("score", "classifier"):
        layer = getattr(model, name, None)
        if isinstance(layer, torch.nn.Linear):
            with torch.no_grad():
                layer.weight.zero_()
                if layer.bias is not None:
                    layer.bias.zero_()


def _masked_lm_types() -> Any:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES
    except ImportError:  # pragma: no cover - very old transformers
        return None
    return MODEL_FOR_MASKED_LM_MAPPING_NAMES


def _is_encoder(cfg: Any) -> bool:
    """A model type with a masked-LM head is bidirectional (BERT-like) unless its config says
    ``is_decoder`` (then it attends causally); decoder-only ones have none."""
    if cfg is None:
        return False
    types = _masked_lm_types()
    if types is None:  # pragma: no cover - very old transformers
        return True  # unknown: do not trim
    return getattr(cfg, "model_type", None) in types and not getattr(cfg, "is_decoder", False)


def _check_causal(model: Any, path: str) -> None:
    """Refuse a backbone that was asked to attend causally but does not: a later token must not change
    an earlier position's output."""
    torch = _torch()
    vocab = model.config.vocab_size
    device = next(model.parameters()).device  # a model on a GPU reads ids there too
    a = torch.tensor([[1 % vocab, 2 % vocab, 3 % vocab, 4 % vocab]], device=device)
    b = a.clone()
    b[0, -1] = 5 % vocab
    with torch.no_grad():
        la = model(input_ids=a).logits[0, 0].float()
        lb = model(input_ids=b).logits[0, 0].float()
    # a bidirectional backbone moves position 0 by far more than any rounding; bf16 weights round at ~1e-2
    atol = 1e-5 if next(model.parameters()).dtype == torch.float32 else 1e-2
    if not torch.allclose(la, lb, atol=atol):
        raise PrmkitError(f"{path}: this backbone ignores is_decoder and attends in both directions; "
                          f"causal=True is not possible with it (use a decoder backbone)")


def _load(path: str, conv: Convention, *, device: str | None, dtype: str | None,
          trust_remote_code: bool, num_labels: int | None = None,
          causal: bool = False, allow_pickle: bool = False) -> tuple[Any, Any]:
    check_safe_weights(path, allow_pickle=allow_pickle)
    torch = _torch()
    try:
        from transformers import (
            AutoConfig,
            AutoModel,
            AutoModelForCausalLM,
            AutoModelForTokenClassification,
            AutoTokenizer,
        )
    except ImportError:
        raise MissingDependencyError("transformers", "hf", "reward models") from None
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = getattr(torch, dtype) if dtype else (
        torch.bfloat16 if device.startswith("cuda") else torch.float32)
    kw: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    # The tokenizer's loader takes no use_safetensors; the models' loaders read no pickle without it.
    mkw: dict[str, Any] = {**kw, **({} if allow_pickle else {"use_safetensors": True})}
    try:
        with _quiet_transformers():
            tok = AutoTokenizer.from_pretrained(path, **kw)
            if conv.head == "lm_token":
                model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, **mkw)
            else:
                cfg = AutoConfig.from_pretrained(path, **kw)
                archs = getattr(cfg, "architectures", None) or []
                is_tc = any(a.endswith("ForTokenClassification") for a in archs)
                if trust_remote_code and archs and not is_tc and "AutoModel" in (getattr(cfg, "auto_map", None) or {}):
                    model = AutoModel.from_pretrained(path, dtype=torch_dtype, **mkw)  # e.g. Qwen2.5-Math-PRM
                else:
                    extra: dict[str, Any] = {}
                    labels = num_labels or conv.num_labels
                    if labels is not None and not is_tc:  # a new head on a backbone (or a value head)
                        names = ["incorrect", "correct"] if labels == 2 else ["correct"]
                        extra = {"num_labels": labels, "id2label": dict(enumerate(names)),
                                 "label2id": {n: i for i, n in enumerate(names)}}
                    if causal and cfg.model_type in (_masked_lm_types() or ()):
                        # Set on the config object: not every model's __init__ takes it as a kwarg.
                        for k, v in {**extra, "is_decoder": True}.items():
                            setattr(cfg, k, v)
                        extra = {"config": cfg}
                    model, info = AutoModelForTokenClassification.from_pretrained(
                        path, dtype=torch_dtype, output_loading_info=True, **extra, **mkw)
                    if num_labels is None:  # a trained reward model: its head must come from the checkpoint
                        _require_head(model, path, info.get("missing_keys", []))
    except (OSError, ValueError) as e:
        hint = ("" if allow_pickle or "safetensors" not in str(e) else
                " (only safetensors weights are read: pass --allow-pickle / allow_pickle=True for a "
                "checkpoint you trust that has pickle weights only)")
        raise PrmkitError(f"cannot load reward model {path!r}: {e}{hint}") from None
    model.to(device).eval()
    return model, tok


#: Value-head names of published checkpoints that are not transformers token-classification models:
#: ``checkpoint key prefix -> where it goes``. Skywork-o1-Open-PRM keeps its head as ``v_head.summary``.
VALUE_HEADS = ("v_head.summary", "v_head")


def _require_head(model: Any, path: str, missing: list[str]) -> None:
    """Fail loudly instead of scoring with a randomly initialised head; map known value heads."""
    head = next((n for n in ("score", "classifier") if hasattr(model, n)), None)
    lost = [k for k in missing if head and k.startswith(head + ".")]
    if not lost:
        return
    import glob

    from safetensors import safe_open

    torch = _torch()
    folder = path
    if not os.path.isdir(folder):
        try:
            from huggingface_hub import snapshot_download

            folder = snapshot_download(path, local_files_only=True)
        except Exception:  # noqa: BLE001 - any failure means: no local copy to look in
            folder = None
    found: dict[str, Any] = {}
    for f in sorted(glob.glob(os.path.join(folder, "*.safetensors"))) if folder else []:
        with safe_open(f, framework="pt") as st:
            for key in st.keys():
                for prefix in VALUE_HEADS:
                    if key in (f"{prefix}.weight", f"{prefix}.bias"):
                        found.setdefault(key.rsplit(".", 1)[1], st.get_tensor(key))
    layer = getattr(model, head)
    if "weight" in found and tuple(found["weight"].shape) == tuple(layer.weight.shape):
        with torch.no_grad():
            layer.weight.copy_(found["weight"])
            if "bias" in found and getattr(layer, "bias", None) is not None:
                layer.bias.copy_(found["bias"])
        return
    raise PrmkitError(f"{path} has no trained {head} head ({', '.join(lost)} missing): it is a backbone, "
                      "not a reward model. Train one with `prmkit train`, or use RewardModel.from_backbone "
                      "to start from it.")


class _quiet_transformers:
    """Silence transformers' load reports and progress bars (a new head's missing weights are
    expected here) for the duration of a load."""

    def __enter__(self):
        from transformers.utils import logging as tl

        self._level = tl.get_verbosity()
        self._bars = tl.is_progress_bar_enabled()
        tl.set_verbosity_error()
        tl.disable_progress_bar()

    def __exit__(self, *exc: object) -> None:
        from transformers.utils import logging as tl

        tl.set_verbosity(self._level)
        if self._bars:
            tl.enable_progress_bar()


def load_reward_model(path: str, **kwargs: Any) -> RewardModel:
    """Shorthand for :meth:`RewardModel.from_pretrained`."""
    return RewardModel.from_pretrained(path, **kwargs)


def shipped_model_folder(name: str) -> str:
    """A folder :meth:`RewardModel.from_pretrained` loads for the shipped model ``name``: its LoRA
    adapter merged into the base its record names, cached under ``$PRMKIT_CACHE/models`` on first
    use (written to a temporary folder, renamed when complete)."""
    out = merged_cache_folder(name)
    if is_complete(out):
        return str(out)
    try:
        from peft import PeftModel
    except ImportError:
        raise MissingDependencyError("peft", "train", "the shipped reward models (a LoRA adapter)") from None
    asset = shipped_asset(name)
    info: dict[str, Any] = json.loads((asset / RM_CONFIG).read_text())
    record = TrainProvenance.from_dict(info)
    if not record.base_model:
        raise PrmkitError(f"{asset / RM_CONFIG}: the training record names no base model")
    rm = RewardModel.from_backbone(record.base_model, convention=info.get("convention"),
                                   kind=info.get("kind", "prm"), max_length=info.get("max_length"),
                                   causal=bool((record.train_config or {}).get("causal", False)))
    rm.model = PeftModel.from_pretrained(rm.model, str(asset)).merge_and_unload()
    rm.name = info.get("name") or name
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    rm.save_pretrained(tmp, record=record)
    publish(tmp, out)
    return str(out)
