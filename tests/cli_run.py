"""Run the ``prmkit`` CLI in-process for a test: ``(exit code, stdout, stderr)``, arguments as strings.
A plain module on sys.path (tests/conftest.py), so test folders share it."""

from __future__ import annotations

from prmkit.cli import main


def run(argv, capsys):
    code = 0
    try:
        main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err
