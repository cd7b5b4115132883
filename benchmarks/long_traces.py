"""How much of ProcessBench and PRMBench a PRM cannot read at a given ``max_length``, and what windows cost.

    python benchmarks/long_traces.py
    python benchmarks/long_traces.py --models default,minilm --lengths 512,1024 --windows 512,1024

Tokenizer only: no weights are loaded and nothing is timed (minutes on 2 cores). The public splits
found under ``--data`` (default ``../shared/data`` beside the repository; skipped with a message where
it is absent): ProcessBench ``processbench/<split>.json`` for gsm8k, math, olympiadbench, omnimath
(whichever are there) and PRMBench's test files ``prmbench/*_test_*.jsonl`` pooled as one split. Each
trace is encoded the way :meth:`prmkit.models.RewardModel.encode` encodes it for scoring, with the
tokenizer and convention of each of ``--models``: ``default`` (the shipped PRM, what
``RewardModel.from_pretrained("default")`` loads; its merged folder is made on first use), any
checkpoint folder with ``prmkit_rm.json``, or a backbone alias (``smollm2``, ``minilm``) with
``--convention``. Rows past the model's own position limit (``max_position_embeddings``) are marked:
those max_length values cannot be loaded (``from_pretrained`` refuses them).

1. **Truncating** (``long="truncate"``: one pass over the first ``max_length`` tokens) at each of
   ``--lengths``: the share of erroneous traces whose labelled first wrong step lies past
   ``max_length`` (cut: never scored, a PRM can never find it), of all steps cut, and of traces with
   any step cut (a trace whose first step does not fit is rejected whole: all its steps count as cut,
   and it is counted under "rejected" too).
2. **Windows** (``long="window"``, the default) at each of ``--windows``: the steps past
   ``max_length`` are each scored in a window of their own (:meth:`RewardModel.encode_windows`). The
   share of first wrong steps still unscored (only where the problem alone leaves no room), the share
   scored in a window (an approximate score: earlier steps left out, or the step itself cut from its
   start when it does not fit even alone with the problem: "clipped"), and the cost
   against one pass over each whole trace: tokens run, and causal attention pairs (sum of
   ``n (n + 1) / 2`` over the inputs; the part of the compute that grows with the square of the length).
   Without weights every input is counted as a decoder's (it ends at its last label position).

Then the token lengths of the whole traces per split, the shortest ``max_length`` that reads every
split whole enough (at most 2% of first wrong steps cut), and the command line last.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

from prmkit.data import read
from prmkit.models import (
    RM_CONFIG,
    SHIPPED_MODELS,
    AlignmentError,
    RewardModel,
    resolve_backbone,
    shipped_model_folder,
)
from prmkit.trace import Trace

#: ``../shared/data`` beside the repository.
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PROCESSBENCH = ("gsm8k", "math", "olympiadbench", "omnimath")
#: The most first wrong steps a max_length may cut on a split and still count as reading it whole.
GOAL = 0.02


def find_splits(data: Path) -> dict[str, list[Path]]:
    """Split name -> its files under ``data`` (only the splits that are there)."""
    out = {f"pb-{s}": [data / "processbench" / f"{s}.json"] for s in PROCESSBENCH
           if (data / "processbench" / f"{s}.json").is_file()}
    if test := sorted((data / "prmbench").glob("*_test_*.jsonl")):
        out["prmbench-test"] = test
    return out


@dataclass
class Reader:
    """What encoding needs of a model: its tokenizer and convention (no weights), and its position limit."""

    name: str
    tokenizer: object
    convention: object
    positions: int | None


def load_reader(spec: str, convention: str) -> Reader:
    """A shipped model's name or a checkpoint folder (its own convention), else a backbone alias."""
    import json

    from transformers import AutoConfig, AutoTokenizer

    folder = shipped_model_folder(spec) if spec in SHIPPED_MODELS else resolve_backbone(spec)
    saved = Path(folder) / RM_CONFIG
    conv = json.loads(saved.read_text()).get("convention") if saved.is_file() else convention
    limit = getattr(AutoConfig.from_pretrained(folder), "max_position_embeddings", None)
    return Reader(spec, AutoTokenizer.from_pretrained(folder), conv, limit)


