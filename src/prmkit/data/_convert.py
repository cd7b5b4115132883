"""Converting a trace file from one format to another (``prmkit data convert``), streaming, written
through a temporary file renamed on success."""

from __future__ import annotations

import os
from typing import Any

from prmkit._jsonio import replace_durably
from prmkit.data._export import ExportReport
from prmkit.data._format import ImportReport, detect_format, read, write
from prmkit.data._hf import write_parquet
from prmkit.errors import PrmkitError

__all__ = ["convert"]


def convert(src: str | os.PathLike, dst: str | os.PathLike, *, src_format: str | None = None,
            dst_format: str | None = "prmkit", skip_invalid: bool = False,
            report: ImportReport | None = None, read_options: dict[str, Any] | None = None,
            write_options: dict[str, Any] | None = None, losses: ExportReport | None = None,
            strict: bool = False) -> int:
    """Convert ``src`` to ``dst``, streaming. Returns the number of records written.

    ``dst_format`` ``"parquet"`` writes Apache Parquet (the ``datasets`` schema); None picks it for a
    ``.parquet`` file name, else ``prmkit`` JSONL. Both keep everything; any other format may not hold
    all a trace has: ``losses`` counts what it dropped, per field, and ``strict`` refuses (raises
    :class:`~prmkit.data.LossyExportError`, leaving ``dst`` as it was) instead of dropping anything."""
    if dst_format is None:
        dst_format = "parquet" if str(dst).endswith(".parquet") else "prmkit"
    if not os.path.exists(src):
        raise PrmkitError(f"{src}: no such file")
    src_format = src_format or detect_format(src)
    if os.path.exists(dst) and os.path.samefile(src, dst):
        raise PrmkitError(f"{dst}: the output must not overwrite the input")
    traces = read(src, src_format, skip_invalid=skip_invalid, report=report,
                  **(read_options or {}))
    # Written beside dst and renamed when complete: a failure leaves an existing dst as it was.
    base, ext = os.path.splitext(os.fspath(dst))
    tmp = f"{base}.partial{ext}"
    try:
        if dst_format == "parquet":
            n = write_parquet(traces, tmp, **(write_options or {}))
        else:
            n = write(traces, tmp, dst_format, losses=losses, strict=strict, **(write_options or {}))
        replace_durably(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return n
