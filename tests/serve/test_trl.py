"""TRL ``reward_funcs`` through the remote scorer: ``PRMReward`` over ``http://...`` (a tiny seeded PRM
behind ``prmkit serve`` in this process) called as TRL's GRPOTrainer calls reward functions gives the
rewards the same model gives locally, to 1e-5.

The call is TRL's own: ``GRPOTrainer._calculate_rewards`` (trl 1.16.0, ``trl/trainer/grpo_trainer.py``)
run on a stand-in for the trainer that holds only what that method reads, so the keyword arguments
(``prompts``, ``completions``, ``completion_ids``, the dataset's columns, ``trainer_state``,
``log_extra``, ``log_metric``), the None -> NaN conversion and the ``log_metric`` hook are TRL's
(a private method: a later trl that renames it makes that test fail, not pass silently). The first
test makes the same call by hand, copied from that file, so it runs without trl:
``reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids_list,
**reward_kwargs)``."""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace

import pytest

from prmkit.serve import ServeConfig

PROBLEMS = ["Tom has 3 apples and buys 5 more. How many apples does he have?",
            "A bag holds 12 pears; 4 are eaten. How many are left?"]
COMPLETIONS = ["3 + 5 = 8.\nThe answer is 8.", "3 + 5 = 9.\nThe answer is 9.",
               "12 - 4 = 8.\nThe answer is 8.", "   "]  # the last has no step: None (TRL: NaN)


@pytest.fixture()
def served(tiny_rm, live_server):
    from prmkit.scoring import PrefixCachingScorer

    return live_server(PrefixCachingScorer(tiny_rm), ServeConfig())


def by_hand(tiny_rm, make_traces) -> list[float | None]:
    """min over the local model's step scores of each completion's lines."""
    out: list[float | None] = []
    for p, c in zip([PROBLEMS[0]] * 2 + [PROBLEMS[1]] * 2, COMPLETIONS, strict=True):
        steps = [line for line in c.split("\n") if line.strip()]
        out.append(min(tiny_rm.score(make_traces(p, [steps]))[0]) if steps else None)
    return out


def test_called_as_grpo_calls_it(tiny_rm, make_traces, served):
    from prmkit.rl import PRMReward

    prompts = [PROBLEMS[0]] * 2 + [PROBLEMS[1]] * 2
    metrics: dict[str, list[float]] = defaultdict(list)
    kwargs = {"answer": ["8", "8", "8", "8"], "trainer_state": SimpleNamespace(global_step=3),
              "log_extra": lambda column, values: None,
              "log_metric": lambda name, value: metrics[name].append(value)}
    remote = PRMReward.from_pretrained(served.url)
    got = remote(prompts=prompts, completions=COMPLETIONS, completion_ids=[[1, 2]] * 4, **kwargs)
    local = PRMReward(tiny_rm)(prompts=prompts, completions=COMPLETIONS, completion_ids=[[1, 2]] * 4, **kwargs)
    want = by_hand(tiny_rm, make_traces)
    assert got[3] is None and local[3] is None and want[3] is None
    assert got[:3] == pytest.approx(want[:3], abs=1e-5) and local[:3] == pytest.approx(want[:3], abs=1e-5)
    assert len({round(x, 5) for x in got[:3]}) == 3  # three different rewards: the check means something
    assert metrics["prm_min/unscored_frac"] == [0.25, 0.25]  # one call each, remote and local


def test_through_trls_own_reward_loop(tiny_rm, make_traces, served):
    """Conversational prompts and completions, as a chat dataset gives them to GRPO."""
    torch = pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    from accelerate import PartialState

    from prmkit.rl import PRMReward

    PartialState()  # TRL's logger needs accelerate's state; a single process here
    remote = PRMReward.from_pretrained(served.url)
    stub = SimpleNamespace(  # what _calculate_rewards reads of the trainer, nothing else
        accelerator=SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        state=SimpleNamespace(global_step=0), args=SimpleNamespace(report_to=[]),
        reward_funcs=[remote], reward_processing_classes=[None], reward_func_names=[remote.__name__],
        environments=None, _pending_metrics=defaultdict(list), _log_completion_extra=lambda c, v: None)
    stub._log_metric = lambda name, value: trl.GRPOTrainer._log_metric(stub, name, value)
    prompts = [[{"role": "system", "content": "Solve it step by step."}, {"role": "user", "content": p}]
               for p in [PROBLEMS[0]] * 2 + [PROBLEMS[1]] * 2]
    completions = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    inputs = [{"prompt": p, "answer": "8"} for p in prompts]
    rewards = trl.GRPOTrainer._calculate_rewards(stub, inputs, prompts, completions, [[1, 2]] * 4)
    got = rewards[:, 0].tolist()
    want = by_hand(tiny_rm, make_traces)
    assert got[:3] == pytest.approx(want[:3], abs=1e-5)
    assert math.isnan(got[3])  # None -> NaN: TRL leaves it out of the group's baseline, advantage 0
    assert stub._pending_metrics["prm_min/unscored_frac"] == [0.25]
