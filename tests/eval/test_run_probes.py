"""The one probe assembly (run_probes), the probe registry, the report rendering probes by asking the
registry, and the one best-of-N verdict builder (bon_report).

run_probes is checked against the assembly the demo did by hand before it (collapse, gaming on the
first traces of at least two steps, length bias, transfer scoring its own sources), on a scripted
scorer and traces small enough to check by hand.
"""

from __future__ import annotations

import copy
import sys
import types

import pytest

from prmkit.errors import PrmkitError
from prmkit.eval import (
    EXTRA_COMPARISONS,
    MAIN_METHOD,
    PROBES,
    RIVALS,
    Probe,
    ProbeNotApplicable,
    bon_curves,
    bon_report,
    bon_verdict,
    collapse_probe,
    default_methods,
    gaming_probe,
    length_bias_probe,
    register_probe,
    render_markdown,
    result_check_probe,
    run_probes,
    transfer_probe,
)
from prmkit.scoring import score_traces
from prmkit.search import ScriptedScorer
from prmkit.trace import Problem, Step, StepLabel, Trace

# -- data: held-out traces with two label sources, and two derived sources ------------------------------

# Step text -> (symbolic label, Monte Carlo label, PRM score). The two label sources disagree, so a
# probe reading the wrong one gives other numbers.
HELDOUT = {
    "h0": ("correct", [("The answer is 8.", 1, 1, 0.75)]),  # one step: not perturbed by gaming
    "h1": ("correct", [("h1 a", -1, 1, 0.25), ("h1: the answer is 8.", 1, 1, 0.75)]),
    "h2": ("incorrect", [("h2 a", 1, 1, 0.75), ("h2 b", -1, 1, 0.5), ("h2: the answer is 9.", -1, -1, 0.25)]),
    "h3": ("incorrect", [("h3 a", 1, -1, 0.5), ("h3: the answer is 7.", -1, -1, 0.25)]),
}
# Derived sources carry synthetic labels only: (label, score) per step.
SOURCE_A = {"a0": [("a0 s0", 1, 0.75), ("a0 s1", -1, 0.25)], "a1": [("a1 s0", 1, 0.5), ("a1 s1", 1, 0.75)]}
SOURCE_B = {"b0": [("b0 s0", 1, 0.25), ("b0 s1", -1, 0.5)]}


def scorer() -> ScriptedScorer:
    table = {text: s for _, rows in HELDOUT.values() for text, _, _, s in rows}
    table.update({text: s for src in (SOURCE_A, SOURCE_B) for rows in src.values() for text, _, s in rows})
    return ScriptedScorer(table, default=0.5)  # a perturbation's new step scores 0.5


def heldout() -> list[Trace]:
    out = []
    for tid, (outcome, rows) in HELDOUT.items():
        steps = [Step(text, labels=[StepLabel(sym, source="symbolic"), StepLabel(mc, source="mc")])
                 for text, sym, mc, _ in rows]
        out.append(Trace(id=tid, problem=Problem("Ann has 5 apples. She buys 3. How many?", answer="8"),
                         steps=steps, outcome=outcome))
    return out


def derived(rows_by_id: dict) -> list[Trace]:
    return [Trace(id=tid, problem=Problem("q"), steps=[Step(text, labels=[StepLabel(v, source="synthetic")])
                                                       for text, v, _ in rows])
            for tid, rows in rows_by_id.items()]


def texts(t: Trace) -> list[str]:
    return [s.text for s in t.steps]


# -- run_probes is the demo's assembly ------------------------------------------------------------------

