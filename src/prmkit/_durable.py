"""Durable outputs: the one way prmkit writes a file a user named.

:func:`durable_file` is a context manager around one output ``OUT``:

- it refuses any input that is ``OUT`` itself, one of ``OUT``'s side files (a label store, a
  ``.skipped.jsonl`` list) or the temporary file of a prmkit writer that is still running, before
  anything is read or written;
- it holds an advisory lock on ``OUT`` for the whole run, so a second prmkit process writing the same
  ``OUT`` is refused at once with a line naming the one that runs (process id and command line);
- it hands out a temporary file in ``OUT``'s folder whose name no other run and no user file can
  have (``.OUT.<pid>-<random>.prmkit-partial``, created exclusively); the caller writes it, and on
  success it is flushed to disk and renamed over ``OUT`` (:func:`~prmkit._jsonio.replace_durably`);
- on any failure (an exception, Ctrl-C, SIGTERM through the CLI, a full disk) the temporary file is
  removed and ``OUT`` is left as it was; a full disk is reported in those terms.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> with durable_file(d / "out.txt") as tmp:
...     _ = tmp.write_text("done")
>>> (d / "out.txt").read_text(), sorted(p.name for p in d.iterdir())
('done', ['out.txt'])
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from prmkit._jsonio import replace_durably
from prmkit.errors import PrmkitError

__all__ = ["durable_file", "output_lock", "build_lock", "BUILD_LOCK_SUFFIX", "check_inputs",
           "temp_name_owner", "OutputBusyError", "full_disk_error", "is_full_disk", "write_text_file",
           "write_bytes_file"]

_TEMP_RE = re.compile(r"^\.(?P<out>.+)\.(?P<pid>\d+)-[0-9a-f]{8}\.prmkit-partial(?:\.gz)?$")
_LOCK_SUFFIX = ".prmkit-lock"
#: The suffix of :func:`build_lock`'s lock files (``.NAME`` + this, beside the entry ``NAME``).
BUILD_LOCK_SUFFIX = ".prmkit-build-lock"


class OutputBusyError(PrmkitError):
    """Another prmkit process is writing the same output."""


def _temp_path(out: Path) -> Path:
    gz = ".gz" if out.name.endswith(".gz") else ""  # the writer compresses by the name's ending
    return out.with_name(f".{out.name}.{os.getpid()}-{secrets.token_hex(4)}.prmkit-partial{gz}")


def _lock_path(out: Path) -> Path:
    return out.with_name(f".{out.name}{_LOCK_SUFFIX}")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    except OSError:
        return False
    return True


def temp_name_owner(path: str | os.PathLike) -> int | None:
    """The process id of the running prmkit writer whose temporary file ``path`` is, else None (not a
    prmkit temporary file, or one left by a process that is gone: it may be read, say to rescue it).

    >>> temp_name_owner(f".out.jsonl.{os.getpid()}-0123abcd.prmkit-partial") == os.getpid()
    True
    >>> temp_name_owner("out.partial.jsonl") is None
    True
    """
    m = _TEMP_RE.match(Path(path).name)
    if not m:
        return None
    pid = int(m.group("pid"))
    return pid if _pid_alive(pid) else None


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_inputs(out: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (),
                 side_files: Iterable[str | os.PathLike | None] = ()) -> None:
    """Refuse (:class:`~prmkit.errors.PrmkitError`) any of ``inputs`` that is ``out``, one of its
    ``side_files`` or a temporary file of a running prmkit writer: a run must never write over what
    it reads. Non-file inputs (None, ``"-"``) are passed over."""
    out = Path(out)
    sides = [Path(s) for s in side_files if s is not None and str(s) != ":memory:"]
    for inp in inputs:
        if inp is None or str(inp) in ("-", ""):
            continue
        inp = Path(inp)
        if _same(inp, out):
            raise PrmkitError(f"{inp}: the output must not overwrite the input (IN and OUT are one file)")
        for side in sides:
            if _same(inp, side):
                raise PrmkitError(f"{inp}: the input is a side file of the output {out} (prmkit writes "
                                  f"or replaces it during this run); copy it elsewhere or choose another OUT")
        if _same(inp, _lock_path(out)):
            raise PrmkitError(f"{inp}: the input is the lock file of the output {out}")
        pid = temp_name_owner(inp)
        if pid is not None:
            raise PrmkitError(f"{inp}: the input is the temporary file of a prmkit run that is still "
                              f"writing (process {pid}); wait for it to finish or stop it first")


def _describe_holder(lock: Path) -> str:
    try:
        text = lock.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text or "another process"


@contextlib.contextmanager
def output_lock(out: str | os.PathLike) -> Iterator[None]:
    """Hold an advisory lock on ``out`` (a hidden ``.OUT.prmkit-lock`` beside it, removed on release)
    while the block runs; :class:`OutputBusyError` at once if another process holds it. Where the
    platform has no ``fcntl`` (Windows) the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    out = Path(out)
    lock = _lock_path(out)
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputBusyError(f"{out}: another prmkit run is writing it ({_describe_holder(lock)}); "
                                  "wait for it to finish, stop it, or choose another output") from None
        except OSError:  # a file system without locks (some network ones): run unlocked
            os.close(fd)
            yield
            return
        # The holder before us may have removed the file after we opened it: then our lock is on a
        # file nobody else sees, and we try again on the one at the name.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        prog = "prmkit" if prog in ("prmkit", "__main__.py") else prog
        cmd = " ".join([prog, *sys.argv[1:]])
        os.write(fd, f"process {os.getpid()}: {cmd}"[:500].encode("utf-8", "replace"))
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


