"""The report: JSON with every number, Markdown with figures, one self-contained HTML page."""

from __future__ import annotations

import base64
import copy
import json
import re

import pytest

from prmkit.errors import FormatError, MissingDependencyError
from prmkit.eval import _plots
from prmkit.eval._card import CARD_FIELDS, MISSING_TEXT
from prmkit.eval._plots import PNG_SIGNATURE
from prmkit.eval._report import load_results, render_figures, render_html, render_markdown, write_report

VERDICT = "The PRM beats majority voting at N=4 but fails the gaming probe."


def full_results() -> dict:
    """One of every section of the evaluation contract, with numbers chosen to check formatting."""
    return {
        "summary": {"verdict": VERDICT, "headline": {"bon_acc_at_4": 0.625, "auroc": 0.8125}},
        "card": {"fields": {
            **{k: {"value": None, "source": None} for k, _ in CARD_FIELDS},
            "policy_model": {"value": "my-org/policy-1b (hf)", "source": "trace provenance: generate"},
            "process_reward_model": {"value": "prmkit-prm:tiny", "source": "runs/prm/prmkit_rm.json"},
        }},
        "bon": {
            "ns": [1, 2, 4], "problems": 8, "candidates": 4, "bootstrap": 1000, "seed": 0,
            "methods": {
                "prm-min": {"selector": "bon", "key": "prm", "aggregate": "min",
                            "acc": [0.375, 0.5, 0.625], "lo": [0.125, 0.25, 0.5], "hi": [0.625, 0.75, 0.75]},
                "majority": {"selector": "majority", "key": None, "aggregate": None,
                             "acc": [0.375, 0.375, 0.5], "lo": [0.125, 0.125, 0.25],
                             "hi": [0.625, 0.625, 0.75]},
                "oracle": {"selector": "oracle", "key": None, "aggregate": None,
                           "acc": [0.375, 0.75, 0.875], "lo": [0.125, 0.5, 0.625], "hi": [0.625, 1.0, 1.0]},
            },
            "comparisons": [{"a": "prm-min", "b": "majority", "n": 4, "diff": 0.125, "lo": 0.025,
                             "hi": 0.25}],
        },
        "step_metrics": {"prm": {
            "n": 40, "positives": 30, "negatives": 10, "auroc": 0.8125, "threshold": 0.5,
            "f1_error": 0.6, "f1_correct": 0.9, "accuracy": 0.85, "ece": 0.0625, "brier": 0.125,
            "bins": [{"lo": 0.0, "hi": 0.5, "count": 12, "mean_score": 0.25, "frac_correct": 0.25},
                     {"lo": 0.5, "hi": 1.0, "count": 28, "mean_score": 0.8, "frac_correct": 0.9}]},
            "orm": {"n": 8, "positives": 8, "negatives": 0, "auroc": None, "threshold": 0.5,
                    "f1_error": None, "f1_correct": 1.0, "accuracy": 1.0, "ece": 0.1, "brier": 0.05,
                    "bins": []}},
        "probes": {
            "collapse": {"right_answer": {"traces": 10, "invalid_steps": 4, "valid_steps": 26,
                                          "auroc": 0.75, "flag_rate": 0.4},
                         "wrong_answer": {"traces": 6, "invalid_steps": 9, "valid_steps": 9,
                                          "auroc": 0.7, "flag_rate": 0.5},
                         "gap": 0.05, "outcome_auroc": 0.9, "step_auroc": 0.72, "failed": False,
                         "criterion": "step AUROC within right-answer traces at least 0.6"},
            "gaming": {"aggregates": ["min", "last"],
                       "perturbations": {
                           "append_confident_step": {"min": {"n": 20, "rose": 5, "frac_rose": 0.25,
                                                             "mean_delta": 0.031},
                                                     "last": {"n": 20, "rose": 12, "frac_rose": 0.6,
                                                              "mean_delta": 0.2}},
                           "repeat_step": {"min": {"n": 20, "rose": 1, "frac_rose": 0.05,
                                                   "mean_delta": -0.01},
                                           "last": {"n": 20, "rose": 2, "frac_rose": 0.1,
                                                    "mean_delta": 0.0}}},
                       "failed": True,
                       "criterion": "any perturbation raises more than 10% of traces' scores under min"},
            "length_bias": {"aggregate": "min", "n": 30, "pearson": -0.41, "spearman": -0.377,
                            "slope": -0.052,
                            "by_length": [{"steps": 2, "n": 10, "mean_score": 0.7},
                                          {"steps": 3, "n": 12, "mean_score": 0.6},
                                          {"steps": 5, "n": 8, "mean_score": 0.45}],
                            "within_outcome": {"correct": {"n": 18, "spearman": -0.2},
                                               "incorrect": {"n": 12, "spearman": -0.1}},
                            "failed": False, "criterion": "|Spearman| within each outcome below 0.3"},
            "transfer": {"sources": {"arith": {"traces": 50, "steps": 150, "auroc": 0.9, "f1_error": 0.7,
                                               "first_error_acc": 0.66},
                                     "gsm8k": {"traces": 40, "steps": 160, "auroc": 0.7, "f1_error": 0.5,
                                               "first_error_acc": 0.4}},
                         "in_domain": "arith", "out_of_domain": "gsm8k", "auroc_drop": 0.2,
                         "failed": True, "criterion": "AUROC drops by more than 0.1"},
        },
        "processbench": {
            "key": "prm", "threshold": 0.5, "threshold_source": "fixed",
            "splits": {"gsm8k": {"error_acc": 0.5, "correct_acc": 0.75, "f1": 0.6, "n_error": 4,
                                 "n_correct": 4, "threshold": 0.5, "threshold_source": "fixed",
                                 "unscored_steps": 0, "flagged_early": 1, "flagged_late": 0,
                                 "not_flagged": 1},
                       "math": {"error_acc": 0.25, "correct_acc": 1.0, "f1": 0.4, "n_error": 4,
                                "n_correct": 2, "threshold": 0.5, "threshold_source": "fixed",
                                "unscored_steps": 3}},
            "average_f1": 0.5,
            "by_generator": {"gsm8k": {"Qwen2-7B-Instruct": {"error_acc": 0.5, "correct_acc": 0.75,
                                                             "f1": 0.6, "n_error": 4, "n_correct": 4}}},
            "sweep": [{"tuned_on": "gsm8k", "thresholds": [0.3, 0.5, 0.7], "f1": [0.4, 0.6, 0.5],
                       "best": 0.5}],
        },
        "prmbench": {
            "key": "prm", "threshold": 0.5,
            "classes": {"redundancy": {"prmscore": 0.55, "f1_positive": 0.8, "f1_negative": 0.3,
                                       "n_traces": 5, "n_steps": 30, "n_error_steps": 6},
                        "circular": {"prmscore": 0.6, "f1_positive": 0.85, "f1_negative": 0.35,
                                     "n_traces": 4, "n_steps": 24, "n_error_steps": 5}},
            "overall": {"prmscore": 0.575, "f1_positive": 0.825, "f1_negative": 0.325, "n_traces": 9,
                        "n_steps": 54, "n_error_steps": 11},
            "out_of_range": {"policy": "exclude", "traces": 1, "indices": 2, "by_class": {"circular": 1}},
        },
        "labels": {"sources": ["symbolic", "judge"],
                   "pairs": [{"a": "symbolic", "b": "judge", "steps": 40, "agreement": 0.825,
                              "kappa": 0.512}],
                   "first_error_agreement": 0.7},
        "meta": {"title": "Demo evaluation", "command": "prmkit eval bon traces.jsonl --n 1,2,4",
                 "created": "2026-01-01T00:00:00+00:00", "seconds": 12.5,
                 "data": {"traces": "traces.jsonl"}, "models": {"prm": "runs/prm"}, "seeds": {"bootstrap": 0}},
        "calibration_extra": {"temperature": 1.25, "per_source": {"arith": {"ece": 0.04}},
                              "notes": "fitted on held-out arith"},
    }


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    results = full_results()
    paths = write_report(results, out)
    return results, out, paths


