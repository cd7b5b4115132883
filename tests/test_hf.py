"""Hugging Face datasets / Parquet conversion: lossless both ways, streaming, hub-style rows."""

from __future__ import annotations

import pytest

from prmkit import Problem, Step, StepLabel, Trace
from prmkit.data import decode_rows, from_hf_dataset, read_parquet, to_hf_dataset, write_parquet
from prmkit.errors import FormatError

datasets = pytest.importorskip("datasets")


def traces() -> list[Trace]:
    a = Trace(
        id="a", problem=Problem("q1", answer="3", meta={"level": 2, "tags": ["x"]}),
        steps=[
            Step("s1", span=(0, 2), labels=[StepLabel(-1, labeler="ann", time="2024-01-01")]),
            Step("s2", kind="final", span=(3, 5),
                 labels=[StepLabel(0.625, source="mc_soft", kind="soft", rollouts=8,
                                   args={"k": 8, "policy": "p"}, cost={"tokens": 10.5})],
                 scores={"prm": 0.25, "orm": 1.0}, meta={"calc": [{"expr": "1+2"}]}),
        ],
        final_answer="3", outcome="incorrect", source="unit", text="s1 s2", meta={"m": None},
    )
    a.add_provenance("label", "symbolic", {"strict": True})
    b = Trace(id="b", problem=Problem("q2"))  # no steps, every optional field empty
    c = Trace(id="c", problem=Problem("q3"), steps=[Step("only", labels=[StepLabel(0)])])
    return [a, b, c]


def test_dataset_round_trip_lossless():
    ts = traces()
    ds = to_hf_dataset(ts, batch_size=2)
    assert isinstance(ds, datasets.Dataset)
    assert ds.num_rows == 3
    # Typed columns are queryable without decoding JSON.
    assert ds[0]["steps"][1]["labels"][0]["source"] == "mc_soft"
    back = list(from_hf_dataset(ds))
    assert back == ts
    assert [t.to_dict() for t in back] == [t.to_dict() for t in ts]  # hard labels stay ints


def test_parquet_streaming_round_trip(tmp_path):
    ts = traces() * 5
    p = tmp_path / "t.parquet"
    assert write_parquet(iter(ts), p, batch_size=4) == 15
    assert list(read_parquet(p)) == ts
    ds = datasets.Dataset.from_parquet(str(p))
    assert list(from_hf_dataset(ds)) == ts


def test_empty_dataset():
    ds = to_hf_dataset([])
    assert ds.num_rows == 0 and list(from_hf_dataset(ds)) == []


def test_not_a_trace_row_is_located():
    ds = datasets.Dataset.from_list([{"id": "x", "question": "q"}])
    with pytest.raises(FormatError) as e:
        list(from_hf_dataset(ds))
    assert e.value.line == 0


def test_decode_rows_with_a_format_importer():
    rows = [{"id": "t", "problem": {"text": "q"}, "steps": [{"text": "s"}]},
            {"id": "u", "problem": {"text": "q"}, "steps": [{"text": 3}]}]
    with pytest.raises(FormatError) as e:
        list(decode_rows(rows, "prmkit", name="hub/x"))
    assert (e.value.path, e.value.line, e.value.field) == ("hub/x", 1, "steps[0].text")
    from prmkit.data import ImportReport

    report = ImportReport()
    got = list(decode_rows(rows, "prmkit", skip_invalid=True, report=report))
    assert [t.id for t in got] == ["t"] and len(report.skipped) == 1
