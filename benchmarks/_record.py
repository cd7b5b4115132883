"""Benchmark results as data: each run of a script in ``benchmarks/`` appends one JSON record to
``benchmarks/results/<name>.jsonl``, and ``benchmarks/render.py`` turns the records into
``docs/benchmarks.md``.

A script imports this module at its start (which notes the load average before the run; :func:`start`
notes it again, for a script that sets up at length before measuring) and calls :func:`record` once at
its end, after printing its ratio last::

    import _record                      # at the top: the load average before
    ...
    print(f"ratio prmkit/trl: {ratio:.2f}")
    _record.record("train_vs_trl", {"prmkit_tokens_s": p, "trl_tokens_s": t}, ratio,
                   goal="prmkit at least as fast as TRL's PRMTrainer")

A record holds the command line, the git commit, the UTC date, the machine (CPU model, the CPU flags
that matter here, torch's CPU capability, a CPU class, the core count), the load average before and
after, every figure and the ratio. ``PRMKIT_BENCH_RESULTS`` names another results folder (the tests
use it, so running a benchmark's command there never touches the repository's records).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["start", "record", "machine", "results_folder", "FLAGS"]

#: The CPU flags that decide how fast (and how exactly) prmkit's CPU paths run: int8 products use VNNI,
#: bfloat16 is native with AVX512-BF16 or AMX.
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8")

_REPO = Path(__file__).resolve().parents[1]


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


_LOAD_BEFORE = _loadavg()  # the import is the script's start


def start() -> None:
    """Note the load average now, as the run's "before" (the import already did, at the script's start)."""
    global _LOAD_BEFORE
    _LOAD_BEFORE = _loadavg()


def results_folder() -> Path:
    """``$PRMKIT_BENCH_RESULTS``, else ``benchmarks/results`` beside this file."""
    env = os.environ.get("PRMKIT_BENCH_RESULTS")
    return Path(env) if env else Path(__file__).resolve().parent / "results"


def _cpuinfo() -> tuple[str, set[str]]:
    model, flags = "unknown", set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown":
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, flags


def machine() -> dict[str, Any]:
    """This machine as a record states it."""
    model, present = _cpuinfo()
    flags = {f: f in present for f in FLAGS}
    from prmkit.policies import cpu_info  # the class prmkit's own dtype="auto" decides by

    info = cpu_info()
    return {"cpu_model": model, "cpu_flags": flags, "torch_cpu_capability": info.capability,
            "cpu_class": info.cpu_class, "cores": os.cpu_count()}


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_REPO, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def _clean(value: Any) -> Any:
    """JSON-safe figures: NaN and infinities become None, tuples lists, other objects strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    try:
        return _clean(float(value))  # numpy and torch scalars
    except (TypeError, ValueError):
        return str(value)


def record(name: str, figures: dict[str, Any], ratio: float | None, *, goal: str | None = None,
           **extra: Any) -> dict[str, Any]:
    """Append one record of this run to ``<results>/<name>.jsonl`` and return it.

    ``figures``: every number the run printed, by name; ``ratio``: the one it printed last (None where
    the run had no baseline to compare with); ``goal``: what the ratio should reach, in words;
    ``extra``: other fields (``note``, ``machine`` for a record made elsewhere, ...). The file is
    rewritten whole through a unique temporary file beside it (old content + the new line, flushed to
    disk, then renamed), so a reader never sees half a record and a crash leaves the old file.
    """
    rec: dict[str, Any] = {
        "name": name,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _commit(),
        "command": " ".join(["python", *sys.argv]) if sys.argv and sys.argv[0] else "python",
        "argv": list(sys.argv),
        "machine": machine(),
        "load_before": _LOAD_BEFORE,
        "load_after": _loadavg(),
        "figures": _clean(figures),
        "ratio": _clean(ratio),
        "goal": goal,
    }
    rec.update(_clean(extra))
    folder = results_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    old = path.read_bytes() if path.exists() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(old + (json.dumps(rec, ensure_ascii=False) + "\n").encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    print(f"record: {path}", file=sys.stderr)
    return rec
