"""The prompt a rollout continues: the one the trace was generated with, else the default one."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from prmkit.provenance import GenerateProvenance
from prmkit.trace import Trace

__all__ = ["rollout_messages"]


@lru_cache(maxsize=64)
def _builder(source: str, shots: int, system: str, config_json: str | None) -> Any:
    import json

    from prmkit.envs import HAND_WRITTEN_SHOTS, ArithConfig, PromptBuilder

    if config_json is not None:
        cfg = json.loads(config_json)
        steps = cfg.get("steps", 3)
        cfg = {**cfg, "ops": tuple(cfg.get("ops", ("+", "-", "*"))),
               "steps": tuple(steps) if isinstance(steps, list) else steps}
        return PromptBuilder("arith", shots=shots, system=system, config=ArithConfig(**cfg))
    return PromptBuilder(source, shots=min(shots, len(HAND_WRITTEN_SHOTS)), system=system)


def rollout_messages(trace: Trace, shots: int | None = None, policy_shots: int | None = None
                     ) -> list[dict[str, Any]]:
    """The chat prompt a rollout of ``trace`` continues: the prompt the trace was generated with
    when its provenance records one (``prmkit generate`` does), else the default prompt with
    ``shots`` worked examples (the policy's preference, else 2). ``arith`` problems draw their
    examples from the environment, like ``prmkit generate``."""
    import json

    from prmkit.envs import SYSTEM_PROMPT

    gen = next((p.typed for p in reversed(trace.provenance) if p.stage == "generate"), None)
    prompt = (gen.prompt if isinstance(gen, GenerateProvenance) else None) or {}
    if shots is None:
        shots = prompt.get("shots")
    if shots is None:
        shots = policy_shots if policy_shots is not None else 2
    system = prompt.get("system") or SYSTEM_PROMPT
    arith = (trace.problem.meta or {}).get("arith")
    config = json.dumps(arith["config"], sort_keys=True) if arith and "config" in arith else None
    return _builder(prompt.get("source", "dataset"), int(shots), system, config).messages(trace.problem)