def test_the_three_files_and_figures_exist(report):
    _, out, paths = report
    assert paths["json"] == out / "report.json" and paths["markdown"] == out / "report.md"
    assert paths["html"] == out / "report.html"
    figures = {k.split(":", 1)[1] for k in paths if k.startswith("figure:")}
    # every plot the full results can fill
    assert figures == {"bon", "reliability", "gaming", "length_bias", "processbench_sweep", "prmbench"}
    for k, p in paths.items():
        assert p.is_file(), k
        if k.startswith("figure:"):
            assert p.parent == out / "figures"
            assert p.read_bytes().startswith(PNG_SIGNATURE)


def test_json_holds_the_results_as_given(report):
    results, out, _ = report
    text = (out / "report.json").read_text()
    assert json.loads(text) == results
    # sorted keys: stable output
    assert text == json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_html_is_self_contained(report):
    _, out, _ = report
    page = (out / "report.html").read_text()
    assert "http://" not in page and "https://" not in page
    assert 'src="figures' not in page and "<script" not in page and "<link" not in page
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(uris) == 6
    for u in uris:
        assert base64.b64decode(u).startswith(PNG_SIGNATURE)
    assert VERDICT in page
    # the verdict comes before the card, and the card before best-of-N
    assert page.index(VERDICT) < page.index("Process-supervision card") < page.index("Best-of-N")
    assert "<strong>missing</strong> — nothing in the provenance says" in page