def encoder(reader: Reader, max_length: int | None, long: str) -> RewardModel:
    """A reward model that only encodes: ``encode`` needs the tokenizer and convention, not weights."""
    return RewardModel(None, reader.tokenizer, convention=reader.convention, max_length=max_length, long=long,
                       name="tokenizer-only")


@dataclass
class Count:
    traces: int = 0
    erroneous: int = 0
    steps: int = 0
    wrong_unscored: int = 0
    steps_unscored: int = 0
    traces_cut: int = 0
    wrong_approx: int = 0
    steps_approx: int = 0
    left_out: list[int] = field(default_factory=list)
    tokens: int = 0
    pairs: int = 0
    longest_input: int = 0
    rejected: int = 0
    clipped: int = 0
    first_lengths: list[int] = field(default_factory=list)


def pairs(n: int) -> int:
    return n * (n + 1) // 2


def measure(traces: list[Trace], rm: RewardModel) -> Count:
    """What ``rm.score`` would read of ``traces`` (the inputs ``encode_all`` makes)."""
    c = Count()
    for t in traces:
        n = len(t.steps)
        wrong = t.first_error()
        c.traces += 1
        c.steps += n
        erroneous = wrong is not None and wrong >= 0
        c.erroneous += erroneous
        try:
            parts = rm.encode_all(t)
        except AlignmentError:  # rejected (not even the first step fits): nothing of it is scored
            c.rejected += 1
            c.steps_unscored += n
            c.traces_cut += 1
            c.wrong_unscored += erroneous
            continue
        scored = {e.first_step + i for e in parts for i in range(len(e.positions))}
        approx = {e.first_step: e.window_from for e in parts if e.is_window}
        c.clipped += sum(e.clipped > 0 for e in parts)
        c.steps_unscored += n - len(scored)
        c.traces_cut += any(e.dropped or e.is_window for e in parts)
        c.steps_approx += len(approx)
        c.left_out += list(approx.values())
        if erroneous:
            c.wrong_unscored += wrong not in scored
            c.wrong_approx += wrong in approx
        c.tokens += sum(len(e) for e in parts)
        c.pairs += sum(pairs(len(e)) for e in parts)
        c.longest_input = max([c.longest_input, *(len(e) for e in parts)])
        c.first_lengths.append(len(parts[0]))
    return c


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:5.1f}%" if b else "    -"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA,
                    help="the shared data folder (processbench/, prmbench/); default ../shared/data")
    ap.add_argument("--models", default="default",
                    help="comma list: shipped model names, checkpoint folders or backbone aliases")
    ap.add_argument("--convention", default="prmkit", help="for a backbone alias (a checkpoint brings its own)")
    ap.add_argument("--lengths", default="512,1024,2048,4096,8192", help="max_length values, truncating")
    ap.add_argument("--windows", default="512", help="max_length values, with windows")
    args = ap.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",") if x]
    windows = [int(x) for x in args.windows.split(",") if x]
    found = find_splits(args.data) if args.data.is_dir() else {}
    if not found:
        print(f"skipped: no ProcessBench (processbench/<split>.json) or PRMBench (prmbench/*_test_*.jsonl) "
              f"files under {args.data}; give the folder that holds them with --data")
        return
    splits = {s: [t for f in files for t in read(f)] for s, files in found.items()}
    print(f"splits under {args.data}: {', '.join(f'{s} ({len(t)} traces)' for s, t in splits.items())}\n")

    trunc_rows, window_rows, length_rows = [], [], []
    for spec in [b for b in args.models.split(",") if b]:
        reader = load_reader(spec, args.convention)
        print(f"{spec}: convention {encoder(reader, None, 'truncate').convention.name}, tokenizer {type(reader.tokenizer).__name__} "
              f"({len(reader.tokenizer)} tokens), position limit {reader.positions}")
        for split, traces in splits.items():
            whole = measure(traces, encoder(reader, None, "truncate"))
            full = sorted(whole.first_lengths)
            length_rows.append((spec, split, statistics.median(full), full[int(0.9 * (len(full) - 1))],
                                full[int(0.99 * (len(full) - 1))], full[-1]))
            for m in lengths:
                c = measure(traces, encoder(reader, m, "truncate"))
                trunc_rows.append((reader, split, m, c))
            for m in windows:
                c = measure(traces, encoder(reader, m, "window"))
                window_rows.append((spec, split, m, c, whole))

    def past(reader: Reader, m: int) -> str:
        return "  past the model's positions" if reader.positions and m > reader.positions else ""

    print("\n1. Truncating (long=truncate): what one pass over max_length tokens cuts")
    print(f"{'model':<9} {'split':<14} {'max_len':>7}  {'first wrong step cut':>22}  {'steps cut':>9}"
          f"  {'traces cut':>10}  rejected")
    for reader, split, m, c in trunc_rows:
        print(f"{reader.name:<9} {split:<14} {m:>7}  {c.wrong_unscored:>5}/{c.erroneous:<5} "
              f"{pct(c.wrong_unscored, c.erroneous):>9}  {pct(c.steps_unscored, c.steps):>9}"
              f"  {pct(c.traces_cut, c.traces):>10}  {c.rejected:>8}{past(reader, m)}")

    print("\n2. Windows (long=window, the default): every step past max_length in a window of its own")
    print(f"{'model':<9} {'split':<14} {'max_len':>7}  {'first wrong step unscored':>25}  {'steps unscored':>14}"
          f"  {'wrong step approx.':>18}  {'steps approx.':>13}  {'left out (mean)':>15}"
          f"  {'clipped':>7}  {'tokens x':>8}  {'attn pairs x':>12}  {'longest input':>13}")
    for spec, split, m, c, whole in window_rows:
        left = f"{statistics.mean(c.left_out):.1f} steps" if c.left_out else "-"
        print(f"{spec:<9} {split:<14} {m:>7}  {c.wrong_unscored:>5}/{c.erroneous:<5} {pct(c.wrong_unscored, c.erroneous):>12}"
              f"  {pct(c.steps_unscored, c.steps):>14}  {pct(c.wrong_approx, c.erroneous):>18}"
              f"  {pct(c.steps_approx, c.steps):>13}  {left:>15}  {c.clipped:>7}  {c.tokens / whole.tokens:>8.2f}"
              f"  {c.pairs / whole.pairs:>12.2f}  {c.longest_input:>6} ({whole.longest_input})")
    print("   approx.: scored in a window (earlier steps left out, or the step clipped: cut from its start "
          "to fit with the problem);\n   left out: earlier steps a window left out, mean over windows; "
          "clipped: steps cut from their start;\n   tokens x / attn pairs x: against one pass over each "
          "whole trace; longest input: windows (one pass)")

    print("\n3. Token lengths of whole traces (as encoded for scoring)")
    print(f"{'model':<9} {'split':<14} {'median':>7} {'p90':>6} {'p99':>6} {'max':>6}")
    for spec, split, med, p90, p99, mx in length_rows:
        print(f"{spec:<9} {split:<14} {med:>7.0f} {p90:>6} {p99:>6} {mx:>6}")

    print(f"\nShortest max_length (of {args.lengths}) cutting at most {GOAL:.0%} of the first wrong steps "
          "of every split, one pass:")
    for spec in dict.fromkeys(r.name for r, *_ in trunc_rows):
        ok = [m for m in lengths if all(c.wrong_unscored <= GOAL * c.erroneous
                                        for r, _s, mm, c in trunc_rows if r.name == spec and mm == m)]
        print(f"  {spec}: {min(ok) if ok else 'none'}")

    print("\nreproduce: python benchmarks/long_traces.py " + shlex.join(sys.argv[1:] if argv is None else argv))
    _record.record("long_traces", {"truncate": [
        {"model": r.name, "split": s, "max_length": m, "first_wrong_cut": c.wrong_unscored, "erroneous": c.erroneous,
         "steps_cut": c.steps_unscored, "steps": c.steps} for r, s, m, c in trunc_rows]}, None,
        goal=f"the shortest max_length cutting at most {GOAL:.0%} of the first wrong steps of every split")


if __name__ == "__main__":
    main()
