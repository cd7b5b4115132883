"""``omegaprm``: the first error by binary search in a tree of shared rollouts, with the rollouts
counted by hand; sharing (a rollout from a shorter prefix that writes the trace's next steps again
decides or fills a deeper prefix); resume; the MATH-APS tree round trip; the command line."""

from __future__ import annotations

import json

import pytest
import typer
from labeler_fakes import RIGHT, WRONG, RulePolicy, comparable, make_trace
from typer.testing import CliRunner

from prmkit.cli._label import label
from prmkit.data import get_format, read
from prmkit.errors import PrmkitError
from prmkit.labelers import BinarySearchLabeler, OmegaPRMLabeler, get_labeler, omegaprm_records
from prmkit.policies import ScriptedPolicy
from prmkit.trace import read_traces, write_traces


def values(trace, source):
    return [None if lab is None else lab.value for lab in trace.labels(source)]


class PrefixPolicy(ScriptedPolicy):
    """Rollout ``r`` from prefix ``p`` of any trace is ``script[p][r]`` (``WRONG`` when missing)."""

    def __init__(self, script: dict[int, list[str]]) -> None:
        def pick(request, r):
            p = int(request.key.rpartition("@")[2])
            got = script.get(p, [])
            return got[r] if r < len(got) else WRONG
        super().__init__(pick)

    def keys(self):
        return [req.key for req in self.requests]


def test_no_sharing_searches_like_binary_with_the_rollouts_counted():
    # 4 steps, the answer 7 is wrong; prefix 1 good (1 of 3 rollouts right), prefix 2 bad. The
    # rollouts write none of the trace's steps, so nothing is shared: the search visits prefix 2
    # (0/3), then prefix 1 (1/3), 6 rollouts, exactly binary's.
    t, b = (make_trace("T", ["step a", "step b", "step c", "The answer is 7."]) for _ in range(2))
    pol = RulePolicy({"T@1": 1})
    report = OmegaPRMLabeler(pol, k=3).label([t])
    assert [req.key for req, _ in pol.requests] == ["T@2", "T@1"]
    assert report.rollouts == 6 == BinarySearchLabeler(RulePolicy({"T@1": 1}), k=3).label([b]).rollouts
    assert values(t, "binary_search") == [1, -1, None, None] == values(b, "binary_search")
    # soft: correct / samples where a prefix has samples; the last step from the trace's own answer
    assert values(t, "mc_soft") == [pytest.approx(1 / 3), 0.0, None, 0.0]
    lab = t.steps[0].label("mc_soft")
    assert (lab.labeler, lab.kind, lab.rollouts, lab.model) == ("omegaprm", "soft", 3, "rule-policy")
    assert lab.meta == {"prefix": 1, "own": 3, "own_successes": 1, "shared": 0, "shared_successes": 0}
    assert t.steps[1].label("binary_search").rollouts == 6
    assert t.meta["labeling"]["omegaprm"]["visited"] == [[2, 3, 3, 0], [1, 3, 3, 1]]
    assert t.provenance[-1].name == "omegaprm" and t.provenance[-1].args["args"]["k"] == 3


def test_a_right_rollout_through_a_deeper_prefix_makes_its_rollouts_unnecessary():
    # Steps 0-2 right, the answer line wrong. The search rolls out prefix 2 (k=2): rollout 0 writes
    # step 2 ("3+1=4") again and reaches 4, so prefix 3 is good with no rollout of its own; the first
    # error is step 3 after 2 rollouts. binary rolls out prefixes 2 and 3: 4.
    steps = ["1+1=2", "2+1=3", "3+1=4", "The answer is 5."]
    t, b = make_trace("T", steps), make_trace("T", steps)
    for x in (t, b):
        x.problem.answer = "4"
    script = {2: ["3+1=4\nThe answer is 4.", "3+1=5\nThe answer is 5."], 3: ["The answer is 4."] * 2}
    pol = PrefixPolicy(script)
    report = OmegaPRMLabeler(pol, k=2).label([t])
    assert pol.keys() == ["T@2"] and report.rollouts == 2
    assert t.first_error("binary_search") == 3
    assert BinarySearchLabeler(PrefixPolicy(script), k=2).label([b]).rollouts == 4
    assert b.first_error("binary_search") == 3
    # prefix 3's samples: rollout 0 of prefix 2 (shared, right); prefix 2: both of its own, 1 right
    assert values(t, "mc_soft") == [None, 0.5, 1.0, 0.0]
    assert t.steps[2].label("mc_soft").meta == {"prefix": 3, "own": 0, "own_successes": 0,
                                                "shared": 1, "shared_successes": 1}
    assert t.meta["labeling"]["omegaprm"]["tree"]["branches"] == [
        [2, 0, 1, True, "3+1=4\nThe answer is 4."], [2, 1, 0, False, "3+1=5\nThe answer is 5."]]