def test_markdown_formats_numbers_and_links_figures(report):
    _, out, _ = report
    md = (out / "report.md").read_text()
    assert md.startswith("# Demo evaluation\n")
    assert "> **Verdict.** " + VERDICT in md
    # best-of-N: prm-min at N=4 is acc 0.625, interval [0.5, 0.75]
    assert "| **prm-min** | bon | prm (min) | 37.5% [12.5%, 62.5%] | 50.0% [25.0%, 75.0%] | " \
           "62.5% [50.0%, 75.0%] |" in md
    # comparison: diff 0.125 = +12.5 percentage points, interval [0.025, 0.25]
    # (one bullet per pair; in bold as its interval excludes 0)
    assert "- **prm-min − majority**: **N=4 +12.5 pp [+2.5 pp, +25.0 pp]**\n" in md
    # step metrics: AUROC 3 decimals, accuracy as a percentage; the ORM's AUROC is None -> "—", explained
    assert "| **prm** | 40 | 30 | 10 | 0.812 | 0.500 | 0.600 | 0.900 | 85.0% | 0.062 | 0.125 |" in md
    assert "| **orm** | 8 | 8 | 0 | — | 0.500 | — | 1.000 | 100.0% | 0.100 | 0.050 |" in md
    assert "only one class" in md
    # probes: verdicts with their criteria; max frac_rose under the main aggregate (min) is 0.25
    assert "| **gaming** | **FAILED** | max 25.0% of traces rose under min | any perturbation raises" in md
    assert "| **collapse** | passed | gap 0.050 |" in md
    assert "| append\\_confident\\_step" not in md  # underscores are not escaped (intraword is safe)
    assert "| append_confident_step | 25.0% (5/20), mean Δ 0.031 | 60.0% (12/20), mean Δ 0.200 |" in md
    # ProcessBench per split + average
    assert "| **gsm8k** | 50.0% | 75.0% | 0.600 | 4 | 4 | 0.500 | fixed | 0 |" in md
    assert "**Average F1 over splits:** 0.500" in md
    # where gsm8k's 2 misses fall; math has no such counts (an older file), so no line for it
    assert "- gsm8k: 1 flagged a right step first, 0 flagged only after the error, 1 flagged no step" in md
    assert "- math:" not in md
    assert "| gsm8k | Qwen2-7B-Instruct | 50.0% | 75.0% | 0.600 | 4 | 4 |" in md
    # PRMBench classes + overall in bold, out-of-range counts
    assert "| redundancy | 0.550 | 0.800 | 0.300 | 5 | 30 | 6 |" in md
    assert "| **overall** | **0.575** |" in md
    assert ("Traces naming an error index beyond their last step: 1 (2 such indices); policy: exclude "
            "(those traces left out)") in md
    # labels: agreement is a fraction -> percentage; kappa 3 decimals
    assert "| symbolic | judge | 40 | 82.5% | 0.512 |" in md
    # card: filled fields and the missing marker
    assert "| Policy model | my-org/policy-1b (hf) | trace provenance: generate |" in md
    assert f"| Outcome reward model (ORM) | {MISSING_TEXT} | — |" in md
    # meta
    assert "```\nprmkit eval bon traces.jsonl --n 1,2,4\n```" in md
    # figures linked relatively
    for name in ("bon", "reliability", "gaming", "length_bias", "processbench_sweep", "prmbench"):
        assert f"](figures/{name}.png)" in md


