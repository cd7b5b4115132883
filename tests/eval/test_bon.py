"""Best-of-N curves: the selection rules equal select()'s, exact values where no sampling noise is
left, and the bootstrap's determinism and pairing.

Scores are binary fractions (0.25, 0.5, ...) so sums and ties are exact.
"""

from __future__ import annotations

import json
import random
from itertools import combinations

import pytest

from prmkit.errors import PrmkitError
from prmkit.eval._bon import BonMethod, bon_choices, bon_curves, default_methods
from prmkit.search import select
from prmkit.trace import Problem, Step, Trace


def make(pid, rows, answer="5"):
    """rows: (final answer, correct, step scores or None, ORM score or None) per candidate."""
    p = Problem(f"question {pid}", answer=answer, id=pid)
    out = []
    for i, (ans, ok, steps, orm) in enumerate(rows):
        st = [Step(f"step {k}", scores={"prm": s}) for k, s in enumerate(steps or [])] or [Step("x")]
        meta = {} if orm is None else {"scores": {"orm": orm}}
        out.append(Trace(id=f"{pid}#{i}", problem=p, steps=st, final_answer=ans,
                         outcome="correct" if ok else "incorrect", meta=meta))
    return out


# Problems with ties, unscored candidates, candidates without an answer and equivalent answers
# ("5" and "5.0"), so every tie rule of select() is exercised.
TRICKY = [
    make("a", [("5", True, [0.75, 0.25], 0.5), ("6", False, [0.5, 0.625], 0.75),
               ("5.0", True, [0.5, 0.5], 0.25), ("6", False, [0.25, 0.5], None),
               (None, False, [0.875], 0.875)]),
    make("b", [("6", False, None, None), ("5", True, [0.25], 0.5), ("7", False, [0.25], 0.5),
               ("7", False, None, 0.25)]),
    make("c", [(None, True, [0.5], None), (None, False, [0.5], None)]),
    make("d", [("6", False, None, None), ("5", True, None, None)]),
    make("e", [("7", False, [0.5, 0.75], 0.25), ("7", False, [0.25], 0.25), ("5", True, [1.0], 0.0),
               ("8", False, [0.5], 0.5)]),
]

METHODS = [
    *(BonMethod(f"PRM ({a})", "bon", "prm", a) for a in ("min", "last", "prod", "mean", "geo_mean")),
    BonMethod("PRM weighted (min)", "weighted", "prm", "min"),
    BonMethod("PRM weighted (last)", "weighted", "prm", "last"),
    BonMethod("ORM", "bon", "orm"), BonMethod("ORM weighted", "weighted", "orm"),
    BonMethod("majority", "majority"), BonMethod("oracle", "oracle"),
]


def select_index(ts, m):
    if m.selector in ("bon", "weighted"):
        return select(ts, m.selector, aggregate=m.aggregate or "min", key=m.key).index
    return select(ts, m.selector).index


def random_problems(seed, count=30):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        rows = []
        for _ in range(rng.randint(2, 6)):
            ans = rng.choice(["5", "5.0", "6", "7", None])
            steps = None if rng.random() < 0.15 else [rng.choice([0.25, 0.5, 0.75])
                                                      for _ in range(rng.randint(1, 3))]
            orm = None if rng.random() < 0.2 else rng.choice([0.25, 0.5])
            rows.append((ans, ans in ("5", "5.0"), steps, orm))
        out.append(make(f"r{i}", rows))
    return out


@pytest.mark.parametrize("problems", [TRICKY, random_problems(1), random_problems(2)],
                         ids=["tricky", "random1", "random2"])
def test_choice_with_all_candidates_equals_select(problems):
    """Invariant: with all candidates, every method picks what select() picks."""
    traces = [t for ts in problems for t in ts]
    got = bon_choices(traces, METHODS)
    for ts in problems:
        pid = ts[0].problem.id
        for m in METHODS:
            assert got[m.name][pid] == select_index(ts, m), (m.name, pid)


@pytest.mark.parametrize("ts", TRICKY, ids=[ts[0].problem.id for ts in TRICKY])
def test_curve_at_all_candidates_equals_select(ts):
    """One problem at N = all candidates: no sampling is left, so every replicate's accuracy is the
    correctness of select()'s choice (no choice = wrong)."""
    curves = bon_curves(ts, METHODS, ns=[len(ts)], bootstrap=20)
    for m in METHODS:
        sel = select_index(ts, m)
        want = 0.0 if sel is None else float(ts[sel].outcome == "correct")
        assert curves.acc[m.name] == [want], m.name
        assert (curves.lo[m.name], curves.hi[m.name]) == ([want], [want])


