"""``prmkit eval processbench | prmbench | bon | probes`` and ``prmkit report`` end to end, with the
scripted scorer (scores chosen per step text) so every printed number can be derived by hand."""

from __future__ import annotations

import json

import pytest

from prmkit.cli import main
from prmkit.data import read
from prmkit.trace import Problem, Step, StepLabel, Trace, write_traces


def run(args):
    main(args)


def test_processbench_prints_and_writes_the_four_numbers(fixtures, tmp_path, capsys):
    path = fixtures / "processbench" / "mini.json"
    records = json.loads(path.read_text())
    # mini.json: labels -1, 0, 2, 1. Flag (score 0.1) step 0 of the label-0 sample (hit), step 2 of the
    # label-2 sample (hit) and step 0 of the label-1 sample (a miss: predicted 0); everything else
    # scores 0.9, so the error-free sample is predicted -1 (hit).
    low = [records[1]["steps"][0], records[2]["steps"][2], records[3]["steps"][0]]
    scores = json.dumps({text: 0.1 for text in low})
    out = tmp_path / "pb.json"
    run(["eval", "processbench", str(path), "--scorer", "scripted", "-s", f"scores={scores}",
         "-s", "default=0.9", "--by-generator", "--json", str(out)])
    printed = capsys.readouterr().out
    pb = json.loads(out.read_text())["processbench"]
    s = pb["splits"]["mini"]
    # error acc 2/3, correct acc 1/1, F1 = 2 * (2/3) * 1 / (2/3 + 1) = 0.8; one split: average = 0.8.
    assert s["n_error"] == 3 and s["n_correct"] == 1
    assert s["error_acc"] == pytest.approx(2 / 3) and s["correct_acc"] == 1.0
    assert s["f1"] == pytest.approx(0.8) and pb["average_f1"] == pytest.approx(0.8)
    assert pb["threshold"] == 0.5 and pb["threshold_source"] == "fixed"
    assert "mini" in printed and "average F1 80.0" in printed
    # Per generator: Qwen2-7B-Instruct wrote the -1, 2 and 1 samples (hits, hit, miss): error acc
    # 1/2, correct acc 1/1; Meta-Llama-3-8B-Instruct the label-0 sample (hit).
    gens = pb["by_generator"]["mini"]
    assert gens["Qwen2-7B-Instruct"]["error_acc"] == 0.5 and gens["Qwen2-7B-Instruct"]["correct_acc"] == 1.0
    assert gens["Meta-Llama-3-8B-Instruct"]["error_acc"] == 1.0
    assert "Qwen2-7B-Instruct: error acc 50.0" in printed


def test_processbench_threshold_is_tuned_on_another_split(fixtures, tmp_path):
    path = fixtures / "processbench" / "mini.json"
    tune = tmp_path / "tune.json"
    tune.write_text(path.read_text())
    # Same samples under another name: the CLI refuses a tuning split that is the reported split
    # (same trace ids).
    from prmkit.errors import PrmkitError

    with pytest.raises((PrmkitError, SystemExit)):
        run(["eval", "processbench", str(path), "--tune-on", str(tune), "--scorer", "scripted",
             "-s", "scores={}", "-s", "default=0.9"])


def test_prmbench_cli_counts_out_of_range_rows(fixtures, tmp_path):
    path = fixtures / "prmbench" / "mini.jsonl"
    traces = list(read(path, "prmbench"))
    # Perfect scores from the labels (0.9 for a right step, 0.1 for a wrong one), keyed by step text.
    scores: dict[str, float] = {}
    for t in traces:
        for st, lab in zip(t.steps, t.labels(), strict=True):
            if lab is not None:
                v = 0.9 if lab.value > 0 else 0.1
                assert scores.setdefault(st.text, v) == v, "a step text with two labels"
    out = tmp_path / "prmbench.json"
    run(["eval", "prmbench", str(path), "--scorer", "scripted", "-s", f"scores={json.dumps(scores)}",
         "--json", str(out)])
    res = json.loads(out.read_text())["prmbench"]
    bad_rows = sum(bool(t.meta["prmbench"].get("out_of_range")) for t in traces)
    assert res["out_of_range"]["traces"] == bad_rows
    assert any(c["n_traces"] for c in res["classes"].values())
    for name, c in res["classes"].items():
        # A class whose every row points past its last step is excluded entirely (no score).
        assert c["prmscore"] == pytest.approx(1.0) if c["n_traces"] else c["prmscore"] is None, name


def _bon_traces() -> list[Trace]:
    """2 problems x 2 candidates; per problem one right (answer 5) and one wrong (answer 6)."""
    out = []
    for p in range(2):
        for k, (ans, good) in enumerate([("5", True), ("6", False)]):
            # The PRM scores the right candidate's steps higher; the ORM prefers the wrong one.
            prm = [0.9, 0.8] if good else [0.7, 0.2]
            labels = [1, 1] if good else [1, -1]
            steps = [Step(f"p{p} c{k} s{i}", scores={"prm": prm[i]},
                          labels=[StepLabel(labels[i], source="symbolic")]) for i in range(2)]
            out.append(Trace(id=f"p{p}#{k}", problem=Problem(f"problem {p}", answer="5", id=f"p{p}"),
                             steps=steps, final_answer=ans,
                             outcome="correct" if good else "incorrect",
                             meta={"scores": {"orm": 0.3 if good else 0.6}}))
    return out


