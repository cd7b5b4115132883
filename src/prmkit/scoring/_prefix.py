"""A decoder PRM scorer that never runs the same tokens twice: prefix sharing and incremental scoring.

In a decoder the model's output at a position depends only on the tokens up to it, so two inputs
that start with the same tokens have the same keys/values (KV) and the same head outputs over that
common prefix. :class:`PrefixCachingScorer` exploits this twice:

- **prefix sharing** (within one call): the traces' token ids are sorted and the prefixes that
  several traces share (the rendered problem for N candidates; a first step several candidates agree
  on) become nodes of a prefix tree. Each node is run once, then everything below it runs only its
  own tokens on top of the node's KV;
- **incremental scoring** (across calls): every sequence run is kept, with its KV and the head's
  outputs at every position, in an LRU store bounded by ``max_cached_tokens``. A trace that extends
  a stored sequence (beam search adding one step to a beam it scored before) runs only the new
  tokens, and its label positions inside the reused part read the stored outputs.

Rows whose reused parts have different lengths are batched together: their past KV is left-padded
to a common length (masked out by a padding mask), their new tokens right-padded, and their position
ids continue each row's own past. Keys in the KV already carry their rotary position, so padding
never moves them. The results equal :meth:`RewardModel.score` up to float rounding (tested to 1e-4
on every decoder convention).

A PRM's steps past ``max_length`` are scored as :meth:`RewardModel.score` scores them (``rm.long``:
windows of their own, by default, or ``None``); the windows run after the traces' first inputs, and
share with them (and each other) the rendered problem and the steps they have in common.

Encoders (bidirectional: a prefix's outputs depend on what follows) and models this path does not
know how to drive (remote code, non-attention layers, inputs longer than a sliding window) are
scored the plain way, one padded forward pass per batch, as :meth:`RewardModel.score` does.
"""

from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.models import SCORE_AUTO, Encoded, RewardModel, gqa_attention, resolve_precision
from prmkit.trace import Trace

__all__ = ["PrefixCachingScorer", "ScoringStats"]


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "hf", "prefix-caching scoring") from None
    return torch


@dataclass
class ScoringStats:
    """What a scorer ran, so search methods can compare compute.

    - ``tokens_requested``: the tokens of every trace as encoded (what a scorer without reuse runs);
    - ``tokens_computed``: the tokens actually run through the model (padding not counted);
    - ``tokens_reused`` = requested - computed: tokens whose outputs came from a shared prefix or the
      cache instead of being run again;
    - ``padded_tokens``: batch rows x width over all forward passes (real + padding);
    - ``attention_pairs``: (query, key) pairs of the computed tokens, each attending to itself and
      every position before it, for FLOP estimates (about ``2 x params x tokens_computed +
      4 x layers x attention width x attention_pairs``);
    - ``forward_passes``: model calls; ``cache_hits``: sequences that reused more tokens from the KV
      store (earlier calls, mostly) than from the prefixes they share within the call.
    """

    calls: int = 0
    traces: int = 0
    tokens_requested: int = 0
    tokens_computed: int = 0
    padded_tokens: int = 0
    attention_pairs: int = 0
    forward_passes: int = 0
    cache_hits: int = 0

    @property
    def tokens_reused(self) -> int:
        return self.tokens_requested - self.tokens_computed

    def reset(self) -> None:
        """Zero every counter."""
        for k in asdict(self):
            setattr(self, k, 0)

    def to_dict(self) -> dict[str, int]:
        return {**asdict(self), "tokens_reused": self.tokens_reused}


@dataclass(eq=False)
class _Entry:
    """A sequence that was run: its ids, the keys and values (KV) of every layer, and the head's logits
    at every position ``[T, C]`` (float32).

    The KV of the first ``start`` tokens is ``base``'s whole KV (``start == len(base)``: the entry
    continues the sequence it was run on top of, a tree node most often), so a shared prefix's KV is
    held once, however many sequences continue it; ``kv`` holds the rest, ``[layers, 2, kv_heads,
    T - start, head_dim]``. An entry that reused only part of another copies that part instead of
    keeping it alive, so the KV reachable from an entry is exactly its own ``T`` tokens and the store's
    bound holds for memory too. ``depth``: entries above it (a sequence extended step by step, as beam
    search or a monitor does, would chain without end: past :data:`_MAX_CHAIN` an entry copies instead).
    """

    ids: Any  # numpy int64 array
    kv: Any
    logits: Any
    base: _Entry | None = None
    start: int = 0
    depth: int = 0

    def __len__(self) -> int:
        return len(self.ids)

    def kv_into(self, m: int, dst: Any) -> None:
        """Copy the KV of the first ``m`` tokens into ``dst`` (``[layers, 2, kv_heads, m, head_dim]``)."""
        if self.base is not None:
            k = min(m, self.start)
            self.base.kv_into(k, dst[:, :, :, :k])
            if m > self.start:
                dst[:, :, :, self.start:m] = self.kv[:, :, :, :m - self.start]
        else:
            dst.copy_(self.kv[:, :, :, :m])


