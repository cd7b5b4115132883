"""Sampling traces from a policy — the ``prmkit generate`` stage.

Problems (the built-in ``arith`` environment or a dataset with reference answers) go to a policy
backend (:mod:`prmkit.policies`); each completion becomes a :class:`~prmkit.trace.Trace`: steps
split, the final answer extracted, the outcome checked, symbolic step labels where the environment
knows the intermediate values.

- :func:`generate_file`: the stage's file-level entry point (resumable, what the CLI calls);
- :func:`sample_traces`: the same with explicit prompts, and a callback per problem;
- :func:`completion_to_trace`: one completion -> one trace (search and guided generation use it);
- :func:`load_problems` / :func:`problems_from_file`: where problems come from;
- :class:`SampleReport`: what a run did, with pass@k of the output (:func:`pass_at_k`);
- :func:`hinted_problems` (:data:`HINT_ARMS`): each problem with no hint, the right answer and a wrong
  one as a hint, for the faithfulness probe (``--hints``).
"""

from prmkit.generate._hints import HINT_ARMS, hinted_problems
from prmkit.generate._passk import pass_at_k
from prmkit.generate._run import ENVS, generate_file, load_problems, parse_steps
from prmkit.generate._sampling import SampleReport, completion_to_trace, problems_from_file, sample_traces

__all__ = ["generate_file", "load_problems", "parse_steps", "ENVS", "sample_traces", "completion_to_trace",
           "problems_from_file", "SampleReport", "HINT_ARMS", "hinted_problems", "pass_at_k"]
