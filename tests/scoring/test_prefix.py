"""Invariants of PrefixCachingScorer: its scores equal one-trace-at-a-time ``RewardModel.score`` (to
1e-4) however traces are batched, shared or reused; the KV store stays within its bound; stats count
reused tokens exactly (hand-derived on the character tokenizer, where one character is one token)."""

from __future__ import annotations

import pytest

from prmkit.scoring import PrefixCachingScorer, ScoringStats, StepScorer
from prmkit.scoring._prefix import _node_waves, plan_prefix_tree

torch = pytest.importorskip("torch")

DECODERS = ["qwen2.5-math-prm", "skywork-prm", "prmkit", "math-shepherd", "rlhflow"]
TOL = 1e-4


def one_at_a_time(rm, traces):
    return [rm.score([t])[0] for t in traces]


def assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert len(g) == len(w)
        for a, b in zip(g, w, strict=True):
            if b is None:
                assert a is None
            else:
                assert a == pytest.approx(b, abs=TOL)


def extend(make_trace, t, step):
    return make_trace(t.id + "+", t.problem.text, [s.text for s in t.steps] + [step])


@pytest.mark.parametrize("name", DECODERS)
def test_batched_and_shared_equal_one_at_a_time(name, make_rm, mixed_traces):
    rm = make_rm(name)
    want = one_at_a_time(rm, mixed_traces)
    # Probabilities spread (the heads are re-drawn wide), so 1e-4 is a real check.
    assert max(max(s) for s in want) - min(min(s) for s in want) > 0.1
    for batch_size, min_saved in [(3, 2), (8, 8), (1, 1)]:
        scorer = PrefixCachingScorer(rm, batch_size=batch_size, min_saved_tokens=min_saved)
        assert scorer.supported, scorer.unsupported_reason
        assert_close(scorer.score(mixed_traces), want)
        assert scorer.stats.tokens_reused > 0  # the shared problems ran once


@pytest.mark.parametrize("name", DECODERS)
def test_incremental_equals_one_at_a_time(name, make_rm, mixed_traces, make_trace):
    """Beam-search style: score partial traces, then each extended by one step (some twice, some
    unchanged), and a call that mixes cached and new problems."""
    rm = make_rm(name)
    scorer = PrefixCachingScorer(rm, batch_size=4, min_saved_tokens=4)
    first = mixed_traces[:5]
    assert_close(scorer.score(first), one_at_a_time(rm, first))
    computed = scorer.stats.tokens_computed
    longer = [extend(make_trace, t, "Check: 8 - 5 = 3.") for t in first] + \
             [extend(make_trace, t, "The answer is 8.") for t in first[:2]] + first[:1]
    assert_close(scorer.score(longer), one_at_a_time(rm, longer))
    assert scorer.stats.cache_hits >= len(first)
    # Every earlier trace was extended: only the new steps (and nothing of the old ones) ran again.
    new_tokens = scorer.stats.tokens_computed - computed
    old_tokens = sum(len(rm.encode(t)) for t in first)
    assert new_tokens < sum(len(rm.encode(t)) for t in longer) - old_tokens
    rest = mixed_traces[5:] + longer[:3]
    assert_close(scorer.score(rest), one_at_a_time(rm, rest))


