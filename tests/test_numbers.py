"""Numbers validated at the edge: NaN, infinities and out-of-range scores or label values are refused on
read with their file, line and field; aggregation and selection refuse NaN instead of letting it win;
a trace a PRM scored only in part is marked (``meta.scored_steps``) and counted in the summaries."""

from __future__ import annotations

import json
import math

import pytest

from prmkit.errors import FormatError, PrmkitError
from prmkit.eval import BonMethod, bon_curves
from prmkit.scoring import ScriptedScorer, score_file, score_traces, score_traces_or_skip, trace_score
from prmkit.search import select, select_file
from prmkit.trace import Problem, Step, StepLabel, Trace, read_traces, write_traces
from prmkit.trace_queries import partly_scored, write_scores

NAN = float("nan")


def _write_lines(path, records):
    # json.dumps writes NaN / Infinity for float("nan") / float("inf"): what a careless writer leaves
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _trace(tid="t", **step):
    return {"id": tid, "problem": {"text": "1 + 1?"}, "steps": [{"text": "1 + 1 = 2", **step}]}


# -- on read ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("step, where, reason", [
    ({"scores": {"prm": NAN}}, "steps[0].scores.prm", "a step score is a probability in [0, 1], got nan"),
    ({"scores": {"prm": float("inf")}}, "steps[0].scores.prm",
     "a step score is a probability in [0, 1], got inf"),
    ({"scores": {"prm": 1.25}}, "steps[0].scores.prm", "a step score is a probability in [0, 1], got 1.25"),
    ({"scores": {"prm": -0.5}}, "steps[0].scores.prm", "a step score is a probability in [0, 1], got -0.5"),
    ({"labels": [{"value": NAN, "kind": "soft"}]}, "steps[0].labels[0].value",
     "expected a finite number, got NaN"),
    ({"labels": [{"value": float("-inf"), "kind": "soft", "source": "advantage"}]},
     "steps[0].labels[0].value", "expected a finite number, got -inf"),
    ({"labels": [{"value": 1.5, "kind": "soft", "source": "mc_soft"}]}, "steps[0].labels[0].value",
     "a soft label is a probability in [0, 1], got 1.5"),
    ({"labels": [{"value": -1.5, "kind": "soft", "source": "advantage"}]}, "steps[0].labels[0].value",
     "an advantage label lies in [-1, 1], got -1.5"),
    ({"labels": [{"value": NAN}]}, "steps[0].labels[0].value", "expected a finite number, got NaN"),
])
def test_bad_numbers_are_refused_with_file_line_and_field(tmp_path, step, where, reason):
    path = _write_lines(tmp_path / "in.jsonl", [_trace("ok"), _trace("bad", **step)])
    with pytest.raises(FormatError) as e:
        list(read_traces(path))
    assert str(e.value) == f"{path}:2: {where} — {reason}"


def test_nan_trace_scores_in_meta_are_refused(tmp_path):
    bad = {**_trace(), "meta": {"scores": {"orm": 0.5, "prm:min": NAN}}}
    path = _write_lines(tmp_path / "in.jsonl", [bad])
    with pytest.raises(FormatError, match=r"in\.jsonl:1: meta\.scores\.prm:min — expected a finite "
                                          r"number, got NaN"):
        list(read_traces(path))


def test_numbers_in_range_still_read(tmp_path):
    ok = [_trace("a", scores={"prm": 0}, labels=[{"value": -0.25, "kind": "soft", "source": "advantage"}]),
          {**_trace("b", scores={"prm": 1.0}), "meta": {"scores": {"prm:min": 1}}}]
    path = _write_lines(tmp_path / "in.jsonl", ok)
    a, b = read_traces(path)
    assert a.steps[0].labels[0].value == -0.25 and b.meta["scores"] == {"prm:min": 1}


def test_a_soft_label_out_of_range_is_refused_in_code_too():
    with pytest.raises(ValueError, match=r"a soft label is a probability in \[0, 1\], got nan"):
        StepLabel(NAN, source="mc_soft", kind="soft")


# -- aggregation and selection ------------------------------------------------------------------------

@pytest.mark.parametrize("agg", ["min", "last", "prod", "mean", "geo_mean", "first_below:0.5"])
def test_every_aggregator_refuses_nan(agg):
    with pytest.raises(PrmkitError, match="score 0 is nan"):
        trace_score([NAN, 0.1], agg)


def test_a_custom_aggregator_that_returns_nan_is_refused():
    with pytest.raises(PrmkitError, match="aggregate custom: score 0 is nan"):
        trace_score([0.5], lambda v: NAN)


def _pair():
    # a wrong trace scored [NaN, 0.1] and a right one scored [0.9, 0.8]: before, min([nan, 0.1]) was
    # nan, which compares false with everything, so best-of-N kept the first trace — the wrong one
    p = Problem("2 + 3?", answer="5", id="p")
    wrong = Trace(id="wrong", problem=p, final_answer="6", outcome="incorrect",
                  steps=[Step("2 + 3 = 6", scores={"prm": NAN}),
                         Step("The answer is 6.", scores={"prm": 0.1})])
    right = Trace(id="right", problem=p, final_answer="5", outcome="correct",
                  steps=[Step("2 + 3 = 5", scores={"prm": 0.9}),
                         Step("The answer is 5.", scores={"prm": 0.8})])
    return [wrong, right]


