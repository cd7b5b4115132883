"""Verifiers as RL rewards, following the trainer's contract exactly.

- :class:`PRMReward`: a PRM or ORM as a TRL GRPO reward function,
  ``reward_fn(prompts, completions, **kwargs) -> list[float | None]`` (trace level: split, score,
  aggregate; ``None`` for an unscorable completion; ``__name__`` for TRL's logs).
- :class:`DenseStepReward` / :func:`place_step_rewards`: per-step rewards placed on the *policy's*
  tokens (the token covering each step's last character), for any pair of policy and PRM tokenizers.
- ``prmkit/rl/_verl.py``: a verl custom reward function (``compute_score``) over a PRM served by
  ``prmkit serve`` (point verl's ``custom_reward_function.path`` at the file).

The same scorer object serves evaluation (``prmkit score`` / ``select`` / ``search``) and rewards, so
offline metrics and RL signals cannot drift apart.
"""

from prmkit.rl._dense import DenseRewards, DenseStepReward, place_step_rewards, token_char_ends
from prmkit.rl._rewards import TRUNCATION, PRMReward, completion_text, prompt_text

__all__ = ["PRMReward", "completion_text", "prompt_text", "TRUNCATION",
           "DenseRewards", "DenseStepReward", "place_step_rewards", "token_char_ends"]
