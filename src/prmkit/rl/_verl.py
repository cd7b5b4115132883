"""A verl custom reward function over a PRM served by ``prmkit serve``.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once per sample (its
``custom_reward_function.path`` / ``.name`` settings point at this file and this function). The PRM
runs elsewhere, behind ``prmkit serve``: ``$PRMKIT_REWARD_URL`` names it (``$PRMKIT_SERVE_TOKEN`` its
token), ``$PRMKIT_REWARD_AGGREGATE`` the aggregator (``min``). The problem is ``extra_info["question"]``
(or ``"problem"``, or ``"prompt"``; verl's dataset preprocessing decides what is there), the steps the
solution's non-empty lines, as :class:`~prmkit.rl.PRMReward` reads them.

It returns ``{"score": reward, "prm_unscored": 0 or 1}``: verl takes ``score`` as the reward and logs
the other keys. A solution the PRM could not score gets ``score`` 0.0 and ``prm_unscored`` 1 (verl
needs a number), and is counted in the reward function's ``stats``.

    python -m verl.trainer.main_ppo ... \\
        custom_reward_function.path=$(python -c "import prmkit.rl._verl as m; print(m.__file__)") \\
        custom_reward_function.name=compute_score
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["compute_score", "reward_function"]

_REWARD: Any = None


def reward_function() -> Any:
    """The process's :class:`~prmkit.rl.PRMReward` over ``$PRMKIT_REWARD_URL`` (made on first use)."""
    global _REWARD
    if _REWARD is None:
        from prmkit.errors import PrmkitError
        from prmkit.rl import PRMReward
        from prmkit.scoring import get_scorer

        url = os.environ.get("PRMKIT_REWARD_URL")
        if not url:
            raise PrmkitError("set PRMKIT_REWARD_URL to the `prmkit serve` address (http://host:port)")
        _REWARD = PRMReward(get_scorer("remote", url=url),
                            aggregate=os.environ.get("PRMKIT_REWARD_AGGREGATE", "min"))
    return _REWARD


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, float]:
    """verl's custom reward contract (module docs)."""
    info = extra_info if isinstance(extra_info, dict) else {}
    problem = next((str(info[k]) for k in ("question", "problem", "prompt") if info.get(k)), "")
    value = reward_function()([problem], [solution_str])[0]
    return {"score": 0.0 if value is None else float(value), "prm_unscored": float(value is None)}