class _PrefixStore:
    """Least-recently-used :class:`_Entry` s, at most ``max_tokens`` tokens in all.

    ``lookup`` returns the entry sharing the longest prefix with some ids. An entry that is a prefix
    of a newly added one is dropped (the new one serves every lookup the old one could).
    """

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.entries: OrderedDict[int, _Entry] = OrderedDict()
        self.tokens = 0

    def lookup(self, ids: Any) -> tuple[_Entry | None, int]:
        np = _np()
        best: _Entry | None = None
        best_n = 0
        for e in self.entries.values():
            n = min(len(e), len(ids))
            if n <= best_n or e.ids[0] != ids[0]:
                continue
            diff = np.flatnonzero(e.ids[:n] != ids[:n])
            common = int(diff[0]) if diff.size else n
            if common > best_n:
                best, best_n = e, common
        if best is not None:
            self.entries.move_to_end(id(best))
        return best, best_n

    def add(self, entry: _Entry) -> None:
        np = _np()
        n = len(entry)
        if n > self.max_tokens:
            return
        for key, e in list(self.entries.items()):
            m = min(len(e), n)
            if not np.array_equal(e.ids[:m], entry.ids[:m]):
                continue
            if len(e) >= n:  # the new sequence is already covered
                self.entries.move_to_end(key)
                return
            del self.entries[key]
            self.tokens -= len(e)
        while self.entries and self.tokens + n > self.max_tokens:
            _, old = self.entries.popitem(last=False)
            self.tokens -= len(old)
        self.entries[id(entry)] = entry
        self.tokens += n

    def clear(self) -> None:
        self.entries.clear()
        self.tokens = 0


@dataclass(eq=False)
class _Row:
    """One sequence to run: a shared prefix (a tree node) or a whole trace (a leaf). ``parent`` is the
    deepest node whose ids start these; ``result`` is ``(entry, n)``: these ids are ``entry.ids[:n]``."""

    ids: tuple[int, ...]
    parent: _Row | None = None
    level: int = 0
    result: tuple[_Entry, int] | None = field(default=None, repr=False)


def _np():
    import numpy

    return numpy


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_prefix_tree(seqs: Sequence[tuple[int, ...]], min_saved: int
                     ) -> tuple[list[list[_Row]], dict[tuple[int, ...], _Row]]:
    """Shared-prefix nodes (by tree level) and one leaf row per distinct sequence.

    A node is made where ``k >= 2`` distinct sequences share ``m`` tokens beyond their nearest
    enclosing node and running those once saves at least ``min_saved`` tokens (``(k - 1) * m``):
    below that, the extra row (and the wait for it) costs more than it saves.
    """
    uniq = sorted(set(seqs))
    leaves = {s: _Row(s) for s in uniq}
    levels: list[list[_Row]] = []
    stack: list[tuple[int, int, int, _Row | None]] = [(0, len(uniq), 0, None)] if uniq else []
    while stack:
        lo, hi, base, parent = stack.pop()
        if hi - lo == 1:
            _attach(leaves[uniq[lo]], parent)
            continue
        # Sorted: the range's common prefix is that of its first and last sequences.
        shared = _common_prefix(uniq[lo], uniq[hi - 1])
        if shared > base and (hi - lo - 1) * (shared - base) >= min_saved:
            level = parent.level + 1 if parent is not None else 0
            node = _Row(uniq[lo][:shared], parent, level)
            while len(levels) <= level:
                levels.append([])
            levels[level].append(node)
            parent, base = node, shared
        i = lo
        if len(uniq[lo]) == shared:  # a sequence that is the shared prefix itself sorts first
            _attach(leaves[uniq[lo]], parent)
            i += 1
        while i < hi:  # split the rest by their next token; each part shares a longer prefix
            j = i
            while j < hi and uniq[j][shared] == uniq[i][shared]:
                j += 1
            stack.append((i, j, base, parent))
            i = j
    return levels, leaves


