"""The quick start's time: ``prmkit demo`` (a preset, default ``full``) into a fresh folder, timed, with
the dtype the default policy chose on this CPU, against the README's budget of 15 minutes.

    python benchmarks/demo.py                      # the full preset, as the README's quick start runs it
    python benchmarks/demo.py --preset quick       # the CI-sized run
    python benchmarks/demo.py -p dtype=float32     # the default policy with another dtype

The demo runs in a child process (``python -m prmkit demo ...``), as a user runs it, so its model
loads and compile caches are what a new process has; prmkit's model cache (``PRMKIT_CACHE``) is
kept as it is, so the time is a second run's on this machine unless ``--cold`` empties a private one
first (then the GGUF conversion, the shipped models' merge and torch's kernel compiles are counted too). It prints each
stage's time, the dtype chosen, then the wall time over the budget last (below 1 meets it), and
appends a record to ``benchmarks/results/demo.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _record  # benchmarks/_record.py: notes the load average now; record() at the end

BUDGET_S = 15 * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="full", help="full, quick or verdict")
    ap.add_argument("--policy", default=None, help="policy backend (default: the demo's)")
    ap.add_argument("-p", "--policy-arg", action="append", default=[], help="KEY=VALUE for the policy")
    ap.add_argument("--cold", action="store_true", help="a private, empty model cache (counts conversions)")
    ap.add_argument("--out", default=None, help="run folder (default: a temporary one, removed after)")
    args = ap.parse_args()

    from prmkit.policies import choose_compute, cpu_info

    env = dict(os.environ)
    scratch = tempfile.TemporaryDirectory(prefix="prmkit-demo-bench-")
    if args.cold:  # what a fresh machine has: no converted weights, no compiled kernels
        env["PRMKIT_CACHE"] = str(Path(scratch.name) / "cache")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(scratch.name) / "inductor")
        env["TRITON_CACHE_DIR"] = str(Path(scratch.name) / "triton")
    out = Path(args.out) if args.out else Path(scratch.name) / "demo"
    cmd = [sys.executable, "-m", "prmkit", "demo", "--preset", args.preset, "--out", str(out), "--overwrite"]
    if args.policy:
        cmd += ["--policy", args.policy]
    for kv in args.policy_arg:
        cmd += ["-p", kv]
    print("running:", " ".join(cmd[2:]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"prmkit demo failed (exit {proc.returncode}) after {wall:.0f} s")
    times = json.loads((out / "demo_times.json").read_text())
    settings = json.loads((out / "demo_settings.json").read_text())
    info = cpu_info()
    dtype = dict(kv.split("=", 1) for kv in args.policy_arg).get("dtype") or choose_compute(
        "cpu", candidates=("bfloat16", "int8"), shape=(64, 576, 1536)).dtype
    for stage, s in times["stage_seconds"].items():
        print(f"  {stage:<40} {s:8.1f} s")
    print(f"CPU: {info.model} ({info.cpu_class}); policy {settings['policy']} {settings['policy_args'] or ''}, "
          f"dtype {dtype}")
    print(f"demo --preset {args.preset}: {wall:.0f} s wall ({times['seconds']:.0f} s in the demo's own count)")
    ratio = wall / BUDGET_S
    print(f"wall / 15-minute budget: {ratio:.2f}")
    _record.record("demo", {"seconds": round(wall, 1), "demo_seconds": times["seconds"],
                            "stage_seconds": times["stage_seconds"], "preset": args.preset,
                            "policy": settings["policy"], "policy_args": settings["policy_args"],
                            "dtype": dtype, "cold_cache": args.cold},
                   round(ratio, 3),
                   goal="prmkit demo (the full preset) within 15 minutes on 2 CPU cores (ratio: wall seconds / 900)")
    scratch.cleanup()


if __name__ == "__main__":
    main()
