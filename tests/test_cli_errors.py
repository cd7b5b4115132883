"""What a person sees when the command line goes wrong (issue 15, items 2 and 10).

- Every file-reading command, given a bad input (nonexistent, a folder, empty, not UTF-8, a truncated
  JSON line), fails with one ``error:`` line naming the path, no traceback and no output; nothing is
  loaded first (training is stubbed to fail if it ever starts).
- A usage mistake on any command is one ``error:`` line plus the usage line, exit 2; bare ``prmkit``
  and bare groups print the help with exit 0; ``--version`` prints the version.
- Anything unexpected is one line with a ``--debug`` hint; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer

import prmkit
from prmkit.cli import app, main

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = {"id": "t1", "problem": {"text": "1+1+1?", "answer": "3"},
        "steps": [{"text": "1+1=2"}, {"text": "2+1=3"}, {"text": "The answer is 3."}], "final_answer": "3"}
GOOD_LINE = json.dumps(GOOD) + "\n"


def run(argv, capsys):
    code = 0
    try:
        main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def bad_input(kind, tmp_path):
    p = tmp_path / "in.jsonl"
    if kind == "nonexistent":
        return tmp_path / "missing.jsonl"
    if kind == "folder":
        p = tmp_path / "a_folder"
        p.mkdir()
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "not_utf8":  # the bad byte on the first line: every reader meets it before content
        p.write_bytes(b'{"id": "t\xff"}\n' + GOOD_LINE.encode())
    elif kind == "not_utf8_later":  # after a good line: past format detection, into the reading
        p.write_bytes(GOOD_LINE.encode() + b'{"id": "t\xff"}\n')
    elif kind == "truncated":
        p.write_bytes(GOOD_LINE.encode()[:40])
    return p


# Every command that reads a file, each path argument once (the others valid or absent), with a
# policy / scorer that loads nothing. OUT is where the command would write.
COMMANDS = {
    "data convert": lambda p, o: ["data", "convert", p, o],
    "data validate": lambda p, o: ["data", "validate", p],
    "data stats": lambda p, o: ["data", "stats", p],
    "data inspect": lambda p, o: ["data", "inspect", p],
    "data derive": lambda p, o: ["data", "derive", p, o],
    "generate --data": lambda p, o: ["generate", "--data", p, "-o", o, "--policy", "scripted",
                                     "-p", 'completions=["The answer is 3."]'],
    "label": lambda p, o: ["label", p, o, "--policy", "scripted", "-p", 'completions=["The answer is 3."]',
                           "--workers", "0", "--no-progress"],
    "score": lambda p, o: ["score", p, o, "--scorer", "scripted", "-s", "scores={}"],
    "select": lambda p, o: ["select", p, "-o", o],
    "search --data": lambda p, o: ["search", "--data", p, "-o", o, "--policy", "scripted",
                                   "-p", 'completions=["x"]', "--scorer", "scripted", "-s", "scores={}"],
    "train prm (data)": lambda p, o: ["train", "prm", "--config", "tiny", f"train=[{p}]", f"output_dir={o}"],
    "train orm (eval data)": lambda p, o: ["train", "orm", "--config", "tiny", f"eval=[{p}]",
                                           f"output_dir={o}", f"train=[{o.parent / 'good.jsonl'}]"],
    "train prm --config": lambda p, o: ["train", "prm", "--config", p, f"output_dir={o}"],
    "eval processbench": lambda p, o: ["eval", "processbench", p, "--json", o],
    "eval processbench --tune-on": lambda p, o: ["eval", "processbench", o.parent / "pb.json", "--tune-on", p,
                                                 "--scorer", "scripted", "-s", "scores={}", "-s", "default=0.5",
                                                 "--json", o],
    "eval prmbench": lambda p, o: ["eval", "prmbench", p, "--json", o],
    "eval bon": lambda p, o: ["eval", "bon", p, "--json", o],
    "eval probes": lambda p, o: ["eval", "probes", p, "--scorer", "scripted", "-s", "scores={}", "--json", o],
    "eval probes --transfer": lambda p, o: ["eval", "probes", o.parent / "good.jsonl", "--transfer", p,
                                            "--scorer", "scripted", "-s", "scores={}", "--json", o],
    "eval probes --transfer-gsm8k": lambda p, o: ["eval", "probes", o.parent / "good.jsonl",
                                                  "--transfer-gsm8k", p, "--scorer", "scripted",
                                                  "-s", "scores={}", "--json", o],
    "demo --transfer-data": lambda p, o: ["demo", "--quick", "--transfer-data", p, "-o", o],
    "report": lambda p, o: ["report", p, "-o", o],
    "report --traces": lambda p, o: ["report", o.parent / "good.json", "--traces", p, "-o", o],
}
KINDS = ["nonexistent", "folder", "empty", "not_utf8", "not_utf8_later", "truncated"]


@pytest.fixture
def no_training(monkeypatch):
    """Training (and the model it loads) must never start on a bad input."""
    import prmkit.train

    def refuse(*args, **kwargs):
        raise AssertionError("training started: the input was not checked first")

    monkeypatch.setattr(prmkit.train, "launch", refuse)


# `data derive` skips a record it cannot read and counts it with its reason (documented, tested in
# tests/data): a bad line after good ones is not an error there.
CASES = [(c, k) for c in COMMANDS for k in KINDS if (c, k) != ("data derive", "not_utf8_later")]


@pytest.mark.parametrize("command, kind", CASES)
def test_a_bad_input_is_one_line_naming_the_path(tmp_path, capsys, no_training, command, kind):
    (tmp_path / "good.jsonl").write_text(GOOD_LINE)
    (tmp_path / "good.json").write_text('{"bon": {}}')
    shutil.copy(FIXTURES / "processbench" / "mini.json", tmp_path / "pb.json")
    path, out = bad_input(kind, tmp_path), tmp_path / "out.jsonl"
    before = sorted(tmp_path.rglob("*"))
    code, stdout, err = run(COMMANDS[command](path, out), capsys)
    assert code != 0, stdout + err
    assert "Traceback" not in stdout + err
    assert sorted(tmp_path.rglob("*")) == before, "the command wrote something"
    if command == "data validate" and kind == "not_utf8_later":  # its job: list every bad row, go on
        assert f"{path}:2: not UTF-8 (byte b'\\xff' at byte offset {len(GOOD_LINE) + 9})" in err, err
        return
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert str(path) in errors[0], errors[0]
    if kind == "truncated" and command == "train prm --config":
        assert "line 1, column" in err  # a YAML config's parse error: located on the lines that follow
    else:
        assert err.strip().splitlines()[-1] == errors[0], err
        if kind in ("not_utf8", "truncated"):
            assert f"{path}:1" in errors[0], errors[0]  # located: file and line


def test_not_utf8_names_line_and_byte_offset(tmp_path, capsys):
    p = tmp_path / "in.jsonl"
    p.write_bytes(GOOD_LINE.encode() + b'{"id": "t\xfe2"}\n')
    code, _, err = run(["data", "stats", p], capsys)
    assert code == 1
    assert err.strip() == f"error: {p}:2: not UTF-8 (byte b'\\xfe' at byte offset {len(GOOD_LINE) + 9})"


def test_a_report_results_file_not_utf8_is_located(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_bytes(b'{"bon":\n {"x": "\xff"}}')
    code, _, err = run(["report", p, "-o", tmp_path / "rep"], capsys)
    assert code == 1 and err.strip() == f"error: {p}:2: not UTF-8 (byte b'\\xff' at byte offset 16)"
    assert not (tmp_path / "rep").exists()


def test_a_byte_order_mark_is_accepted_in_json_lines_as_in_json_arrays(tmp_path, capsys):
    plain, bom_lines, bom_array = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.json"
    plain.write_text(GOOD_LINE + GOOD_LINE.replace("t1", "t2"))
    bom_lines.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    bom_array.write_bytes(b"\xef\xbb\xbf" + json.dumps([GOOD, {**GOOD, "id": "t2"}]).encode())
    stats = []
    for p in (plain, bom_lines, bom_array):
        code, out, err = run(["data", "stats", p, "--json", "--from", "prmkit"], capsys)
        assert code == 0, err
        stats.append(json.loads(out))
    assert stats[0] == stats[1] == stats[2] and stats[0]["traces"] == 2
    bom_results = tmp_path / "r.json"
    bom_results.write_bytes(b"\xef\xbb\xbf" + b'{"bon": {}}')
    code, _, err = run(["report", bom_results, "-o", tmp_path / "rep"], capsys)
    assert code == 0, err


@pytest.mark.parametrize("argv, expect", [
    (["--model", "{file}"], "is a file, not a folder"),
    (["--model", "{folder}/nope"], "no such folder"),
])
def test_a_model_folder_that_is_a_file_is_refused_before_loading(tmp_path, capsys, argv, expect):
    (tmp_path / "good.jsonl").write_text(GOOD_LINE)
    argv = [a.format(file=tmp_path / "good.jsonl", folder=tmp_path) for a in argv]
    code, _, err = run(["score", tmp_path / "good.jsonl", tmp_path / "o.jsonl", *argv], capsys)
    assert code == 1 and expect in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run(["report", tmp_path / "good.jsonl", "--model-dir", argv[1], "-o", tmp_path / "r"], capsys)
    assert code == 1 and expect in err and len(err.strip().splitlines()) == 1, err


def test_an_aggregator_argument_that_is_not_a_number_is_one_line(tmp_path, capsys):
    p = tmp_path / "good.jsonl"
    p.write_text(GOOD_LINE)
    code, _, err = run(["select", p, "--aggregate", "first_below:abc"], capsys)
    assert code == 1
    assert err.strip() == "error: first_below: the threshold is a number in [0, 1], got 'abc'"


# -- anything else -----------------------------------------------------------------------------------

@pytest.fixture
def boom(monkeypatch, tmp_path):
    """``data stats`` on a good file meets an exception prmkit did not foresee."""
    import prmkit.data

    def fail(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(prmkit.data, "compute_stats", fail)
    p = tmp_path / "good.jsonl"
    p.write_text(GOOD_LINE)
    return p


def test_an_unexpected_error_is_one_line_with_a_debug_hint(boom, capsys, monkeypatch):
    monkeypatch.delenv("PRMKIT_DEBUG", raising=False)
    code, _, err = run(["data", "stats", boom], capsys)
    assert code == 1
    assert err.strip() == "error: RuntimeError: boom second line (run with --debug for the traceback)"


@pytest.mark.parametrize("how", ["flag first", "flag last", "env"])
def test_debug_shows_the_traceback(boom, capsys, monkeypatch, how):
    monkeypatch.delenv("PRMKIT_DEBUG", raising=False)
    argv = ["data", "stats", str(boom)]
    if how == "flag first":
        argv = ["--debug", *argv]
    elif how == "flag last":
        argv = [*argv, "--debug"]
    else:
        monkeypatch.setenv("PRMKIT_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):  # raised on: Python prints the traceback
        main(argv)


def test_debug_adds_the_traceback_to_a_prmkit_error(tmp_path, capsys):
    code, _, err = run(["--debug", "data", "stats", tmp_path / "missing.jsonl"], capsys)
    assert code == 1 and "Traceback" in err and err.strip().endswith("no such file")


# -- usage ---------------------------------------------------------------------------------------------

def _commands(group, path: tuple[str, ...] = ()) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """(every command, every group) under a click group, as the words that name them."""
    commands, groups = [], []
    for name, cmd in group.commands.items():
        commands.append((*path, name))
        if hasattr(cmd, "commands"):  # a group (typer's bundled click or the click package)
            groups.append((*path, name))
            more, more_groups = _commands(cmd, (*path, name))
            commands += more
            groups += more_groups
    return commands, groups


ALL_COMMANDS, GROUPS = _commands(typer.main.get_command(app))


def test_the_command_list_is_complete():
    assert {("score",), ("data", "convert"), ("eval", "probes"), ("train", "prm"), ("report",),
            ("policy", "sft"), ("demo",)} <= set(ALL_COMMANDS)


@pytest.mark.parametrize("command", [(), *ALL_COMMANDS], ids=lambda c: " ".join(c) or "prmkit")
def test_an_unknown_option_is_one_line_plus_usage_and_exit_2(capsys, command):
    code, out, err = run([*command, "--no-such-option"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: No such option: --no-such-option"), err
    assert len(lines) == 2 and lines[1].startswith(f"Usage: {' '.join(('prmkit', *command))} "), err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("argv, expect", [
    (["frobnicate"], "error: No such command 'frobnicate'."),
    (["data", "stat", "x"], "error: No such command 'stat'. Did you mean 'stats'?"),
    (["data", "stats"], "error: Missing argument"),
    (["generate", "-n", "abc", "-o", "x"], "error: Invalid value for '-n'"),
])
def test_usage_errors_put_the_message_first(capsys, argv, expect):
    code, _, err = run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and lines[0].startswith(expect) and lines[1].startswith("Usage: prmkit"), err
    assert len(lines) == 2


@pytest.mark.parametrize("group", [(), *GROUPS], ids=lambda c: " ".join(c) or "prmkit")
def test_a_bare_command_group_prints_help_and_exits_0(capsys, group):
    code, out, err = run(list(group), capsys)
    assert code == 0 and "Usage" in out + err and "error" not in err


def test_version(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"prmkit {prmkit.__version__}"
