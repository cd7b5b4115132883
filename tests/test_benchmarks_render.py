"""benchmarks/render.py: records -> docs/benchmarks.md and the README's results table (issue 44, item 3)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rec(name, date, cls, model, ratio, figures=None, **extra):
    return {"name": name, "date": date, "commit": "0123456789abcdef", "command": f"python benchmarks/{name}.py",
            "machine": {"cpu_model": model, "cpu_class": cls, "cores": 2}, "load_before": [0.5, 0.4, 0.3],
            "load_after": [1.5, 0.6, 0.4], "figures": figures or {}, "ratio": ratio, "goal": f"{name} goal", **extra}


def test_render_page_and_readme_table(tmp_path):
    render = _module("render")
    results = tmp_path / "results"
    results.mkdir()
    gen = [_rec("generate", "2026-11-28", "AVX512-VNNI", "Intel Xeon", 2.5, {"default/hf@16": 2.1, "default/hf@64": 2.5}),
           _rec("generate", "2026-11-29", "AVX512-VNNI", "Intel Xeon", 3.27, {"default/hf@16": 3.03, "default/hf@64": 3.27}),
           _rec("generate", "2026-12-02", "AVX2", "AMD Ryzen", 1.9, {"default/hf@16": 1.7, "default/hf@64": 1.9})]
    (results / "generate.jsonl").write_text("".join(json.dumps(r) + "\n" for r in gen))
    for i, name in enumerate(["serve_load", "train_vs_trl", "score_bon", "search_incremental", "label_cost",
                              "prefix_chains"]):
        (results / f"{name}.jsonl").write_text(json.dumps(_rec(name, "2026-11-29", "AVX2", "x" * 200, 1.0 + i)) + "\n")
    # traces kept beside the records (rl_gaming.py's fooling traces) are not a benchmark
    (results / "rl_gaming_traces.jsonl").write_text(json.dumps({"id": "t1", "problem": {}, "steps": []}) + "\n")
    docs, readme = tmp_path / "docs", tmp_path / "README.md"
    readme.write_text(f"# x\n\n{render.START}\nold\n{render.END}\n\nafter\n")
    assert render.main(["--results", str(results), "--docs", str(docs), "--readme", str(readme)]) == 0

    text = (docs / "benchmarks.md").read_text()
    assert "## generate" in text and "## serve_load" in text and "rl_gaming_traces" not in text
    assert "generate goal" in text and "`python benchmarks/generate.py`" in text
    # the sampler against hf for each CPU class measured, the latest run of each machine
    section = text.split("## The default sampler against `hf`, per CPU class")[1].split("\n## ")[0]
    assert "| AVX2 |" in section and "| AVX512-VNNI |" in section
    assert "3.03" in section and "3.27" in section and "2.1 " not in section
    assert "0.5 → 1.5" in text  # load average before and after
    if importlib.util.find_spec("matplotlib") is not None:
        assert (docs / "img" / "benchmarks" / "generate.png").stat().st_size > 0
        assert "img/benchmarks/generate.png" in text

    new = readme.read_text()
    assert "old" not in new and new.endswith("after\n")
    table = new.split(render.START)[1].split(render.END)[0].strip().splitlines()
    rows = table[2:]
    assert 1 <= len(rows) <= 6
    for row in table:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert all(len(c) <= 80 for c in cells), row
    assert rows[0].startswith("| generate |") and "×1.9" in rows[0]  # the latest run, whatever its machine


def test_record_appends_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("PRMKIT_BENCH_RESULTS", str(tmp_path))
    record = _module("_record")
    record.record("x", {"a": 1.0, "b": float("nan")}, 2.5, goal="g")
    rec = record.record("x", {"a": 2}, None)
    lines = (tmp_path / "x.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["figures"] == {"a": 1.0, "b": None}
    assert rec["ratio"] is None and rec["machine"]["cores"] and rec["commit"]
    assert set(rec["machine"]["cpu_flags"]) == set(record.FLAGS)
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_repository_records_render():
    """The records in benchmarks/results are valid and the README's table was rendered from them."""
    render = _module("render")
    records = render.load(REPO / "benchmarks" / "results")
    assert "generate" in records
    readme = (REPO / "README.md").read_text()
    table = readme.split(render.START)[1].split(render.END)[0].strip().splitlines()
    assert table == render.readme_table(records)
