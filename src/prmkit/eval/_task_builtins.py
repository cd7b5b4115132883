"""The built-in evaluation tasks (:data:`~prmkit.eval.EVAL_TASKS`): each wraps the evaluation stage's
file-level function of its benchmark, prints what the per-benchmark command printed, and returns
the typed report section(s). ``prmkit eval processbench`` and ``prmkit eval run processbench`` both
run the objects defined here."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from prmkit.eval._files import bon_file, prmbench_files, probes_file, processbench_files
from prmkit.eval._refusals import RefusalsResult, refusal_eval_file
from prmkit.eval._results import (
    EvalResults,
    MonitorabilitySection,
    PRMBenchSection,
    ProbesSection,
    ProcessBenchSection,
)
from prmkit.eval._tasks import DataSource, EvalTask, TaskContext, TaskOption
from prmkit.scoring import load_scorer

__all__ = ["PROCESSBENCH", "PRMBENCH", "BON", "PROBES_TASK", "MONITOR", "REFUSALS"]

_KEY = TaskOption("key", str, "prm", "score key: step.scores[KEY] (scored here, or already stored)")
_LIMIT = TaskOption("limit", int, None, "only the first N samples of each file", minimum=1)
_BOOTSTRAP = TaskOption("bootstrap", int, 1000, "bootstrap replicates for the 95% intervals", minimum=1)
_SEED = TaskOption("seed", int, 0, "bootstrap seed")


def _processbench(ctx: TaskContext) -> ProcessBenchSection:
    o = ctx.options
    result, skipped = processbench_files(ctx.data, ctx.prm(), key=o["key"], threshold=o["threshold"],
                                         tune_on=o["tune_on"] or None, cross_split=o["cross_split"],
                                         limit=o["limit"], progress=ctx.progress)
    ctx.unscored(skipped)
    ctx.say(result.lines(by_generator=o["by_generator"]))
    return ProcessBenchSection.from_dict(result.to_dict())


PROCESSBENCH = EvalTask(
    name="processbench",
    description="ProcessBench: find the first wrong step (error / error-free accuracy and their F1 per split)",
    data=DataSource("ProcessBench split files (.json; the split name is the file stem), or prmkit score "
                    "output of them", default=("processbench/gsm8k.json", "processbench/math.json")),
    metric="mean F1 over splits (F1 = harmonic mean of the accuracies on erroneous and error-free samples)",
    sections=("processbench",),
    run=_processbench,
    options=(_KEY,
             TaskOption("threshold", float, None, "fixed step threshold (default 0.5 unless tune_on or "
                        "cross_split chooses one)"),
             TaskOption("tune_on", Path, None, "split file the threshold is tuned on (never reported)", many=True),
             TaskOption("cross_split", bool, False, "each split's threshold is chosen on the other splits"),
             _LIMIT,
             TaskOption("by_generator", bool, False, "also print each split per generator (always in the file)")),
    prm="optional")


def _prmbench(ctx: TaskContext) -> PRMBenchSection:
    o = ctx.options
    result, skipped = prmbench_files(ctx.data, ctx.prm(), key=o["key"], threshold=o["threshold"],
                                     out_of_range=o["out_of_range"], limit=o["limit"], originals=o["originals"],
                                     progress=ctx.progress)
    ctx.unscored(skipped)
    ctx.say(result.lines())
    return PRMBenchSection.from_dict(result.to_dict())


PRMBENCH = EvalTask(
    name="prmbench",
    description="PRMBench: fine-grained step errors by class",
    data=DataSource("PRMBench JSONL files (one per error class, or the combined file), or prmkit score "
                    "output of them", default=("prmbench/prm800k_test_p1_4o_*.jsonl",)),
    metric="PRMScore (mean of the F1 of correct and of wrong steps) per class and overall",
    sections=("prmbench",),
    run=_prmbench,
    options=(_KEY,
             TaskOption("threshold", float, 0.5, "a step scoring at or above it is predicted correct"),
             TaskOption("out_of_range", str, "exclude", "rows whose error_steps point past the last step: "
                        "exclude or in_range"),
             _LIMIT,
             TaskOption("originals", bool, False, "also score each question's error-free original once")),
    prm="optional")


def _bon(ctx: TaskContext) -> EvalResults:
    o = ctx.options
    report, sections = bon_file(ctx.data[0], prm_key=o["prm_key"], orm_key=o["orm_key"],
                                label_source=o["label_source"], threshold=o["threshold"],
                                bootstrap=o["bootstrap"], seed=o["seed"])
    ctx.say(report.curves.lines())
    for name in ("step_metrics", "summary"):
        if name in sections:
            ctx.say(sections[name].lines())
    return sections


BON = EvalTask(
    name="bon",
    description="best-of-N curves of the PRM, ORM, majority and oracle, the verdict, and step metrics",
    data=DataSource("scored traces (prmkit score output), N per problem, with outcomes", many=False),
    metric="accuracy against N with bootstrap 95% intervals; step AUROC and F1 where steps carry labels",
    sections=("bon", "summary", "step_metrics"),
    run=_bon,
    options=(TaskOption("prm_key", str, "prm", "step-score key of the PRM"),
             TaskOption("orm_key", str, "orm", "trace-score key of the ORM (meta.scores)"),
             TaskOption("label_source", str, None, "step labels for the step metrics (default: latest)"),
             TaskOption("threshold", float, 0.5, "step threshold for the step F1"),
             _BOOTSTRAP, _SEED),
    prm="none")


def _probes(ctx: TaskContext) -> ProbesSection:
    o = ctx.options
    result, skipped = probes_file(ctx.data[0], ctx.prm(), label_source=o["label_source"], transfer=o["transfer"] or [],
                                  transfer_gsm8k=o["transfer_gsm8k"], transfer_limit=o["transfer_limit"],
                                  gaming_traces=o["gaming_traces"], aggregate=o["aggregate"], seed=o["seed"],
                                  probes=o["probe"] or None, progress=ctx.progress,
                                  optimiser_traces=o["optimiser_traces"])
    ctx.unscored(skipped)
    ctx.say(result.lines())
    return result


PROBES_TASK = EvalTask(
    name="probes",
    description="failure-mode probes: process collapse, verifier gaming, result check, length bias, transfer",
    data=DataSource("labelled traces (in-domain), N per problem", many=False),
    metric="one number per probe with its pass / fail criterion",
    sections=("probes",),
    run=_probes,
    options=(TaskOption("label_source", str, None, "step labels to use (default: latest)"),
             TaskOption("transfer", Path, None, "a second data source for the transfer probe", many=True),
             TaskOption("transfer_gsm8k", Path, None, "build the second source from a GSM8K file"),
             TaskOption("transfer_limit", int, 50, "problems taken from transfer_gsm8k", minimum=1),
             TaskOption("gaming_traces", int, 64, "traces the gaming probe perturbs", minimum=1),
             TaskOption("optimiser_traces", Path, None, "a real optimiser's traces the gaming probe scores too"),
             TaskOption("probe", str, None, "run only this probe (default: every one the inputs allow)", many=True),
             TaskOption("aggregate", str, "min", "step scores -> trace score"),
             TaskOption("seed", int, 0, "seed of the perturbations")),
    prm="required")


def _monitor_api() -> Any:
    # prmkit.monitor imports prmkit.eval (its statistics), so eval may not import it: the task reaches
    # it by name when it runs, as a registry entry reaches a component (no import at load time, no cycle).
    return importlib.import_module("prmkit.monitor")


def _monitor(ctx: TaskContext) -> MonitorabilitySection:
    o = ctx.options
    mon = _monitor_api()
    monitors = mon.load_monitors(o["monitor"] or [], o["monitor_arg"] or None)
    result = mon.monitorability_file(ctx.data[0], monitors, control=o["control"],
                                     views=o["view"] or tuple(mon.VIEWS), bootstrap=o["bootstrap"], seed=o["seed"])
    ctx.say(result.lines())
    return MonitorabilitySection.from_dict(result.to_dict())


MONITOR = EvalTask(
    name="monitor",
    description="monitorability of agent trajectories: TPR, TNR and g-mean² per monitor and view",
    data=DataSource("agent trajectories (prmkit agent run output, or traces with the env's labels)", many=False),
    metric="g-mean² = TPR x TNR with bootstrap intervals, per monitor, view and archetype",
    sections=("monitorability",),
    run=_monitor,
    options=(TaskOption("monitor", str, None, "a monitor: rule, rule:RULES.yaml, prm:MODEL_DIR, judge", many=True),
             TaskOption("monitor_arg", str, None, "a monitor setting MONITOR.KEY=VALUE", many=True),
             TaskOption("control", Path, None, "control arm (the same tasks with the loophole off)"),
             TaskOption("view", str, None, "all, actions, reasoning (default: all three)", many=True),
             _BOOTSTRAP, _SEED),
    prm="none")


def _refusals(ctx: TaskContext) -> RefusalsResult:
    o = ctx.options
    scorers = {}
    prm = ctx.prm()
    if prm is not None:
        scorers["prm"] = prm
    if o["orm"] is not None:
        scorers["orm"] = load_scorer("model", o["orm"], {"cache": False})
    result = refusal_eval_file(ctx.data[0], scorers, bootstrap=o["bootstrap"], seed=o["seed"])
    ctx.say(result.lines())
    return result


REFUSALS = EvalTask(
    name="refusals",
    description="safety specs: over- and under-refusal, and how a PRM and an ORM rank reasoned refusals",
    data=DataSource("spec-environment trajectories (prmkit agent spec output)", many=False),
    metric="refusal rates per organism; AUROC of reasoned over surface refusals per scorer, and their difference",
    sections=("refusals",),
    run=_refusals,
    options=(TaskOption("orm", Path, None, "an ORM checkpoint folder (its trace score ranks a trace)"),
             _BOOTSTRAP, _SEED),
    prm="optional")
