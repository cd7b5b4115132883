"""``prmkit score | select | search``: use a verifier on saved traces, or search with it.

- ``score``: write a PRM's (ORM's) scores into every step of a trace file, and the aggregated trace
  score (re-scoring saved traces is its own stage, so a new PRM never means sampling again);
- ``select``: pick one trace per problem (``bon``, ``weighted``, ``majority``, ``oracle``) and report
  the accuracy of the picks;
- ``search``: step-level beam search, DVTS or MCTS with a policy and a PRM on the built-in environment or a
  dataset's problems.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from prmkit.cli._data import parse_options, print_skipped
from prmkit.cli._help import check_aggregator, names
from prmkit.cli._options import (
    AggregateOpt,
    AllowPickleOpt,
    EnvOpt,
    EnvSeedOpt,
    InFormatOpt,
    MaxOperandOpt,
    ModelOpt,
    OpsOpt,
    OverwriteOpt,
    PolicyArgOpt,
    PolicyOpt,
    ProblemsOpt,
    ScorerArgOpt,
    ScorerOpt,
    ShotsOpt,
    SkipInvalidOpt,
    StartOpt,
    StepsOpt,
    given_options,
)
from prmkit.cli._paths import input_files, output_file
from prmkit.scoring import AGGREGATORS
from prmkit.search import SEARCHES, SELECTORS

if TYPE_CHECKING:
    from prmkit.scoring import StepScorer

__all__ = ["score", "select", "search", "load_scorer_opts"]

console = Console()

def load_scorer_opts(model: Path | None, scorer: str, scorer_arg: list[str] | None, batch_size: int,
                     allow_pickle: bool = False) -> StepScorer:
    """The ``--model`` / ``--scorer`` / ``-s`` / ``--allow-pickle`` options as a scorer (shared by
    score, search, eval)."""
    from prmkit.scoring import load_scorer

    return load_scorer(scorer, model, parse_options(scorer_arg), batch_size=batch_size,
                       allow_pickle=allow_pickle)


def _say(lines: list[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def score(
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Traces (prmkit JSONL or any importable format).",
                                        callback=input_files)],
    out: Annotated[Path, typer.Argument(metavar="OUT", help="Scored traces (prmkit JSONL).")],
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    batch_size: Annotated[int, typer.Option(help="Sequences per forward pass.")] = 8,
    aggregate: AggregateOpt = "min",
    key: Annotated[str | None, typer.Option(
        help="Name the scores are stored under (default: prm or orm).")] = None,
    chunk: Annotated[int, typer.Option(help="Traces per scorer call (problems' N samples together "
                                            "share their prompt).")] = 256,
    from_format: InFormatOpt = None,
    skip_invalid: SkipInvalidOpt = False,
    allow_pickle: AllowPickleOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Score every step of every trace in IN and write them to OUT.

    Example: prmkit score --model runs/prm traces.jsonl scored.jsonl --aggregate min
    A PRM's step scores go to step.scores[KEY] and the trace score to meta.scores["KEY:AGGREGATE"];
    an ORM's to meta.scores[KEY]. Traces that cannot be scored are written unchanged and listed.
    """
    from prmkit.scoring import score_file

    output_file(out, overwrite)
    report = score_file(inp, out, load_scorer_opts(model, scorer, scorer_arg, batch_size, allow_pickle),
                        key=key,
                        aggregate=aggregate, chunk=chunk, fmt=from_format, skip_invalid=skip_invalid)
    _say(report.lines())
    if skip_invalid:
        from prmkit.data import ImportReport, scan

        # score_file counts what it skipped but keeps no list: one more read (no model) names them.
        print_skipped(scan(inp, from_format) if report.invalid else ImportReport(), out, overwrite=overwrite)


