"""The forward pass of a reward model: encoded inputs collated into right-padded batches, run
through the model, and P(correct) read at their label positions.

:class:`ForwardMixin` is :class:`~prmkit.models.RewardModel`'s model-running half.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

from prmkit.errors import MissingDependencyError
from prmkit.models._encoding import Encoded
from prmkit.models._precision import Precision, resolve_precision

#: What scoring's ``precision="auto"`` computes in where bf16 is native. Scoring's default stays
#: ``fp32``: bf16 scored 1.9x faster on SmolLM2 but moved step scores by up to 0.004 and breaks the
#: invariants scores are tested on (cached = plain and batched = alone within 1e-4), see
#: ``benchmarks/score_precision.py``.
SCORE_AUTO = "bf16"


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "hf", "reward models") from None
    return torch


class ForwardMixin:
    """:class:`~prmkit.models.RewardModel`'s forward pass: :meth:`collate`, :meth:`position_logits`,
    :meth:`probabilities`, and the device and precision scoring runs on."""

    # What RewardModel sets in __init__ (is_causal: its property).
    model: Any
    tokenizer: Any
    precision: str
    verdict_ids: tuple[int, int] | None
    is_causal: bool

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


def _takes(module: Any, name: str) -> bool:
    """Whether ``module``'s forward has a parameter ``name``."""
    return name in _forward_params(type(module))


@functools.lru_cache(maxsize=64)
def _forward_params(cls: type) -> frozenset[str]:
    return frozenset(inspect.signature(cls.forward).parameters)
