"""Human step labels at the least cost: the labeling web app and active-learning queues.

``prmkit annotate serve TRACES --db labels.sqlite`` serves a labeling page in the spirit of PRM800K's
(the problem, the steps one by one, a -1 / 0 / +1 rating per step by keys 1 / 2 / 3, "stop at the first
wrong step"); every rating goes to SQLite as it is made. ``queue`` orders what to label next by a
registered strategy (:data:`STRATEGIES`), ``export`` writes prmkit traces with
``StepLabel(source="human", labeler=<annotator>)`` (or PRM800K / TRL stepwise) that ``prmkit train prm``
trains on, and :func:`summary_of` gives progress, agreement (kappa) and cost.
"""

from prmkit.annotate._app import AppConfig, create_app
from prmkit.annotate._export import EXPORT_FORMATS, ExportResult, export_labels, labelled_traces
from prmkit.annotate._run import (
    QueueResult,
    add_user,
    check_bind,
    is_loopback,
    load_traces,
    make_app,
    queue_file,
    serve,
    summary_of,
)
from prmkit.annotate._simulate import SimulationResult, simulate
from prmkit.annotate._store import FLAGS, VALUES, Assignment, Item, Rating, Store, User
from prmkit.annotate._strategies import (
    STRATEGIES,
    QueueEntry,
    build_queue,
    convincing_wrong,
    disagreement,
    random_order,
    score_key,
    uncertainty,
)
from prmkit.annotate._summary import AnnotationSummary, AnnotatorProgress, PairAgreement, summarize

__all__ = [
    "AppConfig", "create_app", "make_app", "serve", "add_user", "queue_file", "QueueResult", "summary_of",
    "check_bind", "is_loopback", "load_traces",
    "Store", "User", "Item", "Rating", "Assignment", "VALUES", "FLAGS",
    "STRATEGIES", "QueueEntry", "build_queue", "score_key", "random_order", "uncertainty", "convincing_wrong",
    "disagreement",
    "AnnotationSummary", "AnnotatorProgress", "PairAgreement", "summarize",
    "EXPORT_FORMATS", "ExportResult", "export_labels", "labelled_traces",
    "SimulationResult", "simulate",
]
