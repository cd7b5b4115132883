"""Everyday CLI mistakes end in a one-line error and a non-zero exit, never a traceback."""

from __future__ import annotations

import pytest

from prmkit.cli import main


@pytest.mark.parametrize("argv, expect", [
    (["frobnicate"], "No such command 'frobnicate'"),
    (["data", "stats"], "Missing argument"),
    (["data", "stat", "x"], "No such command 'stat'"),
])
def test_usage_errors_are_one_message(capsys, argv, expect):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err


def test_bare_prmkit_shows_help_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 0
    captured = capsys.readouterr()
    assert "Usage" in captured.out + captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("command", [["data", "stats"], ["data", "convert"]])
def test_a_directory_given_as_a_file_is_one_line(tmp_path, capsys, command):
    argv = [*command, str(tmp_path)] + ([str(tmp_path / "o.jsonl")] if command[1] == "convert" else [])
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and str(tmp_path) in err and "\n" not in err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("argv, expect", [
    (["demo", "--preset", "nope"], "unknown preset 'nope'; presets: full, verdict, quick"),
    (["demo", "--quick", "--preset", "verdict"], "--quick and --preset verdict disagree"),
])
def test_demo_preset_mistakes_are_one_line_and_start_nothing(tmp_path, capsys, argv, expect):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(tmp_path / "run")])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert expect in err and "\n" not in err
    assert not (tmp_path / "run").exists()
