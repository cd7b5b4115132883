"""An existing output is never replaced unless asked (issue 15, item 1): every command that writes a
file refuses an OUT that exists, before it loads anything, names the flag that allows it, and leaves
the old OUT byte for byte; with ``--overwrite`` it replaces it (through a temporary file). ``generate``
and the demo resume an existing output instead (tested with them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import run

from prmkit import read_traces
from prmkit.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
SCRIPTED = ["--scorer", "scripted", "-s", "scores={}", "-s", "default=0.5"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """``traces.jsonl`` (4 arith traces with labels and outcomes) and ``scored.jsonl`` (scripted
    scores), made by prmkit's own commands."""
    d = tmp_path_factory.mktemp("inputs")
    for argv in (["data", "derive", "--env", "arith", "--problems", "2", "--per-problem", "1",
                  "--correct-fraction", "1", d / "traces.jsonl"],
                 ["score", d / "traces.jsonl", d / "scored.jsonl", *SCRIPTED]):
        try:
            main([str(a) for a in argv])
        except SystemExit as e:
            assert not e.code, argv
    return d


def _cases(d: Path) -> dict[str, list]:
    """command -> its arguments; ``OUT`` stands for the output that exists."""
    return {
        "data convert": ["data", "convert", d / "traces.jsonl", "OUT"],
        "data derive": ["data", "derive", "--env", "arith", "--problems", "2", "OUT"],
        "score": ["score", d / "traces.jsonl", "OUT", *SCRIPTED],
        "select": ["select", d / "scored.jsonl", "--out", "OUT"],
        "search": ["search", "--env", "arith", "--problems", "1", "--policy", "scripted", *SCRIPTED,
                   "--out", "OUT"],
        "label": ["label", "--method", "symbolic", d / "traces.jsonl", "OUT"],
        "label --report": ["label", "--method", "symbolic", d / "traces.jsonl", "new.jsonl", "--report", "OUT"],
        "eval bon": ["eval", "bon", d / "scored.jsonl", "--json", "OUT"],
        "eval processbench": ["eval", "processbench", FIXTURES / "processbench" / "mini.json", *SCRIPTED,
                              "--json", "OUT"],
        "eval prmbench": ["eval", "prmbench", FIXTURES / "prmbench" / "mini.jsonl", *SCRIPTED, "--json", "OUT"],
        "eval probes": ["eval", "probes", d / "traces.jsonl", *SCRIPTED, "--json", "OUT"],
    }


COMMANDS = list(_cases(Path(".")))


@pytest.mark.parametrize("command", COMMANDS)
def test_an_existing_out_is_refused_by_name_and_left_as_it_was(command, inputs, tmp_path, capsys,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old output\n")
    argv = [out if a == "OUT" else a for a in _cases(inputs)[command]]
    code, stdout, err = run(argv, capsys)
    assert (code, err) == (1, f"error: {out}: already exists; pass --overwrite to replace it\n"), stdout
    assert out.read_bytes() == b"old output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # nothing else begun


@pytest.mark.parametrize("command", ["data convert", "data derive", "score", "select", "label",
                                     "eval bon"])
def test_overwrite_replaces_an_existing_out(command, inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old output\n")
    argv = [out if a == "OUT" else a for a in _cases(inputs)[command]]
    code, stdout, err = run([*argv, "--overwrite"], capsys)
    assert code == 0, err
    assert out.read_bytes() != b"old output\n"
    if command != "eval bon":
        assert len(list(read_traces(out))) > 0
    assert not list(tmp_path.glob("*.partial*")) and not list(tmp_path.glob("*.tmp"))


def test_report_refuses_a_folder_holding_a_report(inputs, tmp_path, capsys):
    section = tmp_path / "bon.json"
    assert run(["eval", "bon", inputs / "scored.jsonl", "--json", section], capsys)[0] == 0
    folder = tmp_path / "rep"
    folder.mkdir()
    (folder / "report.md").write_text("old report\n")
    code, _, err = run(["report", section, "-o", folder], capsys)
    assert (code, err) == (1, f"error: {folder}: already holds report.md; pass --overwrite to replace it\n")
    assert sorted(p.name for p in folder.iterdir()) == ["report.md"]
    assert (folder / "report.md").read_text() == "old report\n"
    code, _, err = run(["report", section, "-o", folder, "--overwrite"], capsys)
    assert code == 0, err
    assert (folder / "report.md").read_text() != "old report\n" and (folder / "report.html").exists()
    # a folder holding other things (not a report) is written into as before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    assert run(["report", section, "-o", other], capsys)[0] == 0
    assert (other / "notes.txt").read_text() == "mine\n"


def test_policy_sft_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    folder = tmp_path / "sft"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    code, _, err = run(["policy", "sft", "--output-dir", folder], capsys)
    assert (code, err) == (1, f"error: {folder}: already holds adapter_config.json; pass --overwrite to "
                              "replace it\n")


def test_an_output_that_is_a_folder_is_refused_even_with_overwrite(inputs, tmp_path, capsys):
    code, _, err = run(["data", "convert", inputs / "traces.jsonl", tmp_path, "--overwrite"], capsys)
    assert (code, err) == (1, f"error: {tmp_path}: is a folder, not a file\n")