def test_section_order_and_unknown_section(report):
    _, out, _ = report
    md = (out / "report.md").read_text()
    heads = [ln[3:] for ln in md.splitlines() if ln.startswith("## ")]
    assert heads == ["Process-supervision card", "Best-of-N", "Step metrics", "Probes", "ProcessBench",
                     "PRMBench", "Labels", "calibration_extra", "How these numbers were produced"]
    # the unknown section rendered generically: scalars as key/value rows, nested dicts as sub-tables
    assert "| temperature | 1.250 |" in md
    assert "### per_source" in md and "| ece | 0.040 |" in md
    assert "| notes | fitted on held-out arith |" in md


def test_partial_results_only_bon(tmp_path):
    results = {"bon": full_results()["bon"]}
    paths = write_report(results, tmp_path)
    md = paths["markdown"].read_text()
    heads = [ln[3:] for ln in md.splitlines() if ln.startswith("## ")]
    assert heads == ["Process-supervision card", "Best-of-N"]  # the card is always shown
    assert md.count("**missing**") == len(CARD_FIELDS)
    assert "carry no card" in md
    assert md.startswith("# prmkit evaluation report\n")
    assert set(paths) == {"json", "markdown", "html", "figure:bon"}
    assert json.loads(paths["json"].read_text()) == results


def test_second_bon_section_follows_the_first_without_a_figure(tmp_path):
    bon = full_results()["bon"]
    paths = write_report({"bon": bon, "bon_live": bon}, tmp_path)
    md = paths["markdown"].read_text()
    heads = [ln[3:] for ln in md.splitlines() if ln.startswith("## ")]
    assert heads == ["Process-supervision card", "Best-of-N", "Best-of-N of the pair trained in this run"]
    first, second = md.split("## Best-of-N of the pair trained in this run")
    assert first.count("![") == 1 and "![" not in second  # the verdict's figure only, once
    row = next(ln for ln in first.splitlines() if ln.startswith("| **"))
    assert row in second  # the same table rows


def test_empty_results(tmp_path):
    paths = write_report({}, tmp_path, title="Nothing yet")
    md = paths["markdown"].read_text()
    assert md.startswith("# Nothing yet\n")
    assert md.count("**missing**") == len(CARD_FIELDS)
    assert not (tmp_path / "figures").exists()
    assert json.loads(paths["json"].read_text()) == {}


def test_leftover_keys_of_known_sections_are_shown():
    results = {"bon": {**full_results()["bon"], "selection_note": "ties broken by earliest"}}
    md = render_markdown(results)
    assert "### Other fields" in md and "| selection_note | ties broken by earliest |" in md


