"""The command line's shared options (issue 46, item 4).

- One command line serves several methods (``prmkit label --method``, ``prmkit search --method``),
  and an option the chosen method does not take is refused, naming it and what the method does
  take, before any work; an option left at its default is no choice, and is never refused.
- An option several command modules use is defined once, in ``prmkit/cli/_options.py``.
- A help that lists registered names (monitors, organisms, selectors, searches, ...) takes them from
  the registry, so an installed plugin's name shows up.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from prmkit.cli import main
from prmkit.errors import PrmkitError
from prmkit.labelers import build_labeler
from prmkit.search import check_search_settings
from prmkit.trace import Problem, Step, Trace, read_traces, write_traces

SCRIPTED_POLICY = ["--policy", "scripted", "-p", 'completions=["The answer is 4."]']
SEARCH = ["search", "--env", "arith", "--problems", "1", "--max-depth", "1", *SCRIPTED_POLICY,
          "--scorer", "scripted", "-s", "scores={}"]


def _fails(capsys, argv: list) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    return exc.value.code, capsys.readouterr().err


@pytest.fixture()
def traces(tmp_path):
    path = tmp_path / "in.jsonl"
    write_traces([Trace(id="t", problem=Problem("2 + 2?", answer="4"),
                        steps=[Step("2 + 2 = 4."), Step("The answer is 4.")])], path)
    return path


# -- an option the method does not take -------------------------------------------------------------

def test_label_refuses_an_option_its_labeler_does_not_take(tmp_path, capsys, traces):
    out = tmp_path / "out.jsonl"
    assert _fails(capsys, ["label", "-m", "symbolic", "-k", "8", traces, out]) == (
        1, "error: --k / -k is not an option of the symbolic labeler (it takes none of the shared "
           "options)\n")
    code, err = _fails(capsys, ["label", "-m", "judge", *SCRIPTED_POLICY, "-k", "2", "--max-rollouts", "3",
                                "--seed", "1", traces, out])
    assert code == 1 and err.startswith(
        "error: --k / -k, --max-rollouts are not options of the judge labeler (it takes: --policy, "
        "--policy-arg / -p, --judge-policy, --judge-arg / -j, --retries, ") and err.count("\n") == 1
    assert not out.exists() and not (tmp_path / "out.jsonl.labels.sqlite").exists()
    main(["label", "-m", "symbolic", str(traces), str(out), "--no-progress"])  # without -k: it runs
    assert next(read_traces(out)).labels("symbolic") != [None, None]


def test_the_spec_labeler_takes_the_judge_options_it_hands_to_the_judge():
    # Its **judge_args go to the judge labeler: --retries and --judge-temperature were dropped before.
    spec = build_labeler("spec", {"policy": "scripted", "retries": 5, "judge_temperature": 0.3},
                         given=["policy", "retries", "judge_temperature"])
    assert (spec.args["retries"], spec.channels["judge"].params.temperature) == (5, 0.3)
    with pytest.raises(PrmkitError, match=r"^k is not an option of the spec labeler \(it takes: policy, "
                                          r"policy_args, judge_policy, judge_args, retries, "):
        build_labeler("spec", {"policy": "scripted", "k": 3}, given=["k"])
    # Not given (the Python API's one dict for every method): left out, as before.
    assert "k" not in build_labeler("spec", {"policy": "scripted", "k": 3}).args


def test_search_refuses_an_option_of_another_method_before_loading_anything(tmp_path, capsys):
    out = tmp_path / "found.jsonl"
    # --policy nope would fail when loaded: the refusal comes first.
    assert _fails(capsys, [*SEARCH, "--policy", "nope", "-m", "beam", "-n", "8", "-o", out]) == (
        1, "error: --n / -n is not an option of the beam search (it takes: --beam-width, --expansions, "
           "--max-depth, --lookahead, --aggregate, --step-tokens, --temperature, --top-p, --seed)\n")
    # Given explicitly, even at its default value, it is a choice the method cannot honour.
    code, err = _fails(capsys, [*SEARCH, "-m", "dvts", "--beam-width", "4", "--expansions", "4", "-o", out])
    assert code == 1 and err.startswith("error: --beam-width, --expansions are not options of the dvts "
                                        "search (it takes: --n / -n, --m, --select, --max-depth, ")
    assert not out.exists()
    main([*SEARCH, "-m", "dvts", "-n", "4", "--m", "2", "-o", str(out)])  # beam's defaults: no choice
    assert next(read_traces(out)).meta["search"]["method"] == "dvts"


def test_check_search_settings_names_them_in_the_callers_terms():
    with pytest.raises(PrmkitError, match=r"^n is not an option of the beam search \(it takes: beam_width, "
                                          r"expansions, max_depth, .*, seed, label\)$"):
        check_search_settings("beam", ["beam_width", "n"])
    check_search_settings("dvts", ["n", "m", "select", "seed"])
    with pytest.raises(PrmkitError, match=r"unknown search method 'bfs'; one of beam, dvts"):
        check_search_settings("bfs", [])


# -- one definition of each shared option -----------------------------------------------------------

CLI = Path(__file__).resolve().parents[1] / "src" / "prmkit" / "cli"


def _aliases(path: Path) -> tuple[set[str], set[str]]:
    """(option aliases ``XOpt = Annotated[...]`` a module defines, ``...Opt`` names it uses)."""
    tree = ast.parse(path.read_text())
    defined = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
               if isinstance(t, ast.Name) and t.id.endswith("Opt")}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id.endswith("Opt")}
    used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names
             if a.name.endswith("Opt")}
    return defined, used


def test_an_option_several_command_modules_use_is_defined_once_in_options():
    defined_in, used_by = defaultdict(set), defaultdict(set)
    for path in sorted(CLI.glob("*.py")):
        defined, used = _aliases(path)
        for name in defined:
            defined_in[name].add(path.name)
        for name in used - defined:
            used_by[name].add(path.name)
    twice = {name: sorted(where) for name, where in defined_in.items() if len(where) > 1}
    assert not twice, f"option aliases defined in more than one module: {twice}"
    shared_elsewhere = {name: sorted(used_by[name]) for name, where in defined_in.items()
                        if used_by[name] and where != {"_options.py"}}
    assert not shared_elsewhere, f"option aliases shared from a command module (move them to _options.py): " \
                                 f"{shared_elsewhere}"
    assert {"MonitorOpt", "ModelOpt", "ScorerOpt", "PolicyArgOpt", "InFormatOpt"} <= {
        name for name, where in defined_in.items() if where == {"_options.py"}}


def test_the_alias_check_sees_a_second_definition(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from prmkit.cli._options import MonitorOpt\nKeyOpt = 1\ndef f(a: MonitorOpt, b: KeyOpt): ...\n")
    assert _aliases(src) == ({"KeyOpt"}, {"MonitorOpt", "KeyOpt"})


# -- help from the registries -----------------------------------------------------------------------

HELPS = """
import sys
from prmkit.cli import main
for argv in (["monitor"], ["eval", "monitor"], ["agent", "run"], ["select"], ["search"]):
    print("===", " ".join(argv))
    try:
        main([*argv, "--help"])
    except SystemExit:
        pass
