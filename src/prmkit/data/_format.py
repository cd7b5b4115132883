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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import durable_file
from prmkit._fields import Fields
from prmkit._jsonio import iter_json_records, open_binary, open_text, write_jsonl_line
from prmkit._registry import Registry
from prmkit._result import Record
from prmkit.data._export import ExportReport, LossCheck
from prmkit.errors import FormatError, PrmkitError
from prmkit.trace import Trace

__all__ = ["Format", "ImportReport", "FORMATS", "get_format", "detect_format", "read", "write",
           "register_format", "count_records", "record_id", "scan"]


@dataclass(eq=False)
class ImportReport(Record):
    """What a read did: records seen, traces made, records skipped (with why), and non-fatal issues.

    ``issues`` are problems the importer noticed and kept the record for (say, a PRMBench
    ``error_steps`` index beyond the last step): each is a :class:`FormatError` with its location.
    In :meth:`to_dict` each error is a row (``path``, ``line``, ``field``, ``id``, ``reason``); two
    reports are equal when their dicts are (an exception is equal only to itself).
    """

    kind: ClassVar[str] = "import"
    records: int = 0
    traces: int = 0
    skipped: list[FormatError] = field(default_factory=list)
    issues: list[FormatError] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ImportReport) and self.to_dict() == other.to_dict()

    def to_dict(self) -> dict[str, Any]:
        return {"records": self.records, "traces": self.traces, "skipped": self.skipped_rows(),
                "issues": [_error_row(e) for e in self.issues], **self.extra}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> ImportReport:
        r = super().from_dict(d, where=where)
        where = where or cls.kind
        r.skipped = [_row_error(row, f"{where}.skipped[{i}]") for i, row in enumerate(r.skipped)]
        r.issues = [_row_error(row, f"{where}.issues[{i}]") for i, row in enumerate(r.issues)]
        return r

    def skip_reasons(self) -> Counter[str]:
        return Counter(e.reason for e in self.skipped)

    def issue_reasons(self) -> Counter[str]:
        return Counter(e.reason for e in self.issues)

    def skipped_rows(self) -> list[dict[str, Any]]:
        """One row per skipped record: ``path``, ``line``, ``field``, ``id`` (when the record had
        one) and ``reason``, as written to the side file of :meth:`write_skipped`."""
        return [_error_row(e) for e in self.skipped]

    def write_skipped(self, path: str | os.PathLike) -> None:
        """Write :meth:`skipped_rows` to ``path`` as JSON Lines, through a temporary file beside it
        that is flushed to disk and renamed: ``path`` is complete or absent."""
        with durable_file(path) as tmp, open_text(tmp, "w") as f:
            for row in self.skipped_rows():
                write_jsonl_line(f, row)

    def skipped_lines(self, out: str | os.PathLike | None = None, *, limit: int = 20,
                      overwrite: bool = False) -> list[str]:
        """Lines for people about the skipped records: each one (``file:line: field — reason``, and
        its id) up to ``limit``; past it the count, and with ``out`` the full list written to
        ``<out>.skipped.jsonl``. A list from an earlier run of ``out`` that this run has no use for is
        removed only with ``overwrite`` (the user's ``--overwrite``); otherwise a line says it is stale.

        >>> r = ImportReport(skipped=[FormatError("bad", path="a.jsonl", line=3, field="steps")])
        >>> r.skipped_lines()
        ['skipped a.jsonl:3: steps — bad', 'skipped by reason: 1× bad']
        """
        side = None if out is None else Path(f"{os.fspath(out)}.skipped.jsonl")
        lines = []
        for e in self.skipped[:limit]:
            rid = record_id(e)
            lines.append(f"skipped {e}" + (f" (id {rid})" if rid is not None else ""))
        if len(self.skipped) > limit:
            lines.append(f"… and {len(self.skipped) - limit} more: {len(self.skipped)} records skipped")
            if side is not None:
                self.write_skipped(side)
                lines.append(f"all {len(self.skipped)} skipped records (file, line, field, id, reason): "
                             f"{side}")
        elif side is not None and side.exists():
            if overwrite:
                side.unlink()
            else:
                lines.append(f"note: {side} is from an earlier run, not this one (kept; --overwrite "
                             "removes it)")
        if self.skipped:
            lines.append("skipped by reason: " + ", ".join(
                f"{n}× {r}" for r, n in self.skip_reasons().most_common(5)))
        return lines

    def lines(self) -> list[str]:
        """What a terminal shows of it (the one way every result prints; :meth:`summary` is its line)."""
        return [self.summary()]

    def summary(self) -> str:
        parts = [f"{self.records} records read", f"{self.traces} traces"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.issues:
            parts.append(f"{len(self.issues)} issues")
        return ", ".join(parts)


#: Keys under which public formats keep a record's id, most specific first.
_ID_KEYS = ("id", "idx", "unique_id", "question_id", "uid")


def _with_id(err: FormatError, record: Any) -> FormatError:
    """``err`` carrying the id of the malformed ``record`` when it has a usable one, so a skipped
    record can be named by id as well as by line."""
    if isinstance(record, dict):
        for key in _ID_KEYS:
            value = record.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and len(str(value)) <= 200:
                err.record_id = str(value)  # type: ignore[attr-defined]
                break
    return err


def record_id(err: FormatError) -> str | None:
    """The id of the record ``err`` is about, when it was read (see :meth:`ImportReport.skipped_rows`)."""
    return getattr(err, "record_id", None)


def _error_row(e: FormatError) -> dict[str, Any]:
    return {"path": e.path, "line": e.line, "field": e.field, "id": record_id(e), "reason": e.reason}


def _row_error(row: Any, where: str) -> FormatError:
    """The error :func:`_error_row` wrote (its id kept)."""
    if not isinstance(row, Mapping) or not isinstance(row.get("reason"), str):
        raise FormatError("must be an object with a reason", field=where)
    err = FormatError(row["reason"], path=row.get("path"), line=row.get("line"), field=row.get("field"))
    if row.get("id") is not None:
        err.record_id = str(row["id"])  # type: ignore[attr-defined]
    return err


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
    #: Whether a record holds everything a trace has (then writing skips the loss check).
    lossless: ClassVar[bool] = False

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
                self.report.skipped.append(_with_id(e, obj))
                continue
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
                # A decoder bug or an input shape it did not foresee: still name the place.
                err = FormatError(f"cannot read record ({type(e).__name__}: {e})", path=where,
                                  line=line)
                if not skip_invalid:
                    raise err from e
                self.report.skipped.append(_with_id(err, obj))
                continue
            for t in traces:
                if self.record_import:
                    t.add_provenance("import", self.name,
                                     {"path": where, line_key: line, **self.options})
                self.report.traces += 1
                yield t

    def group(self, traces: Iterable[Trace]) -> Iterator[list[Trace]]:
        """The traces of each record to write, in order: one each (a format whose records hold
        several traces, such as MATH-APS's search trees, overrides this)."""
        for t in traces:
            yield [t]

    def write(self, traces: Iterable[Trace], path: str | os.PathLike, *,
              losses: ExportReport | None = None, strict: bool = False) -> int:
        """Write ``traces`` in this format (streamed); returns how many records were written.

        ``losses``: read every record back and count in it what the format could not hold (see
        :class:`ExportReport`); ``strict``: raise :class:`LossyExportError` at the first trace that
        would lose anything (implies the check)."""
        check = None
        if (losses is not None or strict) and not self.lossless:
            check = LossCheck(self, losses if losses is not None else ExportReport(), strict=strict)
        n = 0
        # A temporary file beside ``path``, renamed when complete: ``path`` is the old file or the new.
        with durable_file(path) as tmp, open_text(tmp, "w") as f:
            if self.container == "array":
                import json

                f.write("[")
            for group in self.group(traces):
                record = self.encode_record(group)
                if check is not None:
                    check(group, record)
                if self.container == "array":
                    f.write(",\n" if n else "\n")
                    f.write(json.dumps(record, ensure_ascii=False))
                else:
                    write_jsonl_line(f, record)
                n += 1
            if self.container == "array":
                f.write("\n]\n" if n else "]\n")
        if losses is not None and self.lossless:
            losses.format = losses.format or self.name
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
    "inspect": "prmkit.data._inspect:InspectFormat",
}, group="prmkit.formats")


