"""Errors in the user's terms (issue 45, items 6 and 7): each case names the input or option at fault
in one line, instead of an exception class and "run with --debug"."""

from __future__ import annotations

import sys
import types

import pytest
from cli_run import run

import prmkit._registry as registry_module
from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace, write_traces


@pytest.fixture()
def traces(tmp_path):
    p = tmp_path / "t.jsonl"
    write_traces([Trace(id="a", problem=Problem("1 + 1?", answer="2"),
                        steps=[Step("1 + 1 = 2"), Step("2 * 1 = 2"), Step("The answer is 2.")],
                        final_answer="2")], p)
    return p


@pytest.mark.parametrize("value", ["nan", "inf", "x", "2.0", "-0.5"])
def test_a_scripted_default_that_is_not_a_score_is_named(traces, tmp_path, capsys, value):
    code, _, err = run(["score", traces, tmp_path / "s.jsonl", "--scorer", "scripted", "-s", "scores={}",
                        "-s", f"default={value}"], capsys)
    assert code == 1 and "TypeError" not in err and "--debug" not in err
    assert "default must be a score in [0, 1]" in err and value in err


def test_scripted_scores_out_of_range_are_named(tmp_path):
    from prmkit.scoring import ScriptedScorer

    with pytest.raises(PrmkitError, match=r"scripted scorer: the score of 'x' must be a score in \[0, 1\]"):
        ScriptedScorer({"x": 1.5})
    assert ScriptedScorer({"x": None}, default=0.25).default == 0.25


def test_a_rules_file_that_is_not_yaml_names_file_and_line(traces, tmp_path, capsys):
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - id: R1\n    tool: [\n")
    code, _, err = run(["monitor", traces, tmp_path / "m.jsonl", "--monitor", f"rule:{rules}"], capsys)
    assert code == 1 and f"{rules}:4: not valid YAML (rules file)" in err, err
    assert "ParserError" not in err and "--debug" not in err


def test_a_bad_rule_in_a_file_names_the_file(traces, tmp_path, capsys):
    rules = tmp_path / "rules.json"
    rules.write_text('[{"text": "no id"}]')
    code, _, err = run(["monitor", traces, tmp_path / "m.jsonl", "--monitor", f"rule:{rules}"], capsys)
    assert code == 1 and f"{rules}: rule 0: needs an 'id'" in err, err


def test_a_spec_that_is_not_utf8_names_file_and_byte(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(b"rules:\n  - id: R1\n    text: caf\xe9\n")
    code, _, err = run(["agent", "spec", "-o", tmp_path / "s.jsonl", "--requests", "2", "--spec", spec], capsys)
    assert code == 1 and f"{spec}:3: not UTF-8" in err, err
    assert "UnicodeDecodeError" not in err


@pytest.mark.parametrize("argv", [["agent", "run", "--organism", "all", "--tasks", "-3"],
                                  ["agent", "run", "--organism", "all", "--start", "-1"],
                                  ["agent", "spec", "--requests", "0"],
                                  ["generate", "--env", "arith", "--policy", "scripted", "--problems", "0"]])
def test_counts_below_their_minimum_are_refused_naming_the_option(tmp_path, capsys, argv):
    out = tmp_path / "o.jsonl"
    code, _, err = run([*argv, "-o", out], capsys)
    assert code == 2 and "Invalid value for '--" in err, err
    assert not out.exists()


def test_a_plugin_that_calls_sys_exit_at_import_is_named(monkeypatch):
    mod = types.ModuleType("prmkit_exiting_plugin")
    monkeypatch.setitem(sys.modules, "prmkit_exiting_plugin", None)  # import fails unless found below

    def fake(group):
        from types import SimpleNamespace

        return (SimpleNamespace(name="exits", value="prmkit_exiting_plugin:Splitter", group=group,
                                dist=SimpleNamespace(name="prmkit-exits")),)

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "prmkit_exiting_plugin":
                return None
            import importlib.machinery

            class Loader:
                def create_module(self, spec):
                    return mod

                def exec_module(self, module):
                    sys.exit(3)

            return importlib.machinery.ModuleSpec(name, Loader())

    monkeypatch.delitem(sys.modules, "prmkit_exiting_plugin")
    monkeypatch.setattr(sys, "meta_path", [Finder, *sys.meta_path])
    monkeypatch.setattr(registry_module, "_entry_points", fake)
    r = Registry("splitter", {}, group="prmkit.splitters")
    with pytest.raises(PrmkitError, match=r"splitter 'exits' comes from the plugin prmkit-exits .*which "
                                          r"failed to load: it called sys.exit\(3\)"):
        r.load("exits")


@pytest.mark.parametrize("message, expect", [
    ("attempt to write a readonly database", "the label store cannot be written"),
    ("database or disk is full", "no space left on device writing the label store")])
def test_a_label_store_that_cannot_be_written_is_named(traces, tmp_path, capsys, monkeypatch, message, expect):
    import sqlite3

    from prmkit.labelers import LabelStore

    def refuse(self, *a, **k):
        raise sqlite3.OperationalError(message)

    monkeypatch.setattr(LabelStore, "add", refuse)
    store = tmp_path / "store.sqlite"
    code, _, err = run(["label", traces, tmp_path / "l.jsonl", "--method", "mc", "--policy", "scripted",
                        "-p", 'completions=["The answer is 2."]', "-k", "2", "--store", store], capsys)
    assert code == 1 and expect in err and str(store) in err, err
    assert "OperationalError" not in err.split("(")[0] and "--debug" not in err
    assert not (tmp_path / "l.jsonl").exists()


def test_monitor_reads_an_inspect_log(tmp_path, capsys):
    """A valid Inspect log was "invalid JSON" to ``prmkit monitor``: it read prmkit JSONL only."""
    from pathlib import Path

    log = Path(__file__).parent / "fixtures" / "inspect" / "shop_ledger.json"
    out = tmp_path / "m.jsonl"
    code, stdout, err = run(["monitor", log, out, "--monitor", "rule"], capsys)
    assert code == 0, err
    assert "rule: flagged 1/3 traces" in stdout + err and out.exists()


def test_a_policy_named_like_a_module_attribute_is_an_unknown_backend(tmp_path, capsys):
    """``--policy os:system`` was an AttributeError with "run with --debug"."""
    code, _, err = run(["generate", "--env", "arith", "--policy", "os:system", "--problems", "1",
                        "-o", tmp_path / "g.jsonl"], capsys)
    assert code == 1 and "unknown policy backend 'os:system'" in err and "--debug" not in err, err


@pytest.mark.parametrize("stop, code, line", [("ctrl-c", 130, "interrupted"), ("sigterm", 143, "terminated"),
                                              (None, 1, "error: RuntimeError: A process in the process pool")])
def test_an_error_raised_while_a_stop_unwinds_is_reported_as_the_stop(monkeypatch, capsys, stop, code, line):
    """Ctrl-C reaches a label run's workers too; the pool they break can raise in the main process while
    its KeyboardInterrupt unwinds, and that error took the interruption's place ("error:
    BrokenProcessPool ... (run with --debug ...)", exit 1)."""
    import prmkit.cli as cli

    def app(**kwargs):
        try:
            if stop == "ctrl-c":
                raise KeyboardInterrupt
            if stop == "sigterm":
                raise cli._Terminated(143)
            raise ValueError("not a stop")
        except BaseException:
            raise RuntimeError("A process in the process pool was terminated abruptly") from None

    monkeypatch.setattr(cli, "app", app)
    got, _, err = run(["label"], capsys)
    assert got == code and err.strip().splitlines()[-1].startswith(line), err