def test_run_probes_equals_the_demo_assembly():
    prm = scorer()
    held, same, other = heldout(), derived(SOURCE_A), derived(SOURCE_B)
    score_traces(prm, held, "prm", aggregate="min")  # the demo scores the held-out traces first
    held_m, same_m, other_m = copy.deepcopy((held, same, other))
    # What the demo's _evaluate did, call for call.
    manual = {
        "collapse": collapse_probe(held_m, key="prm", label_source="symbolic").to_dict(),
        "gaming": gaming_probe(prm, [t for t in held_m if len(t.steps) >= 2][:2], seed=7).to_dict(),
        "result_check": result_check_probe(prm, held_m, label_source="symbolic", max_traces=2,
                                           seed=7).to_dict(),
        "length_bias": length_bias_probe(held_m, key="prm", aggregate="min").to_dict(),
        "transfer": transfer_probe(prm, {"arith (derived)": same_m, "other": other_m},
                                   in_domain="arith (derived)", key="prm").to_dict(),
    }
    mine = scorer()
    got = run_probes(mine, held, key="prm", score=False, label_source="symbolic", aggregate="min",
                     seed=7, gaming_traces=2, transfer_sources={"arith (derived)": same, "other": other},
                     in_domain="arith (derived)")
    assert got == manual
    assert list(got) == ["collapse", "gaming", "result_check", "length_bias", "transfer"]
    # By hand. Gaming perturbs h1 and h2 (h0 has one step): its first call scores exactly those.
    assert mine.calls[0] == [texts(held[1]), texts(held[2])]
    assert got["gaming"]["skipped"]["reorder_steps"] == 1  # h1 has no pair of steps before its last
    # Collapse reads the symbolic labels: one invalid step (h1 a, 0.25) among right-answer traces,
    # below both valid ones (0.75, 0.75); under the latest (mc) labels there would be none.
    assert got["collapse"]["right_answer"]["invalid_steps"] == 1
    assert got["collapse"]["right_answer"]["auroc"] == 1.0
    assert got["length_bias"]["n"] == 4
    # Transfer scores its sources and reads their own (synthetic) labels: a has 4 labelled steps,
    # AUROC 1.0 (valid .75 .5 .75 over invalid .25); b's one pair is ranked wrong: AUROC 0.
    src = got["transfer"]["sources"]
    assert (src["arith (derived)"]["steps"], src["arith (derived)"]["auroc"]) == (4, 1.0)
    assert (src["other"]["auroc"], got["transfer"]["auroc_drop"]) == (0.0, 1.0)


def test_in_domain_traces_join_transfer_with_their_label_source():
    """The CLI's shape: in_domain names the probed traces, which are not scored again."""
    prm = scorer()
    held, other = heldout(), derived(SOURCE_B)
    score_traces(prm, held, "probe")
    held_m, other_m = copy.deepcopy((held, other))
    score_traces(prm, other_m, "probe")
    manual = transfer_probe(None, {"heldout": held_m, "b": other_m}, in_domain="heldout", key="probe",
                            label_source={"heldout": "symbolic"}).to_dict()
    mine = scorer()
    got = run_probes(mine, held, key="probe", score=False, label_source="symbolic", probes=["transfer"],
                     transfer_sources={"b": other}, in_domain="heldout")
    assert got == {"transfer": manual}
    assert mine.calls == [[texts(other[0])]]  # only the second source was scored
    # Symbolic labels of the held-out steps: valid .75 .75 .75 .5, invalid .25 .5 .25 .25; of the 16
    # pairs the valid step ranks higher in 15 and ties in 1: AUROC 15.5 / 16 (mc labels: 12.5 / 15).
    assert got["transfer"]["sources"]["heldout"]["auroc"] == 15.5 / 16
    assert list(got["transfer"]["sources"]) == ["heldout", "b"]


def test_run_probes_scores_first_by_default():
    held = heldout()
    got = run_probes(scorer(), held, label_source="symbolic", probes=["length_bias"])
    assert held[3].steps[0].scores == {"prm": 0.5} and held[3].meta["scores"] == {"prm:min": 0.25}
    # min scores 0.75 (1 step), 0.25 (2), 0.25 (3), 0.25 (2)
    assert got["length_bias"]["by_length"] == [{"steps": 1, "n": 1, "mean_score": 0.75},
                                               {"steps": 2, "n": 2, "mean_score": 0.25},
                                               {"steps": 3, "n": 1, "mean_score": 0.25}]


