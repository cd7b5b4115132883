"""Input paths checked when the command line is parsed, before any model is loaded or any output
opened: each one must exist, be a regular file (or the folder asked for; a pipe such as ``<(cmd)``
is refused, as commands read an input more than once), be readable and, for a file, not be empty. A failed check is one line naming the path (``in.jsonl: is a folder, not a file``).

The checks are typer callbacks, so a command states them where it declares its arguments:
``typer.Argument(callback=input_files)``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prmkit.errors import FormatError, PrmkitError

__all__ = ["input_file", "input_files", "model_folders", "input_folders", "utf8_file", "output_file",
           "output_folder"]


def _paths(value: Any) -> Iterable[Path]:
    if value is None:
        return []
    return [Path(v) for v in value] if isinstance(value, (list, tuple)) else [Path(value)]


def input_file(path: str | os.PathLike) -> Path:
    """``path`` if it is a readable, non-empty file; else a :class:`PrmkitError` naming it.

    >>> input_file("/nonexistent/in.jsonl")
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: /nonexistent/in.jsonl: no such file
    """
    p = Path(path)
    if p.is_dir():
        raise PrmkitError(f"{p}: is a folder, not a file")
    if not p.exists():
        raise PrmkitError(f"{p}: no such file")
    kind = _special_kind(p)
    if kind is not None:
        # Every command reads an input more than once (its format from the first record, a count for
        # the progress bar, then the records): a pipe would be used up by the first read and the
        # rest would see an empty file, so it is refused before anything reads it.
        raise PrmkitError(f"{p}: {kind}, not a regular file (prmkit reads an input more than once); "
                          f"save it to a file first")
    try:
        with open(p, "rb"):
            pass
    except OSError as e:
        raise PrmkitError(f"{p}: cannot be read ({e.strerror or e})") from None
    # A regular file of 0 bytes holds no records, and taking it for an empty data set (exit 0)
    # would hide a failed download or copy.
    if p.stat().st_size == 0:
        raise PrmkitError(f"{p}: empty file (0 bytes)")
    return p


def _special_kind(p: Path) -> str | None:
    """What ``p`` is when it exists but is not a regular file: a pipe (``<(cmd)``, a FIFO), a
    device, a socket; None for a regular file."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return ("is a pipe" if stat.S_ISFIFO(mode) else "is a character device" if stat.S_ISCHR(mode)
            else "is a block device" if stat.S_ISBLK(mode) else "is a socket" if stat.S_ISSOCK(mode)
            else "is a special file")


def input_files(value: Any) -> Any:
    """Typer callback: every path given (one, a list, or None) passes :func:`input_file`."""
    for p in _paths(value):
        input_file(p)
    return value


def _folder(p: Path) -> None:
    if not p.exists():
        raise PrmkitError(f"{p}: no such folder")
    if not p.is_dir():
        raise PrmkitError(f"{p}: is a file, not a folder")
    if not os.access(p, os.R_OK | os.X_OK):
        raise PrmkitError(f"{p}: cannot be read (permission denied)")


def input_folders(value: Any) -> Any:
    """Typer callback: every path given must be a readable folder."""
    for p in _paths(value):
        _folder(p)
    return value


def model_folders(value: Any) -> Any:
    """Typer callback for ``--model``: a path that exists must be a readable folder; one that does
    not may still name a shipped model, which the scorer checks (before loading anything)."""
    for p in _paths(value):
        if p.exists():
            _folder(p)
    return value


def utf8_file(path: str | os.PathLike) -> None:
    """Raise a :class:`~prmkit.errors.FormatError` at the line and byte offset of the first bytes of
    ``path`` that are not UTF-8 (for files read whole as text, such as a YAML config)."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 (byte {data[e.start:e.start + 1]!r} at byte offset {e.start})",
                          path=str(path), line=data.count(b"\n", 0, e.start) + 1) from None


def output_file(path: str | os.PathLike | None, overwrite: bool, flag: str = "--overwrite") -> None:
    """Refuse an output ``path`` that exists unless ``overwrite`` (the command's ``flag``) says so.

    Called first thing in a writer command's body, after the input checks and before any model
    loads, so a mistyped OUT never costs a finished result. The writers write a temporary file and
    rename it, so a refused run (or a failing one) leaves the old OUT as it was.

    >>> output_file("/", overwrite=False)
    Traceback (most recent call last):
    ...
    prmkit.errors.PrmkitError: /: is a folder, not a file
    """
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise PrmkitError(f"{p}: is a folder, not a file")
    if p.exists() and not overwrite:
        raise PrmkitError(f"{p}: already exists; pass {flag} to replace it")


def output_folder(path: str | os.PathLike | None, overwrite: bool, names: Iterable[str] = (),
                  flag: str = "--overwrite") -> None:
    """Refuse an output folder that already holds one of ``names`` (any entry when ``names`` is
    empty) unless ``overwrite`` (the command's ``flag``) says so; a file at ``path`` is refused."""
    if path is None:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise PrmkitError(f"{p}: is a file, not a folder")
    if not p.is_dir() or overwrite:
        return
    names = list(names)
    found = [n for n in names if (p / n).exists()] if names else sorted(c.name for c in p.iterdir())
    if found:
        raise PrmkitError(f"{p}: already holds {', '.join(found[:3])}"
                          f"{' …' if len(found) > 3 else ''}; pass {flag} to replace it")
