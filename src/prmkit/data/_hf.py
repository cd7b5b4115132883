"""Hugging Face ``datasets`` / Arrow / Parquet conversion of traces, lossless both ways.

The Arrow schema types the fields every stage filters or trains on (ids, texts, step kinds, spans,
label values and sources, outcome) so they can be queried column-wise; the free-form dicts (``meta``,
``args``, ``cost``, ``scores``, provenance) are stored as JSON strings, which keeps the schema the same
for every trace whatever its meta holds. ``from_hf_dataset(to_hf_dataset(ts))`` gives ``ts`` back.

Rows of a dataset in a public format (say ``Qwen/ProcessBench`` loaded from the hub by a user who has
internet) go through :func:`decode_rows` with that format's importer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from prmkit._durable import durable_file
from prmkit._fields import Fields
from prmkit.errors import FormatError, MissingDependencyError
from prmkit.trace import Problem, Provenance, Step, StepLabel, Trace

__all__ = ["to_hf_dataset", "from_hf_dataset", "write_parquet", "read_parquet", "decode_rows",
           "arrow_schema"]


def _pa():
    try:
        import pyarrow as pa
    except ImportError:
        raise MissingDependencyError("pyarrow", "data", "Arrow / Parquet conversion") from None
    return pa


def _datasets():
    try:
        import datasets
    except ImportError:
        raise MissingDependencyError("datasets", "data", "Hugging Face datasets conversion") from None
    return datasets


def arrow_schema():
    """The Arrow schema of a trace table."""
    pa = _pa()
    label = pa.struct([
        ("value", pa.float64()), ("source", pa.string()), ("kind", pa.string()),
        ("labeler", pa.string()), ("model", pa.string()), ("rollouts", pa.int64()),
        ("time", pa.string()), ("args", pa.string()), ("cost", pa.string()), ("meta", pa.string()),
    ])
    step = pa.struct([
        ("text", pa.string()), ("kind", pa.string()), ("span_start", pa.int64()),
        ("span_end", pa.int64()), ("labels", pa.list_(label)), ("scores", pa.string()),
        ("meta", pa.string()),
    ])
    problem = pa.struct([
        ("text", pa.string()), ("answer", pa.string()), ("solution", pa.string()),
        ("id", pa.string()), ("meta", pa.string()),
    ])
    return pa.schema([
        ("id", pa.string()), ("problem", problem), ("steps", pa.list_(step)),
        ("final_answer", pa.string()), ("outcome", pa.string()), ("source", pa.string()),
        ("text", pa.string()), ("meta", pa.string()), ("provenance", pa.string()),
    ])


def _js(d: Any) -> str:
    return json.dumps(d, ensure_ascii=False, separators=(",", ":"))


def _row(t: Trace) -> dict[str, Any]:
    return {
        "id": t.id,
        "problem": {"text": t.problem.text, "answer": t.problem.answer,
                    "solution": t.problem.solution, "id": t.problem.id, "meta": _js(t.problem.meta)},
        "steps": [{
            "text": s.text, "kind": s.kind,
            "span_start": s.span[0] if s.span else None, "span_end": s.span[1] if s.span else None,
            "labels": [{"value": float(lab.value), "source": lab.source, "kind": lab.kind,
                        "labeler": lab.labeler, "model": lab.model, "rollouts": lab.rollouts,
                        "time": lab.time, "args": _js(lab.args), "cost": _js(lab.cost),
                        "meta": _js(lab.meta)} for lab in s.labels],
            "scores": _js(s.scores), "meta": _js(s.meta),
        } for s in t.steps],
        "final_answer": t.final_answer, "outcome": t.outcome, "source": t.source, "text": t.text,
        "meta": _js(t.meta), "provenance": _js([p.to_dict() for p in t.provenance]),
    }


def _value(v: float, kind: str) -> float:
    # Arrow stores every label value as float64; hard labels come back as the ints they were.
    return int(v) if kind == "hard" else v


def _trace(row: dict[str, Any], where: str, index: int) -> Trace:
    try:
        p = row["problem"]
        return Trace(
            id=row["id"],
            problem=Problem(p["text"], p["answer"], p["solution"], p["id"], json.loads(p["meta"])),
            steps=[Step(
                s["text"], s["kind"],
                (s["span_start"], s["span_end"]) if s["span_start"] is not None else None,
                [StepLabel(_value(lab["value"], lab["kind"]), lab["source"], lab["kind"],
                           lab["labeler"], json.loads(lab["args"]), lab["model"], lab["rollouts"],
                           json.loads(lab["cost"]), lab["time"], json.loads(lab["meta"]))
                 for lab in s["labels"]],
                json.loads(s["scores"]), json.loads(s["meta"])) for s in row["steps"]],
            final_answer=row["final_answer"], outcome=row["outcome"], source=row["source"],
            text=row["text"], meta=json.loads(row["meta"]),
            provenance=[Provenance.from_fields(Fields(p, path=where, line=index))
                        for p in json.loads(row["provenance"])],
        )
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"not a prmkit trace row ({type(e).__name__}: {e})", path=where,
                          line=index) from None


def _tables(traces: Iterable[Trace], batch_size: int) -> Iterator[Any]:
    pa, schema, rows = _pa(), arrow_schema(), []
    for t in traces:
        rows.append(_row(t))
        if len(rows) >= batch_size:
            yield pa.Table.from_pylist(rows, schema=schema)
            rows = []
    if rows:
        yield pa.Table.from_pylist(rows, schema=schema)


def write_parquet(traces: Iterable[Trace], path: str | os.PathLike, *,
                  batch_size: int = 1000) -> int:
    """Stream ``traces`` into a Parquet file, ``batch_size`` rows at a time. Returns how many."""
    import pyarrow.parquet as pq

    n = 0
    with durable_file(path) as tmp, pq.ParquetWriter(str(tmp), arrow_schema()) as w:
        for table in _tables(traces, batch_size):
            w.write_table(table)
            n += table.num_rows
    return n


def read_parquet(path: str | os.PathLike) -> Iterator[Trace]:
    """Stream traces back from a Parquet file written by :func:`write_parquet`."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(str(path))
    i = 0
    for batch in f.iter_batches():
        for row in batch.to_pylist():
            yield _trace(row, str(path), i)
            i += 1