def test_probe_selection_and_what_cannot_run():
    held = heldout()
    score_traces(scorer(), held, "prm")
    # order is the registry's, whatever the order asked
    assert list(run_probes(None, held, score=False, probes=["length_bias", "collapse"])) == [
        "collapse", "length_bias"]
    # without a scorer gaming cannot run, without a second source transfer cannot: left out ...
    assert list(run_probes(None, held, score=False)) == ["collapse", "length_bias"]
    # ... or an error when asked for by name
    with pytest.raises(ProbeNotApplicable, match="needs a scorer"):
        run_probes(None, held, score=False, probes=["gaming"])
    with pytest.raises(ProbeNotApplicable, match="second data source"):
        run_probes(scorer(), held, score=False, probes=["transfer"])
    with pytest.raises(PrmkitError, match="unknown probe 'nope'; known: collapse, gaming"):
        run_probes(scorer(), held, probes=["nope"])
    with pytest.raises(PrmkitError, match="needs a scorer; pass score=False"):
        run_probes(None, held)
    with pytest.raises(PrmkitError, match="without in_domain"):
        run_probes(scorer(), held, score=False, transfer_sources={"b": derived(SOURCE_B)})


# -- a probe from elsewhere: registered, run and rendered without touching the report ---------------------

class StepCountProbe:
    """A plugin probe: counts steps."""

    name = "step_count"
    title = "steps per trace"

    def run(self, ctx):
        per = {t.id: len(t.steps) for t in ctx.traces}
        total = sum(per.values())
        return {"failed": total > 100, "criterion": "fails above 100 steps", "steps": total,
                "per_trace": per}

    def headline(self, result):
        return f"{result['steps']} steps in all"

    def details(self, doc, result, figures):
        doc.table(["Trace", "Steps"], [[k, doc.count(v)] for k, v in result["per_trace"].items()])
        return ["per_trace"]


@pytest.fixture
def plugin(monkeypatch):
    module = types.ModuleType("prmkit_test_probe_plugin")
    module.StepCountProbe = StepCountProbe
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(PROBES, "step_count", "placeholder:X")  # undone after the test
    register_probe("step_count", "prmkit_test_probe_plugin:StepCountProbe")


def test_a_registered_probe_runs_and_renders(plugin):
    assert isinstance(PROBES.create("step_count"), Probe)
    held = heldout()
    got = run_probes(scorer(), held, transfer_sources={"b": derived(SOURCE_B)}, in_domain="heldout")
    assert list(got) == ["collapse", "gaming", "result_check", "length_bias", "transfer", "step_count"]
    assert got["step_count"] == {"failed": False, "criterion": "fails above 100 steps", "steps": 8,
                                 "per_trace": {"h0": 1, "h1": 2, "h2": 3, "h3": 2}}
    md = render_markdown({"probes": got})
    assert "| **step_count** | passed | 8 steps in all | fails above 100 steps |" in md
    section = md[md.index("### step_count: passed"):]
    assert "| Trace | Steps |\n| --- | --- |\n| h0 | 1 |\n| h1 | 2 |" in section
    # what details did not claim is still shown, once
    assert "#### Other fields" in section and "| steps | 8 |" in section
    assert "per_trace" not in section


def test_an_unknown_probe_result_renders_generically(monkeypatch):
    # Say a result file from a plugin that is not installed here, and one whose module is missing.
    monkeypatch.setitem(PROBES, "gone", "prmkit_no_such_plugin_module:Probe")
    result = {"failed": True, "criterion": "fails below 0.5", "score": 0.25, "rows": [{"n": 3}]}
    md = render_markdown({"probes": {"ghost": result, "gone": result}})
    for name in ("ghost", "gone"):
        assert f"| **{name}** | **FAILED** | — | fails below 0.5 |" in md
        section = md[md.index(f"### {name}: **FAILED**"):]
        assert section.startswith(f"### {name}: **FAILED**\n\n*Criterion:* fails below 0.5\n\n"
                                  "#### Other fields\n\n| Key | Value |\n| --- | --- |\n| score | 0.250 |")
        assert "| n |\n| --- |\n| 3 |" in section


# -- bon_report is the demo's verdict ----------------------------------------------------------------------

