"""Turn the benchmark records (``benchmarks/results/*.jsonl``, appended by ``benchmarks/_record.py``) into
``docs/benchmarks.md``, a PNG of each benchmark's ratio over time (``docs/img/benchmarks/<name>.png``),
and the README's results table (between ``<!-- results-table:start -->`` and ``<!-- results-table:end -->``).

Run from anywhere: ``python benchmarks/render.py`` (``--results``, ``--docs``, ``--readme`` for other places;
the plots need matplotlib, the ``plot`` extra, and are left out with a note without it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- results-table:start -->", "<!-- results-table:end -->"

#: The README's table: these benchmarks, in this order, where they have a record with a ratio (at most 6).
README_BENCHMARKS = ("generate", "serve_load", "train_vs_trl", "score_bon", "search_incremental", "label_cost")
#: What each ratio is, in a few words (the README's table and the page).
RATIO_NAMES = {
    "generate": "default backend / hf, tokens/s (64 rows)",
    "generate_batching": "hf, 16 rows / 1 row, tokens/s",
    "generate_server": "llama.cpp server, 8 in flight / 1, tokens/s",
    "generate_quality": "pass@1 (no ratio)",
    "serve_load": "prmkit serve / naive server, steps/s",
    "train_vs_trl": "prmkit / TRL PRMTrainer, tokens/s",
    "score_bon": "prefix-caching scorer / card recipe, speed",
    "score_precision": "bf16 / fp32 scoring, speed",
    "prefix_chains": "merged / unmerged prefix chains, speed",
    "search_incremental": "incremental / re-scoring beam search, speed",
    "label_cost": "binary search / Monte Carlo, rollouts",
    "label_cost_backends": "default backend / hf, Monte Carlo rollouts/s",
    "label_sources": "best label source − mc_hard, best-of-N points",
    "verifier": "PRM (min) − majority vote, points",
    "result_surprise": "AUROC, result log-probability",
    "demo": "prmkit demo wall time / 15 minutes",
    "omegaprm": "OmegaPRM / Monte Carlo, rollouts",
    "rl_arms": "dense oracle / outcome-only, held-out pass@1",
    "rl_gaming": "prm+oracle / prm-only held-out gap (PRM step score - step validity), after training",
    "annotate_al": "labels the best strategy needs to match random@400 / 400",
    "search_mcts": "MCTS / best-of-N, accuracy",
    "word_verifier": "none: PRM − ORM pair accuracy on held-out injected errors, in the figures",
    "processbench_pair": "none: PRM − ORM ProcessBench F1, in the figures",
    "prmbench_pair": "none: PRM − ORM PRMBench PRMScore, in the figures",
    "word_curve": "none: the word PRM's metrics along its training budget, in the figures",
}


def load(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Every benchmark's records, oldest first (by date; records without a date first, in file order).
    A file of other data kept beside the records (the traces ``rl_gaming.py`` writes: no record has
    ``name`` and ``figures``) is not a benchmark and is left out."""
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        recs = []
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise SystemExit(f"{path}:{no}: not a JSON record ({e})") from e
        if recs and not any(isinstance(r, dict) and "name" in r and "figures" in r for r in recs):
            continue
        out[path.stem] = sorted(recs, key=lambda r: r.get("date") or "")
    return out


def machine_key(rec: dict[str, Any]) -> str:
    """The machine a record ran on: its CPU class and CPU model."""
    m = rec.get("machine") or {}
    cls, model = m.get("cpu_class") or "unknown", m.get("cpu_model") or "unknown"
    return f"{cls}, {model}"


def machine_text(rec: dict[str, Any]) -> str:
    m = rec.get("machine") or {}
    text = m.get("description") or machine_key(rec)
    if m.get("cores") and "cores" not in text:
        text += f", {m['cores']} cores"
    return text


