"""verl glue: custom reward functions over a PRM served by ``prmkit serve``, and a reward manager that
puts dense step rewards on the response's tokens.

**Reward functions.** verl's ``NaiveRewardManager`` calls ``compute_score(data_source, solution_str,
ground_truth, extra_info)`` once per sample (from a thread pool); its ``BatchRewardManager`` calls
``compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)`` once per batch (point
``custom_reward_function.path`` at this file and ``.name`` at the function). The PRM runs elsewhere,
behind ``prmkit serve``: ``$PRMKIT_REWARD_URL`` names it (``$PRMKIT_SERVE_TOKEN`` its token),
``$PRMKIT_REWARD_AGGREGATE`` the aggregator (``min``). The process's :class:`~prmkit.rl.PRMReward` is
built once, under a lock, whichever thread asks first (:func:`reward_function`).

The problem is ``extra_info["question"]`` (or ``"problem"``, or ``"prompt"``, a string or chat
messages, read as :func:`~prmkit.rl.prompt_text` reads a prompt). verl's own preprocessing decides
what is there, and some of it (``examples/data_preprocess/math_dataset.py``) writes no question: such a
solution is scored against an empty problem, as before, but never silently: the first one logs a
warning on the ``prmkit.rl`` logger, and every one is counted in the reward function's
``stats["no_problem"]`` and returned as ``prm_no_problem`` 1. The steps are the solution's non-empty
lines, ``<think>`` tags and end markers left out (:class:`~prmkit.serve.ReasoningSplitter`).

Each returns ``{"score": reward, "prm_unscored": 0 or 1, "prm_no_problem": 0 or 1}`` per sample: verl
takes ``score`` as the reward and logs the other keys. A solution the PRM could not score gets ``score``
0.0 and ``prm_unscored`` 1 (verl needs a number), and is counted in ``stats``.

    python -m verl.trainer.main_ppo ... \\
        custom_reward_function.path=$(python -c "import prmkit.rl._verl as m; print(m.__file__)") \\
        custom_reward_function.name=compute_score_batch reward_model.reward_manager=batch

**Dense step rewards.** :class:`PRMDenseRewardManager` is a reward manager (loaded by verl's
``reward.reward_manager.source=importlib``, ``.module.path`` this file, ``.name``
``PRMDenseRewardManager``): each step's reward (the PRM's step score, ``$PRMKIT_REWARD_SCALE`` and
``$PRMKIT_REWARD_SHIFT`` applied) goes on the response token that covers the step's last character
(:func:`~prmkit.rl.place_step_rewards`, on the very ids the policy generated), every other token 0, where
verl's managers put one number on the last token. The problem is the sample's ``extra_info`` as above,
else the last user turn of its decoded prompt (:func:`~prmkit.serve.problem_from`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["compute_score", "compute_score_batch", "reward_function", "dense_reward_function",
           "PRMDenseRewardManager", "PROBLEM_KEYS"]

log = logging.getLogger("prmkit.rl")

#: Where a sample's problem is looked for in verl's ``extra_info``, in order.
PROBLEM_KEYS = ("question", "problem", "prompt")

_REWARD: Any = None
_DENSE: dict[int, Any] = {}
_LOCK = threading.Lock()
_WARNED = False


def _url() -> str:
    from prmkit.errors import PrmkitError

    url = os.environ.get("PRMKIT_REWARD_URL")
    if not url:
        raise PrmkitError("set PRMKIT_REWARD_URL to the `prmkit serve` address (http://host:port)")
    return url


def reward_function() -> Any:
    """The process's :class:`~prmkit.rl.PRMReward` over ``$PRMKIT_REWARD_URL``: made on first use, once,
    under a lock (verl calls ``compute_score`` from many threads at once)."""
    global _REWARD
    if _REWARD is None:
        with _LOCK:
            if _REWARD is None:
                from prmkit.rl import PRMReward
                from prmkit.scoring import get_scorer

                _REWARD = PRMReward(get_scorer("remote", url=_url()),
                                    aggregate=os.environ.get("PRMKIT_REWARD_AGGREGATE", "min"))
    return _REWARD


def dense_reward_function(tokenizer: Any) -> Any:
    """The process's :class:`~prmkit.rl.DenseStepReward` over ``$PRMKIT_REWARD_URL`` for the policy's
    ``tokenizer``: made once per tokenizer, under the same lock."""
    key = id(tokenizer)
    if key not in _DENSE:
        with _LOCK:
            if key not in _DENSE:
                from prmkit.rl import DenseStepReward
                from prmkit.scoring import get_scorer

                _DENSE[key] = DenseStepReward(get_scorer("remote", url=_url()), tokenizer,
                                              scale=float(os.environ.get("PRMKIT_REWARD_SCALE", "1")),
                                              shift=float(os.environ.get("PRMKIT_REWARD_SHIFT", "0")))
    return _DENSE[key]


def _problem(extra_info: Any, stats: Any) -> str:
    """The problem in ``extra_info`` (:data:`PROBLEM_KEYS`); "" counted and, the first time, warned about."""
    global _WARNED
    from prmkit.rl import prompt_text

    info = extra_info if isinstance(extra_info, dict) else {}
    for key in PROBLEM_KEYS:
        value = info.get(key)
        if isinstance(value, str) and value.strip():
            return prompt_text(value)
        if isinstance(value, (list, tuple)) and value and all(isinstance(m, dict) for m in value):
            if text := prompt_text(list(value)):
                return text
    with _LOCK:
        stats["no_problem"] += 1
        first, _WARNED = not _WARNED, True
    if first:
        log.warning("verl: a solution arrived without a problem (extra_info has none of %s; verl's MATH "
                    "preprocessing writes none): it is scored against an empty problem. Add the question "
                    "to extra_info; reward_function().stats['no_problem'] counts them.", ", ".join(PROBLEM_KEYS))
    return ""


def compute_score_batch(data_sources: Sequence[Any], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Any] | None = None, **kwargs: Any) -> list[dict[str, float]]:
    """verl's ``BatchRewardManager`` contract (module docs): every solution of the batch in one call."""
    reward = reward_function()
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    problems = [_problem(info, reward.stats) for info in infos]
    values = reward(problems, list(solution_strs))
    return [{"score": 0.0 if v is None else float(v), "prm_unscored": float(v is None),
             "prm_no_problem": float(not p)} for v, p in zip(values, problems, strict=True)]


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, float]:
    """verl's custom reward contract, one sample (module docs)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info])[0]


class PRMDenseRewardManager:
    """A verl reward manager placing dense step rewards on each response's tokens (module docs).

    ``reward``: a :class:`~prmkit.rl.DenseStepReward` for the policy ``tokenizer`` (default: the process's
    one over ``$PRMKIT_REWARD_URL``, :func:`dense_reward_function`). Two ways in, for verl's two kinds of
    reward manager: ``manager(data)`` (``return_dict=True``: with ``reward_extra_info``) gives the
    ``[batch, response_length]`` reward tensor of a whole ``DataProto`` in one scorer call; the reward
    loop's ``await manager.run_single(data)`` gives one sample's per-token rewards, which
    :meth:`assemble_rm_scores` lays on the response tokens of the batch.
    """

    def __init__(self, config: Any = None, tokenizer: Any = None, compute_score: Any = None, *,
                 reward: Any = None, **kwargs: Any) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self._reward = reward

    @property
    def reward(self) -> Any:
        """The :class:`~prmkit.rl.DenseStepReward` in use."""
        if self._reward is None:
            self._reward = dense_reward_function(self.tokenizer)
        return self._reward

    def _samples(self, data: Any) -> tuple[list[str], list[list[int]], list[int]]:
        """Per sample: its problem, its valid response ids, and their number."""
        prompt_len = data.batch["prompts"].shape[-1]
        lengths = [int(n) for n in data.batch["attention_mask"][:, prompt_len:].sum(dim=-1).tolist()]
        infos = data.non_tensor_batch.get("extra_info")
        problems, ids = [], []
        for i, n in enumerate(lengths):
            info = infos[i] if infos is not None else None
            problem = self._problem_of(info, data.batch["prompts"][i], data.batch["attention_mask"][i, :prompt_len])
            problems.append(problem)
            ids.append([int(t) for t in data.batch["responses"][i][:n].tolist()])
        return problems, ids, lengths

    def _problem_of(self, info: Any, prompt_ids: Any, prompt_mask: Any) -> str:
        from prmkit.serve import problem_from

        has = isinstance(info, dict) and any(info.get(k) for k in PROBLEM_KEYS)
        if has or self.tokenizer is None:
            return _problem(info, self.reward.stats)
        # No problem in extra_info: the last user turn of the prompt as the policy saw it.
        kept = [int(t) for t, m in zip(prompt_ids.tolist(), prompt_mask.tolist(), strict=True) if m]
        return problem_from(self.tokenizer.decode(kept, skip_special_tokens=False))

    def dense(self, data: Any) -> tuple[list[list[float] | None], list[int]]:
        """Every sample's per-token rewards (None: unscored) and its valid response length."""
        problems, ids, lengths = self._samples(data)
        texts = [self.tokenizer.decode(x, skip_special_tokens=True, clean_up_tokenization_spaces=False) for x in ids]
        return self.reward(problems, texts, completion_ids=ids), lengths

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        import torch

        rows, lengths = self.dense(data)
        out = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        for i, (row, n) in enumerate(zip(rows, lengths, strict=True)):
            if row is not None:
                out[i, :n] = torch.tensor(row[:n], dtype=torch.float32)
        if not return_dict:
            return out
        return {"reward_tensor": out,
                "reward_extra_info": {"prm_unscored": [float(r is None) for r in rows]}}

    async def run_single(self, data: Any) -> dict[str, Any]:
        """The reward loop's per-sample call: ``reward_score`` is the sample's per-token rewards."""
        import asyncio

        rows, _ = await asyncio.get_running_loop().run_in_executor(None, self.dense, data[-1:])
        row = rows[0]
        return {"reward_score": [] if row is None else row,
                "reward_extra_info": {"prm_unscored": float(row is None)}}

    @classmethod
    def assemble_rm_scores(cls, data: Any, scores: Sequence[Sequence[float]]) -> Any:
        """Each sample's per-token rewards on its response tokens (``[batch, response_length]``)."""
        import torch

        out = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        for i, row in enumerate(scores):
            n = min(len(row), out.shape[-1])
            if n:
                out[i, :n] = torch.tensor(list(row)[:n], dtype=torch.float32)
        return out