def test_wrong_rollouts_through_a_prefix_count_towards_its_k():
    # 5 steps, step 3 BAD. Prefix 3 (k=3): rollout 0 right by its own way, rollouts 1 and 2 write the
    # BAD step again and fail, so prefix 4 holds 2 failed samples and gets 1 rollout of its own
    # (index 0), which fails: bad. First error 3 after 3 + 1 rollouts (binary: 3 + 3).
    steps = ["a", "b", "c", "d BAD", "The answer is 7."]
    t = make_trace("T", steps)
    script = {3: [RIGHT, "d BAD\n" + WRONG, "d BAD\n" + WRONG]}
    pol = PrefixPolicy(script)
    report = OmegaPRMLabeler(pol, k=3).label([t])
    assert pol.keys() == ["T@3", "T@4"] and report.rollouts == 4 == report.generated
    assert values(t, "binary_search") == [1, 1, 1, -1, None]
    assert t.steps[3].label("mc_soft").meta == {"prefix": 4, "own": 1, "own_successes": 0,
                                                "shared": 2, "shared_successes": 0}
    b = make_trace("T", steps)
    assert BinarySearchLabeler(PrefixPolicy(script), k=3).label([b]).rollouts == 6


def test_a_right_rollout_from_a_shorter_prefix_overrules_a_bad_verdict():
    # Prefix 2 fails all k=2 of its own rollouts (bad); prefix 1's rollout 0 writes step 1 again and
    # reaches the answer, so prefix 2 is good after all: the search goes on to prefix 3 (bad).
    t = make_trace("T", ["a", "b", "c", "The answer is 7."])
    pol = PrefixPolicy({1: ["b\n" + RIGHT]})
    report = OmegaPRMLabeler(pol, k=2).label([t])
    assert pol.keys() == ["T@2", "T@1", "T@3"] and report.rollouts == 6
    assert values(t, "binary_search") == [1, 1, -1, None]
    assert values(t, "mc_soft")[:3] == [0.5, pytest.approx(1 / 3), 0.0]


def test_right_traces_cost_nothing_and_the_budget_stops_the_search():
    right = make_trace("R", ["a", "b", "The answer is 42."])
    pol = RulePolicy({})
    assert OmegaPRMLabeler(pol, k=4).label([right]).rollouts == 0 and pol.requests == []
    assert values(right, "binary_search") == [1, 1, 1] and values(right, "mc_soft") == [None, None, 1.0]
    t = make_trace("T", [f"s{i}" for i in range(7)] + ["The answer is 7."])
    report = OmegaPRMLabeler(RulePolicy({f"T@{p}": 1 for p in range(1, 6)}), k=2, max_rollouts=5).label([t])
    # prefix 4 good (2), prefix 6 bad (4); prefix 5 would exceed 5 rollouts: the error is in steps 4..5
    assert report.rollouts == 4 and report.counts["budget_exhausted"] == 1
    assert values(t, "binary_search") == [1, 1, 1, 1, None, None, None, None]
    assert t.meta["labeling"]["omegaprm"]["first_error_within"] == [4, 5]
    with pytest.raises(PrmkitError, match="after_error"):
        OmegaPRMLabeler(pol, after_error="maybe")


def test_resumed_run_equals_the_uninterrupted_one(tmp_path):
    def traces():
        return [make_trace(f"t{i}", ["a", "b BAD" if i % 2 else "b", "c", "The answer is 7."])
                for i in range(4)]
    ref = traces()
    get_labeler("omegaprm", policy=RulePolicy(p=0.5), k=2, seed=5).label(ref, store=tmp_path / "ref.sqlite")
    store = tmp_path / "s.sqlite"
    with pytest.raises(RuntimeError, match="policy went away"):
        get_labeler("omegaprm", policy=RulePolicy(p=0.5, fail_after=3), k=2, seed=5).label(
            traces(), store=store)
    resumed = traces()
    report = get_labeler("omegaprm", policy=RulePolicy(p=0.5), k=2, seed=5).label(resumed, store=store)
    assert report.reused == 3 * 2 and report.generated == report.rollouts - 6
    assert [comparable(t.to_dict()) for t in resumed] == [comparable(t.to_dict()) for t in ref]