"""


def _helps(site: Path | None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", HELPS], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return {part.split("\n", 1)[0]: part for part in r.stdout.split("=== ")[1:]}


def test_help_lists_the_registered_names_a_plugin_included(tmp_path):
    """A distribution's entry points (a dist-info folder on the path, as pip leaves one) add a name to
    the monitors, organisms, selectors and searches; each command's help lists it."""
    info = tmp_path / "prmkit_help_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: prmkit-help-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[prmkit.monitors]\nplugmon = prmkit_help_plugin:Monitor\n\n"
        "[prmkit.organisms]\nplugorg = prmkit_help_plugin:organism\n\n"
        "[prmkit.selectors]\nplugsel = prmkit_help_plugin:select\n\n"
        "[prmkit.searches]\nplugsearch = prmkit_help_plugin:search\n")
    plain, plugged = _helps(None), _helps(tmp_path)
    assert "A monitor: rule, prm, judge (NAME:ARG" in plain["monitor"]  # the built-ins, in order
    for command, listed in [("monitor", "A monitor: rule, prm, judge, plugmon (NAME:ARG"),
                            ("eval monitor", "A monitor: rule, prm, judge, plugmon (NAME:ARG"),
                            ("agent run", "exploit_obfuscated, plugorg, or all"),
                            ("agent run", "each submit (a flag stops the episode): rule, prm, judge, plugmon"),
                            ("select", "Selection method: bon, weighted, majority, oracle, plugsel"),
                            ("search", "Search strategy: beam, dvts, mcts, plugsearch.")]:
        assert listed in plugged[command], command
        assert listed not in plain[command], command
