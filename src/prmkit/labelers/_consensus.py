"""``consensus``: keep a step's label only where Monte Carlo and an LLM judge agree.

Each trace is labelled by ``mc`` (hard estimation, ``k`` rollouts per prefix) and by ``judge`` at the
same time (their rollouts and judge calls are in flight together). A step whose ``mc_hard`` label and
judge verdict agree gets a ``consensus`` label with that value; a step where they disagree, or where
either has no label (an unparseable judge answer), gets none and is counted as dropped
(``consensus_dropped_disagree``, ``consensus_dropped_missing`` in the report). This is the filter of
"The Lessons of Developing Process Reward Models in Mathematical Reasoning" (Zhang et al., 2025).

The ``mc_hard`` / ``mc_soft`` and ``judge`` labels themselves are kept on the steps too
(``keep_components=False`` drops them), each with its own labeler's name and arguments.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from prmkit.labelers._base import RolloutLabeler, policy_args
from prmkit.labelers._executors import Executor
from prmkit.labelers._judge import JUDGE_SYSTEM, JudgeLabeler
from prmkit.labelers._mc import MCLabeler
from prmkit.labelers._plan import Plan, PlanResult, gather
from prmkit.policies import GenerationRequest
from prmkit.trace import StepLabel, Trace

__all__ = ["ConsensusLabeler"]


class ConsensusLabeler(RolloutLabeler):
    """``mc_hard`` and judge agreement. ``policy`` makes the rollouts, ``judge_policy`` (default:
    ``policy``) judges; the other arguments go to :class:`~prmkit.labelers.MCLabeler` and
    :class:`~prmkit.labelers.JudgeLabeler` (``judge_*`` to the judge)."""

    name = "consensus"
    sources = ("consensus",)

    def __init__(self, policy: Any, *, judge_policy: Any = None, k: int = 8,
                 max_new_tokens: int = 128, temperature: float = 0.7, top_p: float = 1.0,
                 seed: int | None = 0, shots: int | None = None, retries: int = 2,
                 judge_max_new_tokens: int = 256, judge_temperature: float = 0.7,
                 allow_extra_text: bool = False, judge_system: str = JUDGE_SYSTEM,
                 keep_components: bool = True, workers: int | None = None,
                 judge_workers: int | None = None, ray_address: str | None = None,
                 answer_method: str = "auto") -> None:
        super().__init__()
        judge_policy = policy if judge_policy is None else judge_policy
        self.mc = MCLabeler(policy, k=k, max_new_tokens=max_new_tokens, temperature=temperature,
                            top_p=top_p, seed=seed, shots=shots, workers=workers,
                            ray_address=ray_address, answer_method=answer_method)
        self.judge = JudgeLabeler(judge_policy, retries=retries, max_new_tokens=judge_max_new_tokens,
                                  temperature=judge_temperature, top_p=top_p, seed=seed,
                                  allow_extra_text=allow_extra_text, system=judge_system,
                                  workers=judge_workers if judge_workers is not None else workers,
                                  ray_address=ray_address)
        self.keep_components = keep_components
        self.answer_method = answer_method
        self.channels = {"rollout": self.mc.channels["rollout"], "judge": self.judge.channels["judge"]}
        self.args = {"mc": dict(self.mc.args), "judge": dict(self.judge.args),
                     "judge_policy": policy_args(judge_policy), "keep_components": keep_components}
        if keep_components:
            self.sources = ("consensus", "mc_hard", "mc_soft", "judge")

    def start(self) -> dict[str, Executor]:
        executors = super().start()
        # The sub-labelers write labels that name their own model.
        self.mc.channels["rollout"].info = self.channels["rollout"].info
        self.judge.channels["judge"].info = self.channels["judge"].info
        return executors

    def request(self, channel: str, trace: Trace, prefix: int) -> GenerationRequest:
        return (self.judge if channel == "judge" else self.mc).request(channel, trace, prefix)

    def plan(self, trace: Trace) -> Plan:
        mc, judge = yield from gather(self.mc.plan(trace), self.judge.plan(trace))
        counts: Counter[str] = Counter()
        counts.update(mc.counts)
        counts.update(judge.counts)
        labels: list[list[StepLabel]] = []
        for mc_labs, judge_labs in zip(mc.labels, judge.labels, strict=True):
            hard = next((lab for lab in mc_labs if lab.source == "mc_hard"), None)
            verdict = judge_labs[0] if judge_labs else None
            out = list(mc_labs) + list(judge_labs) if self.keep_components else []
            if hard is None or verdict is None:
                counts["consensus_dropped_missing"] += 1
            elif hard.value != verdict.value:
                counts["consensus_dropped_disagree"] += 1
            else:
                counts["consensus_kept"] += 1
                rollouts = (hard.rollouts or 0) + (verdict.rollouts or 0)
                cost = {key: hard.cost.get(key, 0) + verdict.cost.get(key, 0)
                        for key in set(hard.cost) | set(verdict.cost)}
                mc_soft = next((lab.value for lab in mc_labs if lab.source == "mc_soft"), None)
                out.append(self.make_label(hard.value, "consensus", count=rollouts,
                                           meta={"mc_soft": mc_soft,
                                                 "judge_model": self.model_id("judge")}))
                out[-1].cost = cost
            labels.append(out)
        notes = {"mc": mc.notes, "judge": judge.notes,
                 "dropped": counts["consensus_dropped_missing"] + counts["consensus_dropped_disagree"]}
        return PlanResult(labels, counts=counts, notes=notes, issues=mc.issues + judge.issues)
