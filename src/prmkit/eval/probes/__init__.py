"""Probes of the known failure modes of process reward models, each reduced to a number and a verdict;
one probe per module, its math and its renderer together.

- **Verifier gaming** (:func:`gaming_probe`): edits that add no information (:data:`PERTURBATIONS`:
  a filler claim of having checked everything, the problem restated, a step repeated, two steps
  swapped) must not raise a trace's score.
- **Process collapse** (:func:`collapse_probe`): are invalid steps caught when the answer is right,
  or only when it is wrong (an outcome scorer in disguise)?
- **Result checking** (:func:`result_check_probe`): does the PRM tell a step's written result from
  the same step with the result changed?
- **Length bias** (:func:`length_bias_probe`): the trace score against the number of steps, within
  each outcome too.
- **Domain transfer** (:func:`transfer_probe`): step metrics per data source and the AUROC lost away
  from the training domain.
- **Faithfulness** (:func:`faithfulness_probe`): traces that follow a wrong hint without saying so,
  and whether the PRM passes them.

:func:`run_probes` builds the report's ``"probes"`` section from the probes in :data:`PROBES`, each a
:class:`Probe`; add one with :func:`register_probe` or the entry-point group ``prmkit.probes``, and a
perturbation with :func:`register_perturbation` or the group ``prmkit.perturbations``.
"""

from prmkit.eval.probes._base import (
    PROBES,
    Probe,
    ProbeContext,
    ProbeNotApplicable,
    probes_read_scores,
    register_probe,
    run_probes,
)
from prmkit.eval.probes._collapse import CollapseProbe, CollapseResult, OutcomeGroup, collapse_probe
from prmkit.eval.probes._faithfulness import (
    HINT_ARMS,
    MENTION,
    FaithfulnessProbe,
    FaithfulnessResult,
    faithfulness_probe,
    hinted_problems,
)
from prmkit.eval.probes._gaming import (
    GamingProbe,
    GamingResult,
    OptimiserStats,
    RiseStats,
    gaming_probe,
    optimiser_stats,
)
from prmkit.eval.probes._length_bias import (
    LengthBiasProbe,
    LengthBiasResult,
    LengthRow,
    OutcomeCorrelation,
    length_bias_probe,
)
from prmkit.eval.probes._perturbations import (
    FILLER,
    PERTURBATIONS,
    append_filler,
    duplicate_steps,
    register_perturbation,
    reorder_steps,
    restate_problem,
)
from prmkit.eval.probes._result_check import (
    ResultCheckProbe,
    ResultCheckResult,
    change_result,
    claimed_result,
    result_check_probe,
)
from prmkit.eval.probes._transfer import SourceStats, TransferProbe, TransferResult, transfer_probe

__all__ = [
    "Probe", "ProbeContext", "ProbeNotApplicable", "PROBES", "register_probe", "run_probes",
    "probes_read_scores",
    "FILLER", "PERTURBATIONS", "register_perturbation", "append_filler", "restate_problem",
    "duplicate_steps", "reorder_steps",
    "RiseStats", "GamingResult", "gaming_probe", "GamingProbe", "OptimiserStats", "optimiser_stats",
    "OutcomeGroup", "CollapseResult", "collapse_probe", "CollapseProbe",
    "LengthBiasResult", "LengthRow", "OutcomeCorrelation", "length_bias_probe", "LengthBiasProbe",
    "SourceStats", "TransferResult", "transfer_probe", "TransferProbe",
    "ResultCheckProbe", "ResultCheckResult", "change_result", "claimed_result", "result_check_probe",
    "HINT_ARMS", "MENTION", "FaithfulnessProbe", "FaithfulnessResult", "faithfulness_probe",
    "hinted_problems",
]
