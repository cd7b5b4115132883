"""File-level entry points of the evaluation stage: what ``prmkit eval ...`` and ``prmkit report``
call, one function per command.

Each reads trace files, scores them with the PRM where one is given (a trace the scorer rejects is
reported and left unscored; without a PRM the stored scores are used), runs one evaluation and
returns its result; :func:`save_section` writes a result as one report section (atomically), and
:func:`report_files` merges such sections into the report with the process-supervision card.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prmkit._durable import write_text_file
from prmkit.data import detect_format, read
from prmkit.errors import PrmkitError
from prmkit.eval._card import card_from_provenance
from prmkit.eval._derived import gsm8k_derived_traces
from prmkit.eval._prmbench import PRMBenchResult, evaluate_prmbench, prmbench_with_originals
from prmkit.eval._processbench import ProcessBenchResult, evaluate_processbench
from prmkit.eval._report import load_results, write_report
from prmkit.eval._results import EvalResults, ProbesSection, StepMetricsSection, as_results
from prmkit.eval._stepmetrics import step_metrics_for
from prmkit.eval._summary import BonReport, bon_report
from prmkit.eval.probes._base import probes_read_scores, run_probes
from prmkit.scoring import StepScorer, score_traces_or_skip
from prmkit.trace import Trace

__all__ = ["Scored", "score_for_eval", "processbench_files", "prmbench_files", "bon_file", "probes_file",
           "report_files", "save_section", "parse_card_overrides"]


@dataclass
class Scored:
    """Traces ready for an evaluation, and the ones the scorer could not score (id, reason)."""

    traces: list[Trace]
    skipped: list[tuple[str, str]] = field(default_factory=list)


def score_for_eval(traces: list[Trace], scorer: StepScorer | None, key: str, what: str, *,
                   aggregate: str = "min", progress: bool = True) -> Scored:
    """Score ``traces`` under ``key`` with the PRM ``scorer``; with None, check they already carry
    step scores under ``key`` (an error says how to get them otherwise)."""
    if scorer is None:
        if not any(key in s.scores for t in traces for s in t.steps):
            raise PrmkitError(f"{what}: the traces carry no step scores under {key!r}; give the PRM "
                              f"with --model DIR (or score them first with prmkit score)")
        return Scored(traces)
    if scorer.kind != "prm":
        raise PrmkitError(f"{what} needs a PRM (per-step scores); {scorer.name} is an {scorer.kind.upper()}")
    skipped = score_traces_or_skip(scorer, traces, key, aggregate=aggregate, progress=progress,
                                   what=f"scoring ({what})")
    return Scored(traces, skipped)


def _read_all(path: str | os.PathLike, fmt: str | None, limit: int | None = None) -> list[Trace]:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        # out[:-1] would silently drop the last sample, out[:0] keep none
        raise PrmkitError(f"limit must be a positive number of samples, got {limit!r}")
    out = list(read(path, fmt))
    return out[:limit] if limit is not None else out


def _benchmark_format(path: str | os.PathLike, fmt: str) -> str:
    """The benchmark's own ``fmt``, or ``"prmkit"`` for a file of prmkit traces: what ``prmkit score``
    writes from the benchmark's file, so an evaluation reads the stored scores instead of scoring
    again (the traces keep the benchmark's labels and meta through the round trip)."""
    try:
        return "prmkit" if detect_format(path) == "prmkit" else fmt
    except PrmkitError:  # not recognisable: the benchmark's reader says what is wrong, located
        return fmt


def processbench_files(files: Sequence[str | os.PathLike], scorer: StepScorer | None = None, *,
                       key: str = "prm", threshold: float | None = None,
                       tune_on: Sequence[str | os.PathLike] | None = None, cross_split: bool = False,
                       limit: int | None = None, progress: bool = True
                       ) -> tuple[ProcessBenchResult, list[tuple[str, str]]]:
    """ProcessBench on split files (the split name is the file stem); ``tune_on`` files choose the
    threshold (never reported). A file may also be prmkit traces (``prmkit score`` output of a split
    file): without a ``scorer`` its stored scores are used. Returns the result and the traces that
    could not be scored (each still in its split, where it counts as a miss)."""
    skipped: list[tuple[str, str]] = []

    def load(paths: Sequence[str | os.PathLike]) -> dict[str, list[Trace]]:
        out: dict[str, list[Trace]] = {}
        for p in paths:
            name = Path(p).stem
            if name in out:
                raise PrmkitError(f"two split files are named {name!r}; rename one")
            s = score_for_eval(_read_all(p, _benchmark_format(p, "processbench"), limit), scorer, key, f"processbench {name}",
                               progress=progress)
            skipped.extend(s.skipped)
            out[name] = s.traces
        return out

    splits = load(files)
    tune = load(tune_on) if tune_on else None
    return (evaluate_processbench(splits, key=key, threshold=threshold, tune_on=tune,
                                  cross_split=cross_split), skipped)


def prmbench_files(files: Sequence[str | os.PathLike], scorer: StepScorer | None = None, *,
                   key: str = "prm", threshold: float = 0.5, out_of_range: str = "exclude",
                   limit: int | None = None, progress: bool = True, originals: bool = False
                   ) -> tuple[PRMBenchResult, list[tuple[str, str]]]:
    """PRMBench on its JSONL files (one per error class, or the combined file), or on prmkit traces
    made from them (``prmkit score`` output: without a ``scorer`` their stored scores are used).
    ``originals`` adds each question's error-free original solution once (class "correct", as the
    official loader does; :func:`~prmkit.eval.prmbench_with_originals`), which the ``scorer`` scores."""
    traces: list[Trace] = []
    for p in files:
        traces += _read_all(p, _benchmark_format(p, "prmbench"), limit)
    if originals:
        if scorer is None:
            raise PrmkitError("prmbench: the error-free originals have no stored scores; give the PRM "
                              "with --model DIR to score them")
        traces = prmbench_with_originals(traces)
    s = score_for_eval(traces, scorer, key, "prmbench", progress=progress)
    return evaluate_prmbench(s.traces, key=key, threshold=threshold, out_of_range=out_of_range), s.skipped


def bon_file(path: str | os.PathLike, *, prm_key: str = "prm", orm_key: str = "orm",
             label_source: str | None = None, threshold: float = 0.5, bootstrap: int = 1000,
             seed: int = 0) -> tuple[BonReport, EvalResults]:
    """Best-of-N curves of a scored file (N traces per problem, with outcomes), the verdict of the
    main PRM reading against its rivals (:func:`~prmkit.eval.bon_report`), and step metrics where
    steps carry labels. Returns the best-of-N report and the typed report sections ``bon``,
    ``summary`` (when the main method is present) and ``step_metrics``."""

    traces = _read_all(path, None)
    report = bon_report(traces, prm_key=prm_key, orm_key=orm_key, bootstrap=bootstrap, seed=seed)
    sections = EvalResults()
    sections.add(report.bon_section())
    summary = report.summary_section()
    if summary is not None:
        sections.add(summary)
    if any(prm_key in s.scores for t in traces for s in t.steps):
        sm = step_metrics_for(traces, key=prm_key, label_source=label_source, threshold=threshold)
        sections.add(StepMetricsSection({prm_key: sm.section_entry()}))
    return report, sections


def probes_file(path: str | os.PathLike, scorer: StepScorer, *, label_source: str | None = None,
                transfer: Sequence[str | os.PathLike] = (), transfer_gsm8k: str | os.PathLike | None = None,
                transfer_limit: int = 50, gaming_traces: int = 64, aggregate: str = "min", seed: int = 0,
                probes: Sequence[str] | None = None, progress: bool = True,
                optimiser_traces: str | os.PathLike | None = None
                ) -> tuple[ProbesSection, list[tuple[str, str]]]:
    """The failure-mode probes (:func:`~prmkit.eval.run_probes`) on a file of labelled traces; the
    transfer probe compares them with each ``transfer`` file and, from ``transfer_gsm8k``, GSM8K
    reference solutions with one corrupted step for half of them; the gaming probe also scores
    ``optimiser_traces`` (a trace file a real optimiser produced, e.g. ``prmkit rl``'s fooling traces).
    Returns the probes section and the traces that could not be scored."""
    if scorer is None:
        raise PrmkitError("the probes score perturbed traces: give the PRM with --model DIR")
    key = "probe"
    traces = _read_all(path, None)
    if probes_read_scores(probes):
        s = score_for_eval(traces, scorer, key, "probes", aggregate=aggregate, progress=progress)
    else:  # the chosen probes score their own copies: scoring the whole file first would be wasted
        s = Scored(traces)
    sources: dict[str, list[Trace]] = {}
    for p in transfer:
        sources[Path(p).stem] = _read_all(p, None)
    if transfer_gsm8k is not None:
        sources["gsm8k (derived)"] = gsm8k_derived_traces(transfer_gsm8k, limit=transfer_limit, seed=seed)
    name = Path(path).stem
    result = run_probes(scorer, s.traces, key=key, score=False, label_source=label_source,
                        aggregate=aggregate, seed=seed, gaming_traces=gaming_traces,
                        optimiser_traces=optimiser_traces, transfer_sources=sources or None, in_domain=name if sources else None,
                        probes=probes)
    return ProbesSection.from_dict(result), s.skipped


def parse_card_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``["deployment_monitor=none"]`` -> ``{"deployment_monitor": "none"}`` (``--card`` options)."""
    out: dict[str, str] = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep:
            raise PrmkitError(f"--card expects FIELD=VALUE, got {pair!r}")
        out[k.strip()] = v.strip()
    return out


def report_files(results: Sequence[str | os.PathLike], out: str | os.PathLike, *,
                 traces: Sequence[str | os.PathLike] = (), model_dirs: Sequence[str | os.PathLike] = (),
                 card: Mapping[str, str] | None = None, title: str | None = None
                 ) -> tuple[dict[str, Path], list[str]]:
    """Merge result files (``prmkit eval ... --json`` or a demo's report.json; later files win per
    section) into report.md, a self-contained report.html and report.json under ``out``, with the
    process-supervision card filled from the traces' provenance, the model folders and ``card``
    overrides. Returns the written paths and the merge warnings."""
    for p in results:
        if not Path(p).exists():
            raise PrmkitError(f"{p}: no such file")
    warnings: list[str] = []
    merged = as_results(load_results(results, warnings=warnings))  # typed once, here
    loaded: list[Trace] = []
    for p in traces:
        loaded += _read_all(p, None)
    if loaded or model_dirs or card or "card" not in merged:
        merged.add(card_from_provenance(traces=loaded, model_dirs=list(model_dirs), results=merged,
                                        overrides=dict(card or {})))
    return write_report(merged, out, title=title), warnings


def save_section(section: str, data: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write ``{section: data}`` (or, for ``section=""``, ``data`` itself: several sections) as JSON to
    ``path``, through a temporary file renamed on success."""
    body = dict(data) if not section else {section: data}
    return write_text_file(path, json.dumps(body, indent=2, sort_keys=True) + "\n", lock=True)
