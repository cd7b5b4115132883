"""Reading JSON records with their line numbers, streaming where the container allows it.

Three containers occur in this field's data: JSON Lines (one object per line), one JSON array, and
concatenated pretty-printed objects (a sample of PRM800K ships like that). :func:`iter_json_records`
reads all three and yields ``(line, object)``; JSON Lines is streamed line by line, so a multi-GB file
never has to fit in memory. Files ending in ``.gz`` are decompressed on the fly.

Writing goes through one discipline: a finished temporary file or folder, flushed to disk, renamed
into place (:func:`replace_durably` for a file, :func:`publish_folder` for a folder,
:func:`publish_into` for files added to a folder that holds more).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from prmkit.errors import FormatError

__all__ = ["iter_json_records", "decode_utf8", "open_text", "open_binary", "sniff_container",
           "replace_durably", "fsync_folder", "fsync_tree", "publish_folder", "publish_into",
           "load_yaml_or_json"]

_decoder = json.JSONDecoder()


def open_binary(path: str | os.PathLike, mode: str = "rb") -> IO[bytes]:
    """Open ``path`` in binary mode, through gzip when it ends in ``.gz``."""
    if str(path).endswith(".gz"):
        return gzip.open(path, mode)  # type: ignore[return-value]
    return open(path, mode)


def open_text(path: str | os.PathLike, mode: str = "r") -> IO[str]:
    """Open ``path`` as UTF-8 text (gzip when it ends in ``.gz``)."""
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8", newline="")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8", newline="")


def _decode_line(raw: bytes, path: str, line: int, offset: int) -> str:
    """One line as text; ``offset`` is the line's first byte in the file, for the error."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(_not_utf8(raw, e.start, offset + e.start), path=path, line=line) from None
    # A byte order mark opens some files written on Windows; JSON arrays skip it, so JSON Lines does.
    return text[1:] if line == 1 and text.startswith("\ufeff") else text


def _not_utf8(data: bytes, start: int, file_offset: int) -> str:
    return f"not UTF-8 (byte {data[start:start + 1]!r} at byte offset {file_offset})"


def decode_utf8(data: bytes, path: str | os.PathLike) -> str:
    """A whole file's bytes as text, without a leading byte order mark; bytes that are not UTF-8 are
    a :class:`FormatError` naming their line and offset.

    >>> decode_utf8(b"\\xef\\xbb\\xbf{}", "a.json")
    '{}'
    >>> decode_utf8(b'{"a":\\n"\\xff"}', "a.json")
    Traceback (most recent call last):
    ...
    prmkit.errors.FormatError: a.json:2: not UTF-8 (byte b'\\xff' at byte offset 7)
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(_not_utf8(data, e.start, e.start), path=str(path),
                          line=data.count(b"\n", 0, e.start) + 1) from None
    return text[1:] if text.startswith("\ufeff") else text


def load_yaml_or_json(path: str | os.PathLike, what: str = "file") -> Any:
    """A small settings file (rules, a spec, a recipe) parsed as YAML (``.yaml``/``.yml``) or JSON;
    a missing file, bytes that are not UTF-8 and a syntax error are each one
    :class:`~prmkit.errors.FormatError` naming the file (and the line where the parser says).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "r.yaml"), "w").write("rules: [" + chr(10))
    >>> try:
    ...     load_yaml_or_json(os.path.join(d, "r.yaml"), "rules file")
    ... except FormatError as e:
    ...     print(str(e).replace(d + os.sep, ""))
    r.yaml:2: not valid YAML (rules file): expected the node content, but found '<stream end>'
    """
    p = Path(path)
    if not p.is_file():
        raise FormatError(f"no such {what}" if not p.exists() else f"not a file ({what})", path=str(p))
    text = decode_utf8(p.read_bytes(), p)
    yaml_file = p.suffix.lower() in (".yaml", ".yml")
    try:
        if yaml_file:
            import yaml

            return yaml.safe_load(text)
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(f"not valid JSON ({what}): {e.msg}", path=str(p), line=e.lineno) from None
    except Exception as e:  # yaml.YAMLError: its problem and the place it points at
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or " ".join(str(e).split())[:200]
        raise FormatError(f"not valid YAML ({what}): {problem}", path=str(p),
                          line=mark.line + 1 if mark is not None else None) from None


def sniff_container(path: str | os.PathLike) -> str:
    """``"jsonl"``, ``"array"`` or ``"concatenated"``, from the first non-blank bytes of the file."""
    with open_binary(path) as f:
        head = f.read(1 << 16)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("["):
        return "array"
    first_line = text.split("\n", 1)[0].strip()
    try:
        json.loads(first_line)
        return "jsonl"
    except json.JSONDecodeError:
        return "concatenated" if text.startswith("{") else "jsonl"


def iter_json_records(path: str | os.PathLike, container: str | None = None, *,
                      errors: list[FormatError] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, value)`` for each record of a JSON Lines / JSON array / concatenated file.

    ``line`` is 1-based: the line of the record in JSON Lines, the line where the record starts
    otherwise. Blank lines, and a UTF-8 byte order mark opening the file, are skipped (in every
    container alike). Malformed JSON raises :class:`FormatError` at its line, and bytes that are not
    UTF-8 name their offset in the file too; in JSON Lines, when an ``errors`` list is given, a bad
    line is appended to it and reading goes on with the next line (other containers cannot be
    resynchronised after a syntax error).
    """
    path_s = str(path)
    container = container or sniff_container(path)
    if container == "jsonl":
        offset = 0
        with open_binary(path) as f:
            for line_no, raw in enumerate(f, 1):
                offset, start = offset + len(raw), offset
                try:
                    text = _decode_line(raw, path_s, line_no, start)
                    if not text.strip():
                        continue
                    try:
                        value = json.loads(text)
                    except json.JSONDecodeError as e:
                        raise FormatError(f"invalid JSON ({e.msg}, column {e.colno})",
                                          path=path_s, line=line_no) from None
                except FormatError as e:
                    if errors is None:
                        raise
                    errors.append(e)
                    continue
                yield line_no, value
        return
    with open_binary(path) as f:
        data = f.read()
    yield from _iter_values(decode_utf8(data, path_s), path_s, container)


