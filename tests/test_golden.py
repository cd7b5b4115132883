"""Golden outputs: the pipeline's results are pinned while its code moves.

From tiny models with fixed weights (the ``tiny`` backbone, seed 0) and a scripted policy that makes
seeded mistakes (``golden_policy.py``), three runs are compared with files recorded before the
redesign of issue 13 (``tests/golden/``):

- ``prmkit demo``'s ``report.json`` (the quick preset's sizes, ``policy=golden``, ``backbone=tiny``);
- ``prmkit score`` of the demo's held-out samples with its trained PRM;
- one labeler run (``label_file`` with Monte Carlo labels, k = 2, from the scripted policy).

Times, dates and the run folder are masked; floats compare to 1e-3 (absolute), and statistics made
of comparisons between scores (AUROCs, how many perturbed traces rose) to a few decisions of
near-ties (:data:`FLIPS`), so that only a change of behaviour fails, not rounding: the same code on CPUs with other vector units (an AMD EPYC with
AVX-512 against the machine that recorded the files) trains and scores the tiny models with other
summation orders, which moved scores by up to 2e-5 and the collapse probe's AUROC gap by 3e-4. ``PRMKIT_UPDATE_GOLDEN=1`` rewrites the files
(do that only for an intended change of behaviour, and say so in the commit).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("matplotlib")

import golden_policy  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("PRMKIT_UPDATE_GOLDEN") == "1"
TIME_KEYS = {"created", "seconds", "stage_seconds", "time", "elapsed", "wall_s", "started", "finished",
             "timestamp", "duration_s", "seconds_per_trace", "traces_per_second", "date"}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")


def _mask(obj, out: str):
    if isinstance(obj, dict):
        return {k: ("<masked>" if k in TIME_KEYS or k.endswith(("seconds", "_per_second", "_s"))
                    else _mask(v, out)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mask(v, out) for v in obj]
    if isinstance(obj, str):
        return _DATE.sub("<date>", obj.replace(out, "<OUT>"))
    return obj


#: Statistics made of comparisons between scores, and how far they may move. The tiny models score
#: many traces within 1e-5 of each other (reordering a trace's steps moves its mean score by 2e-5 on
#: average), so another CPU's summation order decides some near-ties the other way: on an Intel Xeon
#: without AVX512-BF16 (2026-11-28) the collapse probe's outcome AUROC moved by 4 of its 37 x 11
#: pairs (0.0098) and one more of the 16 reordered traces "rose". They compare to a few such flips
#: (0.03 of an AUROC is 12 of those 407 pairs; 2 of 16 traces); a change of behaviour moves them more.
FLIPS = {"auroc": 0.03, "outcome_auroc": 0.03, "step_auroc": 0.03, "gap": 0.03, "rose": 2, "frac_rose": 0.13}


def _same(got, want, where="$"):
    """The first difference between two JSON values (floats to 1e-3, :data:`FLIPS` to theirs), or None."""
    flips = FLIPS.get(where.rsplit(".", 1)[-1])
    if flips is not None and isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return None if abs(got - want) <= flips or (math.isnan(got) and math.isnan(want)) else (
            f"{where}: {got!r} != {want!r} (by more than {flips})")
    if isinstance(want, float) or isinstance(got, float):
        if isinstance(got, (int, float)) and isinstance(want, (int, float)) and (
                math.isclose(got, want, abs_tol=1e-3) or (math.isnan(got) and math.isnan(want))):
            return None
        return f"{where}: {got!r} != {want!r}"
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return f"{where}: keys differ: +{sorted(set(got) - set(want))} -{sorted(set(want) - set(got))}"
        for k in want:
            if (d := _same(got[k], want[k], f"{where}.{k}")) is not None:
                return d
        return None
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return f"{where}: {len(got)} items != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if (d := _same(g, w, f"{where}[{i}]")) is not None:
                return d
        return None
    return None if got == want else f"{where}: {got!r} != {want!r}"


def _check(name: str, got) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    want = json.loads(path.read_text())
    diff = _same(got, want)
    assert diff is None, f"{name} changed: {diff}"


def _jsonl(path: Path, out: str) -> list:
    return [_mask(json.loads(line), out) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    from prmkit import demo as _demo
    from prmkit.envs import ArithConfig, ArithEnv
    from prmkit.policies import POLICIES

    mp = pytest.MonkeyPatch()
    mp.setenv("PRMKIT_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.setitem(POLICIES, "golden", "golden_policy:GoldenPolicy")
    cfg = _demo.DemoConfig(train_problems=6, heldout_problems=6, n=8, mc_traces=4, mc_k=2,
                           max_new_tokens=80, epochs=1.0, max_steps=8, batch_size=8, bootstrap=200,
                           gaming_traces=16, transfer_traces=24, policy="golden", backbone="tiny",
                           max_length=1024, verdict_prm=None, verdict_orm=None)
    for p in ArithEnv(ArithConfig(steps=3, seed=cfg.env_seed)).problems(12):
        golden_policy.PROBLEMS[p.text] = p
    out = tmp_path_factory.mktemp("demo")
    _demo.run_demo(cfg, out)
    yield out
    mp.undo()


def test_demo_report_is_unchanged(demo_run):
    report = json.loads((demo_run / "report" / "report.json").read_text())
    _check("demo_report.json", _mask(report, str(demo_run)))


def test_score_output_is_unchanged(demo_run, tmp_path):
    from typer.testing import CliRunner

    from prmkit.cli import app

    inp = tmp_path / "in.jsonl"
    lines = (demo_run / "samples.jsonl").read_text().splitlines()
    inp.write_text("\n".join(lines[-24:]) + "\n")  # held-out problems' traces, unscored
    out = tmp_path / "scored.jsonl"
    r = CliRunner().invoke(app, ["score", "--model", str(demo_run / "prm"), str(inp), str(out),
                                 "--aggregate", "min", "--chunk", "10"])
    assert r.exit_code == 0, r.output
    _check("score_output.json", _jsonl(out, str(demo_run)))


def test_label_output_is_unchanged(demo_run, tmp_path):
    from prmkit.labelers import MCLabeler, label_file

    inp = tmp_path / "in.jsonl"
    lines = (demo_run / "samples.jsonl").read_text().splitlines()
    inp.write_text("\n".join(lines[:6]) + "\n")
    out = tmp_path / "mc.jsonl"
    report = label_file(inp, out, MCLabeler(golden_policy.GoldenPolicy(), k=2, seed=0),
                        store=tmp_path / "store.sqlite", progress=False)
    got = {"traces": _jsonl(out, str(tmp_path)), "report": _mask(report.to_dict(), str(tmp_path))}
    _check("label_output.json", got)
