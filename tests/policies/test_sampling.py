"""Sampling traces end to end: steps, answers, outcomes, symbolic labels, provenance, resume."""

from __future__ import annotations

import json

import pytest

from prmkit.cli import main
from prmkit.envs import ArithConfig, ArithEnv
from prmkit.envs._prompts import PromptBuilder
from prmkit.errors import PrmkitError
from prmkit.generate import problems_from_file, sample_traces
from prmkit.policies import SamplingParams, ScriptedPolicy, get_policy
from prmkit.trace import read_traces

CFG = ArithConfig(steps=2, ops=("+", "-"), seed=3)


def solver(request, i):
    """Sample 0 of each problem: the reference solution; sample 1: a wrong first step."""
    problem = request.messages[-1]["content"]
    p = next(p for p in ArithEnv(CFG).problems(10) if p.text == problem)
    if i % 2 == 0:
        return p.solution
    o = p.meta["arith"]["ops"][0]
    wrong = o["after"] + 1
    return (f"First: {o['before']} {o['op']} {o['operand']} = {wrong}.\n"
            f"The answer is {wrong}.")


def test_traces_are_split_checked_and_labelled(tmp_path):
    problems = ArithEnv(CFG).problems(3)
    pol = ScriptedPolicy(solver)
    out = tmp_path / "t.jsonl"
    rep = sample_traces(problems, pol, out, params=SamplingParams(n=2, seed=0),
                        prompts=PromptBuilder("arith", shots=1, config=CFG), progress=False)
    assert (rep.generated, rep.correct) == (6, 3)
    ts = list(read_traces(out))
    assert [t.id for t in ts] == [f"{p.id}#{k}" for p in problems for k in range(2)]
    good, bad = ts[0], ts[1]
    assert good.outcome == "correct" and good.final_answer == problems[0].answer
    assert [s.text for s in good.steps] == problems[0].solution.split("\n")
    assert good.first_error("symbolic") == -1
    assert bad.outcome == "incorrect" and bad.first_error("symbolic") == 0
    assert bad.steps[0].labels[0].meta["verdict"] == "arithmetic_error"
    good.check_spans()
    stages = [p.stage for p in good.provenance]
    assert stages == ["generate", "label"]
    assert good.provenance[0].args["sampling"]["n"] == 2
    assert good.provenance[0].args["policy"]["backend"] == "scripted"
    # The prompt holds the system message, one worked example and the problem.
    msgs = pol.requests[0].messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[-1]["content"] == problems[0].text


def test_resume_skips_done_and_redoes_partial(tmp_path):
    problems = ArithEnv(CFG).problems(4)
    out = tmp_path / "t.jsonl"
    kw = dict(params=SamplingParams(n=2, seed=0), prompts=PromptBuilder("arith", shots=0, config=CFG),
              progress=False)
    sample_traces(problems[:2], ScriptedPolicy(solver), out, **kw)
    # Simulate an interrupt: half a problem written and a torn last line.
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][:20])
    pol = ScriptedPolicy(solver)
    rep = sample_traces(problems, pol, out, **kw)
    assert rep.skipped_done == 1 and rep.generated == 6 and rep.dropped_partial == 2
    ids = [t.id for t in read_traces(out)]
    assert sorted(ids) == sorted(f"{p.id}#{k}" for p in problems for k in range(2))
    # The chunk (4 problems per call) is asked whole, as in an uninterrupted run, but the finished
    # problem is not written again (the sorted ids above have no duplicate).
    assert len(pol.requests) == 4
    rep = sample_traces(problems, ScriptedPolicy(solver), out, **kw)
    assert rep.generated == 0 and rep.skipped_done == 4


def test_resume_refuses_a_corrupt_middle(tmp_path):
    out = tmp_path / "t.jsonl"
    out.write_text('{"id": 1}\n{broken\n{"id": 2}\n')
    with pytest.raises(PrmkitError, match="cannot resume"):
        sample_traces(ArithEnv(CFG).problems(1), ScriptedPolicy(solver), out,
                      params=SamplingParams(n=1), prompts=PromptBuilder("arith", shots=0), progress=False)


@pytest.mark.parametrize("backend,options", [("hf", {}), ("torch", {"dtype": "float32"}),
                                             ("torch", {"dtype": "bfloat16"})],
                         ids=["hf", "torch-float32", "torch-bfloat16"])
@pytest.mark.slow
def test_resumed_file_equals_uninterrupted(tmp_path, tiny_lm, backend, options):
    """A sample file finished in a second run (other batch plans: one problem, then two per call)
    equals one written at once, for hf and for the default local backend (torch, both precisions)."""
    pytest.importorskip("torch")
    pol = get_policy(backend, model=tiny_lm, batch_size=5, progress=False, **options)
    problems = ArithEnv(CFG).problems(5)
    kw = dict(params=SamplingParams(n=3, max_new_tokens=12, temperature=1.0, seed=11),
              prompts=PromptBuilder("arith", shots=1, config=CFG), progress=False)
    full = tmp_path / "full.jsonl"
    sample_traces(problems, pol, full, problems_per_call=5, **kw)
    part = tmp_path / "part.jsonl"
    sample_traces(problems[:2], pol, part, problems_per_call=1, **kw)
    sample_traces(problems, pol, part, problems_per_call=2, **kw)

    def strip(path):  # provenance times differ between runs
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        for r in rows:
            r.pop("provenance")
        return rows

    assert strip(part) == strip(full)


def test_problems_from_gsm8k_fixture(fixtures):
    ps = problems_from_file(fixtures / "gsm8k" / "sample.jsonl", "gsm8k")
    assert ps and all(p.answer for p in ps) and ps[0].id.endswith(":1")


def test_cli_generate_with_scripted_policy(tmp_path, capsys):
    out = tmp_path / "g.jsonl"
    argv = ["generate", "--env", "arith", "--policy", "scripted", "-p",
            'completions=["1 + 1 = 2\\nThe answer is 2."]', "-n", "2", "--problems", "3", "-o", str(out)]
    try:
        main(argv)
    except SystemExit as e:
        assert not e.code
    text = capsys.readouterr().out
    assert "6 traces for 3 problems" in text and "pass@1" in text
    assert len(list(read_traces(out))) == 6


@pytest.mark.realdata
def test_generate_on_gsm8k_test_problems(shared_data, tmp_path):
    problems = problems_from_file(shared_data / "gsm8k" / "test.jsonl", limit=3)
    assert [p.answer for p in problems] == ["18", "3", "70000"]

    def reference(request, i):  # the first problem's reference steps, whatever is asked
        return "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18.\nThe answer is 18."

    out = tmp_path / "g.jsonl"
    rep = sample_traces(problems, ScriptedPolicy(reference), out, params=SamplingParams(n=2),
                        prompts=PromptBuilder("gsm8k", shots=2), progress=False)
    ts = list(read_traces(out))
    assert rep.generated == 6 and [t.outcome for t in ts[:2]] == ["correct"] * 2
    assert all(t.outcome == "incorrect" for t in ts[2:])
    # The checker reads the problem's numbers and the calculator annotations.
    assert [s.label("symbolic").meta["verdict"] for s in ts[0].steps] == ["correct"] * 3
