"""The command line's shared options (issue 46, item 4).

- One command line serves several methods (``prmkit label --method``, ``prmkit search --method``),
  and an option the chosen method does not take is refused, naming it and what the method does
  take, before any work; an option left at its default is no choice, and is never refused.
"""

from __future__ import annotations

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
