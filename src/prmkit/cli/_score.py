"""``prmkit score | select | search``: use a verifier on saved traces, or search with it.

- ``score``: write a PRM's (ORM's) scores into every step of a trace file, and the aggregated trace
  score (re-scoring saved traces is its own stage, so a new PRM never means sampling again);
- ``select``: pick one trace per problem (``bon``, ``weighted``, ``majority``, ``oracle``) and report
  the accuracy of the picks;
- ``search``: step-level beam search or DVTS with a policy and a PRM on the built-in environment or a
  dataset's problems.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from prmkit.errors import PrmkitError

if TYPE_CHECKING:
    from prmkit.scoring._protocol import StepScorer
    from prmkit.trace import Problem, Trace

__all__ = ["score", "select", "search"]

console = Console()

ModelOpt = Annotated[Path | None, typer.Option(
    "--model", help="PRM / ORM checkpoint folder (prmkit train output, or a published PRM).")]
ScorerOpt = Annotated[str, typer.Option(
    "--scorer", help="Scorer backend: model (the --model folder) or scripted (tests).")]
ScorerArgOpt = Annotated[list[str] | None, typer.Option(
    "--scorer-arg", "-s", help="Scorer argument KEY=VALUE, e.g. -s convention=qwen2.5-math-prm or "
    "-s cache=false. Repeatable.")]
AggregateOpt = Annotated[str, typer.Option(
    help="Step scores -> trace score: min, last, prod, mean, geo_mean, first_below:T.")]


def _scorer(model: Path | None, scorer: str, scorer_arg: list[str] | None, batch_size: int) -> StepScorer:
    from prmkit.cli._data import parse_options
    from prmkit.search._scorers import get_scorer

    kwargs = parse_options(scorer_arg)
    if scorer == "model":
        if model is None:
            raise PrmkitError("give the checkpoint folder with --model DIR")
        if not model.exists():
            raise PrmkitError(f"{model}: no such folder")
        kwargs.setdefault("batch_size", batch_size)
        kwargs["path"] = str(model)
    elif model is not None:
        raise PrmkitError(f"--model is for --scorer model, not {scorer!r}")
    return get_scorer(scorer, **kwargs)


def _read(path: Path, fmt: str | None, skip_invalid: bool):
    from prmkit.data._format import read

    if not path.exists():
        raise PrmkitError(f"{path}: no such file")
    return read(path, fmt, skip_invalid=skip_invalid)


def _score_chunk(scorer: StepScorer, traces: list[Trace], key: str, aggregate: str
                 ) -> list[tuple[str, str]]:
    """Score ``traces`` in place; returns ``(trace id, reason)`` for those that could not be."""
    from prmkit.scoring import score_traces

    skipped = [(t.id, "no steps") for t in traces if not t.steps]
    todo = [t for t in traces if t.steps]
    try:
        score_traces(scorer, todo, key, aggregate=aggregate)
    except PrmkitError:
        # One trace the scorer rejects (say, too long for an ORM) must not cost the whole chunk.
        for t in todo:
            try:
                score_traces(scorer, [t], key, aggregate=aggregate)
            except PrmkitError as e:
                skipped.append((t.id, str(e)))
    return skipped


def score(
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Traces (prmkit JSONL or any importable format).")],
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
    from_format: Annotated[str | None, typer.Option("--from", help="Format of IN (detected when omitted).")] = None,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Skip malformed input records instead of failing.")] = False,
) -> None:
    """Score every step of every trace in IN and write them to OUT.

    Example: prmkit score --model out/prm traces.jsonl scored.jsonl --aggregate min
    A PRM's step scores go to step.scores[KEY] and the trace score to meta.scores["KEY:AGGREGATE"];
    an ORM's to meta.scores[KEY]. Traces that cannot be scored are written unchanged and listed.
    """
    from prmkit.trace import TraceWriter

    sc = _scorer(model, scorer, scorer_arg, batch_size)
    key = key or sc.kind
    agg_key = f"{key}:{aggregate}" if sc.kind == "prm" else key
    n, values, skipped = 0, [], []
    traces = iter(_read(inp, from_format, skip_invalid))
    with TraceWriter(out) as w:
        while batch := list(itertools.islice(traces, max(1, chunk))):
            skipped += _score_chunk(sc, batch, key, aggregate)
            for t in batch:
                v = (t.meta.get("scores") or {}).get(agg_key)
                if v is not None:
                    values.append(v)
                w.write(t)
            n += len(batch)
    mean = f"; mean trace score {sum(values) / len(values):.4f}" if values else ""
    console.print(f"{out}: {n} traces, {len(values)} scored by {sc.name} ({sc.kind}, {aggregate})"
                  f"{mean}", highlight=False, soft_wrap=True)
    for trace_id, reason in skipped[:10]:
        console.print(f"[yellow]unscored[/] {trace_id}: {reason}", highlight=False, soft_wrap=True)
    if len(skipped) > 10:
        console.print(f"… and {len(skipped) - 10} more unscored", highlight=False)


def _pick_key(traces: list[Trace], key: str | None) -> str:
    from prmkit.search import score_keys

    if key is not None:
        return key
    keys = score_keys(traces)
    if not keys:
        raise PrmkitError("the traces carry no scores: run prmkit score first, or use --method majority")
    if len(keys) > 1:
        raise PrmkitError(f"the traces carry scores from several scorers ({', '.join(keys)}): pick one "
                          "with --key")
    return keys[0]


def select(
    inp: Annotated[Path, typer.Argument(metavar="IN", help="Scored traces, N per problem.")],
    method: Annotated[str, typer.Option(
        "--method", "-m", help="bon, weighted, majority or oracle (pass@N, a reference).")] = "bon",
    aggregate: AggregateOpt = "min",
    key: Annotated[str | None, typer.Option(
        help="Which stored scores to use (default: the only scorer found).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the chosen trace of every problem here (prmkit JSONL).")] = None,
    from_format: Annotated[str | None, typer.Option("--from", help="Format of IN (detected when omitted).")] = None,
) -> None:
    """Choose one trace per problem and print the accuracy of the choices.

    Example: prmkit select --method weighted --aggregate min scored.jsonl -o chosen.jsonl
    Correctness comes from each trace's outcome (or its answer against the reference answer).
    Majority vote and the oracle are printed beside a scored method for reference.
    """
    from prmkit.search import SELECTORS, select_problems
    from prmkit.search._select import SCORED_METHODS
    from prmkit.trace import TraceWriter

    if method not in SELECTORS:
        raise PrmkitError(f"unknown --method {method!r}; one of {', '.join(SELECTORS)}")
    traces = list(_read(inp, from_format, False))
    if not traces:
        raise PrmkitError(f"{inp}: no traces")
    scored = method in SCORED_METHODS
    if scored:
        key = _pick_key(traces, key)
    report = select_problems(traces, method, aggregate=aggregate, key=key)
    console.print(report.summary() + (f" (scores: {key})" if scored else ""), highlight=False,
                  soft_wrap=True)
    refs = [m for m in ("majority", "oracle") if m != method]
    console.print("reference: " + "; ".join(select_problems(traces, m).summary() for m in refs),
                  highlight=False, soft_wrap=True)
    if out is not None:
        with TraceWriter(out) as w:
            for s in report.selections:
                if s.trace is None:
                    continue
                t = s.trace
                t.meta["selection"] = s.to_dict()
                t.add_provenance("select", method, {"aggregate": s.aggregate, "key": key})
                w.write(t)
        console.print(f"{out}: {w.count} chosen traces", highlight=False, soft_wrap=True)


def _problems(env: str | None, data: Path | None, data_format: str | None, problems: int, start: int,
              steps: str, ops: str, max_operand: int, env_seed: int) -> tuple[list[Problem], Any]:
    """The problems to search on and, for ``arith``, the environment config (for the prompt)."""
    from prmkit.cli._generate import load_problems

    return load_problems(env, data, data_format, problems, start, steps, ops, max_operand, env_seed)


def search(
    out: Annotated[Path, typer.Option("--out", "-o", help="The answer trace of every problem (prmkit JSONL).")],
    method: Annotated[str, typer.Option("--method", "-m", help="beam or dvts.")] = "beam",
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    env: Annotated[str | None, typer.Option(help="Built-in environment: arith.")] = None,
    data: Annotated[Path | None, typer.Option(help="A dataset file of problems with reference answers.")] = None,
    data_format: Annotated[str | None, typer.Option("--data-format", help="Format of --data.")] = None,
    problems: Annotated[int, typer.Option(help="How many problems.")] = 20,
    start: Annotated[int, typer.Option(help="Index of the first problem.")] = 0,
    steps: Annotated[str, typer.Option(help="arith: operations per problem, N or MIN-MAX (1-6).")] = "3",
    ops: Annotated[str, typer.Option(help="arith: operations to draw from.")] = "+-*",
    max_operand: Annotated[int, typer.Option(help="arith: largest number in a problem.")] = 20,
    env_seed: Annotated[int, typer.Option(help="arith: which problem set.")] = 0,
    policy: Annotated[str | None, typer.Option(
        help="Backend: ct2, hf, openai_compat, scripted (default: ct2 where ctranslate2 is installed, "
             "else hf).")] = None,
    policy_arg: Annotated[list[str] | None, typer.Option(
        "--policy-arg", "-p", help="Policy argument KEY=VALUE (repeatable).")] = None,
    beam_width: Annotated[int, typer.Option(help="beam: paths kept per round.")] = 4,
    expansions: Annotated[int, typer.Option(help="beam: next steps sampled per kept path.")] = 4,
    n: Annotated[int, typer.Option("-n", "--n", help="dvts: steps sampled per round (the budget).")] = 16,
    m: Annotated[int, typer.Option("--m", help="dvts: expansions per subtree (n/m subtrees).")] = 4,
    lookahead: Annotated[int, typer.Option(help="Greedy steps rolled out before scoring a candidate.")] = 0,
    max_depth: Annotated[int, typer.Option(help="Most steps per path.")] = 10,
    aggregate: Annotated[str, typer.Option(
        help="Path score from step scores: last (search-and-learn), min, prod, ...")] = "last",
    select_method: Annotated[str, typer.Option(
        "--select", help="dvts: choose among subtrees by bon or weighted.")] = "bon",
    step_tokens: Annotated[int, typer.Option(help="Longest step, in tokens.")] = 64,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the expansions.")] = 0.7,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling mass.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Sampling seed (per problem and path).")] = 0,
    shots: Annotated[int | None, typer.Option(
        help="Worked examples in the prompt (default: 0 for the tuned default policy, else 2).")] = None,
    batch_size: Annotated[int, typer.Option(help="Scorer (and hf policy) sequences per batch.")] = 8,
) -> None:
    """Search for a solution to each problem, step by step, guided by a PRM.

    Example: prmkit search --env arith --problems 20 --method dvts -n 16 --m 4 --model out/prm -o found.jsonl
    Prints the accuracy and the tokens generated and scored per problem (compare methods at equal
    compute); every answer trace records its search in meta.search.
    """
    from prmkit.cli._generate import load_policy
    from prmkit.envs._prompts import PromptBuilder
    from prmkit.search import SEARCHES
    from prmkit.search import search as run_search
    from prmkit.search._common import is_correct
    from prmkit.trace import TraceWriter

    if method not in SEARCHES:
        raise PrmkitError(f"unknown --method {method!r}; one of {', '.join(SEARCHES)}")
    items, cfg = _problems(env, data, data_format, problems, start, steps, ops, max_operand, env_seed)
    sc = _scorer(model, scorer, scorer_arg, batch_size)
    pol = load_policy(policy, policy_arg, batch_size if policy == "hf" else None)
    prompts = PromptBuilder.for_policy(pol, config=cfg, source=data_format, shots=shots)
    settings: dict[str, Any] = {"lookahead": lookahead, "max_depth": max_depth, "aggregate": aggregate,
                                "step_tokens": step_tokens, "temperature": temperature, "top_p": top_p,
                                "seed": seed}
    if method == "beam":
        settings.update(beam_width=beam_width, expansions=expansions)
    elif method == "dvts":
        settings.update(n=n, m=m, select=select_method)
    right, judged, generated, scored = 0, 0, 0, 0
    with TraceWriter(out) as w:
        for p in items:
            r = run_search(method, p, pol, sc, prompts, **settings)
            w.write(r.trace)
            ok = is_correct(r.trace)
            judged += ok is not None
            right += bool(ok)
            generated += r.generated_tokens
            scored += r.scored_tokens
    k = max(1, len(items))
    acc = f"{right / judged:.1%} on {judged} problems" if judged else "n/a"
    console.print(f"{out}: {method} accuracy {acc}; per problem {generated / k:.0f} tokens generated, "
                  f"{scored / k:.0f} scored", highlight=False, soft_wrap=True)