def _iter_values(text: str, path: str, container: str) -> Iterator[tuple[int, Any]]:
    n, pos = len(text), 0
    line_of = _LineCounter(text)

    def skip_ws(i: int) -> int:
        while i < n and text[i] in " \t\r\n\ufeff":
            i += 1
        return i

    def decode_at(i: int) -> tuple[Any, int]:
        try:
            return _decoder.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise FormatError(f"invalid JSON ({e.msg})", path=path, line=line_of(e.pos)) from None

    pos = skip_ws(pos)
    if container == "array":
        if pos >= n or text[pos] != "[":
            raise FormatError("expected a JSON array", path=path, line=line_of(pos))
        pos = skip_ws(pos + 1)
        if pos < n and text[pos] == "]":
            return
        while True:
            start = pos
            value, pos = decode_at(pos)
            yield line_of(start), value
            pos = skip_ws(pos)
            if pos < n and text[pos] == ",":
                pos = skip_ws(pos + 1)
                continue
            if pos < n and text[pos] == "]":
                if skip_ws(pos + 1) != n:
                    raise FormatError("extra data after the JSON array", path=path,
                                      line=line_of(skip_ws(pos + 1)))
                return
            raise FormatError("unterminated JSON array (expected ',' or ']')", path=path,
                              line=line_of(min(pos, n)))
    while pos < n:
        start = pos
        value, pos = decode_at(pos)
        yield line_of(start), value
        pos = skip_ws(pos)


class _LineCounter:
    """Line number of a character offset, counted incrementally (offsets arrive in order)."""

    def __init__(self, text: str) -> None:
        self.text, self.offset, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.offset:  # rare: an error position behind the cursor
            return self.text.count("\n", 0, pos) + 1
        self.line += self.text.count("\n", self.offset, pos)
        self.offset = pos
        return self.line


def write_jsonl_line(f: IO[str] | io.TextIOBase, obj: Any) -> None:
    """One compact JSON line; non-ASCII kept as is (the files stay readable)."""
    f.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
    f.write("\n")


def ensure_parent(path: str | os.PathLike) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)


