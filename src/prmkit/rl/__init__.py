"""Verifiers as RL rewards, following the trainer's contract exactly.

- :class:`PRMReward`: a PRM or ORM as a TRL GRPO reward function,
  ``reward_fn(prompts, completions, **kwargs) -> list[float | None]`` (trace level: split, score,
  aggregate; ``None`` for an unscorable completion; ``__name__`` for TRL's logs).
- :class:`DenseStepReward` / :func:`place_step_rewards`: per-step rewards placed on the *policy's*
  tokens (the token covering each step's last character), for any pair of policy and PRM tokenizers.
- ``prmkit/rl/_verl.py``: a verl custom reward function (``compute_score``) over a PRM served by
  ``prmkit serve`` (point verl's ``custom_reward_function.path`` at the file).
- :func:`rl_train` (``prmkit rl``): GRPO / RLOO of a LoRA policy on ``arith`` against any weighted mix
  of outcome, PRM, dense PRM, PAV and symbolic-oracle step rewards (:class:`RLConfig`).
- :func:`gaming_curve` / :func:`gaming_steps` / :func:`fooling_traces`: the verifier-gaming curve of a
  run (held-out PRM reward against true step validity) and the held-out traces that fool the PRM.

The same scorer object serves evaluation (``prmkit score`` / ``select`` / ``search``) and rewards, so
offline metrics and RL signals cannot drift apart.
"""

from prmkit.rl._advantages import BASELINES, clipped_token_loss, dense_advantages, group_advantages
from prmkit.rl._config import REWARD_COMPONENTS, RLConfig, load_rl_config
from prmkit.rl._dense import DenseRewards, DenseStepReward, place_step_rewards, token_char_ends
from prmkit.rl._gaming import (
           FOOL_THRESHOLD,
           GAMING_DELTA,
           fooling_steps,
           fooling_traces,
           gaming_curve,
           gaming_steps,
)
from prmkit.rl._grpo import RLResult, rl_train
from prmkit.rl._rewards import TRUNCATION, PRMReward, completion_text, prompt_text

__all__ = ["PRMReward", "completion_text", "prompt_text", "TRUNCATION",
           "DenseRewards", "DenseStepReward", "place_step_rewards", "token_char_ends",
           "RLConfig", "load_rl_config", "REWARD_COMPONENTS", "rl_train", "RLResult", "BASELINES",
           "group_advantages", "dense_advantages", "clipped_token_loss",
           "gaming_curve", "gaming_steps", "fooling_steps", "fooling_traces", "FOOL_THRESHOLD", "GAMING_DELTA"]
