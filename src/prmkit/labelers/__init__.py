"""Automatic process labelers and the resumable label store.

Every labeler is a registered component (:data:`LABELERS`, made with :func:`get_labeler`) that appends
:class:`~prmkit.trace.StepLabel` s with full provenance — labeler name and arguments, model, rollouts,
cost (tokens, seconds) and time — and a ``label`` entry to each trace's provenance:

- ``mc``: Math-Shepherd Monte Carlo, ``mc_hard`` and ``mc_soft`` from ``k`` rollouts per prefix;
- ``binary``: OmegaPRM-style binary search for the first error, with a hard rollout budget;
- ``omegaprm``: that search inside a tree that shares rollouts between a trace's prefixes, soft
  labels per prefix, the tree as MATH-APS records (:func:`write_omegaprm_tree`);
- ``advantage``: Setlur et al.'s progress, ``Q(prefix + step) - Q(prefix)`` under a prover;
- ``judge``: an LLM judge with a strict output parser and retries (never a guessed verdict);
- ``consensus``: only the steps where ``mc_hard`` and the judge agree;
- ``symbolic``: the :class:`~prmkit.envs.SymbolicChecker` ground truth.

Rollouts go through any policy backend (inline, a local process pool, or Ray) and into a
:class:`LabelStore` (SQLite, WAL) as they complete, so every run is resumable and a resumed run gives
the same labels as an uninterrupted one.

A new labeler is one file: a :class:`RolloutLabeler` subclass with a ``name`` and a ``plan`` (a
generator of :class:`Need` s, or a :class:`PlanResult` at once), registered with
:func:`register_labeler` or as a ``prmkit.labelers`` entry point of its own distribution. ``prmkit
label --method NAME`` builds it with :func:`build_labeler`: its ``__init__`` parameters say which of
the shared options (:data:`LABEL_OPTIONS`: ``policy``, ``k``, ``seed``, ...) it takes.

>>> from prmkit.policies import ScriptedPolicy
>>> from prmkit.trace import Problem, Step, Trace
>>> t = Trace(id="t", problem=Problem("2+2?", answer="4"),
...           steps=[Step("2+2=5"), Step("The answer is 5.")], final_answer="5")
>>> report = get_labeler("binary", policy=ScriptedPolicy(["The answer is 5."]), k=2).label([t])
>>> t.first_error("binary_search"), report.rollouts
(0, 2)
"""

from prmkit.labelers._advantage import AdvantageLabeler
from prmkit.labelers._base import (
    LABELERS,
    Labeler,
    RolloutLabeler,
    get_labeler,
    register_labeler,
    setup_rollouts,
)
from prmkit.labelers._binary import AFTER_ERROR, BinarySearchLabeler, max_search_rounds
from prmkit.labelers._build import LABEL_OPTIONS, build_labeler, policy_spec
from prmkit.labelers._consensus import ConsensusLabeler
from prmkit.labelers._engine import label_stream
from prmkit.labelers._executors import (
    InlineExecutor,
    PolicyInfo,
    PolicySpec,
    ProcessExecutor,
    RayExecutor,
    make_executor,
)
from prmkit.labelers._judge import JUDGE_SYSTEM, JudgeLabeler, JudgeParseError, parse_verdicts
from prmkit.labelers._mc import MC_SOURCES, MCLabeler
from prmkit.labelers._omegaprm import OmegaPRMLabeler, omegaprm_records, write_omegaprm_tree
from prmkit.labelers._plan import (
    JUDGE_PREFIX,
    LabelReport,
    Need,
    Plan,
    PlanResult,
    Rollout,
    prefix_text,
    rollout_key,
    terminal_success,
)
from prmkit.labelers._prompts import rollout_messages
from prmkit.labelers._run import default_store_path, label_file
from prmkit.labelers._store import LabelStore, StoreMismatchError
from prmkit.labelers._symbolic import SymbolicLabeler

__all__ = [
    "LABELERS", "get_labeler", "register_labeler", "build_labeler", "LABEL_OPTIONS", "policy_spec",
    "Labeler", "RolloutLabeler", "LabelReport",
    "Need", "Rollout", "Plan", "PlanResult", "setup_rollouts", "JUDGE_PREFIX", "prefix_text", "rollout_key",
    "terminal_success", "rollout_messages", "label_stream", "label_file", "default_store_path",
    "MCLabeler", "MC_SOURCES", "BinarySearchLabeler", "AFTER_ERROR", "max_search_rounds",
    "OmegaPRMLabeler", "omegaprm_records", "write_omegaprm_tree",
    "AdvantageLabeler", "JudgeLabeler", "JudgeParseError", "parse_verdicts", "JUDGE_SYSTEM",
    "ConsensusLabeler", "SymbolicLabeler", "LabelStore", "StoreMismatchError",
    "PolicySpec", "PolicyInfo", "InlineExecutor", "ProcessExecutor", "RayExecutor", "make_executor",
]