def _node_waves(levels: list[list[_Row]]) -> tuple[list[list[_Row]], list[tuple[_Row, _Row]]]:
    """The nodes of ``levels`` as waves of forward passes, and ``(node, descendant)`` pairs of nodes
    that need no pass of their own: a node with exactly one child node is the first ``len(node.ids)``
    positions of that child's run (a decoder's KV and outputs at a position depend only on the tokens
    up to it), so the child runs from the node's own parent instead, and the node's leaves read the
    prefix. A chain (the problem, its first step shared by most candidates, then the second, ...)
    costs one pass instead of one per link, with the same tokens computed. The pairs are listed so
    that each descendant is a node that runs or one listed after it."""
    below: dict[int, list[_Row]] = {}
    for level in levels:
        for node in level:
            if node.parent is not None:
                below.setdefault(id(node.parent), []).append(node)
    passes = {id(n) for level in levels for n in level if len(below.get(id(n), ())) != 1}
    waves: list[list[_Row]] = []
    depth: dict[int, int] = {}
    for level in levels:  # parents come in earlier levels than their children
        for node in level:
            if id(node) not in passes:
                continue
            up = node.parent
            while up is not None and id(up) not in passes:
                up = up.parent
            node.parent = up
            d = depth[id(up)] + 1 if up is not None else 0
            depth[id(node)] = d
            while len(waves) <= d:
                waves.append([])
            waves[d].append(node)
    inherit = []
    for level in reversed(levels):  # deepest first: a node's descendant is resolved before it
        for node in level:
            if id(node) not in passes:
                inherit.append((node, below[id(node)][0]))
    return waves, inherit


def _attach(leaf: _Row, parent: _Row | None) -> None:
    leaf.parent = parent
    leaf.level = parent.level + 1 if parent is not None else 0


