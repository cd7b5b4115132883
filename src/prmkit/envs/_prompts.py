"""Prompts that ask a policy for one step per line and a final "The answer is N." line.

The output format matters for everything downstream: steps are cut at newlines, the answer is read
from the last line, and the symbolic checker reads the equations of each line. Worked examples
(``shots``) show that format; for ``arith`` they come from the environment itself with a seed no
evaluation problem uses, for other sources from a few hand-written grade-school problems.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prmkit.envs._arith import ArithConfig, ArithEnv
from prmkit.errors import PrmkitError
from prmkit.policies import GenerationRequest
from prmkit.trace import Problem

__all__ = ["PromptBuilder", "SYSTEM_PROMPT", "HAND_WRITTEN_SHOTS"]

SYSTEM_PROMPT = ("Solve the math word problem step by step. Write each step on its own line with "
                 "its calculation, then finish with the line 'The answer is N.'")

#: Hand-written worked examples in the line-per-step format (used for GSM8K / MATH problems).
HAND_WRITTEN_SHOTS: list[tuple[str, str]] = [
    ("A farmer has 14 cows and buys 9 more. He then sells 5 cows. How many cows does he have?",
     "He buys 9 more: 14 + 9 = 23.\nHe sells 5: 23 - 5 = 18.\nThe answer is 18."),
    ("Pens cost $3 each. Ana buys 4 pens and pays with a $20 bill. How much change does she get?",
     "The pens cost 4 * 3 = 12 dollars.\nHer change is 20 - 12 = 8 dollars.\nThe answer is 8."),
    ("A box holds 6 rows of 5 eggs. 7 eggs break. How many eggs are left?",
     "The box holds 6 * 5 = 30 eggs.\nAfter 7 break: 30 - 7 = 23.\nThe answer is 23."),
]

#: Seed of the arith problems used as worked examples (evaluation sets use small seeds).
SHOT_SEED = 10_007


@dataclass
class PromptBuilder:
    """Builds the chat request for a problem: system prompt, ``shots`` worked examples, the problem.

    ``source="arith"`` draws the examples from :class:`ArithEnv` with ``config`` (same difficulty,
    seed :data:`SHOT_SEED`); any other source uses :data:`HAND_WRITTEN_SHOTS`.
    """

    source: str = "arith"
    shots: int = 2
    system: str = SYSTEM_PROMPT
    config: ArithConfig | None = None

    def __post_init__(self) -> None:
        if self.shots < 0:
            raise PrmkitError("shots must be >= 0")
        if self.source == "arith":
            cfg = self.config or ArithConfig()
            env = ArithEnv(ArithConfig(**{**cfg.to_dict(), "seed": SHOT_SEED,
                                          "steps": cfg.steps, "ops": tuple(cfg.ops)}))
            self._shots = [(p.text, p.solution or "") for p in env.problems(self.shots)]
        else:
            if self.shots > len(HAND_WRITTEN_SHOTS):
                raise PrmkitError(f"at most {len(HAND_WRITTEN_SHOTS)} hand-written shots")
            self._shots = HAND_WRITTEN_SHOTS[: self.shots]

    @classmethod
    def for_policy(cls, policy: Any, *, config: ArithConfig | None = None, source: str | None = None,
                   shots: int | None = None) -> PromptBuilder:
        """The prompts a policy expects: the arith environment's when ``config`` is given, else
        ``source``'s (default "dataset"); ``shots`` defaults to the policy's ``prompt_shots`` (0 for
        a policy tuned on zero-shot prompts), else 2."""
        if shots is None:
            shots = getattr(policy, "prompt_shots", None)
            shots = 2 if shots is None else shots
        if config is not None:
            return cls("arith", shots=shots, config=config)
        return cls(source or "dataset", shots=shots)

    def messages(self, problem: Problem) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = [{"role": "system", "content": self.system}]
        for q, a in self._shots:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        msgs.append({"role": "user", "content": problem.text})
        return msgs

    def request(self, problem: Problem, *, prefix: str = "", key: str | None = None
                ) -> GenerationRequest:
        return GenerationRequest(self.messages(problem), prefix=prefix,
                                 key=key or problem.id or problem.text)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "shots": self.shots, "system": self.system}