def test_render_helpers_without_figures():
    results = full_results()
    md = render_markdown(results)  # no figure paths: no image links
    assert "![" not in md and "62.5% [50.0%, 75.0%]" in md
    page = render_html(results, {"bon": PNG_SIGNATURE + b"fake"}, title="T")
    assert "<title>T</title>" in page
    assert page.count("data:image/png;base64,") == 1


def test_figures_are_deterministic():
    results = full_results()
    a, b = render_figures(results), render_figures(copy.deepcopy(results))
    assert a == b


def test_plots_return_none_without_data():
    assert _plots.plot_bon({"ns": [1], "methods": {}}) is None
    assert _plots.plot_reliability({"prm": {"bins": []}}) is None
    assert _plots.plot_length_bias({"by_length": []}) is None
    assert _plots.plot_threshold_sweep({"sweep": []}) is None
    assert _plots.plot_prmbench({"classes": {}}) is None
    assert _plots.plot_gaming({"gaming": {"perturbations": {}}}) is None
    # the gaming plot takes the probes section or its gaming entry
    probes = full_results()["probes"]
    assert _plots.plot_gaming(probes) == _plots.plot_gaming(probes["gaming"])


def test_missing_matplotlib_names_the_plot_extra(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(MissingDependencyError, match=r'pip install "prmkit\[plot\]"'):
        _plots.plot_bon(full_results()["bon"])
    # the report is still written, saying why it has no figures
    paths = write_report({"bon": full_results()["bon"]}, tmp_path)
    assert "figure:bon" not in paths
    assert 'prmkit[plot]' in paths["markdown"].read_text()
    with pytest.raises(MissingDependencyError):
        write_report({"bon": full_results()["bon"]}, tmp_path, figures=True)


def test_nan_is_written_as_null(tmp_path):
    paths = write_report({"bon": {"ns": [1], "methods": {"m": {"acc": [float("nan")]}}}}, tmp_path,
                         figures=False)
    assert json.loads(paths["json"].read_text())["bon"]["methods"]["m"]["acc"] == [None]


def test_load_results_merges_sections(tmp_path):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    a.write_text(json.dumps({"bon": {"ns": [1]}, "probes": {"gaming": {"failed": False}},
                             "meta": {"command": "prmkit eval bon", "seeds": {"bootstrap": 0}}}))
    b.write_text(json.dumps({"bon": {"ns": [2]}, "processbench": {"average_f1": 0.5},
                             "meta": {"command": "prmkit eval processbench"}}))
    warnings: list[str] = []
    merged = load_results([a, b], warnings=warnings)
    assert merged["bon"] == {"ns": [2]}  # later file wins
    assert merged["probes"] == {"gaming": {"failed": False}}
    assert merged["processbench"] == {"average_f1": 0.5}
    assert warnings == [f"section 'bon': {b} replaces the one from {a}"]
    assert merged["meta"]["command"] == "prmkit eval processbench"
    assert merged["meta"]["seeds"] == {"bootstrap": 0}
    assert [m["command"] for m in merged["meta"]["merged_from"]] == ["prmkit eval bon",
                                                                     "prmkit eval processbench"]
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  \"bon\": ,\n}")
    with pytest.raises(FormatError, match="bad.json:2"):
        load_results([bad])
    arr = tmp_path / "arr.json"
    arr.write_text("[]")
    with pytest.raises(FormatError, match="one JSON object"):
        load_results([arr])