class PrefixCachingScorer:
    """:meth:`RewardModel.score` for decoder PRMs and ORMs, without running any token twice.

    Usage (``candidates``: N traces of one problem; ``extended``: the same with one more step each)::

        scorer = PrefixCachingScorer(RewardModel.from_pretrained("out/prm"))
        scorer.score(candidates)      # the rendered problem runs once, then only each candidate's steps
        scorer.score(extended)        # only the new steps run
        scorer.stats.tokens_reused    # what was not run again

    - ``batch_size``: rows per forward pass;
    - ``max_cached_tokens``: the most tokens whose KV is kept between calls (0: no incremental
      scoring; prefix sharing within a call still happens). KV memory per token is
      ``2 x layers x kv_heads x head_dim x bytes``: about 46 KB for SmolLM2-135M in float32;
    - ``min_saved_tokens``: a prefix shared within a call is run as its own row when that saves at
      least this many tokens (``(sharers - 1) x its tokens beyond the enclosing shared prefix``);
    - ``precision``: ``fp32`` / ``bf16`` / ``auto`` (default: the model's ``rm.precision``), fixed for
      the scorer's life, since cached KV is kept in the precision it was computed in (bf16 halves it);
    - ``merge_chains``: a shared prefix with exactly one shared prefix below it is read from that one's
      run instead of a pass of its own (same tokens computed, fewer passes; False: every shared prefix
      runs in a pass of its own, for comparison — ``benchmarks/prefix_chains.py``).

    On a CPU a grouped-query model's attention runs without repeating its key/value heads
    (:func:`prmkit.models.gqa_attention`: the same numbers, about 4% less time a call of 256 SmolLM2
    traces here), since every pass over a past has a mask, where transformers' ``sdpa`` repeats them.

    ``stats`` (:class:`ScoringStats`) counts tokens computed and reused and forward passes;
    ``cached_tokens`` is the store's size; ``clear()`` empties it. ``supported`` says whether the
    caching path is used at all, and ``unsupported_reason`` why not.
    """

    def __init__(self, rm: RewardModel, *, batch_size: int = 8, max_cached_tokens: int = 16384,
                 min_saved_tokens: int = 32, name: str | None = None, precision: str | None = None,
                 merge_chains: bool = True) -> None:
        if batch_size < 1:
            raise PrmkitError(f"batch_size must be at least 1, got {batch_size}")
        if max_cached_tokens < 0:
            raise PrmkitError(f"max_cached_tokens must be >= 0, got {max_cached_tokens}")
        self.rm = rm
        self.kind = rm.kind
        self.name = name or rm.name
        self.batch_size = batch_size
        self.min_saved_tokens = max(1, min_saved_tokens)
        self.merge_chains = merge_chains
        self.stats = ScoringStats()
        self.precision = resolve_precision(precision or rm.precision, rm.device, auto=SCORE_AUTO,
                                           shape=rm.compute_shape())
        self._store = _PrefixStore(max_cached_tokens)
        self.unsupported_reason = _unsupported(rm)
        self._cache_kw = _cache_keyword(rm) if self.unsupported_reason is None else None

    @property
    def supported(self) -> bool:
        """True when scoring reuses KV (a decoder this class knows how to drive)."""
        return self.unsupported_reason is None

    @property
    def max_cached_tokens(self) -> int:
        return self._store.max_tokens

    @property
    def cached_tokens(self) -> int:
        """Tokens whose KV is kept for later calls (never more than ``max_cached_tokens``)."""
        return self._store.tokens

    def clear(self) -> None:
        """Forget every cached sequence (after changing the model's weights, say)."""
        self._store.clear()

    def describe(self) -> dict[str, Any]:
        """Provenance: the model and this scorer's settings."""
        return {"scorer": "prefix_caching", "model": self.rm.name, "kind": self.kind,
                "convention": self.rm.convention.name, "batch_size": self.batch_size,
                "max_cached_tokens": self.max_cached_tokens, "min_saved_tokens": self.min_saved_tokens,
                "precision": self.precision.used}

    # -- scoring --------------------------------------------------------------------------------------
    def score(self, traces: Sequence[Trace], *, errors: str = "raise") -> list[list[float | None]]:
        """Per trace: P(correct) of every step (PRM; past ``max_length`` as ``rm.long`` says), or a
        one-element list with P(trace correct) (ORM); equal to ``rm.score(traces)`` up to rounding.
        ``errors``: as :meth:`RewardModel.score <prmkit.models.RewardModel.score>`'s."""
        parts, reasons = self.rm.encode_each(traces, errors=errors)
        return [None if why else s  # type: ignore[misc]
                for s, why in zip(self._score_parts(parts), reasons, strict=True)]

    def score_each(self, traces: Sequence[Trace]) -> list[tuple[list[float | None] | None, str | None]]:
        """Per trace ``(scores, None)``, or ``(None, reason)`` for one the model cannot encode, as
        :meth:`RewardModel.score_each <prmkit.models.RewardModel.score_each>` gives them."""
        parts, reasons = self.rm.encode_each(traces, errors="skip")
        return [(None, why) if why is not None else (s, None)
                for s, why in zip(self._score_parts(parts), reasons, strict=True)]

    def _score_parts(self, parts: Sequence[Sequence[Encoded]]) -> list[list[float | None]]:
        _torch()  # a clear error where torch is missing
        encoded = [e for p in parts for e in p if not e.is_window]
        windows = [e for p in parts for e in p if e.is_window]
        self.stats.calls += 1
        self.stats.traces += sum(1 for p in parts if p)
        self.stats.tokens_requested += sum(len(e) for e in encoded) + sum(len(w) for w in windows)
        if not parts:
            return []
        model = self.rm.model
        was_training = model.training
        model.eval()
        try:
            with self.precision.inference(self.rm.device), gqa_attention(model):
                probs = self._probs(encoded) if encoded else []
                rest = self._probs(windows) if windows else []
        finally:
            model.train(was_training)
        return self.rm.join_scores(parts, probs, rest)

    def _probs(self, encoded: Sequence[Encoded]) -> list[list[float]]:
        """P(correct) at every position of every input, reusing KV where this class can."""
        if self.supported and not self._window_exceeded(encoded):
            return self._score_cached(encoded)
        return self._score_plain(encoded)

    def _window_exceeded(self, encoded: Sequence[Encoded]) -> bool:
        """A sliding window shorter than an input: the padded-past mask would misplace the window."""
        window = _sliding_window(getattr(self.rm.model, "config", None))
        return window is not None and max(len(e) for e in encoded) > window

    def _score_plain(self, encoded: Sequence[Encoded]) -> list[list[float]]:
        """What :meth:`RewardModel.score` does: length-sorted, right-padded batches."""
        rm = self.rm
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out: list[list[float]] = [[] for _ in encoded]
        dev = rm.device
        for s in range(0, len(order), self.batch_size):
            idx = order[s:s + self.batch_size]
            batch = rm.collate([encoded[i] for i in idx])
            p = rm.probabilities(rm.position_logits(
                batch["input_ids"].to(dev), batch["attention_mask"].to(dev),
                batch["rows"].to(dev), batch["cols"].to(dev))).tolist()
            self.stats.forward_passes += 1
            self.stats.tokens_computed += sum(len(encoded[i]) for i in idx)
            self.stats.padded_tokens += batch["input_ids"].numel()
            self.stats.attention_pairs += sum(_pairs(0, len(encoded[i])) for i in idx)
            at = 0
            for i in idx:
                k = len(encoded[i].positions)
                out[i] = p[at:at + k]
                at += k
        return out

    def _score_cached(self, encoded: Sequence[Encoded]) -> list[list[float]]:
        torch = _torch()
        np = _np()
        seqs = [tuple(e.input_ids) for e in encoded]
        levels, leaves = plan_prefix_tree(seqs, self.min_saved_tokens)
        waves, inherit = _node_waves(levels) if self.merge_chains else (levels, [])
        # Nodes wave by wave (a node's parent is ready before it), then every leaf in one wave, so
        # leaves of different nodes fill the same batches.
        for rows in waves:
            self._run(rows)
        for node, child in inherit:  # a prefix of the node below it, which has run
            node.result = (child.result[0], len(node.ids))  # type: ignore[index]
        self._run(list(leaves.values()))
        out: list[list[float]] = []
        for e, s in zip(encoded, seqs, strict=True):
            entry, _ = leaves[s].result  # type: ignore[misc]
            pos = torch.as_tensor(np.asarray(e.positions), device=entry.logits.device)
            out.append(self.rm.probabilities(entry.logits[pos]).tolist())
        return out

    def _run(self, rows: Sequence[_Row]) -> None:
        """Find each row's longest reusable past (its parent node, or a cached sequence), then run the
        rest in batches of rows with similar numbers of new tokens."""
        np = _np()
        pending: list[tuple[_Row, _Entry | None, int]] = []
        for row in rows:
            ids = np.asarray(row.ids, dtype=np.int64)
            base, reuse = (row.parent.result if row.parent is not None else (None, 0))  # type: ignore[misc]
            cached, n = self._store.lookup(ids)
            if n > reuse:  # the store (mostly earlier calls) has more of it than the shared prefix
                base, reuse = cached, n
                self.stats.cache_hits += 1
            if base is not None and reuse >= len(ids):
                row.result = (base, len(ids))  # every position already run: nothing to compute
                continue
            pending.append((row, base, reuse))
        pending.sort(key=lambda p: len(p[0].ids) - p[2])
        cost = _PASS_COST_TOKENS.get(self.rm.device.type, _PASS_COST_TOKENS["cuda"])
        for lo, hi in _chunks([len(row.ids) - r for row, _, r in pending], self.batch_size, cost):
            self._forward(pending[lo:hi])

    def _forward(self, chunk: Sequence[tuple[_Row, _Entry | None, int]]) -> None:
        torch = _torch()
        np = _np()
        from transformers.cache_utils import Cache

        dev = self.rm.device
        reuse = [r for _, _, r in chunk]
        news = [row.ids[r:] for row, _, r in chunk]
        past = max(reuse)
        width = max(len(n) for n in news)
        rows = len(chunk)
        pad = self.rm.tokenizer.pad_token_id if self.rm.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((rows, width), pad, dtype=torch.long)
        position_ids = torch.zeros((rows, width), dtype=torch.long)
        for i, (n, r) in enumerate(zip(news, reuse, strict=True)):
            input_ids[i, :len(n)] = torch.tensor(n, dtype=torch.long)
            position_ids[i] = r + torch.arange(width)  # each row continues its own past
        mask = None
        if past and len(set(reuse)) > 1:  # left-padded pasts: hide the padding
            mask = torch.zeros((rows, past + width), dtype=torch.long)
            for i, (n, r) in enumerate(zip(news, reuse, strict=True)):
                mask[i, past - r:past + len(n)] = 1
            mask = mask.to(dev)
        # Right padding needs no mask in a decoder: no real token attends to a later (pad) one.
        backbone = getattr(self.rm.model, self.rm.model.base_model_prefix)
        layers = _num_layers(self.rm.model)
        buffer = _PassKV(chunk, past, width, layers)
        cache = Cache(layers=[_buffer_layer_class()(buffer, i) for i in range(layers)])
        out = backbone(input_ids=input_ids.to(dev), position_ids=position_ids.to(dev), attention_mask=mask,
                       use_cache=True, **{self._cache_kw: cache})
        logits = self._head(out.last_hidden_state).float()
        self.stats.forward_passes += 1
        self.stats.tokens_computed += sum(len(n) for n in news)
        self.stats.padded_tokens += rows * width
        self.stats.attention_pairs += sum(_pairs(r, len(n)) for r, n in zip(reuse, news, strict=True))
        kv = buffer.kv  # [layers, 2, rows, kv_heads, past + width, head_dim]
        for i, ((row, base, r), n) in enumerate(zip(chunk, news, strict=True)):
            # The row's KV is its past (left-padded to ``past``) followed by its new tokens. A row that
            # continues the whole of its base keeps only its new tokens and points at the base.
            whole = base is not None and r == len(base) and base.depth < _MAX_CHAIN
            lo = past if whole or not r else past - r
            own = kv[:, :, i, :, lo:past + len(n)].clone()
            new_logits = logits[i, :len(n)]
            full = torch.cat([base.logits[:r], new_logits]) if r else new_logits.clone()
            entry = _Entry(np.asarray(row.ids, dtype=np.int64), own, full,
                           base=base if whole else None, start=r if whole else 0,
                           depth=base.depth + 1 if whole else 0)  # type: ignore[union-attr]
            row.result = (entry, len(entry))
            self._store.add(entry)

    def _head(self, hidden: Any) -> Any:
        """Head outputs at every position: the two verdict-token logits (``lm_token``) or the
        token-classification head's logits (``classifier``), as :meth:`RewardModel.position_logits`."""
        torch = _torch()
        model = self.rm.model
        with torch.autocast(device_type=hidden.device.type, enabled=False):  # as position_logits: exact
            if self.rm.verdict_ids is not None:
                out_emb = model.get_output_embeddings()
                idx = list(self.rm.verdict_ids)
                logits = hidden.to(out_emb.weight.dtype) @ out_emb.weight[idx].T
                if getattr(out_emb, "bias", None) is not None:
                    logits = logits + out_emb.bias[idx]
                return logits
            head = _classifier_head(model)  # dropout before it is the identity in eval mode
            return head(hidden.to(next(head.parameters()).dtype))