def candidates(pid: str, with_prm: bool = True, with_orm: bool = True) -> list[Trace]:
    """Two candidates: a wrong one first (so majority's tie goes to it) that the ORM prefers, and a
    right one that the PRM prefers under every aggregate."""
    p = Problem(f"question {pid}", answer="5", id=pid)
    out = []
    for i, (ans, prm, orm) in enumerate([("6", [0.75, 0.25], 0.75), ("5", [0.5, 0.75], 0.25)]):
        steps = [Step(f"{pid} {i} {k}", scores={"prm": s} if with_prm else {}) for k, s in enumerate(prm)]
        out.append(Trace(id=f"{pid}#{i}", problem=p, steps=steps, final_answer=ans,
                         outcome="correct" if ans == "5" else "incorrect",
                         meta={"scores": {"orm": orm}} if with_orm else {}))
    return out


def test_bon_report_equals_the_demo_calls():
    ts = [t for pid in "abc" for t in candidates(pid)]
    got = bon_report(ts, bootstrap=200, seed=3)
    # What the demo did by hand.
    methods = default_methods(ts)
    names = {m.name for m in methods}
    pairs = [("PRM (min)", r) for r in ["ORM", "majority"]] + [("PRM weighted (min)", "majority")]
    curves = bon_curves(ts, methods, bootstrap=200, seed=3,
                        comparisons=[c for c in pairs if c[0] in names and c[1] in names])
    assert got.to_dict() == {"bon": curves.to_dict(),
                             "summary": bon_verdict(curves.to_dict(), "PRM (min)", ["ORM", "majority"])}
    assert (MAIN_METHOD, RIVALS, EXTRA_COMPARISONS) == ("PRM (min)", ("ORM", "majority"),
                                                        (("PRM weighted (min)", "majority"),))
    # By hand: at N=2 every draw holds both candidates; the PRM picks the right one, the ORM and
    # majority (a tie, first seen) the wrong one, in every problem.
    d = got.to_dict()
    assert [(c["a"], c["b"], c["diff"], c["lo"]) for c in d["bon"]["comparisons"] if c["n"] == 2] == [
        ("PRM (min)", "ORM", 1.0, 1.0), ("PRM (min)", "majority", 1.0, 1.0),
        ("PRM weighted (min)", "majority", 1.0, 1.0)]
    assert [v["call"] for v in d["summary"]["headline"]["versus"].values()] == [
        "PRM (min) beat ORM", "PRM (min) beat majority"]


def test_bon_report_without_a_method():
    # No ORM scores: its comparison is left out and the verdict names it as not evaluated.
    got = bon_report([t for pid in "ab" for t in candidates(pid, with_orm=False)], bootstrap=50)
    assert {(c["a"], c["b"]) for c in got.to_dict()["bon"]["comparisons"]} == {
        ("PRM (min)", "majority"), ("PRM weighted (min)", "majority")}
    assert got.summary["headline"]["versus"]["ORM"] is None
    # No PRM scores: no main method, so curves without comparisons and no verdict (as the CLI did).
    got = bon_report([t for pid in "ab" for t in candidates(pid, with_prm=False)], bootstrap=50)
    assert got.summary is None and "summary" not in got.to_dict()
    assert got.to_dict()["bon"]["comparisons"] == []
    assert "ORM" in got.to_dict()["bon"]["methods"]


def test_probes_file_scores_the_whole_file_only_for_probes_that_read_its_scores(tmp_path):
    from prmkit.eval import probes_file, probes_read_scores
    from prmkit.trace import write_traces

    steps = ["3 + 4 = 7.", "7 * 2 = 14.", "The answer is 14."]
    traces = [Trace(id=f"t{i}", problem=Problem(f"q{i}"), outcome="correct", final_answer="14",
                    steps=[Step(s, labels=[StepLabel(1)]) for s in steps]) for i in range(3)]
    path = tmp_path / "t.jsonl"
    write_traces(traces, path)
    assert probes_read_scores(["result_check"]) is False and probes_read_scores(["gaming"]) is False
    assert probes_read_scores(["result_check", "collapse"]) is True and probes_read_scores(None) is True

    def whole_file_scored(probes):
        scorer = ScriptedScorer({}, default=0.5)
        probes_file(path, scorer, probes=probes, progress=False)
        return any(texts == steps for call in scorer.calls for texts in call)

    # result_check scores only its cut pairs, never a whole trace; collapse reads the file's scores
    assert whole_file_scored(["result_check"]) is False
    assert whole_file_scored(["collapse"]) is True