def test_subsets_average_select_over_all_subsets():
    """One problem of 5 candidates, N = 2 and 3: the bootstrap mean estimates the average of
    select()'s correctness over all C(5, N) subsets in sample order (exact enumeration); with
    4000 replicates the standard error is at most 0.5 / sqrt(4000) < 0.008."""
    ts = TRICKY[0]
    curves = bon_curves(ts, METHODS, ns=[2, 3], bootstrap=4000, seed=3)
    for j, n in enumerate([2, 3]):
        subsets = list(combinations(range(len(ts)), n))
        for m in METHODS:
            total = 0
            for sub in subsets:
                picked = [ts[i] for i in sub]
                sel = select_index(picked, m)
                total += sel is not None and picked[sel].outcome == "correct"
            assert curves.acc[m.name][j] == pytest.approx(total / len(subsets), abs=0.04), (m.name, n)


# Two problems, two candidates each, one of them correct (derivations in the test).
#   p1: c0 "5" right, PRM 0.75, ORM 0.25;  c1 "6" wrong, PRM 0.25, ORM 0.75
#   p2: c0 "5" right, PRM 0.5,  ORM 0.0;   c1 "7" wrong, PRM 0.25, ORM 0.5
HAND = make("p1", [("5", True, [0.75], 0.25), ("6", False, [0.25], 0.75)]) + \
    make("p2", [("5", True, [0.5], 0.0), ("7", False, [0.25], 0.5)])
HAND_METHODS = [BonMethod("PRM", "bon", "prm", "min"), BonMethod("PRM weighted", "weighted", "prm", "min"),
                BonMethod("ORM", "bon", "orm"), BonMethod("majority", "majority"),
                BonMethod("random", "random"), BonMethod("oracle", "oracle")]


def test_hand_computed_curves():
    curves = bon_curves(HAND, HAND_METHODS, bootstrap=1000, seed=0,
                        comparisons=[("PRM", "ORM"), ("PRM", "random")])
    assert curves.ns == [1, 2] and (curves.problems, curves.candidates) == (2, 2)
    # N = 1: every method must take the one drawn candidate (each is scored and answered), which is
    # right with probability 1/2 in either problem: expectation 0.5 for all. A replicate is the mean
    # of 2 such draws (sd 0.354); over 1000 replicates the standard error is 0.011.
    for m in HAND_METHODS:
        assert curves.acc[m.name][0] == pytest.approx(0.5, abs=0.04), m.name
    # ...and since all methods take the same candidate in every replicate, their paired difference
    # is exactly 0 at N = 1.
    assert curves.compare("PRM", "ORM", n=1) == {"a": "PRM", "b": "ORM", "n": 1, "diff": 0.0,
                                                 "lo": 0.0, "hi": 0.0}
    # N = 2 holds every candidate; whichever problems are drawn:
    #   PRM picks 0.75 (p1 c0) and 0.5 (p2 c0): both right -> 1.0; weighted (one trace per answer)
    #   the same; ORM picks 0.75 (p1 c1) and 0.5 (p2 c1): both wrong -> 0.0; majority: 1-1 ties, the
    #   earliest answer (c0) wins -> 1.0; random: 1 of 2 right -> 0.5; oracle: 1.0.
    want = {"PRM": 1.0, "PRM weighted": 1.0, "ORM": 0.0, "majority": 1.0, "random": 0.5, "oracle": 1.0}
    for name, v in want.items():
        assert (curves.acc[name][1], curves.lo[name][1], curves.hi[name][1]) == (v, v, v), name
    assert curves.compare("PRM", "ORM") == {"a": "PRM", "b": "ORM", "n": 2, "diff": 1.0, "lo": 1.0,
                                            "hi": 1.0}
    # The comparisons asked for: every pair at every N, a minus b.
    got = {(c["a"], c["b"], c["n"]): c["diff"] for c in curves.to_dict()["comparisons"]}
    assert got[("PRM", "ORM", 2)] == 1.0 and got[("PRM", "random", 2)] == 0.5
    assert got[("PRM", "ORM", 1)] == 0.0 and set(got) == {(a, b, n) for a, b in
                                                          [("PRM", "ORM"), ("PRM", "random")]
                                                          for n in (1, 2)}


