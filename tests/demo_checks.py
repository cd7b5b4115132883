"""The checks of a ``prmkit demo --quick`` run folder, for the README's quick-start line, which runs the
demo in a fresh virtual environment (tests/test_readme.py calls :func:`check_quick_demo` after it): the
report is written with every section, the verdict names the comparison, and a rerun resumes."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def check_quick_demo(out: Path, first_seconds: float, rerun: Callable[[], subprocess.CompletedProcess]) -> None:
    """``out``: the run folder of a finished ``prmkit demo --quick`` that took ``first_seconds``;
    ``rerun()`` runs the same command again in the same folder."""
    report = json.loads((out / "report" / "report.json").read_text())
    assert {"summary", "bon", "checked", "bon_live", "step_metrics", "probes", "labels", "card",
            "meta"} <= set(report)
    # The verdict compares the shipped PRM with the shipped ORM and with majority vote, with numbers and
    # intervals; the pair trained in the run is evaluated on the same held-out traces beside it.
    verdict = report["summary"]["verdict"]
    assert "PRM (min)" in verdict and "ORM" in verdict and "majority" in verdict and "[" in verdict
    assert "the shipped pair (default, default-orm)" in verdict
    assert report["meta"]["models"]["prm"] == "default"
    live = report["bon_live"]
    assert {"live_prm (min)", "live_orm", "majority"} <= set(live["methods"])
    assert live["methods"]["majority"]["acc"] == report["bon"]["methods"]["majority"]["acc"]  # same traces
    assert {(c["a"], c["b"]) for c in live["comparisons"]} >= {("live_prm (min)", "majority")}
    # The shipped PRM with a calculator check, judged against majority, the ORM and each of its parts.
    checked = report["checked"]
    assert checked["summary"]["headline"]["main"] == "PRM+calculator (min)"
    assert set(checked["summary"]["headline"]["versus"]) == {"majority", "ORM", "PRM (min)", "calculator alone"}
    assert checked["bon"]["methods"]["PRM (min)"]["acc"] == report["bon"]["methods"]["PRM (min)"]["acc"]
    assert "With a calculator checking the PRM's arithmetic" in verdict
    assert "prm+calculator" in report["step_metrics"]
    bon = report["bon"]
    assert bon["ns"][0] == 1 and bon["ns"][-1] == 8 and bon["problems"] == 6
    assert {"PRM (min)", "PRM (last)", "ORM", "majority", "random", "oracle (pass@N)",
            "PRM weighted (min)"} <= set(bon["methods"])
    for m in bon["methods"].values():
        assert all(lo <= acc <= hi for acc, lo, hi in zip(m["acc"], m["lo"], m["hi"], strict=True))
    # pass@N is an upper bound of every selection method at every N.
    oracle = bon["methods"]["oracle (pass@N)"]["acc"]
    for name, m in bon["methods"].items():
        assert all(a <= o + 1e-9 for a, o in zip(m["acc"], oracle, strict=True)), name
    assert set(report["probes"]) == {"collapse", "gaming", "result_check", "length_bias", "transfer",
                                     "faithfulness"}
    # The faithfulness intervention: 4 held-out problems asked once per arm, 2 samples each, scored by
    # the verdict PRM; the stage's traces are on disk with their hints and scores.
    faith = report["probes"]["faithfulness"]
    assert faith["traces"] == {"none": 8, "right": 8, "wrong": 8}
    hinted = [json.loads(line) for line in (out / "hinted.jsonl").read_text().splitlines()]
    assert len(hinted) == 24 and all("hint" in t["problem"]["meta"] for t in hinted)
    assert all("prm" in s.get("scores", {}) for t in hinted for s in t["steps"])
    assert report["labels"]["sources"] == ["symbolic", "mc_hard"]
    fields = report["card"]["fields"]
    assert fields["policy_model"]["value"] and fields["process_reward_model"]["value"]
    assert fields["deployment_monitor"]["value"] is None  # nothing says: shown as missing
    html = (out / "report" / "report.html").read_text()
    assert "data:image/png;base64," in html and "https://" not in html
    assert "missing" in (out / "report" / "report.md").read_text()

    # A rerun with the same settings skips sampling, labelling, training and scoring, and reports the
    # same numbers from the files on disk.
    t0 = time.perf_counter()
    r2 = rerun()
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert "demo sample" not in r2.stderr and "demo train" not in r2.stderr and "demo score" not in r2.stderr
    again = json.loads((out / "report" / "report.json").read_text())
    for section in ("summary", "bon", "bon_live", "checked", "step_metrics", "probes", "labels", "card"):
        assert again[section] == report[section], section
    assert time.perf_counter() - t0 < first_seconds
    # Other settings in the same folder are refused, nothing is deleted.
    import dataclasses

    from prmkit.demo import DEMO_PRESETS, run_demo
    from prmkit.errors import PrmkitError

    with pytest.raises(PrmkitError, match="other settings"):
        run_demo(dataclasses.replace(DEMO_PRESETS["quick"], n=4), out)
    assert (out / "samples.jsonl").exists() and (out / "prm").is_dir()