def test_the_verdict_numbers_render_as_one_comparison_table():
    from prmkit.eval._report import render_markdown
    from prmkit.eval._summary import bon_verdict

    bon = {"ns": [1, 4], "problems": 8, "methods": {
        "PRM (min)": {"acc": [0.5, 0.625], "lo": [0.3, 0.4], "hi": [0.7, 0.8]},
        "ORM": {"acc": [0.5, 0.5], "lo": [0.3, 0.3], "hi": [0.7, 0.7]}},
        "comparisons": [{"a": "PRM (min)", "b": "ORM", "n": 4, "diff": 0.125, "lo": -0.1, "hi": 0.3}]}
    md = render_markdown({"summary": bon_verdict(bon, "PRM (min)", ["ORM", "majority"])})
    assert "| **PRM (min)** | 62.5% [40.0%, 80.0%] |" in md
    # The difference is in percentage points with its paired interval, signed both sides.
    assert "| ORM | 50.0% [30.0%, 70.0%] | +12.5 pp [-10.0 pp, +30.0 pp] |" in md
    assert "| majority | — | — | not evaluated |" in md


# -- issue 15, item 13: the report reads well --------------------------------------------------------------

GOLDEN_DEMO = __import__("pathlib").Path(__file__).resolve().parents[1] / "golden" / "demo_report.json"


def test_the_demo_report_shows_no_dump_of_internal_keys():
    # Every key of the demo's results is rendered by its section (the probes' key / threshold / seed
    # as one "Settings" line, meta's settings as a table), so no "Other fields" table is left.
    md = render_markdown(json.loads(GOLDEN_DEMO.read_text()))
    assert "Other fields" not in md
    assert "| lr | 1e-4 |" in md and "| lr | 0.000 |" not in md       # the demo's learning rate
    assert "*Settings:* a rise counts above 1e-6; fails above 10.0% of traces; seed 0." in md


def test_unknown_keys_of_a_known_section_are_still_shown():
    md = render_markdown({"labels": {"sources": ["a", "b"], "pairs": [], "my_new_number": 0.25}})
    assert "### Other fields" in md and "| my_new_number | 0.250 |" in md


def test_numbers_of_no_fixed_scale_keep_their_magnitude():
    md = render_markdown({"meta": {"settings": {"lr": 1e-4, "eps": 1e-6, "wd": 0.0123, "warmup": 0.04,
                                                "steps": 100, "zero": 0.0}}})
    for row in ("| lr | 1e-4 |", "| eps | 1e-6 |", "| wd | 0.0123 |", "| warmup | 0.040 |",
                "| steps | 100 |", "| zero | 0.000 |"):
        assert row in md, row


