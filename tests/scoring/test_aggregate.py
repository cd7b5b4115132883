"""Aggregators (hand-computed values) and score_traces."""

from __future__ import annotations

import math

import pytest

from prmkit.errors import PrmkitError
from prmkit.scoring import AGGREGATORS, Aggregator, PrefixCachingScorer, get_aggregator, score_traces

SCORES = [0.9, None, 0.5, 0.8]  # the None (an unscored step) is skipped everywhere


@pytest.mark.parametrize("spec, want", [
    ("min", 0.5), ("last", 0.8), ("prod", 0.9 * 0.5 * 0.8), ("mean", (0.9 + 0.5 + 0.8) / 3),
    ("geo_mean", (0.9 * 0.5 * 0.8) ** (1 / 3)),
    ("first_below:0.6", 1 / 3),  # one scored step (0.9) before the first below 0.6 (0.5), of three
    ("first_below:0.4", 1.0), ("first_below:0.95", 0.0), ("first_below", 1.0),  # 0.5 is not below 0.5
])
def test_values(spec, want):
    assert get_aggregator(spec)(SCORES) == pytest.approx(want)


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
def test_empty_and_unscored_give_none(name):
    agg = get_aggregator(name)
    assert agg([]) is None and agg([None, None]) is None
    assert isinstance(agg, Aggregator) and get_aggregator(agg.spec).spec == agg.spec


def test_geo_mean_long_trace_no_underflow():
    assert get_aggregator("geo_mean")([1e-5] * 400) == pytest.approx(1e-5)
    assert get_aggregator("prod")([1e-5] * 400) == 0.0  # why geo_mean works in logs
    assert math.isclose(get_aggregator("geo_mean")([0.0, 1.0]), 0.0)


def test_first_below_ranks_late_errors_higher():
    early = [0.9, 0.1, 0.9, 0.9]
    late = [0.9, 0.9, 0.9, 0.1]
    agg = get_aggregator("first_below:0.5")
    assert agg(late) > agg(early)
    assert (agg(early), agg(late)) == (0.25, 0.75)


def test_errors_and_callables():
    with pytest.raises(PrmkitError, match="unknown aggregator 'median'"):
        get_aggregator("median")
    with pytest.raises(PrmkitError, match="threshold"):
        get_aggregator("first_below:2")
    with pytest.raises(PrmkitError, match="aggregator 'min:3'"):
        get_aggregator("min:3")

    def my_max(xs):
        return max(x for x in xs if x is not None)

    assert get_aggregator(my_max) is my_max


def test_trace_score_uses_these():
    """trace_score (what selection, search and the probes aggregate with) reads the same registry."""
    from prmkit.scoring import trace_score

    assert trace_score(SCORES, "first_below:0.6") == pytest.approx(1 / 3)
    assert trace_score([], "min") is None


def test_score_traces_prm_and_orm(make_rm, mixed_traces):
    rm = make_rm("prmkit", max_length=85, long="truncate")  # steps past it stay None
    traces = mixed_traces[:4]
    want = [rm.score([t])[0] for t in traces]
    assert any(None in w for w in want)
    score_traces(PrefixCachingScorer(rm), traces, aggregate="first_below:0.3")
    for t, w in zip(traces, want, strict=True):
        assert [s.scores.get("prm") for s in t.steps] == pytest.approx(w, abs=1e-4)
        assert t.meta["scores"]["prm:first_below:0.3"] == pytest.approx(get_aggregator("first_below:0.3")(w))
        assert t.provenance[-1].stage == "score" and t.provenance[-1].args["aggregate"] == "first_below:0.3"
        assert t.provenance[-1].args["scorer"] == "prefix_caching"

    orm = make_rm("prmkit", kind="orm")
    score_traces(orm, traces, key="outcome_rm")
    for t in traces:
        assert t.meta["scores"]["outcome_rm"] == pytest.approx(orm.score([t])[0][0])
        assert "outcome_rm" not in t.steps[-1].scores