@pytest.mark.parametrize("method", ["bon", "weighted"])
def test_selection_refuses_nan_and_names_the_trace(method):
    with pytest.raises(PrmkitError, match=r"trace 'wrong': step scores: score 0 is nan"):
        select(_pair(), method, key="prm")
    with pytest.raises(PrmkitError, match="score 0 is nan"):
        select(_pair()[1:], method, scores=[[NAN, 0.2]])


def test_bon_curves_refuse_nan_step_and_trace_scores():
    with pytest.raises(PrmkitError, match=r"PRM \(min\): trace 'wrong': step scores: score 0 is nan"):
        bon_curves(_pair(), [BonMethod("PRM (min)", "bon", key="prm", aggregate="min")])
    ts = _pair()
    ts[0].meta["scores"] = {"orm": NAN}
    ts[1].meta["scores"] = {"orm": 0.7}
    with pytest.raises(PrmkitError, match=r"ORM: trace 'wrong': trace score: score 0 is nan"):
        bon_curves(ts, [BonMethod("ORM", "bon", key="orm")])


def test_select_file_refuses_a_file_holding_nan(tmp_path):
    path = tmp_path / "scored.jsonl"
    rows = [t.to_dict() for t in _pair()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # writes NaN
    with pytest.raises(FormatError, match=r"scored\.jsonl:1: steps\[0\]\.scores\.prm — a step score is a "
                                          r"probability in \[0, 1\], got nan"):
        select_file(path, method="bon", key="prm")


# -- storing scores ----------------------------------------------------------------------------------------

def test_write_scores_never_stores_nan():
    t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b")])
    with pytest.raises(PrmkitError, match="trace 't': step score nan refused"):
        write_scores(t, [0.5, NAN], kind="prm", key="prm")
    with pytest.raises(PrmkitError, match="trace 't': trace score inf refused"):
        write_scores(t, [0.5, 0.5], kind="prm", key="prm", trace_scores={"prm:min": math.inf})
    assert [s.scores for s in t.steps] == [{}, {}] and "scores" not in t.meta


def test_a_scorer_giving_nan_costs_only_its_trace_and_nothing_is_half_written():
    ts = [Trace(id=str(i), problem=Problem("q"), steps=[Step(f"s{i}")]) for i in range(3)]
    scorer = ScriptedScorer([[0.5], [NAN], [0.25]])
    with pytest.raises(PrmkitError, match=r"trace '1': scorer 'scripted': score 0 is nan"):
        score_traces(scorer, ts)
    assert all(not t.provenance and "scores" not in t.meta for t in ts)  # checked before any write
    skipped = score_traces_or_skip(ScriptedScorer([[0.5], [NAN], [0.25]]), ts, chunk=3)
    assert [tid for tid, _ in skipped] == ["1"]
    assert [t.meta.get("scores") for t in ts] == [{"prm:min": 0.5}, None, {"prm:min": 0.25}]
    assert [len(t.provenance) for t in ts] == [1, 0, 1]  # the retry one at a time adds no duplicate


# -- traces scored only in part ------------------------------------------------------------------------------

def _three_steps(tid):
    return Trace(id=tid, problem=Problem("q", answer="2", id=tid[0]), final_answer="2", outcome="correct",
                 steps=[Step("a"), Step("b"), Step("c")])


def test_a_trace_scored_in_part_is_marked_and_the_mark_survives_a_round_trip(tmp_path):
    t = _three_steps("cut")
    # what RewardModel.score gives a trace cut by max_length with long="truncate": None past the cut
    score_traces(ScriptedScorer(lambda trace: [0.75, 0.5, None]), [t])
    assert partly_scored(t, "prm") and t.meta["scored_steps"] == {"prm": 2}
    assert t.meta["scores"] == {"prm:min": 0.5}  # the steps that fit
    write_traces([t], tmp_path / "t.jsonl")
    [back] = read_traces(tmp_path / "t.jsonl")
    assert back.meta["scored_steps"] == {"prm": 2} and partly_scored(back, "prm")
    score_traces(ScriptedScorer(lambda trace: [0.75, 0.5, 0.25]), [back])  # rescored whole: unmarked
    assert not partly_scored(back, "prm") and "scored_steps" not in back.meta


def test_score_file_and_select_file_count_traces_scored_in_part(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces([_three_steps("p0"), _three_steps("p1"), _three_steps("p2")], src)
    scores = {"p0": [0.75, 0.5, None], "p1": [0.75, 0.5, 0.25], "p2": [0.5, None, None]}
    report = score_file(src, dst, ScriptedScorer(lambda t: scores[t.id]), progress=False)
    assert (report.traces, report.scored, report.partial) == (3, 3, 2)
    assert report.lines()[1] == ("2 of 3 scored only in part (steps past max_length unscored; "
                                 "meta.scored_steps says how many were): their trace score covers "
                                 "the steps that fit")
    assert [t.meta.get("scored_steps") for t in read_traces(dst)] == [{"prm": 2}, None, {"prm": 1}]
    sel = select_file(dst, method="bon", key="prm")
    assert (sel.partial, sel.candidates) == (2, 3)
    assert sel.lines()[2].startswith("2 of 3 candidates scored only in part by prm")


def test_a_fully_scored_file_prints_no_partial_line(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_traces([_three_steps("p0")], src)
    report = score_file(src, dst, ScriptedScorer([[0.75, 0.5, 0.25]]), progress=False)
    assert report.partial == 0 and not any("in part" in line for line in report.lines())
