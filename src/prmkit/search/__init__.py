"""Using a verifier at inference time: selection, step-level search, verifier-guided generation.

- Selection (aggregate, then select): :func:`select` / :func:`select_problems` with the methods in
  :data:`SELECTORS` — ``bon``, ``weighted``, ``majority`` and the ``oracle`` reference.
- Search with a policy and a scorer: :func:`beam_search` (with lookahead), :func:`dvts` and
  :func:`mcts`, by name
  through :func:`search` / :data:`SEARCHES`; each reports the tokens it generated and scored.
- Verifier-guided generation: :func:`reject`, :func:`rerank`, :func:`revise`.
- :func:`select_file` / :func:`search_file`: the ``prmkit select`` and ``prmkit search`` stages,
  file-level.
- Test-time-compute recipes (``prmkit tts``): :func:`load_recipe` / :class:`Recipe`, :func:`run_recipe`
  and :func:`tts_file`, whose results file holds a :class:`TtsResult`.

Scorers by name (:data:`SCORERS`, ``model`` and ``scripted``) and :class:`ScriptedScorer` live in
:mod:`prmkit.scoring` (re-exported here, as is :func:`trace_score`); queries about the record
(:func:`~prmkit.trace_queries.is_correct`, :func:`~prmkit.trace_queries.stored_scores`, ...) in
:mod:`prmkit.trace_queries`.

A verifier is any :class:`~prmkit.scoring.StepScorer` (a ``RewardModel``, a
``PrefixCachingScorer``, a ``ScriptedScorer``); aggregators come from :mod:`prmkit.scoring`.
"""

from prmkit.scoring import SCORERS, ScriptedScorer, get_scorer, model_scorer, register_scorer, trace_score
from prmkit.search._common import ComputeMeter
from prmkit.search._files import (
    SearchFileReport,
    SelectFileReport,
    check_search_settings,
    pick_score_key,
    search_file,
    select_file,
)
from prmkit.search._guided import Attempt, GuidedResult, reject, rerank, revise
from prmkit.search._mcts import mcts, puct
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
from prmkit.search._tts import (
    TTS_METHODS,
    Recipe,
    TtsCell,
    TtsResult,
    Verifier,
    find_recipe,
    load_recipe,
    run_recipe,
    shipped_recipes,
    tts_file,
)

__all__ = [
    "ComputeMeter", "trace_score", "select_file", "SelectFileReport", "search_file", "SearchFileReport",
    "pick_score_key", "check_search_settings",
    "SELECTORS", "register_selector", "AnswerGroup", "Selection", "SelectionReport", "select",
    "select_problems", "group_by_problem", "group_answers", "best_of_n", "weighted_best_of_n",
    "majority_vote", "oracle",
    "SEARCHES", "register_search", "SearchConfig", "SearchResult", "search", "beam_search", "dvts", "mcts",
    "puct",
    "Attempt", "GuidedResult", "reject", "rerank", "revise",
    "ScriptedScorer", "SCORERS", "get_scorer", "register_scorer", "model_scorer",
    "Recipe", "Verifier", "TtsCell", "TtsResult", "TTS_METHODS", "load_recipe", "find_recipe",
    "shipped_recipes", "run_recipe", "tts_file",
]
