"""Plugins: components of other distributions join prmkit's registries through entry points.

The registry mechanics are checked in this process with fake entry points (lazy reading, built-ins
first, a broken plugin failing only when used); the end-to-end tests install a real separate
distribution, ``tests/plugins/prmkit-example-plugin`` (a labeler and a probe, one file each), with
pip into a temporary folder and run ``python -m prmkit`` with that folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import prmkit._registry as registry_module
from prmkit._registry import ENTRY_POINT_GROUPS, Registry
from prmkit.errors import PrmkitError
from prmkit.trace import Problem, Step, Trace, read_traces, write_traces

PLUGIN = Path(__file__).resolve().parent / "plugins" / "prmkit-example-plugin"
GROUP = "prmkit.splitters"


def _ep(name: str, value: str, dist: str = "prmkit-fake-plugin", group: str = GROUP) -> SimpleNamespace:
    return SimpleNamespace(name=name, value=value, group=group, dist=SimpleNamespace(name=dist))


@pytest.fixture()
def installed(monkeypatch):
    """Pretend these entry points are installed: ``installed([ep, ...])``; counts the scans."""
    scans: list[str] = []

    def use(eps: list[SimpleNamespace]) -> list[str]:
        def fake(group: str) -> tuple:
            scans.append(group)
            return tuple(ep for ep in eps if ep.group == group)

        monkeypatch.setattr(registry_module, "_entry_points", fake)
        return scans

    return use


def _splitters() -> Registry:
    return Registry("splitter", {"newline": "prmkit.data._split:NewlineSplitter"}, group=GROUP)


# -- the registry ------------------------------------------------------------------------------------

def test_plugins_are_read_when_the_registry_is_first_listed_and_come_after_the_built_ins(installed):
    scans = installed([_ep("lines", "prmkit.data._split:NewlineSplitter")])
    r = _splitters()
    assert scans == []  # made, not listed: nothing read yet
    assert list(r) == ["newline", "lines"] and "lines" in r and len(r) == 2
    assert r["lines"] == "prmkit.data._split:NewlineSplitter"  # what the registry stores anyway
    assert r.create("lines").name == "newline"
    assert r.plugin("lines").distribution == "prmkit-fake-plugin" and r.plugin("newline") is None
    assert scans == [GROUP]  # once


def test_a_built_in_or_a_name_registered_in_code_wins_over_a_plugin(installed):
    installed([_ep("newline", "nowhere:Nothing"), _ep("mine", "nowhere:Nothing")])
    r = _splitters()
    r.register("mine", "prmkit.data._split:NewlineSplitter")
    with pytest.warns(UserWarning) as caught:
        names = list(r)
    assert [str(w.message).split(" is ignored: ")[1] for w in caught] == [
        "the splitter 'newline' is built in (or registered in code), which comes first",
        "the splitter 'mine' is built in (or registered in code), which comes first"]
    assert names == ["newline", "mine"]
    assert r.create("newline").name == "newline" and r.create("mine").name == "newline"
    assert r.plugin("newline") is None and r.plugin("mine") is None


def test_a_broken_plugin_fails_when_used_with_its_name_and_never_hides_the_built_ins(installed):
    installed([_ep("broken", "prmkit_no_such_module:Splitter", dist="prmkit-broken")])
    r = _splitters()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(r) == ["newline", "broken"]
    assert r.create("newline").name == "newline"
    with pytest.raises(PrmkitError, match=r"splitter 'broken' comes from the plugin prmkit-broken "
                                          r"\(entry point prmkit.splitters: broken = "
                                          r"prmkit_no_such_module:Splitter\), which failed to load: "
                                          r"ModuleNotFoundError"):
        r.load("broken")
    with pytest.raises(PrmkitError, match=r"unknown splitter 'nope'; known: broken, newline$"):
        r.load("nope")


def test_groups_are_the_documented_ones():
    with pytest.raises(PrmkitError, match="unknown entry-point group 'prmkit.nope'"):
        Registry("thing", {}, group="prmkit.nope")
    assert {"prmkit.labelers", "prmkit.policies", "prmkit.conventions", "prmkit.probes",
            "prmkit.formats"} <= set(ENTRY_POINT_GROUPS)
    for group, where in ENTRY_POINT_GROUPS.items():  # each names the registry that reads it
        module, _, name = where.rpartition(".")
        registry = getattr(__import__(module, fromlist=[name]), name)
        assert isinstance(registry, Registry) and registry.group == group, group


def test_a_convention_plugin_is_a_convention_object(installed, tmp_path, monkeypatch):
    (tmp_path / "my_prm_conventions.py").write_text(
        "from prmkit.models import Convention\nSTEP_TAG = Convention('step-tag', tag=' <step>')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from prmkit.models import CONVENTIONS, get_convention

    installed([_ep("step-tag", "my_prm_conventions:STEP_TAG", group="prmkit.conventions")])
    monkeypatch.setattr(CONVENTIONS, "_scanned", False)  # read the (fake) entry points again
    monkeypatch.setattr(CONVENTIONS, "_entries", dict(CONVENTIONS._entries))
    assert get_convention("step-tag").tag == " <step>"
    assert get_convention("prmkit").name == "prmkit"


# -- a real plugin distribution ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The example plugin installed (offline, no dependencies) into a folder of its own."""
    src = tmp_path_factory.mktemp("plugin-src") / "prmkit-example-plugin"
    shutil.copytree(PLUGIN, src)  # setuptools writes build/ and *.egg-info beside the sources
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                        "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--quiet",
                        "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return target


