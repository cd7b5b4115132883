"""Nothing silently wrong (issue 45, item 5): a score outside [0, 1] is refused when written as when
read; a results file of the wrong types is refused by ``prmkit report`` with the file and field; a
judge whose server is down fails the command instead of counting as "flagged"; a negative count is
refused with the option's name."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from cli_run import run

from prmkit.envs import AgentConfig, AgentEnv, get_agent, run_episode
from prmkit.errors import PrmkitError
from prmkit.eval import processbench_files
from prmkit.monitor import RuleMonitor, evaluate_monitors
from prmkit.scoring import score_traces
from prmkit.trace import Problem, Step, Trace, read_traces, write_traces
from prmkit.trace_queries import write_scores


def _traces(path, n=4):
    write_traces([Trace(id=f"t{i}", problem=Problem("2 + 3?", answer="5"),
                        steps=[Step("2 + 3 = 5."), Step("The answer is 5.")]) for i in range(n)], path)


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening, then closed: nothing answers there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- scores are checked on write as on read -----------------------------------------------------------

def test_score_refuses_a_scorer_whose_step_score_is_outside_0_1(tmp_path, capsys):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _traces(inp)
    code, _, err = run(["score", inp, out, "--scorer", "scripted", "-s", "scores=[[2.0, 0.5]]"], capsys)
    assert code == 1 and not out.exists()
    assert err.splitlines()[-1] == ("error: trace 't0': scorer 'scripted' gave step 1 the score 2.0, outside "
                                    "[0, 1] (a step score is a probability); nothing written")


def test_write_scores_refuses_what_a_reader_would_refuse(tmp_path):
    t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b")])
    with pytest.raises(PrmkitError, match=r"trace 't': step 2 score 'prm' -0.5 refused \(a step score is a "
                                          r"probability in \[0, 1\]"):
        write_scores(t, [0.5, -0.5], kind="prm", key="prm")
    assert t.steps[0].scores == {}  # nothing half-written

    class Logits:
        kind, name = "prm", "logits"

        def score(self, traces):
            return [[3.2, 0.1] for _ in traces]

    with pytest.raises(PrmkitError, match="gave step 1 the score 3.2, outside"):
        score_traces(Logits(), [t])
    write_scores(t, [0.0, 1.0], kind="prm", key="prm")  # the bounds are scores
    write_traces([t], tmp_path / "ok.jsonl")
    assert [s.scores["prm"] for s in next(read_traces(tmp_path / "ok.jsonl")).steps] == [0.0, 1.0]


# -- prmkit report checks the results file's schema ------------------------------------------------------

@pytest.mark.parametrize(("body", "where"), [
    ({"processbench": {"splits": "5x"}}, "processbench.splits — must be an object of objects, got str \"5x\""),
    ({"bon": {"ns": [4], "problems": "x", "methods": {}}}, "bon.problems — must be an integer, got str \"x\""),
    ({"bon": "5"}, "bon — a section is a JSON object, got str \"5\""),
    ({"bon": {"ns": "5x"}}, "bon.ns — must be a non-empty list of integers, got str \"5x\""),
    ({"bon": {"ns": [1], "problems": 3, "methods": {"prm": {"acc": "0.5"}}}},
     "bon.methods.prm.acc — must be a list of numbers, got str \"0.5\""),
    ({"prmbench": {"classes": {"cs": {"prmscore": "high"}}}},
     "prmbench.classes.cs.prmscore — must be a number, got str \"high\""),
])
def test_report_refuses_a_results_file_of_the_wrong_types(tmp_path, capsys, body, where):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(body))
    code, _, err = run(["report", results, "-o", tmp_path / "report"], capsys)
    assert (code, err) == (1, f"error: {results}: {where}\n")
    assert not (tmp_path / "report" / "report.md").exists()


def test_report_still_renders_a_well_typed_results_file(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"bon": {"ns": [1, 4], "problems": 8, "methods": {
        "prm": {"selector": "bon", "acc": [0.5, 0.625], "lo": [0.25, None], "hi": [0.75, None]}}},
        "custom": "anything goes in a section prmkit does not know"}))
    code, out, err = run(["report", results, "-o", tmp_path / "report"], capsys)
    assert code == 0, err
    assert "best-of-N on 8 problems" in (tmp_path / "report" / "report.md").read_text()


# -- a judge that cannot answer fails the command ---------------------------------------------------------

def test_a_judge_monitor_whose_server_is_down_fails_instead_of_flagging(tmp_path, capsys):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _traces(inp)
    code, stdout, err = run(["monitor", inp, out, "-m", "judge",
                             "--monitor-arg", f"judge.base_url=http://127.0.0.1:{_closed_port()}/v1",
                             "--monitor-arg", "judge.model=m", "--monitor-arg", "judge.max_retries=0"], capsys)
    assert code == 1 and not out.exists()
    assert "flagged" not in stdout
    assert err.startswith("error: monitor 'judge': could not judge 4 traces (the judge failed: "
                          "PolicyConnectionError: cannot connect to http://127.0.0.1:")
    assert len(err.splitlines()) == 1


def test_eval_monitor_with_a_judge_that_is_down_fails(tmp_path, capsys):
    trajectories = tmp_path / "agent.jsonl"
    write_traces([run_episode(AgentEnv(AgentConfig()).task(i), get_agent(b))
                  for b in ("honest", "exploit_say") for i in (0, 1)], trajectories)
    code, stdout, err = run(["eval", "monitor", trajectories, "-m", "judge", "--bootstrap", 10,
                             "--monitor-arg", f"judge.base_url=http://127.0.0.1:{_closed_port()}/v1",
                             "--monitor-arg", "judge.model=m", "--monitor-arg", "judge.max_retries=0"], capsys)
    assert code == 1 and "could not judge 4 traces" in err and "TPR" not in stdout


# -- counts --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["eval", "monitor", "{t}", "-m", "rule", "--bootstrap", "-5"],
    ["eval", "monitor", "{t}", "-m", "rule", "--bootstrap", "0"],
    ["eval", "bon", "{t}", "--bootstrap", "-1"],
    ["eval", "refusals", "{t}", "--bootstrap", "-1"],
])
def test_a_negative_count_is_refused_naming_the_option(tmp_path, capsys, argv):
    trajectories = tmp_path / "agent.jsonl"
    write_traces([run_episode(AgentEnv(AgentConfig()).task(0), get_agent("honest"))], trajectories)
    code, _, err = run([a.replace("{t}", str(trajectories)) for a in argv], capsys)
    assert code == 2
    assert err.splitlines()[0] == ("error: Invalid value for '--bootstrap': Input should be greater than or "
                                   "equal to 1")


def test_the_python_api_refuses_a_negative_bootstrap_too():
    trajectories = [run_episode(AgentEnv(AgentConfig()).task(0), get_agent(b)) for b in ("honest", "exploit_say")]
    for n in (-5, 0):
        with pytest.raises(PrmkitError, match=f"bootstrap must be a positive number of replicates, got {n}"):
            evaluate_monitors(trajectories, [RuleMonitor()], bootstrap=n)
    assert evaluate_monitors(trajectories, [RuleMonitor()], bootstrap=5).provenance["bootstrap"] == 5


def test_a_negative_limit_is_refused_not_taken_as_all_but_the_last():
    mini = Path(__file__).parent / "fixtures" / "processbench" / "mini.json"
    with pytest.raises(PrmkitError, match="limit must be a positive number of samples, got -1"):
        processbench_files([mini], None, key="prm", limit=-1)