@contextlib.contextmanager
def build_lock(target: str | os.PathLike, what: str) -> Iterator[None]:
    """Held while this process builds the cache entry ``target`` (``what`` names it in the one line
    printed when waiting): another process that needs the same entry at the same moment waits here
    and then finds it built (check again inside the block), instead of building it a second time
    beside the first (a de-quantised GGUF, a merge or a conversion costs seconds to tens of seconds
    and hundreds of MB; label workers, pytest workers or several commands started on a fresh machine
    all ask for the default policy at once). The lock is ``filelock``'s, on a hidden file ``.NAME``
    + :data:`BUILD_LOCK_SUFFIX` beside the entry, left in place (zero bytes: removing a lock file
    that another process holds would let a third one in). Where the file system has no locks the
    block runs unlocked; each build's atomic publish keeps the entry whole either way."""
    from filelock import FileLock, Timeout

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(target.parent / f".{target.name}{BUILD_LOCK_SUFFIX}"))
    try:
        try:
            lock.acquire(timeout=0.1)
        except Timeout:
            print(f"waiting for another process to finish {what} ({target})", file=sys.stderr, flush=True)
            lock.acquire()
    except OSError:  # a file system without locks (some network ones): build unlocked
        yield
        return
    try:
        yield
    finally:
        lock.release()


def full_disk_error(out: str | os.PathLike, e: BaseException) -> PrmkitError:
    """A full disk (or quota) while writing ``out``, in the user's terms."""
    return PrmkitError(f"no space left on device writing {out} (nothing written; "
                       f"{'the old OUT is intact' if Path(out).exists() else 'no OUT was made'})")


def is_full_disk(e: BaseException) -> bool:
    """Whether ``e`` says the disk (or a quota) is full."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    # Libraries that wrap the OSError in their own exception (safetensors' SafetensorError) keep its text.
    return "no space left on device" in str(e).lower()


@contextlib.contextmanager
def durable_file(out: str | os.PathLike, *, inputs: Iterable[str | os.PathLike | None] = (),
                 side_files: Iterable[str | os.PathLike | None] = (), lock: bool = True,
                 publish: bool = True) -> Iterator[Path]:
    """Write ``out`` through a unique temporary file beside it; yields the temporary file's path
    (created empty, with the permissions a new file gets under the umask).

    ``inputs`` are refused if they are ``out``, one of ``side_files`` or a running writer's
    temporary file (:func:`check_inputs`); ``lock`` holds :func:`output_lock` for the block.
    ``publish=False`` leaves the rename to the caller (the file stays at the yielded path on success).
    """
    out = Path(out)
    check_inputs(out, inputs, side_files)
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out) if lock else contextlib.nullcontext():
        tmp = _temp_path(out)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
        os.close(fd)
        try:
            yield tmp
            if publish:
                replace_durably(tmp, out)
        except BaseException as e:
            with contextlib.suppress(OSError):
                tmp.unlink()
            if is_full_disk(e):
                raise full_disk_error(out, e) from e
            if isinstance(e, OSError) and e.filename is not None and str(e.filename) == str(tmp):
                # the temporary name is prmkit's business: the user knows OUT
                raise PrmkitError(f"{out}: {e.strerror or e} while writing it (nothing written; "
                                  f"{'the old OUT is intact' if out.exists() else 'no OUT was made'})") from e
            raise


def write_text_file(path: str | os.PathLike, text: str, *, lock: bool = False,
                    inputs: Iterable[str | os.PathLike | None] = ()) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through :func:`durable_file`; small files only (settings,
    results, a report page). Returns ``path``."""
    return write_bytes_file(path, text.encode("utf-8"), lock=lock, inputs=inputs)


def write_bytes_file(path: str | os.PathLike, data: bytes, *, lock: bool = False,
                     inputs: Iterable[str | os.PathLike | None] = ()) -> Path:
    """Write ``data`` to ``path`` through :func:`durable_file`. Returns ``path``."""
    with durable_file(path, lock=lock, inputs=inputs) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return Path(path)
