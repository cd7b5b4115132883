"""Evaluation: ProcessBench, PRMBench, best-of-N curves, step metrics, failure-mode probes, the report
and the process-supervision card.

Each evaluation returns a result whose typed section (:class:`EvalResults` holds them, one class per
section: :class:`BonSection`, :class:`SummarySection`, ...; each a :class:`prmkit._result.Result`) the
report renders: :func:`write_report` writes Markdown, self-contained HTML and JSON from them. Two calls
build the sections a PRM evaluation needs: :func:`bon_report` (curves and the verdict of
:data:`MAIN_METHOD` against :data:`RIVALS`) and :func:`run_probes` (every probe in :data:`PROBES`;
add one with :func:`register_probe`).
"""

from prmkit.eval._agreement import label_agreement
from prmkit.eval._bon import (
    BonCurves,
    BonMethod,
    bon_choices,
    bon_curves,
    default_methods,
    within_problem_auroc,
)
from prmkit.eval._card import CARD_FIELDS, Card, CardField, card_from_provenance
from prmkit.eval._derived import arith_derived_traces, derive_traces, gsm8k_derived_traces
from prmkit.eval._metrics import first_error_accuracy, first_error_index
from prmkit.eval._passk import pass_at_k, pass_at_k_traces
from prmkit.eval._prmbench import PRMBENCH_GROUPS, PRMBenchResult, evaluate_prmbench, prmbench_with_originals
from prmkit.eval._processbench import (
    ProcessBenchResult,
    evaluate_processbench,
    predict_first_error,
    processbench_split,
    threshold_sweep,
)
from prmkit.eval._report import (
    ReportDoc,
    check_results,
    load_results,
    render_html,
    render_markdown,
    write_report,
)
from prmkit.eval._stats import (
    auroc,
    average_ranks,
    bootstrap_summary,
    cohen_kappa,
    fleiss_kappa,
    nested_resamples,
    pearson,
    percentile_interval,
    slope,
    spearman,
    stratified_resamples,
    wilson_interval,
)
from prmkit.eval._stepmetrics import StepMetrics, collect_steps, step_metrics, step_metrics_for
from prmkit.eval._summary import (
    EXTRA_COMPARISONS,
    MAIN_METHOD,
    RIVALS,
    BonReport,
    CheckedMethods,
    bon_report,
    bon_verdict,
    checked_bon_report,
    checked_methods,
    headline_sentence,
)
from prmkit.eval.probes import (
    PERTURBATIONS,
    PROBES,
    CollapseProbe,
    GamingProbe,
    LengthBiasProbe,
    Probe,
    ProbeContext,
    ProbeNotApplicable,
    TransferProbe,
    append_filler,
    collapse_probe,
    duplicate_steps,
    gaming_probe,
    length_bias_probe,
    probes_read_scores,
    register_perturbation,
    register_probe,
    reorder_steps,
    restate_problem,
    run_probes,
    transfer_probe,
)

__all__ = [
    "auroc", "average_ranks", "pearson", "spearman", "slope", "percentile_interval", "wilson_interval", "bootstrap_summary",
    "cohen_kappa", "fleiss_kappa",
    "stratified_resamples", "nested_resamples", "first_error_accuracy", "first_error_index", "pass_at_k", "pass_at_k_traces",
    "evaluate_processbench", "ProcessBenchResult", "predict_first_error", "processbench_split",
    "threshold_sweep",
    "evaluate_prmbench", "PRMBenchResult", "PRMBENCH_GROUPS", "prmbench_with_originals",
    "bon_curves", "BonCurves", "BonMethod", "default_methods", "bon_choices", "bon_verdict", "within_problem_auroc",
    "bon_report", "BonReport", "MAIN_METHOD", "RIVALS", "EXTRA_COMPARISONS", "checked_bon_report",
    "checked_methods", "CheckedMethods", "headline_sentence",
    "step_metrics", "step_metrics_for", "collect_steps", "StepMetrics",
    "gaming_probe", "collapse_probe", "length_bias_probe", "transfer_probe", "PERTURBATIONS",
    "register_perturbation", "append_filler", "restate_problem", "duplicate_steps", "reorder_steps",
    "run_probes", "probes_read_scores", "PROBES", "register_probe", "Probe", "ProbeContext",
    "ProbeNotApplicable",
    "CollapseProbe", "GamingProbe", "LengthBiasProbe", "TransferProbe",
    "derive_traces", "gsm8k_derived_traces", "arith_derived_traces",
    "label_agreement",
    "card_from_provenance", "Card", "CardField", "CARD_FIELDS",
    "write_report", "render_markdown", "render_html", "load_results", "ReportDoc",
]

