"""Evaluation tasks as a registry (issue 49, item 4): ``prmkit eval run TASK...`` runs registered tasks
into one results file that ``prmkit report`` renders; a task from a separate file
(``user_task_example.py``, through ``--tasks-from``) or from an entry point runs the same way; the
per-benchmark commands write exactly the sections ``eval run`` writes; and the errors a user meets
(an unknown task, missing data, a wrong option) say what to do."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_run import run

import prmkit._registry as registry_module
from prmkit.errors import PrmkitError
from prmkit.eval import (
    EVAL_TASKS,
    DataSource,
    EvalTask,
    ProcessBenchSection,
    get_eval_task,
    parse_task_args,
    run_eval_task,
)
from prmkit.trace import Problem, Step, StepLabel, Trace, write_traces

USER_FILE = Path(__file__).with_name("user_task_example.py")
BUILT_IN = ["processbench", "prmbench", "bon", "probes", "monitor", "refusals"]


@pytest.fixture(autouse=True)
def _registry_restored(monkeypatch):
    """Each test sees the built-in tasks only, whatever an earlier one registered."""
    monkeypatch.setattr(EVAL_TASKS, "_entries", dict(EVAL_TASKS._entries))
    monkeypatch.setattr(EVAL_TASKS, "_plugins", dict(EVAL_TASKS._plugins))


def _labelled(tmp_path: Path) -> Path:
    """Three traces of 2, 3 and 4 steps; the 3-step one has a wrong step (label -1)."""
    traces = []
    for i, n in enumerate((2, 3, 4)):
        steps = [Step(f"t{i} s{k}", labels=[StepLabel(-1 if (n == 3 and k == 1) else 1, source="symbolic")])
                 for k in range(n)]
        traces.append(Trace(id=f"t{i}", problem=Problem(f"p{i}", answer="1"), steps=steps, final_answer="1"))
    path = tmp_path / "labelled.jsonl"
    write_traces(traces, path)
    return path


def test_a_task_from_a_separate_file_runs_through_eval_run_into_the_report(tmp_path, capsys):
    data = _labelled(tmp_path)
    out = tmp_path / "results.json"
    code, printed, err = run(["eval", "run", "step_count", "--tasks-from", USER_FILE, "--data", f"step_count={data}",
                              "-T", "step_count.min_steps=3", "-o", out], capsys)
    assert code == 0, err
    results = json.loads(out.read_text())
    # 2 + 3 + 4 steps over 3 traces: 3 on average; 2 traces of >= 3 steps; 1 of 3 has a wrong step.
    assert results["step_count"] == {"traces": 3, "long_traces": 2, "mean_steps": 3.0, "error_rate": pytest.approx(1 / 3)}
    assert results["meta"]["data"] == {"step_count": [str(data)]}
    assert results["meta"]["settings"] == {"step_count": {"min_steps": 3}}
    assert "step_count: 3 traces, 3.0 steps on average, 2 with at least 3 steps" in printed
    # prmkit report renders the user's section (prmkit has no renderer for it: a table of its fields).
    rep = tmp_path / "report"
    code, _, err = run(["report", out, "-o", rep], capsys)
    assert code == 0, err
    md = (rep / "report.md").read_text()
    assert "## step_count" in md and "long_traces" in md
    assert json.loads((rep / "report.json").read_text())["step_count"]["long_traces"] == 2
    # --list shows it beside the built-ins, with its data source and option.
    code, listed, _ = run(["eval", "run", "--list", "--tasks-from", USER_FILE], capsys)
    assert code == 0 and all(f"\n{n}: " in "\n" + listed for n in [*BUILT_IN, "step_count"])
    assert "labelled traces (prmkit JSONL) (give --data step_count=PATH)" in listed
    assert "-T step_count.min_steps=... (default 3)" in listed


def _scored_bon(tmp_path: Path) -> Path:
    """2 problems x 2 candidates, scored: the PRM prefers the right one, the ORM the wrong one."""
    out = []
    for p in range(2):
        for k, (ans, good) in enumerate([("5", True), ("6", False)]):
            prm, labels = ([0.9, 0.8], [1, 1]) if good else ([0.7, 0.2], [1, -1])
            steps = [Step(f"p{p} c{k} s{i}", scores={"prm": prm[i]}, labels=[StepLabel(labels[i], source="symbolic")])
                     for i in range(2)]
            out.append(Trace(id=f"p{p}#{k}", problem=Problem(f"problem {p}", answer="5", id=f"p{p}"), steps=steps,
                             final_answer=ans, outcome="correct" if good else "incorrect",
                             meta={"scores": {"orm": 0.3 if good else 0.6}}))
    path = tmp_path / "scored.jsonl"
    write_traces(out, path)
    return path


def test_two_built_in_tasks_write_one_file_equal_to_the_per_benchmark_commands(fixtures, tmp_path, capsys):
    pb = fixtures / "processbench" / "mini.json"
    records = json.loads(pb.read_text())
    low = json.dumps({text: 0.1 for text in (records[1]["steps"][0], records[2]["steps"][2], records[3]["steps"][0])})
    scorer = ["--scorer", "scripted", "-s", f"scores={low}", "-s", "default=0.9"]
    scored = _scored_bon(tmp_path)
    both = tmp_path / "both.json"
    code, printed, err = run(["eval", "run", "processbench", "bon", *scorer, "--data", f"processbench={pb}",
                              "--data", f"bon={scored}", "-T", "bootstrap=50", "-o", both], capsys)
    assert code == 0, err
    assert "average F1 80.0" in printed and "PRM (min)" in printed  # what the two commands print
    one = json.loads(both.read_text())
    separate: dict = {}
    for args, name in (([pb, *scorer], "pb.json"), ([scored, "--bootstrap", "50"], "bon.json")):
        command = "processbench" if name == "pb.json" else "bon"
        code, _, err = run(["eval", command, *args, "--json", tmp_path / name], capsys)
        assert code == 0, err
        separate.update(json.loads((tmp_path / name).read_text()))
    assert set(separate) == {"processbench", "bon", "summary", "step_metrics"}
    assert {k: v for k, v in one.items() if k != "meta"} == separate
    # Hand-derived (tests/eval/test_cli_eval.py): F1 0.8 on mini.json; at N=2 the PRM picks right.
    assert one["processbench"]["average_f1"] == pytest.approx(0.8)
    assert one["bon"]["methods"]["PRM (min)"]["acc"][1] == 1.0
    assert one["meta"]["tasks"]["bon"]["sections"] == ["bon", "summary", "step_metrics"]
    assert one["meta"]["settings"]["bon"]["bootstrap"] == 50


def test_an_unknown_task_lists_the_registered_ones(capsys):
    code, _, err = run(["eval", "run", "processbench", "procesbench"], capsys)
    assert code == 1
    assert "unknown evaluation task 'procesbench'; registered: " + ", ".join(BUILT_IN) in " ".join(err.split())


def test_missing_data_names_the_path(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "nowhere.jsonl"
    code, _, err = run(["eval", "run", "bon", "--data", f"bon={missing}"], capsys)
    assert code == 1 and f"task 'bon': data file {missing}: no such file" in " ".join(err.split())
    code, _, err = run(["eval", "run", "bon"], capsys)  # no default: say how to give it
    assert code == 1 and "give --data bon=PATH" in err
    # A default under the shared data folder that is not there: named, with the two ways out.
    monkeypatch.setenv("PRMKIT_SHARED_DATA", str(tmp_path))
    code, _, err = run(["eval", "run", "processbench", "--scorer", "scripted", "-s", "scores={}"], capsys)
    err = " ".join(err.split())
    assert code == 1 and str(tmp_path / "processbench" / "gsm8k.json") in err
    assert "give --data processbench=PATH" in err and "PRMKIT_SHARED_DATA" in err


def test_options_are_checked_before_any_task_runs(fixtures):
    with pytest.raises(PrmkitError, match=r"task 'bon' has no option 'bootstrp'; its options: prm_key, orm_key"):
        parse_task_args(["bon.bootstrp=5"], ["bon"])
    with pytest.raises(PrmkitError, match="none of the tasks run \\(probes\\) takes 'bootstrap'"):
        parse_task_args(["bootstrap=5"], ["probes"])
    # KEY=VALUE goes to every task that takes KEY; a repeated key of a many-valued option accumulates.
    assert parse_task_args(["seed=3", "probes.probe=gaming", "probes.probe=collapse"], ["bon", "probes"]) == {
        "bon": {"seed": "3"}, "probes": {"seed": "3", "probe": ["gaming", "collapse"]}}
    bon = get_eval_task("bon")
    with pytest.raises(PrmkitError, match="option 'bootstrap': must be at least 1, got 0"):
        bon.resolve_options({"bootstrap": "0"})
    with pytest.raises(PrmkitError, match="option 'threshold': expected a number, got 'high'"):
        bon.resolve_options({"threshold": "high"})
    assert bon.resolve_options({"bootstrap": "7"})["bootstrap"] == 7


def test_a_task_must_return_the_sections_it_declares(fixtures):
    def wrong(ctx):
        return ProcessBenchSection(key="prm")

    EVAL_TASKS.register("liar", EvalTask("liar", "declares one section, returns another",
                                         DataSource("any file", many=False), "none", ("mine",), wrong))
    with pytest.raises(PrmkitError, match="returned the section\\(s\\) processbench, which it does not declare"):
        run_eval_task("liar", [fixtures / "processbench" / "mini.json"])


PLUGIN = '''
from prmkit.eval import DataSource, EvalTask, OtherSection


def _lines(ctx):
    return OtherSection("line_count", {"lines": len(open(ctx.data[0]).read().splitlines())})


LINES = EvalTask("line_count", "lines in a file", DataSource("any text file", many=False), "lines",
                 ("line_count",), _lines)
'''


def test_an_entry_point_task_runs_by_name(tmp_path, monkeypatch, capsys):
    (tmp_path / "prmkit_task_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = SimpleNamespace(name="line_count", value="prmkit_task_plugin:LINES", group="prmkit.eval_tasks",
                         dist=SimpleNamespace(name="prmkit-task-plugin"))
    monkeypatch.setattr(registry_module, "_entry_points", lambda group: (ep,) if group == ep.group else ())
    monkeypatch.setattr(EVAL_TASKS, "_scanned", False)
    text = tmp_path / "three.txt"
    text.write_text("a\nb\nc\n")
    out = tmp_path / "r.json"
    code, _, err = run(["eval", "run", "line_count", "--data", f"line_count={text}", "-o", out], capsys)
    assert code == 0, err
    assert json.loads(out.read_text())["line_count"] == {"lines": 3}
    assert EVAL_TASKS.plugin("line_count").distribution == "prmkit-task-plugin"
    assert isinstance(get_eval_task("line_count"), EvalTask)


def test_a_tasks_file_that_fails_is_named(tmp_path, capsys):
    bad = tmp_path / "broken_tasks.py"
    bad.write_text("raise RuntimeError('no such benchmark yet')\n")
    code, _, err = run(["eval", "run", "bon", "--tasks-from", bad], capsys)
    err = " ".join(err.split())
    assert code == 1 and f"{bad}: importing it failed: RuntimeError: no such benchmark yet" in err
    not_python = tmp_path / "tasks.txt"
    not_python.write_text("x")
    code, _, err = run(["eval", "run", "--list", "--tasks-from", not_python], capsys)
    assert code == 1 and "not a Python file" in err


def test_the_list_survives_a_plugin_that_fails_to_import(monkeypatch, capsys):
    ep = SimpleNamespace(name="gone", value="prmkit_no_such_module:TASK", group="prmkit.eval_tasks",
                         dist=SimpleNamespace(name="prmkit-gone"))
    monkeypatch.setattr(registry_module, "_entry_points", lambda group: (ep,) if group == ep.group else ())
    monkeypatch.setattr(EVAL_TASKS, "_scanned", False)
    code, listed, _ = run(["eval", "run", "--list"], capsys)
    assert code == 0 and "\nbon: " in listed
    assert "gone: cannot be loaded: evaluation task 'gone' comes from the plugin prmkit-gone" in " ".join(listed.split())


@pytest.mark.realdata
def test_the_default_data_is_where_the_tasks_say(shared_data, monkeypatch):
    monkeypatch.setenv("PRMKIT_SHARED_DATA", str(shared_data))
    pb = get_eval_task("processbench").data.resolve(None, "processbench")
    assert [p.name for p in pb] == ["gsm8k.json", "math.json"]
    prmbench = get_eval_task("prmbench").data.resolve(None, "prmbench")
    assert len(prmbench) == 8 and all(p.name.startswith("prm800k_test_p1_4o_") for p in prmbench)
