"""``prmkit eval processbench | prmbench | bon | probes`` and ``prmkit report``.

Each ``eval`` command prints its numbers and, with ``--json FILE``, writes them as one report section
(``{"processbench": {...}}`` …); ``prmkit report`` merges such files into the Markdown / HTML / JSON
report with the process-supervision card.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from prmkit.cli._score import AggregateOpt, ModelOpt, ScorerArgOpt, ScorerOpt, _read, _score_chunk, _scorer
from prmkit.errors import PrmkitError

if TYPE_CHECKING:
    from prmkit.scoring._protocol import StepScorer
    from prmkit.trace import Trace

__all__ = ["app", "report"]

console = Console()
app = typer.Typer(help="Evaluate a PRM: ProcessBench, PRMBench, best-of-N curves, failure-mode probes.",
                  no_args_is_help=True)

KeyOpt = Annotated[str, typer.Option(help="Score key: step.scores[KEY] (scored here or already stored).")]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="Write the numbers to this JSON file "
                                                             "(a report section; see prmkit report).")]
BatchOpt = Annotated[int, typer.Option(help="Sequences per forward pass.")]


def _echo(lines: list[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def _save(section: str, data: dict[str, Any], path: Path | None) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({section: data}, indent=2, sort_keys=True) + "\n")
    console.print(f"wrote {path}", highlight=False)


def _prm(model: Path | None, scorer: str, scorer_arg: list[str] | None, batch_size: int,
         what: str) -> StepScorer | None:
    """The PRM to score with (loaded once per command), or None: use the scores the traces carry."""
    if model is None and scorer == "model":
        return None
    sc = _scorer(model, scorer, scorer_arg, batch_size)
    if sc.kind != "prm":
        raise PrmkitError(f"{what} needs a PRM (per-step scores); {sc.name} is an {sc.kind.upper()}")
    return sc


def _scored(traces: list[Trace], sc: StepScorer | None, key: str, what: str,
            aggregate: str = "min") -> list[Trace]:
    """Score ``traces`` under ``key`` with ``sc``, or (None) check they already carry scores."""
    from prmkit._progress import progress_bar

    if sc is None:
        if not any(key in s.scores for t in traces for s in t.steps):
            raise PrmkitError(f"{what}: the traces carry no step scores under {key!r}; give the PRM "
                              f"with --model DIR (or score them first with prmkit score)")
        return traces
    skipped: list[tuple[str, str]] = []
    chunk = 64
    with progress_bar(len(traces), f"scoring ({what})", transient=False) as advance:
        for i in range(0, len(traces), chunk):
            skipped += _score_chunk(sc, traces[i:i + chunk], key, aggregate)
            advance(len(traces[i:i + chunk]))
    if skipped:
        console.print(f"[yellow]{len(skipped)} traces could not be scored[/] (first: "
                      f"{skipped[0][0]}: {skipped[0][1]})", highlight=False, soft_wrap=True)
    return traces


@app.command("processbench")
def processbench(
    files: Annotated[list[Path], typer.Argument(help="ProcessBench split files (gsm8k.json, math.json, "
                                                     "…); the split name is the file stem.")],
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    key: KeyOpt = "prm",
    threshold: Annotated[float | None, typer.Option(
        help="Fixed step threshold (a step scoring below it is the predicted first error). Default "
             "0.5 unless --tune-on or --cross-split chooses one.")] = None,
    tune_on: Annotated[list[Path] | None, typer.Option(
        "--tune-on", help="Choose the threshold by a sweep on these split files (never reported).")] = None,
    cross_split: Annotated[bool, typer.Option(
        "--cross-split", help="Each split's threshold is chosen on the other given splits.")] = False,
    limit: Annotated[int | None, typer.Option(help="Only the first N samples of each file.")] = None,
    by_generator: Annotated[bool, typer.Option(
        "--by-generator", help="Also print each split's results per generator (always in --json).")] = False,
    batch_size: BatchOpt = 8,
    json_out: JsonOpt = None,
) -> None:
    """ProcessBench: accuracy on erroneous and on error-free samples, their F1, and the mean F1.

    Example: prmkit eval processbench ../shared/data/processbench/gsm8k.json --model runs/demo/prm
    """
    from prmkit.eval._processbench import evaluate_processbench

    sc = _prm(model, scorer, scorer_arg, batch_size, "processbench")

    def load(paths: list[Path]) -> dict[str, list[Trace]]:
        out: dict[str, list[Trace]] = {}
        for p in paths:
            name = p.stem
            if name in out:
                raise PrmkitError(f"two split files are named {name!r}; rename one")
            traces = list(_read(p, "processbench", False))[:limit]
            out[name] = _scored(traces, sc, key, f"processbench {name}")
        return out

    splits = load(files)
    tune = load(tune_on) if tune_on else None
    result = evaluate_processbench(splits, key=key, threshold=threshold, tune_on=tune,
                                   cross_split=cross_split)
    _echo(result.lines(by_generator=by_generator))
    _save("processbench", result.to_dict(), json_out)


@app.command("prmbench")
def prmbench(
    files: Annotated[list[Path], typer.Argument(help="PRMBench JSONL files (one per error class, or the "
                                                     "combined file).")],
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    key: KeyOpt = "prm",
    threshold: Annotated[float, typer.Option(help="A step scoring at or above it is predicted correct.")] = 0.5,
    out_of_range: Annotated[str, typer.Option(
        help="Rows whose error_steps point past the last step: exclude (default) or in_range (keep, "
             "score the steps in range). Counted either way.")] = "exclude",
    limit: Annotated[int | None, typer.Option(help="Only the first N rows of each file.")] = None,
    batch_size: BatchOpt = 8,
    json_out: JsonOpt = None,
) -> None:
    """PRMBench: PRMScore (mean of the F1 of correct and of wrong steps) per error class and overall.

    Example: prmkit eval prmbench ../shared/data/prmbench/prm800k_test_p1_4o_*.jsonl --model runs/demo/prm
    """
    from prmkit.eval._prmbench import evaluate_prmbench

    traces: list[Trace] = []
    for p in files:
        traces += list(_read(p, "prmbench", False))[:limit]
    traces = _scored(traces, _prm(model, scorer, scorer_arg, batch_size, "prmbench"), key, "prmbench")
    result = evaluate_prmbench(traces, key=key, threshold=threshold, out_of_range=out_of_range)
    _echo(result.lines())
    _save("prmbench", result.to_dict(), json_out)


@app.command("bon")
def bon(
    inp: Annotated[Path, typer.Argument(metavar="SCORED", help="Scored traces (prmkit score output), N per "
                                                              "problem, with outcomes.")],
    prm_key: Annotated[str, typer.Option(help="Step-score key of the PRM.")] = "prm",
    orm_key: Annotated[str, typer.Option(help="Trace-score key of the ORM (meta.scores).")] = "orm",
    label_source: Annotated[str | None, typer.Option(
        help="Step labels for the step metrics (default: each step's latest).")] = None,
    threshold: Annotated[float, typer.Option(help="Step threshold for the step F1.")] = 0.5,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap replicates for the 95% intervals.")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    json_out: JsonOpt = None,
) -> None:
    """Best-of-N curves (PRM with each aggregator, ORM, majority, weighted, random, pass@N) with
    bootstrap 95% intervals, and step metrics (AUROC, F1, calibration) where steps carry labels.

    Example: prmkit eval bon scored.jsonl --json runs/bon.json
    """
    from prmkit.eval._bon import bon_curves, default_methods
    from prmkit.eval._stepmetrics import step_metrics_for
    from prmkit.eval._summary import bon_verdict

    traces = list(_read(inp, None, False))
    methods = default_methods(traces, prm_key=prm_key, orm_key=orm_key)
    names = [m.name for m in methods]
    main = "PRM (min)" if "PRM (min)" in names else None
    comparisons = [(main, r) for r in ("ORM", "majority") if main and r in names]
    result = bon_curves(traces, methods, bootstrap=bootstrap, seed=seed, comparisons=comparisons)
    _echo(result.lines())
    sections: dict[str, Any] = {"bon": result.to_dict()}
    if any(prm_key in s.scores for t in traces for s in t.steps):
        sm = step_metrics_for(traces, key=prm_key, label_source=label_source, threshold=threshold)
        sections["step_metrics"] = {prm_key: sm.to_dict()}
        d = sm.to_dict()
        console.print(f"step metrics ({prm_key}): AUROC {_f(d['auroc'])}  F1(error) {_f(d['f1_error'])}  "
                      f"ECE {_f(d['ece'])}  on {d['n']} labelled steps", highlight=False)
    if main:
        sections["summary"] = bon_verdict(sections["bon"], main, [r for _, r in comparisons])
        console.print(sections["summary"]["verdict"], highlight=False, soft_wrap=True)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(sections, indent=2, sort_keys=True) + "\n")
        console.print(f"wrote {json_out}", highlight=False)


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


@app.command("probes")
def probes(
    inp: Annotated[Path, typer.Argument(metavar="TRACES", help="Labelled traces (in-domain), N per problem.")],
    model: ModelOpt = None,
    scorer: ScorerOpt = "model",
    scorer_arg: ScorerArgOpt = None,
    label_source: Annotated[str | None, typer.Option(help="Step labels to use (default: latest).")] = None,
    transfer: Annotated[list[Path] | None, typer.Option(
        help="A second data source (labelled traces in any format) for the domain-transfer probe. "
             "Repeatable.")] = None,
    transfer_gsm8k: Annotated[Path | None, typer.Option(
        help="Build the second source from a GSM8K file's reference solutions (one corrupted step "
             "each for half of them).")] = None,
    transfer_limit: Annotated[int, typer.Option(help="Problems taken from --transfer-gsm8k.")] = 50,
    gaming_traces: Annotated[int, typer.Option(help="Traces the gaming probe perturbs.")] = 64,
    aggregate: AggregateOpt = "min",
    batch_size: BatchOpt = 8,
    seed: Annotated[int, typer.Option(help="Seed of the perturbations.")] = 0,
    json_out: JsonOpt = None,
) -> None:
    """Failure-mode probes: process collapse, verifier gaming, length bias, domain transfer.

    Example: prmkit eval probes runs/demo/heldout.jsonl --model runs/demo/prm --transfer-gsm8k gsm8k/test.jsonl
    """
    from prmkit.eval._derived import gsm8k_derived_traces
    from prmkit.eval._probes import collapse_probe, gaming_probe, length_bias_probe, transfer_probe

    sc = _prm(model, scorer, scorer_arg, batch_size, "the probes")
    if sc is None:
        raise PrmkitError("the probes score perturbed traces: give the PRM with --model DIR")
    traces = list(_read(inp, None, False))
    key = "probe"
    _scored(traces, sc, key, "probes", aggregate)
    res: dict[str, Any] = {
        "collapse": collapse_probe(traces, key=key, label_source=label_source).to_dict(),
        "gaming": gaming_probe(sc, [t for t in traces if t.steps][:gaming_traces], seed=seed).to_dict(),
        "length_bias": length_bias_probe(traces, key=key, aggregate=aggregate).to_dict(),
    }
    sources: dict[str, list[Trace]] = {}
    for p in transfer or []:
        sources[p.stem] = list(_read(p, None, False))
    if transfer_gsm8k is not None:
        sources["gsm8k (derived)"] = gsm8k_derived_traces(transfer_gsm8k, limit=transfer_limit, seed=seed)
    if sources:
        name = inp.stem
        # The given label source is the in-domain traces'; other sources use their own labels.
        res["transfer"] = transfer_probe(sc, {name: traces, **sources}, in_domain=name, key=key,
                                         label_source={name: label_source}).to_dict()
    for probe, d in res.items():
        verdict = "FAILED" if d.get("failed") else "passed"
        console.print(f"{probe}: {verdict} — {d.get('criterion', '')}", highlight=False, soft_wrap=True)
    _save("probes", res, json_out)


def report(
    results: Annotated[list[Path], typer.Argument(help="JSON files written by prmkit eval … --json (or a "
                                                       "demo's report.json); later files win per section.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder.")] = Path("runs/report"),
    traces: Annotated[list[Path] | None, typer.Option(
        "--traces", help="Trace files whose provenance fills the process-supervision card. Repeatable.")] = None,
    model_dir: Annotated[list[Path] | None, typer.Option(
        "--model-dir", help="PRM / ORM checkpoint folders for the card. Repeatable.")] = None,
    card: Annotated[list[str] | None, typer.Option(
        "--card", help="FIELD=VALUE for what provenance cannot know (e.g. deployment_monitor=none). "
                       "Repeatable.")] = None,
    title: Annotated[str | None, typer.Option(help="Report title.")] = None,
) -> None:
    """Merge evaluation results into report.md, a self-contained report.html and report.json.

    Example: prmkit report pb.json bon.json probes.json --traces scored.jsonl --model-dir runs/prm -o runs/report
    """
    from prmkit.eval._card import card_from_provenance
    from prmkit.eval._report import load_results, write_report

    for p in results:
        if not p.exists():
            raise PrmkitError(f"{p}: no such file")
    warnings: list[str] = []
    merged = load_results(results, warnings=warnings)
    for w in warnings:
        console.print(f"[yellow]{w}[/]", highlight=False, soft_wrap=True)
    overrides: dict[str, str] = {}
    for pair in card or []:
        k, sep, v = pair.partition("=")
        if not sep:
            raise PrmkitError(f"--card expects FIELD=VALUE, got {pair!r}")
        overrides[k.strip()] = v.strip()
    loaded: list[Trace] = []
    for p in traces or []:
        loaded += list(_read(p, None, False))
    if loaded or model_dir or overrides or "card" not in merged:
        merged["card"] = card_from_provenance(traces=loaded, model_dirs=model_dir or [],
                                              results=merged, overrides=overrides).to_dict()
    paths = write_report(merged, out, title=title)
    for kind, path in paths.items():
        console.print(f"{kind}: {path}", highlight=False, soft_wrap=True)
