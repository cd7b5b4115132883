"""Scoring traces with a PRM or ORM: the scorer interface, fast batched scoring, aggregation.

- :class:`StepScorer`: the interface search, selection and RL use (``kind``, ``name``,
  ``score(traces)``); :class:`~prmkit.models.RewardModel` satisfies it.
- :class:`PrefixCachingScorer`: the same scores as ``RewardModel.score`` from a decoder PRM, computing
  shared prefixes once per call and reusing the KV of sequences scored in earlier calls (beam search
  extending its beams); :class:`ScoringStats` counts tokens computed and reused.
- Aggregators (:data:`AGGREGATORS`, :func:`get_aggregator`): step scores -> one trace score
  (``min``, ``last``, ``prod``, ``mean``, ``geo_mean``, ``first_below:<threshold>``).
- :func:`score_traces`: score and store step scores and the aggregated trace score on the traces;
  :func:`score_each`: per trace the scores or why the scorer refused it (the others scored together);
  :func:`score_file`: the ``prmkit score`` stage, file to file (a trace the scorer rejects is written
  unscored and reported, not fatal); :func:`trace_score`: step scores -> one number.
- Verifiers by name (:data:`SCORERS`, :func:`get_scorer`): ``model`` (a checkpoint folder) and
  ``scripted`` (:class:`ScriptedScorer`, a deterministic mock for tests and examples) and
  ``likelihood`` (:class:`LikelihoodScorer`, training-free: a causal LM's surprise at each step's
  tokens, the baseline a trained PRM must beat) and ``calculator`` (:class:`CalculatorScorer`: a
  calculator flags the steps whose written arithmetic is wrong, alone or around a PRM;
  :func:`check_arithmetic` reads the equations, :func:`step_flagged` says whether a step is flagged).
- :class:`StoredScorer`: the scores already stored on traces under one key (or the product of
  several), served as a scorer, to check or recombine them without running the model again;
  :func:`add_calculator_scores` stores a PRM's scores checked that way by the calculator, and the
  calculator's own.
- Step checkers (:data:`CHECKERS`, :func:`get_checker`, :func:`register_checker`; entry-point group
  ``prmkit.checkers``): a :class:`StepChecker` reads one step and returns its :class:`CheckFlag` s,
  each with a reason — ``calculator`` (:class:`CalculatorChecker`), ``sympy`` (:class:`SympyChecker`,
  LaTeX equalities) and ``provenance`` (:class:`ProvenanceChecker`, numbers from nowhere);
  :func:`check_trace` runs them on a trace; :class:`CheckedScorer` (the ``checks`` scorer, or
  ``--model DIR -s check=calculator,sympy,provenance``) is a PRM's step scores with the flagged steps
  set to 0.
"""

from prmkit.scoring._aggregate import (
    AGGREGATORS,
    Aggregator,
    agg_first_below,
    agg_geo_mean,
    agg_last,
    agg_mean,
    agg_min,
    agg_prod,
    check_finite,
    get_aggregator,
    register_aggregator,
    trace_score,
)
from prmkit.scoring._calculator import (
    CalculatorScorer,
    Equation,
    add_calculator_scores,
    check_arithmetic,
    step_flagged,
)
from prmkit.scoring._checkers import (
    CHECKERS,
    CalculatorChecker,
    CheckedScorer,
    CheckFlag,
    StepChecker,
    check_trace,
    get_checker,
    get_checkers,
    register_checker,
)
from prmkit.scoring._likelihood import LikelihoodScorer
from prmkit.scoring._prefix import PrefixCachingScorer, ScoringStats
from prmkit.scoring._protocol import StepScorer
from prmkit.scoring._provenance import ProvenanceChecker
from prmkit.scoring._scorers import SCORERS, get_scorer, load_scorer, model_scorer, register_scorer
from prmkit.scoring._scripted import ScriptedScorer
from prmkit.scoring._stored import StoredScorer
from prmkit.scoring._sympy_check import SympyChecker
from prmkit.scoring._traces import (
    ScoreReport,
    add_trace_scores,
    score_each,
    score_file,
    score_traces,
    score_traces_or_skip,
)

__all__ = [
    "StepScorer", "PrefixCachingScorer", "ScoringStats", "score_traces", "score_traces_or_skip", "score_each",
    "score_file", "ScoreReport", "trace_score", "add_trace_scores",
    "SCORERS", "get_scorer", "load_scorer", "register_scorer", "model_scorer", "ScriptedScorer",
    "LikelihoodScorer", "CalculatorScorer", "Equation", "check_arithmetic", "step_flagged", "StoredScorer",
    "add_calculator_scores",
    "CHECKERS", "StepChecker", "CheckFlag", "register_checker", "get_checker", "get_checkers", "check_trace",
    "CheckedScorer", "CalculatorChecker", "SympyChecker", "ProvenanceChecker",
    "AGGREGATORS", "Aggregator", "get_aggregator", "register_aggregator", "check_finite",
    "agg_min", "agg_last", "agg_prod", "agg_mean", "agg_geo_mean", "agg_first_below",
]
