"""``scripted``: a deterministic mock backend for tests and examples — a real registered policy.

Completions come from a list (used in turn, cycling) or from a callable
``fn(request, index) -> str``. Stop strings and ``max_new_tokens`` (counted in whitespace-separated
words) apply as in a real backend, so code under test sees realistic ``finish_reason`` values.

>>> p = ScriptedPolicy(["2 + 2 = 4\\nThe answer is 4.", "2 + 2 = 5\\nThe answer is 5."])
>>> out = p.generate([GenerationRequest([{"role": "user", "content": "2+2?"}])], SamplingParams(n=3))
>>> [c.text.splitlines()[-1] for c in out[0]]
['The answer is 4.', 'The answer is 5.', 'The answer is 4.']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.policies._base import Completion, GenerationRequest, SamplingParams, apply_stop

__all__ = ["ScriptedPolicy"]


class ScriptedPolicy:
    """Replays scripted completions. ``completions`` is a list of strings or a callable
    ``(request, index) -> str`` where ``index`` counts the completions served so far."""

    name = "scripted"

    def __init__(self, completions: Sequence[str] | Callable[[GenerationRequest, int], str],
                 model_id: str = "scripted") -> None:
        if not callable(completions) and not completions:
            raise PrmkitError("scripted policy needs at least one completion")
        self.completions = completions
        self.model_id = model_id
        self.served = 0
        self.requests: list[GenerationRequest] = []

    def _next(self, request: GenerationRequest) -> str:
        i = self.served
        self.served += 1
        if callable(self.completions):
            return self.completions(request, i)
        return self.completions[i % len(self.completions)]

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        out = []
        for req in requests:
            self.requests.append(req)
            row = []
            for _ in range(params.n):
                text, stopped = apply_stop(self._next(req), params.stop)
                words = text.split(" ")
                finish = "stop"
                if len(words) > params.max_new_tokens:
                    text, finish = " ".join(words[: params.max_new_tokens]), "length"
                row.append(Completion(text, finish, num_tokens=len(text.split()),
                                      prompt_tokens=sum(len(str(m.get("content") or "").split())
                                                        for m in req.messages)))
            out.append(row)
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model_id}
