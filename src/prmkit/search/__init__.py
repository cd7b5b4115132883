"""Using a verifier at inference time: selection, step-level search, verifier-guided generation.

- Selection (aggregate, then select): :func:`select` / :func:`select_problems` with the methods in
  :data:`SELECTORS` — ``bon``, ``weighted``, ``majority`` and the ``oracle`` reference.
- Search with a policy and a scorer: :func:`beam_search` (with lookahead) and :func:`dvts`, by name
  through :func:`search` / :data:`SEARCHES`; each reports the tokens it generated and scored.
- Verifier-guided generation: :func:`reject`, :func:`rerank`, :func:`revise`.
- :class:`ScriptedScorer`: a deterministic mock verifier for tests and examples, registered as
  ``scripted`` in :data:`SCORERS` beside ``model`` (a checkpoint folder).

A verifier is any :class:`~prmkit.scoring.StepScorer` (a ``RewardModel``, a
``PrefixCachingScorer``, a ``ScriptedScorer``); aggregators come from :mod:`prmkit.scoring`.
"""

from prmkit.search._common import (
    ComputeMeter,
    is_correct,
    score_keys,
    stored_scores,
    trace_score,
    write_scores,
)
from prmkit.search._guided import Attempt, GuidedResult, reject, rerank, revise
from prmkit.search._scorers import SCORERS, get_scorer, model_scorer, register_scorer
from prmkit.search._scripted import ScriptedScorer
from prmkit.search._search import (
    SEARCHES,
    SearchConfig,
    SearchResult,
    beam_search,
    dvts,
    register_search,
    search,
)
from prmkit.search._select import (
    SELECTORS,
    AnswerGroup,
    Selection,
    SelectionReport,
    best_of_n,
    group_answers,
    group_by_problem,
    majority_vote,
    oracle,
    register_selector,
    select,
    select_problems,
    weighted_best_of_n,
)

__all__ = [
    "ComputeMeter", "trace_score", "stored_scores", "score_keys",
    "write_scores", "is_correct",
    "SELECTORS", "register_selector", "AnswerGroup", "Selection", "SelectionReport", "select",
    "select_problems", "group_by_problem", "group_answers", "best_of_n", "weighted_best_of_n",
    "majority_vote", "oracle",
    "SEARCHES", "register_search", "SearchConfig", "SearchResult", "search", "beam_search", "dvts",
    "Attempt", "GuidedResult", "reject", "rerank", "revise",
    "ScriptedScorer", "SCORERS", "get_scorer", "register_scorer", "model_scorer",
]
