"""Evaluation: ProcessBench, PRMBench, best-of-N curves, step metrics, failure-mode probes, the report
and the process-supervision card.

Each evaluation returns a result object whose ``to_dict()`` is one section of the report
(:func:`write_report` renders Markdown, self-contained HTML and JSON from such sections).
"""

from prmkit.eval._agreement import cohen_kappa, label_agreement
from prmkit.eval._bon import BonCurves, BonMethod, bon_choices, bon_curves, default_methods
from prmkit.eval._card import CARD_FIELDS, Card, CardField, card_from_provenance
from prmkit.eval._derived import arith_derived_traces, derive_traces, gsm8k_derived_traces
from prmkit.eval._metrics import auroc, first_error_accuracy, first_error_index
from prmkit.eval._passk import pass_at_k, pass_at_k_traces
from prmkit.eval._prmbench import PRMBENCH_GROUPS, PRMBenchResult, evaluate_prmbench, prmbench_with_originals
from prmkit.eval._probes import (
    PERTURBATIONS,
    append_filler,
    collapse_probe,
    duplicate_steps,
    gaming_probe,
    length_bias_probe,
    register_perturbation,
    reorder_steps,
    restate_problem,
    transfer_probe,
)
from prmkit.eval._processbench import (
    ProcessBenchResult,
    evaluate_processbench,
    predict_first_error,
    processbench_split,
    threshold_sweep,
)
from prmkit.eval._report import load_results, render_html, render_markdown, write_report
from prmkit.eval._stepmetrics import StepMetrics, collect_steps, step_metrics, step_metrics_for
from prmkit.eval._summary import bon_verdict

__all__ = [
    "auroc", "first_error_accuracy", "first_error_index", "pass_at_k", "pass_at_k_traces",
    "evaluate_processbench", "ProcessBenchResult", "predict_first_error", "processbench_split",
    "threshold_sweep",
    "evaluate_prmbench", "PRMBenchResult", "PRMBENCH_GROUPS", "prmbench_with_originals",
    "bon_curves", "BonCurves", "BonMethod", "default_methods", "bon_choices", "bon_verdict",
    "step_metrics", "step_metrics_for", "collect_steps", "StepMetrics",
    "gaming_probe", "collapse_probe", "length_bias_probe", "transfer_probe", "PERTURBATIONS",
    "register_perturbation", "append_filler", "restate_problem", "duplicate_steps", "reorder_steps",
    "derive_traces", "gsm8k_derived_traces", "arith_derived_traces",
    "label_agreement", "cohen_kappa",
    "card_from_provenance", "Card", "CardField", "CARD_FIELDS",
    "write_report", "render_markdown", "render_html", "load_results",
]
