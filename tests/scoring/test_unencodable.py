"""One trace that cannot be encoded among good ones (issue 15): ``errors="raise"`` (the default) raises
for the whole call before any model work; ``errors="skip"`` / ``score_each`` give that trace ``None``
and a reason naming it, and the good traces score exactly as they do alone (the invariant), through
the model, the prefix-caching scorer and the ``prmkit score`` stage."""

from __future__ import annotations

import json

import pytest

from prmkit.errors import PrmkitError
from prmkit.scoring import PrefixCachingScorer, ScriptedScorer, score_each, score_file
from prmkit.trace import Problem, Step, Trace, read_traces

torch = pytest.importorskip("torch")

TOL = 1e-6
ML = 128  # the character tokenizer: one token per character


def _bad_traces(make_trace):
    """Each cannot be encoded with max_length=ML: its problem alone is longer; it has no steps; its
    text is a lone surrogate, which the tokenizer cannot take."""
    return [make_trace("too-long", "How many? " * 60, ["1 + 1 = 2."]),
            Trace(id="no-steps", problem=Problem("q"), steps=[]),
            make_trace("surrogate", "q\ud800", ["a\ud800"])]


@pytest.mark.parametrize("bad", [0, 1, 2], ids=["too_long", "no_steps", "surrogate"])
def test_one_bad_trace_leaves_the_others_scores_as_alone(bad, make_rm, mixed_traces, make_trace):
    rm = make_rm("prmkit", max_length=ML)
    good = mixed_traces[:5]
    b = _bad_traces(make_trace)[bad]
    alone = [rm.score([t])[0] for t in good]
    with pytest.raises(PrmkitError, match=f"^trace {b.id!r}: "):
        rm.score([*good[:2], b, *good[2:]])

    mixed = [*good[:2], b, *good[2:]]
    got = rm.score(mixed, errors="skip", batch_size=3)
    assert got[2] is None
    for s, a in zip(got[:2] + got[3:], alone, strict=True):
        assert s == pytest.approx(a, abs=TOL)

    each = rm.score_each(mixed, batch_size=3)
    assert [s is None for s, _ in each] == [False, False, True, False, False, False]
    why = each[2][1]
    assert why is not None and why.startswith(f"trace {b.id!r}: ")
    assert [w for _, w in each[:2] + each[3:]] == [None] * 5


def test_reasons_say_what_is_wrong(make_rm, make_trace):
    rm = make_rm("prmkit", max_length=ML)
    reasons = [why for _, why in rm.score_each(_bad_traces(make_trace))]
    assert reasons[0] == f"trace 'too-long': not even the first step fits in max_length={ML}"
    assert reasons[1] == "trace 'no-steps': a trace without steps cannot be scored"
    assert reasons[2].startswith("trace 'surrogate': the tokenizer cannot encode it (TypeError: ")


def test_errors_is_checked(make_rm, mixed_traces):
    with pytest.raises(PrmkitError, match="errors must be one of 'raise', 'skip', got 'ignore'"):
        make_rm("prmkit").score(mixed_traces[:1], errors="ignore")


def test_an_orm_skips_a_trace_too_long_for_it(make_rm, mixed_traces, make_trace):
    rm = make_rm("prmkit", kind="orm", max_length=ML)
    good = mixed_traces[:3]
    alone = [rm.score([t])[0] for t in good]
    got = rm.score_each([good[0], make_trace("long", "q", ["1 + 1 = 2."] * 12), *good[1:]])
    assert got[1] == (None, f"trace 'long': longer than max_length={ML}; an ORM needs the whole trace")
    assert [s for s, _ in got[:1] + got[2:]] == [pytest.approx(a, abs=TOL) for a in alone]


def test_prefix_caching_scorer_skips_the_same_way(make_rm, mixed_traces, make_trace):
    rm = make_rm("qwen2.5-math-prm", max_length=ML)
    cached = PrefixCachingScorer(rm)
    good = mixed_traces[:6]
    alone = [rm.score([t])[0] for t in good]
    mixed = [*good[:3], _bad_traces(make_trace)[0], *good[3:]]
    with pytest.raises(PrmkitError, match="'too-long'"):
        cached.score(mixed)
    got = cached.score_each(mixed)
    assert got[3][0] is None and got[3][1].startswith("trace 'too-long': ")
    for (s, why), a in zip(got[:3] + got[4:], alone, strict=True):
        assert why is None and s == pytest.approx(a, abs=1e-5)
    assert cached.score(mixed, errors="skip")[3] is None


def test_score_each_halves_for_a_scorer_without_its_own():
    calls = []

    class Refuses(ScriptedScorer):
        def score(self, traces):
            calls.append(len(traces))
            if any(t.id == "bad" for t in traces):
                raise PrmkitError("trace 'bad': refused")
            return super().score(traces)

    ts = [Trace(id="bad" if i == 5 else f"t{i}", problem=Problem("q"), steps=[Step("a")]) for i in range(8)]
    got = score_each(Refuses({"a": 0.25}), ts)
    assert [why for _, why in got] == [None] * 5 + ["trace 'bad': refused"] + [None] * 2
    assert [s for s, _ in got if s is not None] == [[0.25]] * 7
    assert len(calls) <= 1 + 2 * 3  # halving: about 2·log2(8), never one call per trace


def test_score_file_scores_the_good_ones_once_and_lists_the_bad(make_rm, mixed_traces, make_trace, tmp_path):
    rm = make_rm("prmkit", max_length=ML)
    good = mixed_traces[:4]
    alone = [rm.score([t])[0] for t in good]
    inp = tmp_path / "in.jsonl"
    with inp.open("w") as f:
        for t in [good[0], _bad_traces(make_trace)[0], *good[1:]]:
            f.write(json.dumps(t.to_dict()) + "\n")
    seen = []

    class Counting:
        kind, name = rm.kind, rm.name

        def score_each(self, traces):
            seen.append([t.id for t in traces])
            return rm.score_each(traces)

        def score(self, traces):  # pragma: no cover - score_file must not need it
            raise AssertionError("score_file retried through score()")

    report = score_file(inp, tmp_path / "out.jsonl", Counting(), progress=False)
    assert seen == [[good[0].id, "too-long", *[t.id for t in good[1:]]]]  # one call, nothing rescored
    assert report.skipped == [("too-long", f"trace 'too-long': not even the first step fits in max_length={ML}")]
    assert report.scored == 4 and report.traces == 5
    out = list(read_traces(tmp_path / "out.jsonl"))
    assert out[1].id == "too-long" and not out[1].meta.get("scores")
    for t, a in zip(out[:1] + out[2:], alone, strict=True):
        assert [s.scores["prm"] for s in t.steps] == pytest.approx(a, abs=TOL)


def test_score_traces_leaves_a_skipped_trace_as_it_was(make_rm, mixed_traces, make_trace):
    rm = make_rm("prmkit", max_length=ML)
    bad = _bad_traces(make_trace)[0]
    good = mixed_traces[0]
    rm.score_traces([good, bad], errors="skip")
    assert all("prm" in s.scores for s in good.steps) and len(good.provenance) == 1
    assert not bad.provenance and all(not s.scores for s in bad.steps)