def test_the_tree_round_trips_through_the_math_aps_importer(tmp_path):
    steps = ["1+1=2", "2+1=3", "3+1=4", "The answer is 5."]
    t = make_trace("T", steps)
    t.problem.answer = "4"
    OmegaPRMLabeler(PrefixPolicy({2: ["3+1=4\nThe answer is 4.", "  3+1=5 \n\nThe answer is 5."]}),
                    k=2).label([t])
    q = t.problem.text
    [rec] = omegaprm_records([t])
    assert rec == {"question": q, "final_answer": "4", "question_id": 0, "reasoning_steps": [
        {"solution_prefix": f"{q}\n\n1+1=2\n\n2+1=3", "mc_value": 0.5},
        {"solution_prefix": f"{q}\n\n1+1=2\n\n2+1=3\n\n3+1=4", "mc_value": 1.0},
        {"solution_prefix": f"{q}\n\n1+1=2\n\n2+1=3\n\n3+1=4\n\nThe answer is 5.", "mc_value": 0.0},
        {"solution_prefix": f"{q}\n\n1+1=2\n\n2+1=3\n\n3+1=4\n\nThe answer is 4.", "mc_value": 1.0},
        {"solution_prefix": f"{q}\n\n1+1=2\n\n2+1=3\n\n3+1=5\n\nThe answer is 5.", "mc_value": 0.0}]}
    path = tmp_path / "tree.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    back = list(read(path, "math_aps"))
    # the importer's tree: the trace's leaf and the two rollout leaves, values where entries were
    assert sorted(tuple(s.text for s in b.steps) for b in back) == [
        ("1+1=2\n\n2+1=3", "3+1=4", "The answer is 4."), ("1+1=2\n\n2+1=3", "3+1=4", "The answer is 5."),
        ("1+1=2\n\n2+1=3", "3+1=5\n\nThe answer is 5.")]  # no entry for the rollout's inner state
    assert list(get_format("math_aps").encode_records(back)) == [rec]


def test_the_command_line_labels_and_writes_the_tree(tmp_path):
    app = typer.Typer()
    app.command(name="label")(label)
    app.command(name="unused")(lambda: None)
    inp, out, tree = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "tree.jsonl"
    write_traces([make_trace("t0", ["a", "b", "The answer is 7."]),
                  make_trace("t1", ["a", "The answer is 42."]), make_trace("x", ["a"], answer=None)], inp)
    args = ["label", str(inp), str(out), "--method", "omegaprm", "-k", "2", "--policy", "scripted",
            "-p", f"completions={json.dumps([RIGHT, WRONG])}", "--tree-out", str(tree), "--no-progress"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "2/3 traces labelled by omegaprm" in result.output and "1 unlabelled traces left out" in result.output
    ts = list(read_traces(out))
    # t0: prefix 2's two rollouts are RIGHT and WRONG (the script in turn): the answer line is the error
    assert ts[0].first_error("binary_search") == 2 and ts[1].first_error("binary_search") == -1
    recs = [json.loads(line) for line in tree.read_text().splitlines()]
    assert [len(r["reasoning_steps"]) for r in recs] == [2 + 2, 1]  # t0: prefix 2, the trace, 2 rollouts
    assert list(get_format("math_aps").encode_records(read(tree, "math_aps"))) == recs
    bad = CliRunner().invoke(app, ["label", str(inp), str(tmp_path / "o2.jsonl"), "--method", "mc",
                                   "--tree-out", str(tmp_path / "t2.jsonl")])
    assert bad.exit_code != 0 and "--tree-out is for --method omegaprm" in bad.output


def test_a_right_sibling_earlier_in_the_input_is_a_free_branch():
    # R (right) and W (wrong at step 2) answer the same problem and share their first two steps. R
    # comes first, so W's prefixes 1 and 2 are good with no rollout: W's search rolls out prefix 3
    # only (k=2, both fail). Without siblings the rollouts (all wrong here) put the error at step 0.
    def pair():
        r = make_trace("R", ["a", "b", "c", "The answer is 42."])
        w = make_trace("W", ["a", "b", "c BAD", "The answer is 7."])
        w.problem = r.problem
        return [r, w]
    ts, pol = pair(), RulePolicy({})
    report = OmegaPRMLabeler(pol, k=2).label(ts)
    assert [req.key for req, _ in pol.requests] == ["W@3"] and report.rollouts == 2
    assert values(ts[1], "binary_search") == [1, 1, -1, None]
    assert ts[1].meta["labeling"]["omegaprm"]["tree"]["siblings"] == [["R", 2, True]]
    assert values(ts[1], "mc_soft") == [1.0, 1.0, 0.0, 0.0]
    alone, pol = pair(), RulePolicy({})
    assert OmegaPRMLabeler(pol, k=2, siblings=False).label(alone).rollouts == 4
    assert [req.key for req, _ in pol.requests] == ["W@2", "W@1"] and alone[1].first_error("binary_search") == 0
    # W first: R is right and never searched, and W has no earlier sibling
    flipped, pol = pair()[::-1], RulePolicy({})
    assert OmegaPRMLabeler(pol, k=2).label(flipped).rollouts == 4


def test_descend_rolls_out_the_shortest_undecided_prefix():
    t = make_trace("T", ["a", "b", "c", "d", "The answer is 7."])
    pol = RulePolicy({"T@1": 1, "T@2": 1})
    OmegaPRMLabeler(pol, k=2, search="descend").label([t])
    assert [req.key for req, _ in pol.requests] == ["T@1", "T@2", "T@3"]
    assert t.first_error("binary_search") == 2
    with pytest.raises(PrmkitError, match="search must be one of"):
        OmegaPRMLabeler(pol, search="sideways")
