"""``prmkit label``: every method from the command line, the default store beside OUT, resume."""

from __future__ import annotations

import json

import pytest
import typer
from labeler_fakes import make_trace
from typer.testing import CliRunner

from prmkit.cli._label import label
from prmkit.labelers import LabelStore
from prmkit.trace import read_traces, write_traces

app = typer.Typer()
app.command(name="label")(label)
app.command(name="unused")(lambda: None)  # two commands: typer keeps "label" as a subcommand
RULE = ["--policy", "labeler_fakes:RulePolicy", "-p", "p=0.5", "--workers", "0"]


@pytest.fixture()
def inp(tmp_path):
    path = tmp_path / "in.jsonl"
    write_traces([make_trace(f"t{i}", ["a", "b BAD" if i else "b", "The answer is 7."])
                  for i in range(3)] + [make_trace("x", ["a"], answer=None)], path)
    return path


def run(*args):
    result = CliRunner().invoke(app, ["label", *map(str, args)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_mc_writes_labels_and_a_store_beside_out_then_resumes(tmp_path, inp):
    out = tmp_path / "out.jsonl"
    text = run(inp, out, "--method", "mc", "-k", "2", *RULE, "--no-progress",
               "--report", tmp_path / "r.json")
    assert "3/4 traces labelled by mc" in text and "skipped x: no reference answer" in text
    ts = list(read_traces(out))
    assert [t.id for t in ts] == ["t0", "t1", "t2", "x"]
    assert all(s.label("mc_soft") is not None for s in ts[0].steps)
    store = tmp_path / "out.jsonl.labels.sqlite"
    with LabelStore(store) as st:
        assert st.count() == 3 * 2 * 2
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["generated"], report["rollouts"]) == (12, 12)
    # A finished OUT is replaced only with --overwrite, which keeps the store: every rollout reused.
    refused = CliRunner().invoke(app, ["label", *map(str, (inp, out, "--method", "mc", "-k", "2", *RULE))])
    assert refused.exit_code == 1 and "already exists; pass --overwrite" in str(refused.exception)
    run(inp, out, "--method", "mc", "-k", "2", *RULE, "--no-progress", "--report", tmp_path / "r.json",
        "--overwrite")
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["generated"], report["reused"]) == (0, 12)


@pytest.mark.parametrize("method, source", [
    ("binary", "binary_search"), ("advantage", "advantage"), ("judge", "judge"),
    ("consensus", "consensus"), ("symbolic", "symbolic"),
])
def test_every_method_runs_from_the_command_line(tmp_path, inp, method, source):
    out = tmp_path / "out.jsonl"
    judge = ["--judge-policy", "labeler_fakes:JudgePolicy"]
    # Each method gets the options it takes: one it does not take is refused (tests/test_cli_options.py).
    extra = {"binary": ["-k", "2", *RULE, "--max-rollouts", "4"], "advantage": ["-k", "2", *RULE],
             "judge": [*RULE, *judge], "consensus": ["-k", "2", *RULE, *judge]}.get(method, [])
    run(inp, out, "--method", method, *extra, "--no-progress")
    ts = list(read_traces(out))
    assert any(lab is not None for t in ts for lab in t.labels(source))
    assert ts[1].provenance[-1].name == method


def test_options_reach_the_labeler_and_errors_are_one_line(tmp_path, inp):
    out = tmp_path / "out.jsonl"
    run(inp, out, "--method", "mc", "-k", "1", *RULE, "-o", "sources=mc_soft", "--store",
        tmp_path / "elsewhere.sqlite", "--no-progress")
    assert (tmp_path / "elsewhere.sqlite").exists()
    t = next(read_traces(out))
    assert t.labels("mc_hard") == [None] * 3 and t.labels("mc_soft")[0] is not None
    from prmkit.errors import PrmkitError

    out = tmp_path / "new.jsonl"  # an existing OUT would be refused first
    with pytest.raises(PrmkitError, match=r"unknown labeler 'oracle'; known: advantage, binary, "
                                          r"consensus, judge, mc, omegaprm, spec, symbolic$"):
        CliRunner().invoke(app, ["label", str(inp), str(out), "--method", "oracle"],
                           catch_exceptions=False)
    with pytest.raises(PrmkitError, match=r"unknown policy backend 'nope'; known: ct2, hf, "):
        CliRunner().invoke(app, ["label", str(inp), str(out), "--policy", "nope"],
                           catch_exceptions=False)


def test_a_labeler_registered_in_code_runs_and_is_listed(tmp_path, inp, monkeypatch):
    """Adding a labeler is one file plus its registration: the command lists it, builds it with
    the shared options it takes (--seed), refuses those it does not (-k, --policy), passes -o
    extras, and keeps no store for a labeler that generates nothing."""
    from prmkit.labelers import LABELERS

    monkeypatch.setitem(LABELERS, "step_length", "labeler_fakes:StepLengthLabeler")
    help_text = CliRunner().invoke(app, ["label", "--help"], terminal_width=200).output
    assert "step_length" in help_text
    out = tmp_path / "out.jsonl"
    from prmkit.errors import PrmkitError

    with pytest.raises(PrmkitError, match=r"^--policy, --k / -k are not options of the step_length "
                                          r"labeler \(it takes: --seed\)$"):
        CliRunner().invoke(app, ["label", str(inp), str(out), "--method", "step_length", "-k", "2",
                                 "--policy", "scripted", "--seed", "5"], catch_exceptions=False)
    text = run(inp, out, "--method", "step_length", "--seed", "5", "-o", "longest=1", "--no-progress")
    assert "4/4 traces labelled by step_length" in text and "store:" not in text
    assert not (tmp_path / "out.jsonl.labels.sqlite").exists()
    t = next(read_traces(out))
    assert [lab.value for lab in t.labels("step_length")] == [1, 1, -1]  # "a", "b", "The answer..."
    assert t.steps[0].labels[-1].args == {"longest": 1, "seed": 5}


def test_skip_invalid_names_the_records_it_dropped(tmp_path, inp):
    with open(inp, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "broken", "problem": {"text": "q"}, "steps": [{"text": 5}]}) + "\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["label", str(inp), str(out), "--method", "mc", "-k", "1", *RULE,
                                      "--no-progress", "--skip-invalid"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"1 malformed input records skipped (not in {out})" in result.output
    assert f"skipped {inp}:5: steps[0].text — expected string, got integer (id broken)" in result.output
    assert [t.id for t in read_traces(out)] == ["t0", "t1", "t2", "x"]
