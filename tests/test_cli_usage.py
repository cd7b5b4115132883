"""Everyday CLI mistakes end in a one-line error and a non-zero exit, never a traceback."""

from __future__ import annotations

import gc

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



class _SeenThresholds:
    """Stands for the version ``prmkit version`` prints: records the collector's thresholds then."""

    def __init__(self):
        self.seen = []

    def __str__(self):
        self.seen.append(gc.get_threshold())
        return "0.0"


def test_a_command_runs_with_higher_collector_thresholds_and_puts_them_back(monkeypatch, capsys):
    import prmkit

    seen = _SeenThresholds()
    monkeypatch.setattr(prmkit, "__version__", seen)
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)  # CPython's defaults
        main(["version"])
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(100_000, 5, 40)  # a caller's own higher values are kept
        main(["version"])
        assert gc.get_threshold() == (100_000, 5, 40)
    finally:
        gc.set_threshold(*before)
    assert seen.seen == [(50_000, 20, 20), (100_000, 20, 40)]
    assert capsys.readouterr().out.split() == ["0.0", "0.0"]
