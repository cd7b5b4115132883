"""How much of ProcessBench a PRM cannot read at a given ``max_length``, and what windows cost.

    python benchmarks/long_traces.py
    python benchmarks/long_traces.py --tokenizers smollm2 --lengths 512,1024 --windows 512,1024

Tokenizer only: no weights are loaded and nothing is timed. Every ProcessBench split found in
``--data`` (gsm8k, math, olympiadbench, omnimath: whichever are there) is encoded the way
:meth:`prmkit.models.RewardModel.encode` encodes it for scoring (the ``prmkit`` convention, by default)
with the tokenizer of each backbone (``smollm2``: the default PRM's; ``minilm``: the encoder's, whose
own position limit is 512, so its rows past 512 are hypothetical).

1. **Truncating** (``long="truncate"``) at each of ``--lengths``: the share of erroneous traces whose
   labelled first wrong step lies past ``max_length`` (unscored: a PRM can never find it), of all
   steps cut, and of traces with any step cut (a trace whose first step does not fit is rejected
   whole: all its steps count as cut, and it is counted under "rejected" too).
2. **Windows** (``long="window"``, the default) at each of ``--windows``: the steps past
   ``max_length`` are each scored in a window of their own (:meth:`RewardModel.encode_windows`). The
   share of first wrong steps still unscored (only where the problem alone leaves no room), the share
   scored in a window (an approximate score: earlier steps left out, or the step itself cut from its
   start when it does not fit even alone with the problem: "clipped"), and the cost
   against one pass over each whole trace: tokens run, and causal attention pairs (sum of
   ``n (n + 1) / 2`` over the inputs; the part of the compute that grows with the square of the length).
   Without weights every input is counted as a decoder's (it ends at its last label position).

Then the token lengths of the whole traces per split; the command line is printed last.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from prmkit.data import read
from prmkit.models import AlignmentError, RewardModel, resolve_backbone
from prmkit.trace import Trace

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "processbench"
SPLITS = ("gsm8k", "math", "olympiadbench", "omnimath")


def load_tokenizer(backbone: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_backbone(backbone))


def encoder(tok, convention: str, max_length: int | None, long: str) -> RewardModel:
    """A reward model that only encodes: ``encode`` needs the tokenizer and convention, not weights."""
    return RewardModel(None, tok, convention=convention, max_length=max_length, long=long, name="tokenizer-only")


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
    ap.add_argument("--data", type=Path, default=DATA, help="folder of ProcessBench splits (<split>.json)")
    ap.add_argument("--tokenizers", default="smollm2,minilm", help="backbones whose tokenizers to use")
    ap.add_argument("--convention", default="prmkit")
    ap.add_argument("--lengths", default="256,512,1024,2048,4096", help="max_length values, truncating")
    ap.add_argument("--windows", default="512", help="max_length values, with windows")
    args = ap.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",") if x]
    windows = [int(x) for x in args.windows.split(",") if x]
    splits = {s: list(read(args.data / f"{s}.json")) for s in SPLITS if (args.data / f"{s}.json").exists()}
    if not splits:
        sys.exit(f"no ProcessBench split in {args.data}")
    print(f"ProcessBench splits: {', '.join(f'{s} ({len(t)} traces)' for s, t in splits.items())}; "
          f"convention {args.convention}\n")

    trunc_rows, window_rows, length_rows = [], [], []
    for backbone in [b for b in args.tokenizers.split(",") if b]:
        tok = load_tokenizer(backbone)
        for split, traces in splits.items():
            whole = measure(traces, encoder(tok, args.convention, None, "truncate"))
            full = sorted(whole.first_lengths)
            length_rows.append((backbone, split, statistics.median(full), full[int(0.9 * (len(full) - 1))],
                                full[int(0.99 * (len(full) - 1))], full[-1]))
            for m in lengths:
                c = measure(traces, encoder(tok, args.convention, m, "truncate"))
                trunc_rows.append((backbone, split, m, c))
            for m in windows:
                c = measure(traces, encoder(tok, args.convention, m, "window"))
                window_rows.append((backbone, split, m, c, whole))

    print("1. Truncating (long=truncate): what max_length cuts")
    print(f"{'tokenizer':<9} {'split':<13} {'max_len':>7}  {'first wrong step cut':>22}  {'steps cut':>9}"
          f"  {'traces cut':>10}  rejected")
    for backbone, split, m, c in trunc_rows:
        print(f"{backbone:<9} {split:<13} {m:>7}  {c.wrong_unscored:>5}/{c.erroneous:<5} {pct(c.wrong_unscored, c.erroneous):>9}"
              f"  {pct(c.steps_unscored, c.steps):>9}  {pct(c.traces_cut, c.traces):>10}  {c.rejected:>8}")

    print("\n2. Windows (long=window, the default): every step past max_length in a window of its own")
    print(f"{'tokenizer':<9} {'split':<13} {'max_len':>7}  {'first wrong step unscored':>25}  {'steps unscored':>14}"
          f"  {'wrong step approx.':>18}  {'steps approx.':>13}  {'left out (mean)':>15}"
          f"  {'clipped':>7}  {'tokens x':>8}  {'attn pairs x':>12}  {'longest input':>13}")
    for backbone, split, m, c, whole in window_rows:
        left = f"{statistics.mean(c.left_out):.1f} steps" if c.left_out else "-"
        print(f"{backbone:<9} {split:<13} {m:>7}  {c.wrong_unscored:>5}/{c.erroneous:<5} {pct(c.wrong_unscored, c.erroneous):>12}"
              f"  {pct(c.steps_unscored, c.steps):>14}  {pct(c.wrong_approx, c.erroneous):>18}"
              f"  {pct(c.steps_approx, c.steps):>13}  {left:>15}  {c.clipped:>7}  {c.tokens / whole.tokens:>8.2f}"
              f"  {c.pairs / whole.pairs:>12.2f}  {c.longest_input:>6} ({whole.longest_input})")
    print("   approx.: scored in a window (earlier steps left out, or the step clipped: cut from its start "
          "to fit with the problem);\n   left out: earlier steps a window left out, mean over windows; "
          "clipped: steps cut from their start;\n   tokens x / attn pairs x: against one pass over each "
          "whole trace; longest input: windows (one pass)")

    print("\n3. Token lengths of whole traces (as encoded for scoring)")
    print(f"{'tokenizer':<9} {'split':<13} {'median':>7} {'p90':>6} {'p99':>6} {'max':>6}")
    for backbone, split, med, p90, p99, mx in length_rows:
        print(f"{backbone:<9} {split:<13} {med:>7.0f} {p90:>6} {p99:>6} {mx:>6}")

    print("\nreproduce: python benchmarks/long_traces.py " + shlex.join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