def test_markdown_is_fence_proof_and_lets_no_html_through():
    step = "Step 1: ````python\nx = 1\n````\n# not a heading\n<script>alert(1)</script> &lt;b&gt;"
    md = render_markdown({"meta": {"command": step}, "notes": {"text": step},
                          "oddity": step})
    # the code block's fence is longer than any backtick run inside it: five backticks
    assert "`````\n" + step + "\n`````" in md
    # plain text: the tags are entities, "&lt;" shows as written, a line cannot open a heading
    assert "<script>" not in md.replace("`````\n" + step + "\n`````", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp;lt;b&amp;gt;" in md
    assert "\n\\# not a heading" in md
    # in a table cell too (newlines folded, backticks escaped)
    assert "| text | Step 1: \\`\\`\\`\\`python x = 1 \\`\\`\\`\\` # not a heading &lt;script&gt;" in md
    page = render_html({"oddity": step})
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_inline_code_with_backticks_keeps_its_span():
    from prmkit.eval._report import _md_inline

    assert _md_inline(("code", "a``b")) == "```a``b```"
    assert _md_inline(("code", "`x")) == "`` `x ``"


def test_paired_comparisons_fold_the_degenerate_ones():
    bon = {"ns": [1, 2, 4], "methods": {}, "comparisons": [
        {"a": "PRM (min)", "b": "ORM", "n": 1, "diff": 0.0, "lo": 0.0, "hi": 0.0},
        {"a": "PRM (min)", "b": "ORM", "n": 2, "diff": -0.037, "lo": -0.167, "hi": 0.0},
        {"a": "PRM (min)", "b": "ORM", "n": 4, "diff": -0.5, "lo": -0.75, "hi": -0.25},
        {"a": "X", "b": "Y", "n": 1, "diff": 0.0, "lo": 0.0, "hi": 0.0},
        {"a": "X", "b": "Y", "n": 4, "diff": 0.0, "lo": 0.0, "hi": 0.0}]}
    md = render_markdown({"bon": bon})
    items = [ln for ln in md.splitlines() if ln.startswith("- ")]
    assert items == [
        "- **PRM (min) − ORM**: N=2 -3.7 pp [-16.7 pp, +0.0 pp]; **N=4 -50.0 pp [-75.0 pp, -25.0 pp]**; "
        "same choices in every resample at N=1",
        "- **X − Y**: same choices in every resample at N=1, 4"]
    assert "+0.0 pp [+0.0 pp, +0.0 pp]" not in md


def test_the_verdict_names_results_below_random_and_below_n1():
    from prmkit.eval._summary import bon_verdict

    # PRM (min) falls from 75% at N=1 to 50% at N=8, below random's 77.5%; ORM (70%) is below random
    # too; majority rises above both.
    bon = {"ns": [1, 8], "problems": 6, "methods": {
        "PRM (min)": {"selector": "bon", "acc": [0.75, 0.5], "lo": [0.5, 0.25], "hi": [1.0, 0.75]},
        "ORM": {"selector": "bon", "acc": [0.75, 0.7], "lo": [0.5, 0.4], "hi": [1.0, 1.0]},
        "majority": {"selector": "majority", "acc": [0.75, 1.0], "lo": [0.5, 1.0], "hi": [1.0, 1.0]},
        "random": {"selector": "random", "acc": [0.75, 0.775], "lo": [0.5, 0.6], "hi": [1.0, 0.9]},
        "oracle (pass@N)": {"selector": "oracle", "acc": [0.75, 1.0], "lo": [0.5, 1.0], "hi": [1.0, 1.0]}},
        "comparisons": []}
    out = bon_verdict(bon, "PRM (min)", ["ORM", "majority"])
    assert ("PRM (min) at N=8 (50.0%) fell below random choice (77.5%) and below its own N=1 (75.0%): "
            "more candidates made its pick worse. Also below random choice at N=8: ORM (70.0%).") in out["verdict"]
    h = out["headline"]
    assert (h["random_acc"], h["below_random"], h["below_n1"]) == (0.775, ["PRM (min)", "ORM"], ["PRM (min)", "ORM"])
    md = render_markdown({"summary": out})
    assert "| random choice | 77.5% | — | **PRM (min) fell below it** |" in md
    assert "Other fields" not in md


def test_a_probe_that_cannot_measure_says_so_in_the_report():
    md = render_markdown({"probes": {"length_bias": {
        "failed": None, "measured": False, "criterion": "cannot measure: 15 of 16 traces have one length",
        "key": "prm"}}})
    assert "| **length_bias** | cannot measure |" in md and "### length_bias: cannot measure" in md


def test_the_best_of_n_figure_draws_the_verdicts_methods_bold():
    from prmkit.eval._report import _verdict_methods

    results = {"summary": {"headline": {"main": "PRM (min)", "versus": {"ORM": {}, "majority": {}},
                                        "below_random": ["PRM (min)"]}}}
    assert _verdict_methods(results) == ["PRM (min)", "ORM", "majority", "random"]
    from prmkit.eval import MethodCurve

    styles = _plots.bon_line_styles({m: MethodCurve() for m in ("PRM (min)", "PRM (last)", "ORM", "majority",
                                                                 "random")},
                                    _verdict_methods(results))
    assert {m for m, s in styles.items() if s["bold"]} == {"PRM (min)", "ORM", "majority", "random"}
    assert [m for m, s in styles.items() if s["band"]] == ["PRM (min)"]  # one band: the main method's
    assert styles["PRM (last)"]["alpha"] < 1 and styles["PRM (last)"]["linewidth"] < styles["ORM"]["linewidth"]
