"""Deterministic fake policies and tiny traces for the labeler tests.

Importable by name (``conftest.py`` puts this folder on ``sys.path``), so process-pool workers and
the subprocess of the kill test can build the same policies from a ``PolicySpec``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from prmkit.labelers import PlanResult, RolloutLabeler
from prmkit.policies import Completion, GenerationRequest, SamplingParams, derive_seed
from prmkit.trace import Problem, Step, Trace

ANSWER = "42"
RIGHT = "We keep going.\nThe answer is 42."
WRONG = "We keep going.\nThe answer is 7."


def make_trace(tid: str, steps: Sequence[str], *, answer: str | None = ANSWER,
               final_answer: str | None = None) -> Trace:
    """A trace cut from one text (spans set, newline-separated), like ``prmkit generate`` makes."""
    text = "\n".join(steps)
    out, at = [], 0
    for s in steps:
        out.append(Step(s, kind="final" if s.startswith("The answer") else "reasoning",
                        span=(at, at + len(s))))
        at += len(s) + 1
    return Trace(id=tid, problem=Problem(f"Problem of {tid}: what is the answer?", answer=answer),
                 steps=out, final_answer=final_answer, text=text)


def comparable(obj: Any) -> Any:
    """A trace dict without what differs between runs by nature: timestamps and wall seconds."""
    if isinstance(obj, dict):
        return {k: comparable(v) for k, v in obj.items() if k not in ("time", "seconds")}
    if isinstance(obj, list):
        return [comparable(v) for v in obj]
    return obj


def prefix_steps(request: GenerationRequest) -> list[str]:
    return [line for line in request.prefix.split("\n") if line.strip()]


class RulePolicy:
    """Rollout ``r`` of request ``key`` reaches 42 by a rule:

    - ``table``: ``{key: m}`` — the first ``m`` rollouts of that request reach it (missing keys: 0);
    - ``oracle``: the prefix has no step containing ``BAD`` and a seeded coin (from
      ``derive_seed(params.seed, key, r)``) falls under ``p``.

    ``delay`` seconds of sleep per rollout; ``fail_after`` raises after that many requests (an
    interrupted run). Every request is recorded in ``requests`` (with its ``n``).
    """

    name = "rule"

    def __init__(self, table: dict[str, int] | None = None, *, p: float = 1.0, delay: float = 0.0,
                 fail_after: int | None = None, model_id: str = "rule-policy") -> None:
        self.table = table
        self.p = p
        self.delay = delay
        self.fail_after = fail_after
        self.model_id = model_id
        self.requests: list[tuple[GenerationRequest, int]] = []

    def reaches(self, request: GenerationRequest, r: int, seed: int | None) -> bool:
        if self.table is not None:
            return r < self.table.get(request.key, 0)
        if any("BAD" in s for s in prefix_steps(request)):
            return False
        s = derive_seed(seed, request.key, r)
        return (s if s is not None else 0) / 2**32 < self.p

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        out = []
        for req in requests:
            if self.fail_after is not None and len(self.requests) >= self.fail_after:
                raise RuntimeError("policy went away")
            self.requests.append((req, params.n))
            row = []
            for r in range(params.n):
                text = RIGHT if self.reaches(req, r, params.seed) else WRONG
                row.append(Completion(text, "stop", num_tokens=len(text.split()), prompt_tokens=10))
            if self.delay:
                time.sleep(self.delay * params.n)
            out.append(row)
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model_id, "p": self.p}


class JudgePolicy:
    """A judge that answers from a list of replies per trace id (``{trace_id: [reply, ...]}``; the
    attempt number picks the reply, the last one repeating), or judges ``BAD`` steps incorrect."""

    name = "fake_judge"

    def __init__(self, replies: dict[str, list[str]] | None = None, model_id: str = "fake-judge"
                 ) -> None:
        self.replies = replies or {}
        self.model_id = model_id
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams
                 ) -> list[list[Completion]]:
        out = []
        for req in requests:
            self.requests.append(req)
            trace_id, _, attempt = req.key.partition("@judge#")
            if trace_id in self.replies:
                options = self.replies[trace_id]
                text = options[min(int(attempt), len(options) - 1)]
            else:
                user = req.messages[-1]["content"]
                steps = [line for line in user.splitlines() if line.startswith("Step ")
                         and ":" in line and not line.startswith("Step i")]
                text = "\n".join(f"{s.split(':')[0]}: {'incorrect' if 'BAD' in s else 'correct'}"
                                 for s in steps)
            out.append([Completion(text, "stop", num_tokens=len(text.split()))
                        for _ in range(params.n)])
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model_id}


class StepLengthLabeler(RolloutLabeler):
    """A labeler defined outside prmkit, in one file: step ``i`` gets ``+1`` when it has at most
    ``longest`` characters, else ``-1``. It takes one shared option (``seed``, only recorded) and
    generates nothing, so it has no channels and needs no store."""

    name = "step_length"
    sources = ("step_length",)
    needs_answer = False

    def __init__(self, *, longest: int = 3, seed: int = 0) -> None:
        super().__init__()
        self.longest = longest
        self.args = {"longest": longest, "seed": seed}

    def plan(self, trace: Trace) -> PlanResult:
        return PlanResult([[self.make_label(1 if len(s.text) <= self.longest else -1, "step_length")]
                           for s in trace.steps])
