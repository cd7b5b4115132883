"""Converting a trace file from one format to another (``prmkit data convert``), streaming, written
through a temporary file renamed on success."""

from __future__ import annotations

import os
from typing import Any

from prmkit._durable import check_inputs
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
    check_inputs(dst, [src], [f"{os.fspath(dst)}.skipped.jsonl" if skip_invalid else None])
    traces = read(src, src_format, skip_invalid=skip_invalid, report=report,
                  **(read_options or {}))
    # Written to a temporary file beside dst and renamed when complete (both writers go through
    # prmkit._durable): a failure leaves an existing dst as it was.
    if dst_format == "parquet":
        n = write_parquet(traces, dst, **(write_options or {}))
    else:
        n = write(traces, dst, dst_format, losses=losses, strict=strict, **(write_options or {}))
    return n