def latest_per_machine(recs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rec in recs:  # oldest first: the last one seen wins
        out[machine_key(rec)] = rec
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _cell(text: str, limit: int = 80) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _load(rec: dict[str, Any]) -> str:
    b, a = rec.get("load_before"), rec.get("load_after")
    if not b and not a:
        return "—"
    first = lambda x: _fmt(x[0]) if x else "?"  # noqa: E731  (the 1-minute average)
    return f"{first(b)} → {first(a)}"


def _scalars(figures: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """The figures' numbers and short strings, flattened (``a.b``)."""
    out: list[tuple[str, Any]] = []
    if isinstance(figures, dict):
        for k, v in figures.items():
            out += _scalars(v, f"{prefix}{k}.") if isinstance(v, dict) else (
                [(prefix + k, v)] if isinstance(v, (int, float, str, bool)) or v is None else [])
    return out


def plot(name: str, recs: list[dict[str, Any]], out: Path) -> bool:
    """The ratio of each dated record over time, one line per machine; False where nothing to plot."""
    points: dict[str, list[tuple[str, float]]] = {}
    for rec in recs:
        if rec.get("date") and isinstance(rec.get("ratio"), (int, float)):
            points.setdefault(machine_key(rec), []).append((rec["date"][:10], float(rec["ratio"])))
    if not points:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    dates = sorted({d for pts in points.values() for d, _ in pts})
    for key, pts in sorted(points.items()):
        ax.plot([dates.index(d) for d, _ in pts], [r for _, r in pts], marker="o", label=key)
    ax.set_xticks(range(len(dates)), dates, rotation=20, fontsize=8)
    ax.set_ylabel("ratio")
    ax.set_title(f"{name}: {RATIO_NAMES.get(name, 'ratio')}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return True


def page(records: dict[str, list[dict[str, Any]]], img: Path, img_rel: str) -> str:
    """``docs/benchmarks.md``."""
    lines = ["# Benchmarks", "",
             "Generated by `python benchmarks/render.py` from the records in `benchmarks/results/` (one JSON line per",
             "run, appended by each script through `benchmarks/_record.py`); do not edit by hand. Each script runs",
             "its baseline in the same process and prints the ratio last. Records marked *README history* were",
             "converted from the measurements the README used to hold; their `note` field keeps the original text.",
             ""]
    if "generate" in records:
        lines += ["## The default sampler against `hf`, per CPU class", "",
                  "The latest `benchmarks/generate.py` run on each machine measured: the default backend's tokens/s",
                  "over `hf`'s (transformers `generate`) at 16 and at 64 rows per batch.", "",
                  "| CPU class | machine | date | default / hf, 16 rows | default / hf, 64 rows |",
                  "| --- | --- | --- | --- | --- |"]
        for _key, rec in sorted(latest_per_machine(records["generate"]).items()):
            f = rec.get("figures") or {}
            cls = (rec.get("machine") or {}).get("cpu_class") or "unknown"
            lines.append(f"| {cls} | {_cell(machine_text(rec), 60)} | {_fmt((rec.get('date') or '')[:10] or None)} "
                         f"| {_fmt(f.get('default/hf@16'))} | {_fmt(f.get('default/hf@64', rec.get('ratio')))} |")
        lines.append("")
    for name, recs in records.items():
        last = recs[-1]
        lines += [f"## {name}", ""]
        goal = next((r.get("goal") for r in reversed(recs) if r.get("goal")), None)
        lines += [f"- **Goal**: {goal or '—'}",
                  f"- **Ratio**: {RATIO_NAMES.get(name, 'the ratio the script prints last')}",
                  f"- **Command** (latest run): `{last.get('command', '?')}`",
                  f"- **Records**: {len(recs)} in `benchmarks/results/{name}.jsonl`", ""]
        lines += ["Latest run per machine:", "",
                  "| machine | date | commit | ratio | load before → after | source |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for _key, rec in sorted(latest_per_machine(recs).items()):
            lines.append(f"| {_cell(machine_text(rec), 70)} | {_fmt((rec.get('date') or '')[:10] or None)} "
                         f"| {_fmt((rec.get('commit') or 'unknown')[:7])} | {_fmt(rec.get('ratio'))} | {_load(rec)} "
                         f"| {rec.get('source', 'run')} |")
        lines.append("")
        figures = [(k, v) for k, v in _scalars(last.get("figures")) if not isinstance(v, str) or len(v) <= 60][:12]
        if figures:
            lines += ["Figures of the latest run: " + "; ".join(f"{k} {_fmt(v)}" for k, v in figures) + ".", ""]
        if plot(name, recs, img / f"{name}.png"):
            lines += [f"![{name}: the ratio over time]({img_rel}/{name}.png)", ""]
    return "\n".join(lines).rstrip() + "\n"


def readme_table(records: dict[str, list[dict[str, Any]]]) -> list[str]:
    """At most 6 rows: each README benchmark's latest record that has a ratio."""
    rows = ["| benchmark | ratio | value | machine | date |", "| --- | --- | --- | --- | --- |"]
    for name in README_BENCHMARKS:
        recs = [r for r in records.get(name, []) if isinstance(r.get("ratio"), (int, float))]
        if not recs:
            continue
        rec = recs[-1]
        rows.append(f"| {_cell(name)} | {_cell(RATIO_NAMES.get(name, 'ratio'))} | {_cell('×' + _fmt(rec['ratio']))} "
                    f"| {_cell(machine_text(rec), 60)} | {_cell((rec.get('date') or '—')[:10])} |")
        if len(rows) == 2 + 6:
            break
    return rows


def rewrite_readme(readme: Path, rows: list[str]) -> None:
    text = readme.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{readme}: no {START} ... {END} markers to write the table between")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + START + "\n" + "\n".join(rows) + "\n" + END + tail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--docs", type=Path, default=REPO / "docs", help="writes benchmarks.md and img/benchmarks/ here")
    ap.add_argument("--readme", type=Path, default=REPO / "README.md", help="its results table is rewritten")
    args = ap.parse_args(argv)
    records = load(args.results)
    out = args.docs / "benchmarks.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(records, args.docs / "img" / "benchmarks", "img/benchmarks"))
    rewrite_readme(args.readme, readme_table(records))
    print(f"wrote {out} ({sum(map(len, records.values()))} records of {len(records)} benchmarks) and the table of "
          f"{args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
