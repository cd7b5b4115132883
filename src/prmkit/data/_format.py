"""The importer/exporter interface, its registry, and the read/write/convert functions over it.

A :class:`Format` turns one record of a public format into traces (``decode``) and one trace back
into a record (``encode``). Whatever a record holds that has no :class:`~prmkit.trace.Trace` field
is kept in ``trace.meta[format.name]``, so ``encode(decode(r)) == r`` for every record the format
allows: round trips are lossless. Reading goes through :func:`read`, which locates every error
(file, line, field), counts what it skipped and why in an :class:`ImportReport`, and streams.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._fields import Fields
from prmkit._jsonio import ensure_parent, iter_json_records, open_text, write_jsonl_line
from prmkit._registry import Registry
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Trace

__all__ = ["Format", "ImportReport", "FORMATS", "get_format", "detect_format", "read", "write",
           "register_format", "count_records"]


@dataclass
class ImportReport:
    """What a read did: records seen, traces made, records skipped (with why), and non-fatal issues.

    ``issues`` are problems the importer noticed and kept the record for (say, a PRMBench
    ``error_steps`` index beyond the last step): each is a :class:`FormatError` with its location.
    """

    records: int = 0
    traces: int = 0
    skipped: list[FormatError] = field(default_factory=list)
    issues: list[FormatError] = field(default_factory=list)

    def skip_reasons(self) -> Counter[str]:
        return Counter(e.reason for e in self.skipped)

    def issue_reasons(self) -> Counter[str]:
        return Counter(e.reason for e in self.issues)

    def summary(self) -> str:
        parts = [f"{self.records} records read", f"{self.traces} traces"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.issues:
            parts.append(f"{len(self.issues)} issues")
        return ", ".join(parts)


class Format:
    """One public data format. Subclasses set ``name``, ``container`` and implement the three methods.

    Options given to the constructor (say, PRM800K's neutral-rating policy) are recorded in each
    trace's provenance, so a label can always say how it was derived.
    """

    name: ClassVar[str] = ""
    #: "jsonl" (one record per line) or "array" (one JSON array); reading accepts any container.
    container: ClassVar[str] = "jsonl"
    description: ClassVar[str] = ""
    #: Whether reading appends an "import" provenance entry to each trace.
    record_import: ClassVar[bool] = True

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.report = ImportReport()

    # -- to implement -------------------------------------------------------------------------------
    @classmethod
    def detect(cls, record: Any) -> bool:
        """Whether a record looks like this format (used when no format is named)."""
        return False

    def decode(self, f: Fields) -> list[Trace]:
        """Traces from one record (located in ``f``); raise ``f.error(...)`` on malformed input and
        call :meth:`issue` for a problem that keeps the record."""
        raise PrmkitError(f"format {self.name!r} cannot be read")

    def encode(self, trace: Trace) -> dict[str, Any]:
        """One record from one trace; raise :class:`PrmkitError` when the trace cannot be expressed."""
        raise PrmkitError(f"format {self.name!r} cannot be written")

    def encode_record(self, traces: list[Trace]) -> dict[str, Any]:
        """The record that ``decode`` turned into ``traces`` (most formats make one trace per record;
        a format that makes several, such as MATH-APS's search trees, overrides this)."""
        return self.encode(traces[0])

    # -- helpers for subclasses ---------------------------------------------------------------------
    def issue(self, f: Fields, key: str | int | None, reason: str) -> FormatError:
        """Record a non-fatal problem at ``key`` in the current record and return it."""
        err = f.error(key, reason)
        self.report.issues.append(err)
        return err

    @staticmethod
    def default_id(f: Fields) -> str:
        """An id for records that carry none: ``<file stem>:<line>`` (stable for the same file)."""
        stem = Path(f.path).name if f.path else "input"
        return f"{stem}:{f.line}" if f.line is not None else stem

    # -- reading / writing --------------------------------------------------------------------------
    def read(self, path: str | os.PathLike, *, skip_invalid: bool = False) -> Iterator[Trace]:
        """Stream traces from ``path``; see :func:`read`."""
        errors = self.report.skipped if skip_invalid else None
        yield from self.decode_records(iter_json_records(path, errors=errors), str(path),
                                       skip_invalid=skip_invalid)

    def decode_records(self, records: Iterable[tuple[int, Any]], where: str, *,
                       skip_invalid: bool = False, line_key: str = "line") -> Iterator[Trace]:
        """Traces from ``(line, record)`` pairs read from ``where`` (a path or a dataset name).

        Malformed records raise :class:`FormatError`, or with ``skip_invalid`` are counted in
        ``self.report.skipped`` and skipped; each trace gets an "import" provenance entry.
        """
        records = iter(records)
        while True:
            try:
                line, obj = next(records)
            except StopIteration:
                return
            except FormatError as e:  # broken JSON: nothing after it can be located reliably
                if not skip_invalid:
                    raise
                self.report.skipped.append(e)
                return
            self.report.records += 1
            try:
                traces = self.decode(Fields(obj, path=where, line=line))
            except FormatError as e:
                if not skip_invalid:
                    raise
                self.report.skipped.append(e)
                continue
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
                # A decoder bug or an input shape it did not foresee: still name the place.
                err = FormatError(f"cannot read record ({type(e).__name__}: {e})", path=where,
                                  line=line)
                if not skip_invalid:
                    raise err from e
                self.report.skipped.append(err)
                continue
            for t in traces:
                if self.record_import:
                    t.add_provenance("import", self.name,
                                     {"path": where, line_key: line, **self.options})
                self.report.traces += 1
                yield t

    def write(self, traces: Iterable[Trace], path: str | os.PathLike) -> int:
        """Write ``traces`` in this format (streamed); returns how many records were written."""
        ensure_parent(path)
        n = 0
        with open_text(path, "w") as f:
            if self.container == "array":
                import json

                f.write("[")
                for t in traces:
                    f.write(",\n" if n else "\n")
                    f.write(json.dumps(self.encode(t), ensure_ascii=False))
                    n += 1
                f.write("\n]\n" if n else "]\n")
            else:
                for t in traces:
                    write_jsonl_line(f, self.encode(t))
                    n += 1
        return n


# -- registry ----------------------------------------------------------------------------------------

#: name -> "module:attr", imported on first use.
FORMATS = Registry("format", {
    "prmkit": "prmkit.data._native:PrmkitFormat",
    "prm800k": "prmkit.data._prm800k:PRM800KFormat",
    "math_shepherd": "prmkit.data._math_shepherd:MathShepherdFormat",
    "processbench": "prmkit.data._processbench:ProcessBenchFormat",
    "prmbench": "prmkit.data._prmbench:PRMBenchFormat",
    "trl_stepwise": "prmkit.data._trl_stepwise:TRLStepwiseFormat",
    "openrlhf": "prmkit.data._openrlhf:OpenRLHFFormat",
    "gsm8k": "prmkit.data._gsm8k:GSM8KFormat",
    "math": "prmkit.data._math:MATHFormat",
    "math_aps": "prmkit.data._math_aps:MathAPSFormat",
}, group="prmkit.formats")


def register_format(name: str, target: str) -> None:
    """Register a format under ``name`` as ``"module:attr"`` (a :class:`Format` subclass)."""
    FORMATS.register(name, target)


def get_format(name: str, **options: Any) -> Format:
    """An instance of the format registered as ``name``, configured with ``options``."""
    return FORMATS.create(name, **options)


def detect_format(path: str | os.PathLike) -> str:
    """The name of the format of ``path``, from its first record."""
    try:
        _, first = next(iter_json_records(path))
    except StopIteration:
        raise PrmkitError(f"{path}: empty file; name its format with --from") from None
    # Native prmkit traces first: they are the most specific.
    for name in FORMATS:
        if FORMATS.load(name).detect(first):
            return name
    keys = ", ".join(sorted(first)[:8]) if isinstance(first, dict) else type(first).__name__
    raise PrmkitError(f"{path}: cannot tell the format from the first record (keys: {keys}); "
                      f"name it with --from ({', '.join(FORMATS)})")


def read(path: str | os.PathLike, fmt: str | None = None, *, skip_invalid: bool = False,
         report: ImportReport | None = None, **options: Any) -> Iterator[Trace]:
    """Stream traces from ``path`` in format ``fmt`` (detected when None).

    Malformed records raise :class:`FormatError` (file, line, field). With ``skip_invalid`` they are
    skipped instead and listed in ``report.skipped``; problems that keep a record go to
    ``report.issues``. ``options`` configure the format (see its class).
    """
    if not os.path.exists(path):
        raise PrmkitError(f"{path}: no such file")
    f = get_format(fmt or detect_format(path), **options)
    if report is not None:
        f.report = report
    yield from f.read(path, skip_invalid=skip_invalid)


def write(traces: Iterable[Trace], path: str | os.PathLike, fmt: str = "prmkit",
          **options: Any) -> int:
    """Write ``traces`` to ``path`` in format ``fmt``; returns the number of records."""
    return get_format(fmt, **options).write(traces, path)


def count_records(path: str | os.PathLike, fmt: str | None = None) -> int:
    """How many records ``path`` holds, for a progress bar: its non-blank lines for a JSON Lines
    format, else 0 (unknown without parsing the whole file)."""
    fmt = fmt or detect_format(path)
    if FORMATS.load(fmt).container != "jsonl":
        return 0
    with open_text(path) as f:
        return sum(1 for line in f if line.strip())