#: The fixed cost of one forward pass, in tokens' worth of compute: small on a CPU, where time is
#: close to proportional to tokens, larger on an accelerator, where a pass has launch overheads.
_PASS_COST_TOKENS = {"cpu": 32, "cuda": 512}


def _chunks(lengths: Sequence[int], batch_size: int, pass_cost: int) -> list[tuple[int, int]]:
    """Split ascending ``lengths`` into consecutive batches of at most ``batch_size`` that minimise
    padded tokens plus ``pass_cost`` per batch (dynamic programming; right padding wastes
    ``rows x longest - sum``, so one long row should not widen a batch of short ones).

    >>> _chunks([10, 10, 12, 100], batch_size=8, pass_cost=32)
    [(0, 3), (3, 4)]
    """
    n = len(lengths)
    best = [0.0] + [float("inf")] * n  # best[j]: cost of the first j rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(max(0, j - batch_size), j):
            c = best[i] + (j - i) * lengths[j - 1] + pass_cost
            if c < best[j]:
                best[j], cut[j] = c, i
    out = []
    j = n
    while j:
        out.append((cut[j], j))
        j = cut[j]
    return out[::-1]


def _pairs(past: int, new: int) -> int:
    """Causal (query, key) pairs of ``new`` tokens after ``past`` ones: sum of past+1 .. past+new."""
    return new * past + new * (new + 1) // 2