def register_format(name: str, target: str) -> None:
    """Register a format under ``name`` as ``"module:attr"`` (a :class:`Format` subclass)."""
    FORMATS.register(name, target)


def get_format(name: str, **options: Any) -> Format:
    """An instance of the format registered as ``name``, configured with ``options``."""
    return FORMATS.create(name, **options)


def _not_a_file_reason(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be an input file though it exists (a pipe, ``<(cmd)``, a FIFO, a device,
    a socket), or None. prmkit reads an input more than once (its format from the first record, a
    count for the progress bar, then the records): a pipe would be used up by the first read and the
    rest would see an empty file, so such inputs are refused rather than read as empty.

    >>> _not_a_file_reason("/dev/null")
    'is a character device, not a regular file (prmkit reads an input more than once); save it to a file first'
    """
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing or unreadable: the caller's own check names that
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = ("is a pipe" if stat.S_ISFIFO(mode) else "is a character device" if stat.S_ISCHR(mode)
            else "is a block device" if stat.S_ISBLK(mode) else "is a socket" if stat.S_ISSOCK(mode)
            else "is a special file")
    return f"{kind}, not a regular file (prmkit reads an input more than once); save it to a file first"


def _check_regular(path: str | os.PathLike) -> None:
    reason = _not_a_file_reason(path)
    if reason is not None:
        raise PrmkitError(f"{path}: {reason}")


def detect_format(path: str | os.PathLike) -> str:
    """The name of the format of ``path``, from its first record (an Inspect ``.eval`` log, a zip
    archive, from its suffix)."""
    _check_regular(path)
    if str(path).endswith(".eval") and "inspect" in FORMATS:
        return "inspect"
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
    _check_regular(path)
    f = get_format(fmt or detect_format(path), **options)
    if report is not None:
        f.report = report
    yield from f.read(path, skip_invalid=skip_invalid)


def write(traces: Iterable[Trace], path: str | os.PathLike, fmt: str = "prmkit", *,
          losses: ExportReport | None = None, strict: bool = False, **options: Any) -> int:
    """Write ``traces`` to ``path`` in format ``fmt``; returns the number of records.

    ``losses`` counts what the format could not hold; ``strict`` refuses to lose anything (see
    :meth:`Format.write`)."""
    return get_format(fmt, **options).write(traces, path, losses=losses, strict=strict)


def scan(path: str | os.PathLike, fmt: str | None = None, **options: Any) -> ImportReport:
    """Read all of ``path`` skipping malformed records, and return what was read, skipped and why
    (what ``prmkit data validate`` checks)."""
    report = ImportReport()
    for _ in read(path, fmt, skip_invalid=True, report=report, **options):
        pass
    return report


def count_records(path: str | os.PathLike, fmt: str | None = None) -> int:
    """How many records ``path`` holds, for a progress bar: its non-blank lines for a JSON Lines
    format, else 0 (unknown without parsing the whole file)."""
    _check_regular(path)
    fmt = fmt or detect_format(path)
    if FORMATS.load(fmt).container != "jsonl":
        return 0
    # Bytes, not text: a line that is not UTF-8 is the reader's to report, with its place.
    with open_binary(path) as f:
        return sum(1 for line in f if line.strip())