def test_unscored_and_unanswered_candidates_are_never_chosen():
    # q1: c0 right but unscored and without answer, c1 wrong, scored 0.25, answer "6".
    #   bon: N = 1 -> c0 drawn: no choice (wrong), c1 drawn: wrong -> exactly 0; N = 2 -> c1 -> 0.
    #   majority: c0 never votes -> c1 -> 0 at both N. oracle: N = 2 -> 1.0.
    ts = make("q1", [(None, True, None, None), ("6", False, [0.25], None)])
    curves = bon_curves(ts, [BonMethod("PRM", "bon", "prm", "min"), BonMethod("majority", "majority"),
                             BonMethod("w", "weighted", "prm", "min"), BonMethod("oracle", "oracle")],
                        bootstrap=50)
    assert curves.acc["PRM"] == [0.0, 0.0] and curves.acc["majority"] == [0.0, 0.0]
    assert curves.acc["w"] == [0.0, 0.0] and curves.acc["oracle"][1] == 1.0


def test_bootstrap_is_deterministic_and_intervals_hold_the_estimate():
    traces = [t for ts in random_problems(7, count=12) for t in ts]
    a = bon_curves(traces, METHODS, bootstrap=300, seed=11)
    b = bon_curves(traces, METHODS, bootstrap=300, seed=11)
    assert a.to_dict() == b.to_dict()
    c = bon_curves(traces, METHODS, bootstrap=300, seed=12)
    assert c.to_dict()["methods"] != a.to_dict()["methods"]
    for m in METHODS:
        for acc, lo, hi in zip(a.acc[m.name], a.lo[m.name], a.hi[m.name], strict=True):
            assert lo <= acc <= hi
            assert 0.0 <= lo and hi <= 1.0
    # ns: the smallest problem has 2 candidates -> [1, 2].
    assert a.ns == [1, 2]


def test_intervals_hold_the_estimate_where_the_percentiles_miss_it():
    # Problem a: 63 right candidates and one wrong; problem b: one right. At N = 1 a replicate falls
    # below 1 only when it draws a and then a's wrong candidate: 1 - (1 - 1/128)^2 = 1.6% of replicates,
    # fewer than 2.5%, so both percentiles are 1.0 while the mean is below it (the CI failure of stop 40).
    traces = make("a", [("5", True, None, None)] * 63 + [("6", False, None, None)]) \
        + make("b", [("5", True, None, None)])
    rnd = [BonMethod("random", "random")]
    curves = bon_curves(traces, rnd, ns=[1], bootstrap=1000, seed=3)
    below = float((curves.replicates["random"][:, 0] < 1.0).mean())
    assert 0.0 < below < 0.025
    acc = curves.acc["random"][0]
    assert acc == pytest.approx(1.0 - below / 2, abs=1e-12) and acc < 1.0
    assert curves.lo["random"][0] == acc and curves.hi["random"][0] == 1.0
    # Identical replicates of 1/3 (one right of three in each of three problems, all candidates taken):
    # their mean is 0.33333333333333326, a bit below the value; the interval reaches it.
    third = [t for i in range(3) for t in make(f"t{i}", [("5", True, None, None)]
                                                + [("6", False, None, None)] * 2)]
    c = bon_curves(third, rnd, ns=[3], bootstrap=1000, seed=0)
    assert c.lo["random"][0] <= c.acc["random"][0] <= c.hi["random"][0]
    assert c.acc["random"][0] == pytest.approx(1 / 3)
    d = curves.compare("random", "random", 1)
    assert d["lo"] <= d["diff"] <= d["hi"]


def test_paired_comparison_with_itself_is_zero():
    traces = [t for ts in random_problems(5, count=8) for t in ts]
    curves = bon_curves(traces, METHODS, bootstrap=200, comparisons=[("PRM (min)", "PRM (min)")])
    for n in curves.ns:
        assert curves.compare("PRM (min)", "PRM (min)", n) == {"a": "PRM (min)", "b": "PRM (min)",
                                                               "n": n, "diff": 0.0, "lo": 0.0,
                                                               "hi": 0.0}
    assert all(c["diff"] == 0.0 and c["lo"] == 0.0 and c["hi"] == 0.0 for c in curves.comparisons)