#: Most entries one entry's KV is read through (see :class:`_Entry`).
_MAX_CHAIN = 8


class _PassKV:
    """The KV of one forward pass, every layer in one tensor ``[layers, 2, rows, kv_heads, past + width,
    head_dim]``: each row's reused KV left-padded with zeros (masked out) to ``past``, then the pass's
    new tokens, which the layers write in place (no concatenation, no per-layer copies). Allocated at the
    first layer's update, when the KV's heads, size and dtype are known."""

    def __init__(self, chunk: Sequence[tuple[_Row, _Entry | None, int]], past: int, width: int,
                 layers: int) -> None:
        self.chunk, self.past, self.width, self.layers = chunk, past, width, layers
        self.kv: Any = None

    def allocate(self, keys: Any) -> None:
        torch = _torch()
        rows, heads, _, dim = keys.shape
        past = self.past
        kv = torch.empty((self.layers, 2, rows, heads, past + self.width, dim), dtype=keys.dtype,
                         device=keys.device)
        first = next((b for _, b, _ in self.chunk if b is not None), None)
        same = all(b is self.chunk[0][1] and r == self.chunk[0][2] for _, b, r in self.chunk)
        if first is not None and same:  # one shared past: copied once, then to every row
            first.kv_into(past, kv[:, :, 0, :, :past])
            kv[:, :, 1:, :, :past] = kv[:, :, :1, :, :past]
        elif past:
            for i, (_, base, r) in enumerate(self.chunk):
                if r < past:
                    kv[:, :, i, :, :past - r].zero_()
                if r:
                    base.kv_into(r, kv[:, :, i, :, past - r:past])  # type: ignore[union-attr]
        self.kv = kv