def replace_durably(tmp: str | os.PathLike, out: str | os.PathLike) -> None:
    """Rename the finished, closed file ``tmp`` over ``out``: the one way every writer publishes a file.

    ``tmp``'s bytes are flushed to disk (fsync) before the rename, so after an operating-system crash
    or power loss ``out`` is the old file or the complete new one, never a renamed file whose data
    was still in the page cache (an empty or truncated file at the final name). On POSIX the folder
    is flushed after, so the rename itself survives. A killed process needs neither: the rename is
    what marks a file complete, and it happens only after the last byte was written.
    """
    # A write handle: Windows' fsync (_commit) refuses a read-only one.
    fd = os.open(tmp, os.O_RDWR | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, out)
    if os.name == "posix":
        fsync_folder(Path(out).parent)


def fsync_folder(folder: str | os.PathLike) -> None:
    """Flush a folder's entries (a rename, a new file) to disk; POSIX only, where a folder can be
    opened. A file system that cannot flush a folder (some network and FUSE ones say EINVAL) is left
    as it is: the file's own data was flushed, and nothing better can be done there."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(folder: str | os.PathLike) -> None:
    """Flush every file under ``folder`` to disk, then every folder, deepest first, ``folder`` last
    (a folder's entries are on disk only once the folder itself is flushed)."""
    for root, _dirs, files in os.walk(folder, topdown=False):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if os.name == "posix":
            fsync_folder(root)


def publish_folder(tmp: str | os.PathLike, out: str | os.PathLike, *, replace: bool = False) -> bool:
    """Rename the finished folder ``tmp`` to ``out``: the one way a writer publishes a folder (a model,
    a checkpoint, a cache entry). Every file and folder in ``tmp`` is flushed first, and the parent
    after, so after a crash ``out`` is absent, the old folder, or the complete new one.

    Where ``out`` exists: ``replace=True`` moves it aside, renames ``tmp`` in and then removes the
    old one; ``replace=False`` (a cache entry another process may have written first) keeps it,
    removes ``tmp`` and returns False. Returns True when ``tmp`` became ``out``.
    """
    tmp, out = Path(tmp), Path(out)
    _default_mode(tmp)
    fsync_tree(tmp)
    old = None
    if replace and out.exists():
        old = out.with_name(f".old-{out.name}-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
    try:
        os.replace(tmp, out)
    except OSError:
        if old is not None:
            os.replace(old, out)
            raise
        if not out.exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # another process published it first
        return False
    if os.name == "posix":
        fsync_folder(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return True


def _default_mode(folder: Path) -> None:
    """Private modes made by the tools that fill a staging folder — ``tempfile.mkdtemp``'s 0700
    folders, safetensors' 0600 files (``save_file`` writes through a private temporary file) — become,
    once published, the modes any new folder or file gets under the umask, so a model folder or a
    shared cache is readable as usual. Other modes are left as they are."""
    if os.name != "posix":
        return
    umask = os.umask(0)
    os.umask(umask)
    for root, _dirs, files in os.walk(folder):
        entries = [(root, 0o700, 0o777), *((os.path.join(root, f), 0o600, 0o666) for f in files)]
        for name, private, mode in entries:
            try:
                st = os.lstat(name)
                if st.st_mode & 0o777 == private and not os.path.islink(name):
                    os.chmod(name, mode & ~umask)
            except OSError:
                pass


def publish_into(tmp: str | os.PathLike, out: str | os.PathLike, *, last: str) -> None:
    """Move every entry of the finished folder ``tmp`` into the folder ``out`` (which holds other
    things too, such as a training run's checkpoints), ``last`` after all the others, then remove
    ``tmp``.

    ``last`` is the file that marks ``out`` complete (a model's ``prmkit_rm.json``): the old one is
    removed before anything moves and the new one arrives last, so a crash halfway never shows a
    complete-looking mix of old and new files. Everything is flushed to disk before the first move
    and ``out`` after the last.
    """
    tmp, out = Path(tmp), Path(out)
    if not (tmp / last).exists():
        raise FileNotFoundError(f"{tmp / last}: the file that marks the folder complete is missing")
    _default_mode(tmp)
    fsync_tree(tmp)
    out.mkdir(parents=True, exist_ok=True)
    (out / last).unlink(missing_ok=True)
    if os.name == "posix":
        fsync_folder(out)
    for entry in sorted(tmp.iterdir(), key=lambda p: p.name == last):
        target = out / entry.name
        if entry.is_dir() and not entry.is_symlink():
            publish_folder(entry, target, replace=True)
        else:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            os.replace(entry, target)
    if os.name == "posix":
        fsync_folder(out)
    tmp.rmdir()