def to_hf_dataset(traces: Iterable[Trace], *, batch_size: int = 1000):
    """A ``datasets.Dataset`` with one row per trace (schema: :func:`arrow_schema`).

    For more traces than fit in memory, :func:`write_parquet` then ``Dataset.from_parquet`` (memory
    mapped) gives the same dataset.
    """
    datasets, pa = _datasets(), _pa()
    tables = list(_tables(traces, batch_size))
    table = pa.concat_tables(tables) if tables else arrow_schema().empty_table()
    return datasets.Dataset(table)


def from_hf_dataset(dataset: Any) -> Iterator[Trace]:
    """Traces from a dataset made by :func:`to_hf_dataset` (or read from such a Parquet file)."""
    name = getattr(getattr(dataset, "info", None), "dataset_name", None) or "<dataset>"
    for i, row in enumerate(dataset):
        yield _trace(row, name, i)


def decode_rows(rows: Iterable[dict[str, Any]], fmt: str, *, name: str = "<dataset>",
                skip_invalid: bool = False, report: Any = None, **options: Any) -> Iterator[Trace]:
    """Traces from rows in a public format (e.g. a hub dataset), through that format's importer.

    ``line`` in errors is the row index (0-based). Works on a ``datasets.Dataset`` or any iterable of
    dicts, e.g. ``decode_rows(load_dataset("Qwen/ProcessBench", split="gsm8k"), "processbench")``.
    """
    from prmkit.data._format import get_format

    f = get_format(fmt, **options)
    if report is not None:
        f.report = report
    yield from f.decode_records(enumerate(rows), name, skip_invalid=skip_invalid, line_key="row")