def prmkit(*args: str, site: Path | None, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    paths = [str(site)] if site is not None else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run([sys.executable, "-m", "prmkit", *args], capture_output=True, text=True,
                       env=env, cwd=cwd, timeout=300)
    if ok:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture()
def traces(tmp_path):
    path = tmp_path / "in.jsonl"
    steps = [["x = 2 + 2 = 4.", "The answer is 4."], ["x = 2 + 2 = 5, wrong.", "The answer is 5."],
             ["2 + 2 = 4.", "Check: 4 - 2 = 2.", "The answer is 4."]]
    write_traces([Trace(id=f"t{i}", problem=Problem("2 + 2?", answer="4"),
                        steps=[Step(s) for s in ss], outcome="correct" if "4" in ss[-1] else "incorrect")
                  for i, ss in enumerate(steps)], path)
    return path


@pytest.mark.slow
def test_the_plugin_labeler_and_probe_are_listed_in_the_help(site, tmp_path):
    label_help = prmkit("label", "--help", site=site, cwd=tmp_path).stdout
    probes_help = prmkit("eval", "probes", "--help", site=site, cwd=tmp_path).stdout
    assert "spec, example_keywords" in label_help
    assert "faithfulness, example_step_count" in probes_help
    # Without the plugin on the path, neither is there: the names come from the entry points.
    assert "example_keywords" not in prmkit("label", "--help", site=None, cwd=tmp_path).stdout
    assert "example_step_count" not in prmkit("eval", "probes", "--help", site=None, cwd=tmp_path).stdout


@pytest.mark.slow
def test_the_plugin_labeler_labels_from_the_command_line(site, tmp_path, traces):
    out = tmp_path / "labelled.jsonl"
    refused = prmkit("label", "--method", "example_keywords", str(traces), str(out), "-k", "3", "--seed",
                     "4", site=site, cwd=tmp_path, ok=False)  # -k: not an argument of the plugin's
    assert (refused.returncode, refused.stderr) == (
        1, "error: --k / -k is not an option of the example_keywords labeler (it takes: --seed)\n")
    r = prmkit("label", "--method", "example_keywords", str(traces), str(out), "-o", 'words=["wrong"]',
               "--seed", "4", "--no-progress", site=site, cwd=tmp_path)
    assert "3/3 traces labelled by example_keywords" in r.stdout and "store:" not in r.stdout
    got = [[lab.value for lab in t.labels("keywords")] for t in read_traces(out)]
    assert got == [[1, 1], [-1, 1], [1, 1, 1]]
    lab = next(read_traces(out)).steps[0].labels[-1]
    assert (lab.labeler, lab.args) == ("example_keywords", {"words": ["wrong"], "seed": 4})
    unknown = prmkit("label", "--method", "nope", str(traces), str(tmp_path / "new.jsonl"), site=site,
                     cwd=tmp_path, ok=False)  # a new OUT: an existing one is refused first
    assert unknown.returncode == 1
    assert "error: unknown labeler 'nope'; known: advantage, binary, consensus, example_keywords, " \
           "judge, mc, omegaprm, spec, symbolic" in unknown.stderr


@pytest.mark.slow
def test_the_plugin_probe_runs_and_is_reported(site, tmp_path, traces):
    labelled = tmp_path / "labelled.jsonl"
    prmkit("label", "--method", "example_keywords", str(traces), str(labelled), "-o", 'words=["wrong"]',
           "--no-progress", site=site, cwd=tmp_path)
    scored = ["--scorer", "scripted", "-s", "scores={}", "-s", "default=0.6"]
    out = tmp_path / "probes.json"
    r = prmkit("eval", "probes", str(labelled), *scored, "--json", str(out), site=site, cwd=tmp_path)
    probes = json.loads(out.read_text())["probes"]
    assert probes["example_step_count"] == {
        "failed": False, "criterion": "fails when the mean number of steps exceeds 10",
        "traces": 3, "mean_steps": pytest.approx(7 / 3)}
    assert "collapse" in probes and "example_step_count: passed" in r.stdout
    only = tmp_path / "only.json"
    prmkit("eval", "probes", str(labelled), *scored, "--probe", "example_step_count", "--json", str(only),
           site=site, cwd=tmp_path)
    assert list(json.loads(only.read_text())["probes"]) == ["example_step_count"]
    prmkit("report", str(out), "-o", str(tmp_path / "report"), site=site, cwd=tmp_path)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| **example_step_count** | passed | 2.3 steps per trace |" in md
    assert "3 traces, 2.33 steps each on average." in md


def test_unknown_names_are_one_line_errors_before_any_work(tmp_path, traces):
    for args, message in [
        (["eval", "probes", str(traces), "--scorer", "scripted", "-s", "scores={}", "--probe", "nope"],
         "error: unknown probe 'nope'; known: collapse, faithfulness, gaming, length_bias, result_check, transfer\n"),
        (["score", str(traces), str(tmp_path / "o.jsonl"), "--scorer", "scripted", "-s", "scores={}",
          "--aggregate", "median"],
         "error: unknown aggregator 'median'; known: first_below, geo_mean, last, mean, min, prod\n"),
        (["label", str(traces), str(tmp_path / "o.jsonl"), "--policy", "nope"],
         "error: unknown policy backend 'nope'; known: ct2, hf, openai_compat, scripted, torch\n"),
    ]:
        r = prmkit(*args, site=None, cwd=tmp_path, ok=False)
        assert (r.returncode, r.stderr) == (1, message), args
    assert not (tmp_path / "o.jsonl").exists()
