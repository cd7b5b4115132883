"""``PRMReward`` and ``DenseStepReward`` cross into a spawned process, as TRL's ``AsyncGRPOTrainer`` sends
its reward functions (``trl/experimental/async_grpo/async_rollout_worker.py``: the loop runs in an
``mp.get_context("spawn")`` child, every reward function pickled, then called through
``asyncio.to_thread(reward_func, completions=..., prompts=..., completion_ids=..., **columns)``).
Issue 48: a remote one raised ``TypeError: cannot pickle '_thread.RLock'``.

A remote reward function travels as its URL and options, a local one as its checkpoint path; both are
rebuilt in the child on first use, and must give there the rewards they give here. The trainer itself
is not run: it needs a vLLM server for generation.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import pickle

import pytest

from prmkit.rl import DenseStepReward, PRMReward
from prmkit.scoring import PrefixCachingScorer, get_scorer
from prmkit.serve import ServeConfig

PROMPTS = ["<|im_start|>user\nTom has 3 apples and buys 5 more. How many?<|im_end|>\n<|im_start|>assistant\n"] * 2
COMPLETIONS = ["3 + 5 = 8.\nThe answer is 8.", "3 + 5 = 9.\n</think>\nThe answer is 9.<|im_end|>"]


def _child(blobs: list[bytes], out) -> None:
    """In the spawned child: unpickle each reward function and call it as AsyncGRPO's score loop does."""
    async def score(fn):
        return await asyncio.to_thread(fn, completions=COMPLETIONS, prompts=PROMPTS, completion_ids=None)

    try:
        out.put([asyncio.run(score(pickle.loads(b))) for b in blobs])
    except BaseException as e:  # the parent reports it
        out.put(repr(e))


def _in_spawned_child(*fns) -> list:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_child, args=([pickle.dumps(f) for f in fns], out))
    p.start()
    got = out.get(timeout=120)
    p.join(30)
    assert not isinstance(got, str), got
    return got


@pytest.mark.slow
def test_remote_and_local_reward_functions_pickle_and_score_in_a_spawned_child(tiny_rm, live_server, tmp_path):
    from prmkit.models import build_char_tokenizer

    tiny_rm.save_pretrained(tmp_path / "prm")
    server = live_server(PrefixCachingScorer(tiny_rm), ServeConfig())
    remote = PRMReward(get_scorer("remote", url=server.url, timeout=30.0))
    local = PRMReward.from_pretrained(str(tmp_path / "prm"), aggregate="last")
    dense = DenseStepReward(get_scorer("remote", url=server.url), build_char_tokenizer())
    here = [remote(PROMPTS, COMPLETIONS), local(PROMPTS, COMPLETIONS), dense(PROMPTS, COMPLETIONS)]
    assert remote.stats["completions"] == 2  # counted here; a copy starts at zero

    remote_blob = pickle.dumps(remote)
    assert b"RLock" not in remote_blob and b"tiny-prm" not in pickle.dumps(local)  # no model in the local pickle
    there = _in_spawned_child(remote, local, dense)
    for a, b in zip(here[:2], there[:2], strict=True):
        assert b == pytest.approx(a, abs=1e-6)
    assert [[round(x, 6) for x in r] for r in there[2]] == [[round(x, 6) for x in r] for r in here[2]]
    # One reward per policy token of the completion as written, its end token included.
    ids = build_char_tokenizer()(COMPLETIONS[1], add_special_tokens=False)["input_ids"]
    assert len(there[2][1]) == len(ids) and sum(r != 0 for r in there[2][1]) == 2
