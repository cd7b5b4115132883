"""The prompt a rollout continues: the one the trace was generated with, else the default one."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from prmkit.provenance import GenerateProvenance, PromptRef
from prmkit.trace import Trace

if TYPE_CHECKING:
    from prmkit.envs import ArithConfig

__all__ = ["rollout_messages"]


@lru_cache(maxsize=64)
def _builder(source: str, shots: int, system: str, config: ArithConfig | None) -> Any:
    from prmkit.envs import HAND_WRITTEN_SHOTS, PromptBuilder

    if config is not None:
        return PromptBuilder("arith", shots=shots, system=system, config=config)
    return PromptBuilder(source, shots=min(shots, len(HAND_WRITTEN_SHOTS)), system=system)


def rollout_messages(trace: Trace, shots: int | None = None, policy_shots: int | None = None
                     ) -> list[dict[str, Any]]:
    """The chat prompt a rollout of ``trace`` continues: the prompt the trace was generated with
    when its provenance records one (``prmkit generate`` does), else the default prompt with
    ``shots`` worked examples (the policy's preference, else 2). ``arith`` problems draw their
    examples from the environment, like ``prmkit generate``."""
    from prmkit.envs import SYSTEM_PROMPT, ArithConfig

    gen = next((p.typed for p in reversed(trace.provenance) if p.stage == "generate"), None)
    prompt = (gen.prompt if isinstance(gen, GenerateProvenance) else None) or PromptRef()
    if shots is None:
        shots = prompt.shots
    if shots is None:
        shots = policy_shots if policy_shots is not None else 2
    system = prompt.system or SYSTEM_PROMPT
    arith = (trace.problem.meta or {}).get("arith")
    config = None
    if arith and "config" in arith:
        config = ArithConfig.from_dict(arith["config"], where=f"trace {trace.id}: problem.meta.arith.config")
    return _builder(prompt.source or "dataset", int(shots), system, config).messages(trace.problem)