def select(
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Scored traces, N per problem.",
                                        callback=input_files)],
    method: Annotated[str, typer.Option(
        "--method", "-m", help=f"Selection method: {names(SELECTORS)} (oracle: pass@N, a reference).")
    ] = "bon",
    aggregate: AggregateOpt = "min",
    key: Annotated[str | None, typer.Option(
        help="Which stored scores to use (default: the only scorer found).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the chosen trace of every problem here (prmkit JSONL).")] = None,
    from_format: InFormatOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Choose one trace per problem and print the accuracy of the choices.

    Example: prmkit select --method weighted --aggregate min scored.jsonl -o chosen.jsonl
    Correctness comes from each trace's outcome (or its answer against the reference answer).
    Majority vote and the oracle are printed beside a scored method for reference. A majority tie
    goes to the answer that comes first in IN (sample order); the problems tied are counted. An
    ORM's key (--key orm) selects by its trace scores as they are (no --aggregate).
    """
    from prmkit.search import select_file

    output_file(out, overwrite)
    _say(select_file(inp, method=method, aggregate=aggregate, key=key, out=out, fmt=from_format).lines())


#: The command's parameters that are search settings (parameter -> the search's name for it).
_SEARCH_OPTIONS = {"beam_width": "beam_width", "expansions": "expansions", "n": "n", "m": "m",
                   "select_method": "select", "lookahead": "lookahead", "max_depth": "max_depth",
                   "aggregate": "aggregate", "step_tokens": "step_tokens", "temperature": "temperature",
                   "top_p": "top_p", "seed": "seed",
                   "simulations": "simulations", "c_puct": "c_puct", "rollout_weight": "rollout_weight",
                   "answer": "answer"}


def search(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", "-o", help="The answer trace of every problem (prmkit JSONL).")],
    method: Annotated[str, typer.Option("--method", "-m", help=f"Search strategy: {names(SEARCHES)}.")
                      ] = "beam",
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    env: EnvOpt = None,
    data: Annotated[Path | None, typer.Option(help="A dataset file of problems with reference answers.",
                                              callback=input_files)] = None,
    data_format: Annotated[str | None, typer.Option("--data-format", help="Format of --data.")] = None,
    problems: ProblemsOpt = 20,
    start: StartOpt = 0,
    steps: StepsOpt = "3",
    ops: OpsOpt = "+-*",
    max_operand: MaxOperandOpt = 20,
    env_seed: EnvSeedOpt = 0,
    policy: PolicyOpt = None,
    policy_arg: PolicyArgOpt = None,
    beam_width: Annotated[int, typer.Option(help="beam: paths kept per round.")] = 4,
    expansions: Annotated[int, typer.Option(help="beam: next steps sampled per kept path; mcts: children per expanded node.")] = 4,
    n: Annotated[int, typer.Option("-n", "--n", help="dvts: steps sampled per round (the budget).")] = 16,
    m: Annotated[int, typer.Option("--m", help="dvts: expansions per subtree (n/m subtrees).")] = 4,
    simulations: Annotated[int, typer.Option(help="mcts: simulations (each expands at most one node).")] = 16,
    c_puct: Annotated[float, typer.Option("--c-puct", help="mcts: PUCT exploration weight.")] = 1.0,
    rollout_weight: Annotated[float, typer.Option(
        help="mcts: weight of a greedy rollout's outcome in a node's value (0: PRM only).")] = 0.0,
    answer: Annotated[str, typer.Option(
        help="mcts: the answer is the most-visited path (visits) or the best-valued ended node (value).")
    ] = "visits",
    lookahead: Annotated[int, typer.Option(help="Greedy steps rolled out before scoring a candidate.")] = 0,
    max_depth: Annotated[int, typer.Option(help="Most steps per path.")] = 10,
    aggregate: Annotated[str, typer.Option(
        help=f"Path score from step scores (search-and-learn's: last): {names(AGGREGATORS)}.",
        callback=check_aggregator)] = "last",
    select_method: Annotated[str, typer.Option(
        "--select", help="dvts: choose among subtrees by bon or weighted.")] = "bon",
    step_tokens: Annotated[int, typer.Option(help="Longest step, in tokens.")] = 64,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the expansions.")] = 0.7,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling mass.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Sampling seed (per problem and path).")] = 0,
    shots: ShotsOpt = None,
    batch_size: Annotated[int, typer.Option(help="Scorer (and hf policy) sequences per batch.")] = 8,
    allow_pickle: AllowPickleOpt = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Search for a solution to each problem, step by step, guided by a PRM.

    Example: prmkit search --env arith --problems 20 --method dvts -n 16 --m 4 --model runs/prm -o found.jsonl
    Prints the accuracy and the tokens generated and scored per problem (compare methods at equal
    compute); every answer trace records its search in meta.search. An option of another method
    (-n with --method beam) is refused, naming it. An interrupted run resumes: rerun the same command
    and the problems it finished are not searched again (--overwrite starts afresh).
    """
    from prmkit.generate import load_problems
    from prmkit.policies import load_policy
    from prmkit.search import check_search_settings, search_file

    output_file(out, overwrite)
    check_search_settings(method, *given_options(ctx, _SEARCH_OPTIONS))  # before loading anything
    items, cfg = load_problems(env=env, data=data, data_format=data_format, n=problems, start=start,
                               steps=steps, ops=ops, max_operand=max_operand, env_seed=env_seed)
    report = search_file(out, items, load_policy(policy, parse_options(policy_arg), batch_size=batch_size),
                         load_scorer_opts(model, scorer, scorer_arg, batch_size, allow_pickle), method=method,
                         arith_config=cfg, source=data_format, shots=shots, beam_width=beam_width,
                         expansions=expansions, n=n, m=m, select=select_method, lookahead=lookahead,
                         max_depth=max_depth, aggregate=aggregate, step_tokens=step_tokens,
                         temperature=temperature, top_p=top_p, seed=seed,
                         simulations=simulations, c_puct=c_puct, rollout_weight=rollout_weight, answer=answer,
                         restart=overwrite)
    _say(report.lines())