@pytest.mark.parametrize("name", ["qwen2.5-math-prm", "math-shepherd", "rlhflow", "prmkit"])
def test_truncated_traces(name, make_rm, mixed_traces, make_trace):
    """``max_length`` cuts trailing steps (scored None with ``long="truncate"``) exactly as
    RewardModel.score does."""
    full = make_rm(name)
    lengths = sorted(len(full.encode(t)) for t in mixed_traces)
    rm = make_rm(name, max_length=lengths[len(lengths) // 2], long="truncate")
    traces = mixed_traces + [extend(make_trace, t, "One more step here.") for t in mixed_traces[:3]]
    want = one_at_a_time(rm, traces)
    assert any(None in s for s in want)
    scorer = PrefixCachingScorer(rm, batch_size=3, min_saved_tokens=2)
    assert_close(scorer.score(traces[:6]), want[:6])
    assert_close(scorer.score(traces), want)


@pytest.mark.parametrize("name", ["qwen2.5-math-prm", "rlhflow"])
def test_orm(name, make_rm, mixed_traces):
    rm = make_rm(name, kind="orm")
    scorer = PrefixCachingScorer(rm, batch_size=4, min_saved_tokens=2)
    got = scorer.score(mixed_traces)
    assert all(len(s) == 1 for s in got)
    assert_close(got, one_at_a_time(rm, mixed_traces))
    assert scorer.kind == "orm"


def test_encoder_falls_back(make_rm, mixed_traces):
    rm = make_rm("bert")
    scorer = PrefixCachingScorer(rm, batch_size=4)
    assert not scorer.supported and "encoder" in scorer.unsupported_reason
    assert_close(scorer.score(mixed_traces), one_at_a_time(rm, mixed_traces))
    assert scorer.stats.tokens_reused == 0 and scorer.cached_tokens == 0


def test_sliding_window_shorter_than_input_falls_back(make_rm, mixed_traces):
    rm = make_rm("math-shepherd", sliding_window=8)
    scorer = PrefixCachingScorer(rm, batch_size=4)
    assert scorer.supported
    assert_close(scorer.score(mixed_traces), one_at_a_time(rm, mixed_traces))
    assert scorer.stats.tokens_reused == 0


def test_protocol_and_describe(make_rm):
    rm = make_rm("prmkit")
    scorer = PrefixCachingScorer(rm, name="mine")
    assert isinstance(scorer, StepScorer) and isinstance(rm, StepScorer)
    assert scorer.name == "mine" and scorer.kind == "prm"
    assert scorer.describe()["convention"] == "prmkit"
    assert scorer.score([]) == []


# -- stats and the cache bound, by hand ---------------------------------------------------------------
def test_stats_and_cache_bound_by_hand(make_rm, make_trace):
    """Character tokenizer, prmkit convention: ``problem \\n step \\n ...``, one token per character,
    no special tokens, ids end at the last step's newline.

    Call 1: A = "What?\\nx=1\\n" and B = "What?\\nx=2\\n" (10 tokens each) share "What?\\nx=" (8): the
    shared prefix runs once (pass 1), then 2 tokens of each (pass 2): 12 computed, 8 reused. The store
    keeps A and B (the 8-token prefix is dropped: A covers it): 20 tokens.
    Call 2: C = A + "y=3\\n" (14 tokens) runs its last 4 on A's KV: 4 computed, 10 reused, 1 pass,
    1 cache hit; A (a prefix of C) gives way to C: 10 + 14 = 24 tokens.
    Call 3: D = "How?\\nz=0\\n" (9 tokens) shares nothing: 9 computed. Storing it would make 33 > 25
    tokens, so the least recently used entry (B) goes: C + D = 23.
    Call 4: B again shares "What?\\nx=" (8) with C: 2 computed, 8 reused. The lookup touched C, so
    D is now the least recently used and gives way: C + B = 24.
    """
    rm = make_rm("prmkit")
    A = make_trace("A", "What?", ["x=1"])
    B = make_trace("B", "What?", ["x=2"])
    C = make_trace("C", "What?", ["x=1", "y=3"])
    D = make_trace("D", "How?", ["z=0"])
    assert [len(rm.encode(t)) for t in (A, B, C, D)] == [10, 10, 14, 9]
    scorer = PrefixCachingScorer(rm, batch_size=8, max_cached_tokens=25, min_saved_tokens=4)

    assert_close(scorer.score([A, B]), one_at_a_time(rm, [A, B]))
    s = scorer.stats
    assert (s.tokens_requested, s.tokens_computed, s.tokens_reused, s.forward_passes) == (20, 12, 8, 2)
    assert s.attention_pairs == 8 * 9 // 2 + 2 * (9 + 10)  # the prefix; two tokens after it, twice
    assert scorer.cached_tokens == 20

    s.reset()
    assert s == ScoringStats()
    assert_close(scorer.score([C]), one_at_a_time(rm, [C]))
    assert (s.tokens_computed, s.tokens_reused, s.forward_passes, s.cache_hits) == (4, 10, 1, 1)
    assert scorer.cached_tokens == 24

    s.reset()
    assert_close(scorer.score([D]), one_at_a_time(rm, [D]))
    assert (s.tokens_computed, s.tokens_reused) == (9, 0)
    assert scorer.cached_tokens == 23

    s.reset()
    assert_close(scorer.score([B]), one_at_a_time(rm, [B]))
    assert (s.tokens_computed, s.tokens_reused, s.cache_hits) == (2, 8, 1)
    assert scorer.cached_tokens == 24
    assert s.to_dict()["tokens_reused"] == 8


def test_a_chain_of_shared_prefixes_costs_one_pass(make_rm, make_trace):
    """Best-of-N candidates share the problem, then the first step (all but one), then the second.

    Character tokenizer, prmkit convention. A = "Q?\na=1\nb=2\nc=3\n" and B (c=4) are 15 tokens,
    C = "Q?\na=1\nb=5\n" 11, D = "Q?\na=7\n" 7. All four share "Q?\na=" (5 tokens: a node saving
    3 x 5); A, B and C share "Q?\na=1\nb=" (9: 4 more, saving 2 x 4); A and B share
    "Q?\na=1\nb=2\nc=" (13: 4 more, saving 4). Each of the first two nodes has one node below it,
    so only the deepest runs (13 tokens, one pass) and the other two are its first 5 and 9
    positions; the leaves' 2 tokens each run in a second pass: 13 + 8 = 21 computed, as when every
    node ran in a pass of its own (5 + 4 + 4 + 8), in 2 passes instead of 4."""
    rm = make_rm("prmkit")
    A = make_trace("A", "Q?", ["a=1", "b=2", "c=3"])
    B = make_trace("B", "Q?", ["a=1", "b=2", "c=4"])
    C = make_trace("C", "Q?", ["a=1", "b=5"])
    D = make_trace("D", "Q?", ["a=7"])
    traces = [A, B, C, D]
    assert [len(rm.encode(t)) for t in traces] == [15, 15, 11, 7]
    levels, _ = plan_prefix_tree([tuple(rm.encode(t).input_ids) for t in traces], min_saved=4)
    assert [[len(n.ids) for n in level] for level in levels] == [[5], [9], [13]]
    waves, inherit = _node_waves(levels)
    assert [[len(n.ids) for n in wave] for wave in waves] == [[13]] and waves[0][0].parent is None
    assert [(len(n.ids), len(below.ids)) for n, below in inherit] == [(9, 13), (5, 9)]
    scorer = PrefixCachingScorer(rm, batch_size=8, min_saved_tokens=4)
    assert_close(scorer.score(traces), one_at_a_time(rm, traces))
    s = scorer.stats
    assert (s.tokens_requested, s.tokens_computed, s.forward_passes) == (48, 21, 2)
    one_each = PrefixCachingScorer(rm, batch_size=8, min_saved_tokens=4, merge_chains=False)
    assert_close(one_each.score(traces), one_at_a_time(rm, traces))
    s = one_each.stats
    assert (s.tokens_requested, s.tokens_computed, s.forward_passes) == (48, 21, 4)


def test_a_node_with_two_nodes_below_runs_first():
    levels, _ = plan_prefix_tree([(1, 2, 3, 4, 5), (1, 2, 3, 4, 6), (1, 2, 7, 8, 9), (1, 2, 7, 8, 0)],
                                 min_saved=2)
    waves, inherit = _node_waves(levels)
    assert [sorted(n.ids for n in wave) for wave in waves] == [[(1, 2)], [(1, 2, 3, 4), (1, 2, 7, 8)]]
    assert inherit == [] and all(n.parent is waves[0][0] for n in waves[1])


def test_rows_on_different_pasts_of_equal_length(make_rm, make_trace):
    """Two rows reusing different cached sequences of the same length share a batch unmasked; rows
    on pasts of different lengths (and one on none) need the left-padding mask."""
    rm = make_rm("prmkit")
    A, B = make_trace("A", "What?", ["x=1"]), make_trace("B", "What?", ["x=2"])
    C, D = make_trace("C", "What?", ["x=1", "y=3"]), make_trace("D", "What?", ["x=2", "y=4"])
    E, F = make_trace("E", "What?", ["x=1", "y=3", "z"]), make_trace("F", "Hm?", ["q"])
    scorer = PrefixCachingScorer(rm, batch_size=8, min_saved_tokens=1000)
    scorer.score([A, B])
    assert_close(scorer.score([C, D]), one_at_a_time(rm, [C, D]))
    assert (scorer.stats.forward_passes, scorer.stats.cache_hits) == (2, 2)  # [A, B], then [C, D]
    assert_close(scorer.score([E, D, F, B]), one_at_a_time(rm, [E, D, F, B]))


def test_cache_stays_within_bound(make_rm, mixed_traces, make_trace):
    rm = make_rm("qwen2.5-math-prm")
    bound = 3 * max(len(rm.encode(t)) for t in mixed_traces)
    scorer = PrefixCachingScorer(rm, batch_size=4, max_cached_tokens=bound, min_saved_tokens=2)
    traces = list(mixed_traces)
    want = one_at_a_time(rm, traces)
    for start in range(0, len(traces), 3):
        assert_close(scorer.score(traces[start:start + 3]), want[start:start + 3])
        assert 0 < scorer.cached_tokens <= bound
        assert sum(len(e) for e in scorer._store.entries.values()) == scorer.cached_tokens
    scorer.clear()
    assert scorer.cached_tokens == 0


def test_no_cache_still_shares_prefixes(make_rm, mixed_traces):
    rm = make_rm("rlhflow")
    scorer = PrefixCachingScorer(rm, max_cached_tokens=0)
    assert_close(scorer.score(mixed_traces), one_at_a_time(rm, mixed_traces))
    assert scorer.cached_tokens == 0 and scorer.stats.tokens_reused > 0
    before = scorer.stats.tokens_computed
    scorer.score(mixed_traces[:1])
    assert scorer.stats.tokens_computed - before == len(rm.encode(mixed_traces[0]))


def test_prefix_tree_plan():
    """A node where k >= 2 sequences share m tokens beyond their parent and (k - 1) * m >= min_saved."""
    a, b, c, d, e = (1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 7, 8), (1, 2, 3, 9), (5, 5), (1, 2, 3, 4)
    levels, leaves = plan_prefix_tree([a, b, c, d, e, a], min_saved=2)
    assert [[n.ids for n in level] for level in levels] == [[(1, 2, 3)], [(1, 2, 3, 4)]]
    assert leaves[a].parent.ids == (1, 2, 3, 4) and leaves[e].parent.ids == (1, 2, 3, 4)
    assert leaves[c].parent.ids == (1, 2, 3) and leaves[d].parent is None
    # (1, 2, 3) saves 3 x 3 tokens; (1, 2, 3, 4) adds one token for three sequences: saves 2.
    levels, leaves = plan_prefix_tree([a, b, c, d, e], min_saved=3)
    assert [[n.ids for n in level] for level in levels] == [[(1, 2, 3)]]
    assert {leaves[x].parent.ids for x in (a, b, c, e)} == {(1, 2, 3)}
    levels, leaves = plan_prefix_tree([a, b, c], min_saved=7)
    assert levels == [] and all(leaf.parent is None for leaf in leaves.values())


def _reachable_kv_tokens(scorer) -> int:
    """Tokens of KV held by the store's entries and the entries they continue, each entry once."""
    seen, total = set(), 0
    for e in scorer._store.entries.values():
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            total += e.kv.shape[3]
            e = e.base
    return total


def _plain_kv(rm, ids):
    backbone = getattr(rm.model, rm.model.base_model_prefix)
    with torch.no_grad():
        cache = backbone(input_ids=torch.tensor([list(ids)]), use_cache=True).past_key_values
    return torch.stack([torch.stack([layer.keys[0], layer.values[0]]) for layer in cache.layers])


def _chained_kv(entry):
    kv = entry.kv
    out = torch.empty((kv.shape[0], 2, kv.shape[2], len(entry), kv.shape[4]), dtype=kv.dtype)
    entry.kv_into(len(entry), out)
    return out


def test_stored_kv_is_held_once_per_shared_prefix_and_equals_a_plain_pass(make_rm, make_trace):
    """Character tokenizer, prmkit convention. A = "What?\\nx=1\\n" and B (x=2) share the node
    "What?\\nx=" (8 tokens) and run their last 2 tokens on it: each keeps those 2 and points at the
    node's entry, so the store counts 20 tokens (A and B) and holds KV for 8 + 2 + 2 = 12. C = A +
    "y=3\\n" (14) continues the whole of A: it keeps its 4 new tokens and points at A (A leaves the store,
    C covers it; C's KV reaches A's and the node's: 4 + 2 + 8 = 14 tokens). D = "What?\\nx=1\\ny=5\\n"
    reuses the first 12 tokens of C, part of it: D copies them rather than keep C's last 2 alive, and
    holds its 14 tokens itself. Every entry's KV, read through what it continues, is a plain forward
    pass's."""
    rm = make_rm("prmkit")
    A, B = make_trace("A", "What?", ["x=1"]), make_trace("B", "What?", ["x=2"])
    C, D = make_trace("C", "What?", ["x=1", "y=3"]), make_trace("D", "What?", ["x=1", "y=5"])
    scorer = PrefixCachingScorer(rm, batch_size=8, min_saved_tokens=4)
    scorer.score([A, B])
    entries = list(scorer._store.entries.values())
    assert [len(e) for e in entries] == [10, 10] and scorer.cached_tokens == 20
    assert [e.kv.shape[3] for e in entries] == [2, 2] and entries[0].base is entries[1].base
    assert len(entries[0].base) == 8 and _reachable_kv_tokens(scorer) == 12
    scorer.score([C])
    c = next(e for e in scorer._store.entries.values() if len(e) == 14)
    assert c.kv.shape[3] == 4 and c.start == 10 and len(c.base) == 10 and c.base.start == 8
    assert_close(scorer.score([D]), one_at_a_time(rm, [D]))
    d = list(scorer._store.entries.values())[-1]
    assert len(d) == 14 and d.base is None and d.kv.shape[3] == 14
    assert _reachable_kv_tokens(scorer) <= scorer.cached_tokens
    for e in scorer._store.entries.values():
        torch.testing.assert_close(_chained_kv(e), _plain_kv(rm, e.ids), atol=1e-5, rtol=1e-5)


def test_reachable_kv_stays_within_the_bound(make_rm, mixed_traces, make_trace):
    """However entries continue each other, the KV they keep alive is at most the store's bound."""
    rm = make_rm("qwen2.5-math-prm")
    bound = 3 * max(len(rm.encode(t)) for t in mixed_traces)
    scorer = PrefixCachingScorer(rm, batch_size=4, max_cached_tokens=bound, min_saved_tokens=2)
    traces = list(mixed_traces)
    grown = [extend(make_trace, t, "and then 7") for t in traces]
    for start in range(0, len(traces), 3):
        scorer.score(traces[start:start + 3] + grown[start:start + 2])
        assert _reachable_kv_tokens(scorer) <= scorer.cached_tokens <= bound


def test_a_trace_extended_step_by_step_chains_at_most_max_chain_entries(make_rm, make_trace):
    """Beam search or a monitor extends a trace one step at a time: each extension continues the whole
    of the last, but past ``_MAX_CHAIN`` entries one copies its KV instead, so reading an entry never
    walks more than that many, and the scores stay one-at-a-time's."""
    from prmkit.scoring._prefix import _MAX_CHAIN

    rm = make_rm("prmkit")
    scorer = PrefixCachingScorer(rm, batch_size=4, min_saved_tokens=1)
    steps = []
    for k in range(2 * _MAX_CHAIN + 3):
        steps.append(f"s{k}")
        t = make_trace(f"t{k}", "Q?", steps)
        assert_close(scorer.score([t]), one_at_a_time(rm, [t]))
        entry = next(e for e in scorer._store.entries.values() if len(e) == len(rm.encode(t)))
        assert entry.depth <= _MAX_CHAIN
        n, e = 0, entry
        while e.base is not None:
            n, e = n + 1, e.base
        assert n == entry.depth
    assert entry.depth < k  # some extension copied instead of chaining
    torch.testing.assert_close(_chained_kv(entry), _plain_kv(rm, entry.ids), atol=1e-5, rtol=1e-5)