# File-level entry points of the stage (what ``prmkit eval ...`` and ``prmkit report`` call).
from prmkit.eval._files import (  # noqa: E402
    Scored,
    bon_file,
    parse_card_overrides,
    prmbench_files,
    probes_file,
    processbench_files,
    report_files,
    save_section,
    score_for_eval,
)

__all__ += ["processbench_files", "prmbench_files", "bon_file", "probes_file", "report_files", "save_section",
            "parse_card_overrides", "score_for_eval", "Scored"]

from prmkit.eval.probes import (  # noqa: E402
    HINT_ARMS,
    FaithfulnessProbe,
    faithfulness_probe,
    hinted_problems,
)

__all__ += ["HINT_ARMS", "FaithfulnessProbe", "faithfulness_probe", "hinted_problems"]

from prmkit.eval.probes import (  # noqa: E402
    ResultCheckProbe,
    ResultCheckResult,
    change_result,
    claimed_result,
    result_check_probe,
)

__all__ += ["ResultCheckProbe", "ResultCheckResult", "change_result", "claimed_result", "result_check_probe"]

from prmkit.eval._refusals import Difference, RefusalsResult, Separation, refusal_eval, refusal_eval_file  # noqa: E402,E501

__all__ += ["refusal_eval", "refusal_eval_file", "RefusalsResult", "Separation", "Difference"]
__all__ += ["check_results"]

# The typed results: one class per report section (prmkit._result.Result), what the report renders.
from prmkit.eval._results import (  # noqa: E402
    SECTION_NAMES,
    BenchSplit,
    BonLiveSection,
    BonSection,
    CheckedSection,
    Comparison,
    Duplicates,
    EvalResults,
    Headline,
    InterventionEffect,
    LabelPair,
    LabelsSection,
    MetaSection,
    MethodCurve,
    MonitorabilityProvenance,
    MonitorabilitySection,
    MonitorRef,
    MonitorRow,
    OtherSection,
    OutOfRange,
    PRMBenchClass,
    PRMBenchSection,
    ProbeOutcome,
    ProbesSection,
    ProcessBenchSection,
    RateIntervals,
    Rival,
    ScoreBin,
    ScorerSteps,
    StepMetricsSection,
    SummarySection,
    ThresholdSweep,
    as_results,
    section_from_dict,
)

__all__ += ["SECTION_NAMES", "BenchSplit", "BonLiveSection", "BonSection", "CheckedSection", "Comparison",
            "Duplicates", "EvalResults", "Headline", "LabelPair", "LabelsSection", "MetaSection", "MethodCurve",
            "MonitorabilitySection", "MonitorRow", "MonitorRef", "MonitorabilityProvenance", "RateIntervals",
            "InterventionEffect", "OtherSection", "OutOfRange", "PRMBenchClass", "PRMBenchSection",
            "ProbeOutcome", "ProbesSection", "ProcessBenchSection", "Rival", "ScoreBin", "ScorerSteps",
            "StepMetricsSection", "SummarySection", "ThresholdSweep", "as_results", "section_from_dict"]

# Evaluation tasks as a registry: what ``prmkit eval run TASK...`` runs (a benchmark of one's own:
# register_eval_task, or the entry-point group prmkit.eval_tasks). A task returns a Result; a Record
# dataclass is the short way to write one.
from prmkit._result import Record, Result  # noqa: E402
from prmkit.eval._tasks import (  # noqa: E402
    EVAL_TASKS,
    DataSource,
    EvalTask,
    TaskContext,
    TaskOption,
    TaskRun,
    describe_eval_task,
    eval_tasks_file,
    get_eval_task,
    list_eval_tasks,
    load_task_file,
    parse_data_args,
    parse_task_args,
    register_eval_task,
    run_eval_task,
    run_eval_tasks,
    shared_data_dir,
)

__all__ += ["EVAL_TASKS", "EvalTask", "DataSource", "TaskOption", "TaskContext", "TaskRun", "register_eval_task",
            "get_eval_task", "run_eval_task", "run_eval_tasks", "eval_tasks_file", "load_task_file",
            "describe_eval_task", "list_eval_tasks", "parse_data_args", "parse_task_args", "shared_data_dir",
            "Record", "Result"]

from prmkit.eval._annotation_section import AnnotationSection, AnnotatorPair, AnnotatorRow  # noqa: E402

__all__ += ["AnnotationSection", "AnnotatorRow", "AnnotatorPair"]
