"""``scripted``: a deterministic mock backend for tests and examples — a real registered policy.

Completions come from a list or from a callable ``fn(request, index) -> str``. Stop strings and
``max_new_tokens`` (counted in whitespace-separated words) apply as in a real backend, so code under
test sees realistic ``finish_reason`` values.

Which completion a sample gets is a function of the request alone (``order="seed"``, the default),
as a seeded real backend's is: sample ``k`` of a request keyed ``key`` with seed ``seed`` takes list
item ``(derive_seed(seed, key) + k) % len(list)`` (start 0 for a request without a key), and a
callable is called with ``index = k``. The samples of one request run through the list in turn, and
the same request gets the same completions in any batch, any order, and after a resume, so a
resumed ``prmkit label`` run writes the labels an uninterrupted one would.
``order="served"`` replays the list in turn across calls instead (``index`` counts every completion
served so far): a fixed script for code that makes one request after another, which a resumed run
cannot repeat (:attr:`ScriptedPolicy.reproducible` is False).

``delay`` (seconds per request, default 0) stands in for a slow backend, so a fault test can kill a
run while it is under way (``prmkit label --policy scripted -p delay=0.05``); it changes no
completion and is not part of :meth:`~ScriptedPolicy.describe`, so runs with and without it share
their stored rollouts.

>>> p = ScriptedPolicy(["2 + 2 = 4\\nThe answer is 4.", "2 + 2 = 5\\nThe answer is 5."])
>>> out = p.generate([GenerationRequest([{"role": "user", "content": "2+2?"}])], SamplingParams(n=3))
>>> [c.text.splitlines()[-1] for c in out[0]]
['The answer is 4.', 'The answer is 5.', 'The answer is 4.']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from prmkit._progress import report_within
from prmkit.errors import PrmkitError
from prmkit.policies._base import Completion, GenerationRequest, SamplingParams, apply_stop, derive_seed

__all__ = ["ScriptedPolicy"]

#: How a :class:`ScriptedPolicy` picks completions.
ORDERS = ("seed", "served")


class ScriptedPolicy:
    """Replays scripted completions. ``completions`` is a list of strings or a callable
    ``(request, index) -> str``; ``order`` says what picks them (see the module docs): ``"seed"``
    (the request's key and seed: resumable) or ``"served"`` (a counter across calls); ``delay``:
    seconds of sleep per request (a slow backend, for fault tests)."""

    name = "scripted"

    def __init__(self, completions: Sequence[str] | Callable[[GenerationRequest, int], str],
                 model_id: str = "scripted", *, order: str = "seed", delay: float = 0.0) -> None:
        if not callable(completions) and not completions:
            raise PrmkitError("scripted policy needs at least one completion")
        if order not in ORDERS:
            raise PrmkitError(f"scripted policy: order must be one of {', '.join(ORDERS)}, got {order!r}")
        self.completions = completions
        self.model_id = model_id
        self.order = order
        self.delay = float(delay)
        #: Completions handed out so far (every call, either order).
        self.served = 0
        self.requests: list[GenerationRequest] = []

    @property
    def reproducible(self) -> bool:
        """Whether a request always gets the same completions, whatever came before it (what a
        resumed labeling run needs to equal an uninterrupted one)."""
        return self.order == "seed"

    def _pick(self, request: GenerationRequest, params: SamplingParams, k: int) -> str:
        index = self.served if self.order == "served" else k
        self.served += 1
        if callable(self.completions):
            return self.completions(request, index)
        if self.order == "seed" and request.key:
            index += derive_seed(params.seed if params.seed is not None else 0, request.key) or 0
        return self.completions[index % len(self.completions)]

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        out = []
        for i, req in enumerate(requests):
            self.requests.append(req)
            if self.delay > 0:
                time.sleep(self.delay)
                report_within((i + 1) / len(requests), f"{i + 1}/{len(requests)} requests done")
            row = []
            for k in range(params.n):
                text, stopped = apply_stop(self._pick(req, params, k), params.stop)
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
        d = {"backend": self.name, "model": self.model_id}
        if self.order != "seed":
            d["order"] = self.order
        return d