def test_bon_cli_curves_step_metrics_and_verdict(tmp_path, capsys):
    scored = tmp_path / "scored.jsonl"
    write_traces(_bon_traces(), scored)
    out = tmp_path / "bon.json"
    run(["eval", "bon", str(scored), "--bootstrap", "50", "--json", str(out)])
    res = json.loads(out.read_text())
    bon = res["bon"]
    assert bon["ns"] == [1, 2] and bon["problems"] == 2
    # At N=2 (every candidate): the PRM always picks the right one, the ORM the wrong one, random is
    # 1/2 and pass@2 is 1 — no subsampling variance, so the interval is a point.
    at2 = {name: (m["acc"][1], m["lo"][1], m["hi"][1]) for name, m in bon["methods"].items()}
    assert at2["PRM (min)"] == (1.0, 1.0, 1.0)
    assert at2["ORM"] == (0.0, 0.0, 0.0)
    assert at2["random"][0] == 0.5 and at2["oracle (pass@N)"][0] == 1.0
    # Step metrics: right steps 0.9, 0.8, 0.7 (x2 problems) vs the wrong step 0.2: AUROC 1.
    assert res["step_metrics"]["prm"]["auroc"] == 1.0
    assert "beat ORM" in res["summary"]["verdict"]
    assert "PRM (min)" in capsys.readouterr().out


def test_probes_cli_and_report(tmp_path):
    from prmkit.envs import ArithConfig
    from prmkit.eval._derived import arith_derived_traces

    inp, other = tmp_path / "arith.jsonl", tmp_path / "shifted.jsonl"
    home = arith_derived_traces(ArithConfig(), 12, seed=0)
    for t in home:  # in-domain labels under another source than the second source's ("synthetic")
        for st in t.steps:
            for lab in st.labels:
                lab.source = "symbolic"
    write_traces(home, inp)
    write_traces(arith_derived_traces(ArithConfig(steps=5, max_operand=50, seed=3), 12, seed=1), other)
    out = tmp_path / "probes.json"
    # A scorer that prefers short step texts: a plain, deterministic non-PRM.
    run(["eval", "probes", str(inp), "--scorer", "scripted", "-s", "scores={}", "-s", "default=0.6",
         "--label-source", "symbolic", "--transfer", str(other), "--json", str(out)])
    probes = json.loads(out.read_text())["probes"]
    assert set(probes) == {"collapse", "gaming", "result_check", "length_bias", "transfer"}
    # A constant scorer: no perturbation can raise a score, and step AUROC is exactly chance.
    assert not probes["gaming"]["failed"]
    assert probes["transfer"]["sources"]["shifted"]["auroc"] == 0.5
    # --label-source names the in-domain labels; the second source is read with its own.
    assert probes["transfer"]["sources"]["shifted"]["steps"] > 0
    assert probes["transfer"]["sources"]["arith"]["steps"] > 0

    scored = tmp_path / "scored.jsonl"
    write_traces(_bon_traces(), scored)
    bon = tmp_path / "bon.json"
    run(["eval", "bon", str(scored), "--bootstrap", "20", "--json", str(bon)])
    rep = tmp_path / "report"
    run(["report", str(bon), str(out), "--traces", str(scored), "--card", "deployment_monitor=none",
         "-o", str(rep)])
    md = (rep / "report.md").read_text()
    html = (rep / "report.html").read_text()
    data = json.loads((rep / "report.json").read_text())
    assert {"bon", "probes", "card", "summary"} <= set(data)
    assert data["card"]["fields"]["deployment_monitor"]["value"] == "none"
    assert data["card"]["fields"]["automated_judge"]["value"] is None  # shown as missing, not dropped
    assert "missing" in md and "Best-of-N" in md
    assert "data:image/png;base64," in html and "http://" not in html and "https://" not in html


@pytest.mark.realdata
def test_probes_cli_transfer_to_gsm8k_derived_traces(shared_data, tmp_path):
    from prmkit.envs import ArithConfig
    from prmkit.eval._derived import arith_derived_traces

    inp = tmp_path / "arith.jsonl"
    write_traces(arith_derived_traces(ArithConfig(), 10, seed=0), inp)
    out = tmp_path / "probes.json"
    run(["eval", "probes", str(inp), "--scorer", "scripted", "-s", "scores={}", "-s", "default=0.6",
         "--transfer-gsm8k", str(shared_data / "gsm8k" / "test.jsonl"), "--transfer-limit", "20",
         "--json", str(out)])
    src = json.loads(out.read_text())["probes"]["transfer"]["sources"]["gsm8k (derived)"]
    # 20 GSM8K problems, one derived trace each; their labelled steps are scored (a constant scorer:
    # AUROC exactly 0.5 when both classes are present).
    assert src["traces"] == 20 and src["steps"] > 20
    assert src["auroc"] in (0.5, None)