@functools.cache
def _buffer_layer_class() -> type:
    """A transformers cache layer over one layer of a :class:`_PassKV` (a class made on first use, since
    transformers is imported lazily)."""
    from transformers.cache_utils import DynamicLayer

    class BufferLayer(DynamicLayer):
        def __init__(self, buffer: _PassKV, index: int) -> None:
            super().__init__()
            self.buffer, self.index = buffer, index

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            buf = self.buffer
            if buf.kv is None:
                buf.allocate(key_states)
            kv = buf.kv[self.index]
            kv[0, :, :, buf.past:].copy_(key_states)
            kv[1, :, :, buf.past:].copy_(value_states)
            self.keys, self.values = kv[0], kv[1]
            self.is_initialized = True
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.buffer.past + (self.buffer.width if self.is_initialized else 0)

    return BufferLayer


def _num_layers(model: Any) -> int:
    return int(model.config.get_text_config(decoder=True).num_hidden_layers)


def _classifier_head(model: Any) -> Any:
    for name in ("score", "classifier"):
        layer = getattr(model, name, None)
        if layer is not None:
            return layer
    return None


def _sliding_window(cfg: Any) -> int | None:
    if cfg is None or getattr(cfg, "use_sliding_window", True) is False:
        return None
    types = getattr(cfg, "layer_types", None)
    if types is not None and "sliding_attention" not in types:
        return None
    window = getattr(cfg, "sliding_window", None)
    return int(window) if window else None


def _cache_keyword(rm: RewardModel) -> str:
    backbone = getattr(rm.model, rm.model.base_model_prefix)
    params = inspect.signature(backbone.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _unsupported(rm: RewardModel) -> str | None:
    """Why the KV-reuse path cannot drive ``rm`` (None: it can)."""
    model = rm.model
    if not rm.is_causal:
        return "an encoder: a prefix's outputs depend on the tokens after it"
    if not type(model).__module__.startswith("transformers."):
        return f"{type(model).__name__} is not a transformers model class (remote or custom code)"
    prefix = getattr(model, "base_model_prefix", None)
    backbone = getattr(model, prefix, None) if prefix else None
    if backbone is None:
        return "no backbone at model.base_model_prefix"
    params = inspect.signature(backbone.forward).parameters
    if "cache" not in params and "past_key_values" not in params:
        return "the backbone takes no KV cache"
    if "position_ids" not in params:
        return "the backbone takes no position ids"
    cfg = getattr(model, "config", None)
    types = getattr(cfg, "layer_types", None) or []
    other = sorted({t for t in types if t not in ("full_attention", "sliding_attention")})
    if other:
        return f"layers other than attention ({', '.join(other)}) keep state a KV cache cannot crop"
    if rm.verdict_ids is not None:
        if model.get_output_embeddings() is None:
            return "an lm_token convention on a model without output embeddings"
    elif not type(model).__name__.endswith("ForTokenClassification") or _classifier_head(model) is None:
        return f"{type(model).__name__} is not a token-classification model with a score/classifier head"
    return None