def test_default_methods_and_ns():
    traces = [t for i in range(3) for t in make(f"s{i}", [("5", True, [0.5], 0.5)] * 6)]
    names = [m.name for m in default_methods(traces)]
    assert names == ["PRM (min)", "PRM (last)", "PRM (prod)", "PRM (mean)", "PRM (geo_mean)",
                     "PRM weighted (min)", "ORM", "ORM weighted", "majority", "random",
                     "oracle (pass@N)"]
    no_orm = [t for t in make("s", [("5", True, [0.5], None)] * 2)]
    assert "ORM" not in [m.name for m in default_methods(no_orm)]
    # 6 candidates: powers of two up to 6, then 6 itself.
    curves = bon_curves(traces, bootstrap=10)
    assert curves.ns == [1, 2, 4, 6] and curves.candidates == 6 and curves.problems == 3
    d = curves.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert set(d) >= {"ns", "problems", "candidates", "bootstrap", "seed", "methods", "comparisons"}
    assert set(d["methods"]["PRM (min)"]) >= {"selector", "key", "aggregate", "acc", "lo", "hi"}
    assert d["methods"]["ORM"]["aggregate"] is None and d["methods"]["majority"]["key"] is None
    table = curves.lines()
    assert len(table) == 1 + len(names) + 1 and "N=6" in table[0] and table[1].startswith("PRM (min)")


def test_unjudged_problems_are_left_out():
    judged = make("j", [("5", True, [0.5], None), ("6", False, [0.25], None)])
    unjudged = make("u", [("5", True, [0.5], None)], answer=None)
    for t in unjudged:
        t.outcome = "unknown"
    curves = bon_curves(judged + unjudged, [BonMethod("oracle", "oracle")], bootstrap=10)
    assert (curves.problems, curves.unjudged_problems, curves.ns) == (1, 1, [1, 2])


def test_errors_say_what_to_change():
    with pytest.raises(PrmkitError, match="selector"):
        BonMethod("x", "best")
    with pytest.raises(PrmkitError, match="key"):
        BonMethod("x", "bon")
    with pytest.raises(PrmkitError, match="aggregator"):
        BonMethod("x", "bon", "prm", "median")
    with pytest.raises(PrmkitError, match="1..2"):
        bon_curves(HAND, HAND_METHODS, ns=[3], bootstrap=10)
    with pytest.raises(PrmkitError, match="two method names"):
        bon_curves(HAND, HAND_METHODS, bootstrap=10, comparisons=[("PRM", "nope")])
    with pytest.raises(PrmkitError, match="unique"):
        bon_curves(HAND, [BonMethod("m", "majority"), BonMethod("m", "oracle")], bootstrap=10)
    curves = bon_curves(HAND, HAND_METHODS, bootstrap=10)
    with pytest.raises(PrmkitError, match="no method"):
        curves.compare("PRM", "nope")
    with pytest.raises(PrmkitError, match="N=4"):
        curves.compare("PRM", "ORM", n=4)


def test_within_problem_auroc_ranks_within_problems_only():
    from prmkit.eval import within_problem_auroc
    from prmkit.trace import Problem, Step, Trace

    def t(pid, s, a, orm=False):
        p = Problem("q", answer="1", id=pid)
        if orm:
            return Trace(id=f"{pid}{s}{a}", problem=p, steps=[Step("x")], final_answer=a,
                         meta={"scores": {"orm": s}})
        return Trace(id=f"{pid}{s}{a}", problem=p, steps=[Step("x", scores={"prm": s}),
                                                           Step("y", scores={"prm": 1.0})], final_answer=a)
    # Problem a is easy (all scores high), b hard (all low): every right sample outscores every wrong one
    # within its problem, so the within-problem AUROC is 1 although pooled scores would mix them.
    rows = [("a", 0.9, "1"), ("a", 0.8, "2"), ("b", 0.3, "1"), ("b", 0.1, "2"), ("b", 0.2, "2")]
    assert within_problem_auroc([t(*r) for r in rows], "prm") == (1.0, 2)
    inverted = [(p, 1 - s, a) for p, s, a in rows]
    assert within_problem_auroc([t(*r) for r in inverted], "prm") == (0.0, 2)
    # A trace-level score (an ORM) reads the same with aggregate=None.
    assert within_problem_auroc([t(*r, orm=True) for r in rows], "orm", aggregate=None) == (1.0, 2)
    # No problem with both right and wrong samples: nothing to rank.
    assert within_problem_auroc([t("c", 0.5, "1")], "prm") == (None, 0)
