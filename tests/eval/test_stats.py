"""The shared statistics (``eval/_stats.py``): hand-derived AUROC and rank correlations, seeded
resampling, and, for every function that reports an estimate with an interval, that the interval holds
the estimate (cases chosen so that the plain percentiles miss it)."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from prmkit.envs import SpecEnv, spec_trajectory
from prmkit.eval import (
    BonMethod,
    auroc,
    average_ranks,
    bon_curves,
    bootstrap_summary,
    nested_resamples,
    pearson,
    percentile_interval,
    refusal_eval,
    spearman,
    stratified_resamples,
)
from prmkit.monitor import bootstrap_rates
from prmkit.scoring import ScriptedScorer
from prmkit.trace import Problem, Step, Trace


def test_auroc_by_hand():
    # positives 0.35, 0.8 against negatives 0.1, 0.4: 0.35 beats 0.1 only, 0.8 beats both -> 3/4
    assert auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    # positives 0.5, 0.2 against negative 0.5: a tie (1/2) and a loss (0) -> 0.5 / 2
    assert auroc([0.5, 0.5, 0.2], [True, False, True]) == 0.25
    assert auroc([0.3, 0.1], [True, True]) is None and auroc([], []) is None


def test_auroc_equals_counting_every_pair():
    rng = random.Random(0)
    for _ in range(50):
        s = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(rng.randint(2, 12))]
        y = [rng.random() < 0.5 for _ in s]
        pos = [a for a, b in zip(s, y, strict=True) if b]
        neg = [a for a, b in zip(s, y, strict=True) if not b]
        want = (sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))
                if pos and neg else None)
        assert auroc(s, y) == want


def test_rank_correlations_by_hand():
    assert average_ranks([0.3, 0.1, 0.3, 0.2]) == [3.5, 1.0, 3.5, 2.0]
    # no ties: d = 0, 1, 1, 0 -> rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8, abs=1e-15)
    # ties: ranks x = 1, 2.5, 2.5, 4 -> sxy = 4.5, sxx = 4.5, syy = 5 -> r = sqrt(0.9)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9 ** 0.5, abs=1e-15)
    assert spearman([1, 2, 3], [5, 5, 5]) is None and pearson([1.0], [2.0]) is None


def test_resampling_is_deterministic_with_a_seed():
    a = stratified_resamples([list(range(7)), list("abc")], 20, seed=3)
    assert a == stratified_resamples([list(range(7)), list("abc")], 20, seed=3)
    assert a != stratified_resamples([list(range(7)), list("abc")], 20, seed=4)
    assert stratified_resamples([[1], []], 5) == []

    def draws(seed, chunk):
        return [(s, u.tolist(), o.tolist()) for s, u, o in nested_resamples([3, 1, 2], 6, seed, chunk=chunk)]

    assert draws(0, 4) == draws(0, 4) and draws(0, 4) != draws(1, 4)
    # each drawn unit's order starts with a permutation of its own members
    sizes = [3, 1, 2]
    for _, units, order in nested_resamples(sizes, 6, 0, chunk=4):
        for u_row, o_row in zip(units, order, strict=True):
            for u, o in zip(u_row, o_row, strict=True):
                assert sorted(o[:sizes[u]]) == list(range(sizes[u]))


def test_percentile_interval_holds_its_estimate():
    r = [1.0] * 98 + [0.5, 0.0]
    assert np.percentile(r, [2.5, 97.5]).tolist() == [1.0, 1.0]   # the plain percentiles miss the mean
    mean, lo, hi = (float(x) for x in bootstrap_summary(r))
    assert (mean, lo, hi) == (0.985, 0.985, 1.0)
    assert [float(x) for x in percentile_interval(r, 1.5)] == [1.0, 1.5]
    two_d = np.array([[0.2, 0.4], [0.6, 0.8], [0.4, 0.6]])
    mean, lo, hi = bootstrap_summary(two_d)
    assert np.all(lo <= mean) and np.all(mean <= hi) and lo.shape == (2,)


def test_bon_intervals_hold_their_estimates():
    # One problem, one right answer among 5 candidates: every replicate of "random" at N = 5 is 0.2,
    # but their mean is 0.19999999999999998, below the plain percentiles.
    ts = [Trace(id=str(i), problem=Problem("q", answer="1", id="p"), steps=[Step("s", scores={"prm": i / 8})],
                final_answer="1" if i == 0 else "2") for i in range(5)]
    c = bon_curves(ts, [BonMethod("random", "random"), BonMethod("PRM", "bon", "prm", "min")], ns=[1, 5],
                   bootstrap=7, comparisons=[("random", "PRM")])
    r = c.replicates["random"][:, 1]
    lo, hi = np.percentile(r, [2.5, 97.5])
    assert not lo <= r.mean() <= hi
    for m in ("random", "PRM"):
        for lo, acc, hi in zip(c.lo[m], c.acc[m], c.hi[m], strict=True):
            assert lo <= acc <= hi
    for d in c.comparisons + [c.compare("PRM", "random", 1)]:
        assert d["lo"] <= d["diff"] <= d["hi"]


def _spec_traces():
    return [spec_trajectory(r, o) for r in SpecEnv().requests(5) for o in ("reasoned", "surface")]


def _hashed(t, mod):
    return (zlib.crc32(t.id.encode()) % mod) / 100


def test_refusal_intervals_hold_their_estimates():
    prm = ScriptedScorer(lambda t: [_hashed(t, 97)] * len(t.steps))
    orm = ScriptedScorer(lambda t: [_hashed(t, 89)], kind="orm")
    for seed in range(4):
        # One replicate: the plain percentile interval is that replicate alone, which is not the
        # AUROC on all refusals; the reported interval reaches it.
        r = refusal_eval(_spec_traces(), {"prm": prm, "orm": orm}, bootstrap=1, seed=seed)
        for sep in r.separation.values():
            assert sep.ci[0] <= sep.auroc <= sep.ci[1]
        d = r.difference
        assert d.ci[0] <= d.value <= d.ci[1]
        assert d.ci[0] < d.ci[1]   # widened: one replicate alone is a single point


def test_monitor_rate_intervals_hold_their_estimates():
    rng = random.Random(1)
    for seed in range(5):
        actual = [rng.random() < 0.5 for _ in range(9)] + [True, False]
        predicted = [rng.random() < 0.5 for _ in actual]
        ci = bootstrap_rates(predicted, actual, n=1, seed=seed)
        pos = [p for p, a in zip(predicted, actual, strict=True) if a]
        neg = [p for p, a in zip(predicted, actual, strict=True) if not a]
        tpr, tnr = sum(pos) / len(pos), (len(neg) - sum(neg)) / len(neg)
        for name, value in (("tpr", tpr), ("tnr", tnr), ("g_mean2", tpr * tnr)):
            assert ci[name][0] <= value <= ci[name][1]
