"""Resume: a run interrupted anywhere — by an exception or by SIGKILL — and rerun makes exactly the
missing rollouts, loses none, duplicates none, and writes the labels an uninterrupted run writes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from labeler_fakes import RulePolicy, comparable, make_trace
from store_probe import stored_rollouts

from prmkit.labelers import LabelStore, PolicySpec, get_labeler, label_file
from prmkit.trace import read_traces, write_traces

HERE = Path(__file__).resolve().parent


def traces(n=6, steps=5):
    rng = random.Random(7)
    out = []
    for i in range(n):
        body = [f"step {chr(97 + j)}" for j in range(steps - 1)]
        if i % 2:
            body[rng.randrange(steps - 1)] += " BAD"
        out.append(make_trace(f"t{i}", body + ["The answer is 7."]))
    return out


def rows(path):
    with LabelStore(path) as st:
        return sorted((r.trace_id, r.prefix, r.index, r.seed, r.text, r.reached, r.tokens)
                      for r in st.rollouts())


@pytest.mark.parametrize("method", ["mc", "binary", "advantage"])
def test_an_exception_mid_run_then_a_rerun_gives_the_uninterrupted_labels(tmp_path, method):
    kw = {"k": 3, "seed": 5}
    ref = traces()
    get_labeler(method, policy=RulePolicy(p=0.5), **kw).label(ref, store=tmp_path / "ref.sqlite")

    store = tmp_path / "s.sqlite"
    first = traces()
    with pytest.raises(RuntimeError, match="policy went away"):
        get_labeler(method, policy=RulePolicy(p=0.5, fail_after=5), **kw).label(first, store=store)
    with LabelStore(store) as st:
        assert st.count() == 5 * 3  # every completed request committed, nothing else
    resumed = traces()
    report = get_labeler(method, policy=RulePolicy(p=0.5), **kw).label(resumed, store=store)
    assert report.reused == 15 and report.generated == report.rollouts - 15
    assert [comparable(t.to_dict()) for t in resumed] == [comparable(t.to_dict()) for t in ref]
    assert rows(store) == rows(tmp_path / "ref.sqlite")


SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from prmkit.labelers import PolicySpec, get_labeler, label_file

    def main():
        inp, out, store, workers = sys.argv[2:6]
        spec = PolicySpec("labeler_fakes:RulePolicy", {"p": 0.6, "delay": 0.01})
        labeler = get_labeler("mc", policy=spec, k=3, seed=11, workers=int(workers),
                              answer_method="fallback")
        with labeler:
            label_file(inp, out, labeler, store=store, progress=False, window=4)

    if __name__ == "__main__":
        main()
""")


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(tmp_path):
    """The labeling process (with its pool of 2 workers) is SIGKILLed four times, each time once a
    random number of rollouts is stored plus a random delay; a fifth run completes. 6 traces of 5
    steps, k=3: exactly 6 * 4 * 3 = 72 rollouts must end up stored and the labels must equal an
    uninterrupted run with the same seed. (The store's UNIQUE key makes a duplicate impossible, and
    this test cannot tell a run that reuses the stored rollouts from one that makes them all again:
    ``tests/test_cli_kills.py`` checks the reuse, and the disk right after each kill.)"""
    inp, out, store = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "s.sqlite"
    write_traces(traces(), inp)
    script = tmp_path / "run_label.py"
    script.write_text(SCRIPT)
    total = 6 * 4 * 3
    rng = random.Random(20240611)
    seen = []
    for attempt in range(5):
        proc = subprocess.Popen([sys.executable, str(script), str(HERE), str(inp), str(out),
                                 str(store), "2"], start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if attempt < 4:
            before = stored_rollouts(store)
            target = min(total - 1, before + rng.randint(4, 16))
            deadline = time.monotonic() + 60
            while proc.poll() is None and stored_rollouts(store) < target and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the run and its worker processes
        output = proc.communicate(timeout=120)[0].decode()
        seen.append((proc.returncode, stored_rollouts(store)))
        if attempt == 4:
            assert proc.returncode == 0, output
    print("exit codes and stored rollouts after each run:", seen)
    assert [code for code, _ in seen[:4]] == [-signal.SIGKILL] * 4, seen
    assert all(0 < n < total for _, n in seen[:4]), seen  # every kill landed mid-run
    assert seen[-1][1] == total
    assert not (tmp_path / "out.partial.jsonl").exists()

    ref_out, ref_store = tmp_path / "ref.jsonl", tmp_path / "ref.sqlite"
    spec = PolicySpec("labeler_fakes:RulePolicy", {"p": 0.6, "delay": 0.01})
    with get_labeler("mc", policy=spec, k=3, seed=11, workers=0, answer_method="fallback") as lab:
        label_file(inp, ref_out, lab, store=ref_store, progress=False)
    assert rows(store) == rows(ref_store)
    got = [comparable(t.to_dict()) for t in read_traces(out)]
    assert got == [comparable(t.to_dict()) for t in read_traces(ref_out)]
    assert sum(len(t["steps"]) for t in got) == 30
