"""``judge``: step verdicts from an LLM judge, read by a strict parser that never guesses.

The judge (any policy backend) sees the problem and the numbered steps and must answer with exactly
one line per step, in order::

    Step 1: correct
    Step 2: incorrect

:func:`parse_verdicts` accepts that and nothing else: each line ``Step i: correct`` or
``Step i: incorrect`` (any case, optional trailing period, blank lines ignored), every step exactly
once, no other text (``allow_extra_text=True`` ignores lines that do not start with "Step", for judges
that cannot help a preamble). An answer that breaks a rule is *unparseable*: the judge is asked again,
up to ``retries`` more times, each attempt with its own seed (attempt ``a`` is stored as prefix
``-1 - a``). If no attempt parses, the trace's steps stay unlabelled — a verdict is never guessed from
a malformed answer — and the report counts it (``judge_unparseable`` attempts, ``judge_failed``
traces) with the reason.

Labels: +1 (correct) / -1 (incorrect), source ``judge``, with the judge's model and the cost of every
attempt. The judge samples at ``temperature`` (0.7 by default, so that a retry can come out
differently; use 0 for a greedy judge and ``retries=0``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.labelers._base import RolloutLabeler, check_k, policy_args, sampling_params
from prmkit.labelers._plan import Channel, Need, Plan, PlanResult, Rollout
from prmkit.policies import GenerationRequest
from prmkit.provenance import redact_text, secrets_of
from prmkit.trace import Trace

__all__ = ["JudgeLabeler", "JudgeParseError", "parse_verdicts", "judge_messages", "JUDGE_SYSTEM",
           "judge_prefix"]

JUDGE_SYSTEM = ("You check step-by-step solutions to math problems. Judge every step on its own: "
                "is its reasoning and arithmetic correct, given the problem and the steps before it?")
_INSTRUCTION = ("Check every step. Reply with exactly {n} lines, one per step and nothing else, each "
                "of the form \"Step i: correct\" or \"Step i: incorrect\".")
_LINE_RE = re.compile(r"^step\s+(\d+)\s*:\s*(correct|incorrect)\s*\.?$", re.IGNORECASE)
_STEP_START_RE = re.compile(r"^step\b", re.IGNORECASE)


class JudgeParseError(PrmkitError):
    """A judge's answer that breaks the output format; the message says which rule."""


def judge_prefix(attempt: int) -> int:
    """The store's prefix index of judge attempt ``attempt`` (0-based): ``-1 - attempt``."""
    return -1 - attempt


def parse_verdicts(text: str, n_steps: int, *, allow_extra_text: bool = False) -> list[bool]:
    """The verdict on each of ``n_steps`` steps (True: correct), or :class:`JudgeParseError`.

    >>> parse_verdicts("Step 1: correct\\nStep 2: Incorrect.", 2)
    [True, False]
    >>> parse_verdicts("Step 1: correct", 2)
    Traceback (most recent call last):
    ...
    prmkit.labelers._judge.JudgeParseError: no verdict for step 2
    """
    verdicts: dict[int, bool] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _LINE_RE.match(line)
        if m is None:
            if allow_extra_text and not _STEP_START_RE.match(line):
                continue
            raise JudgeParseError(f"line {lineno} is not 'Step i: correct|incorrect': {line[:80]!r}")
        i = int(m.group(1))
        if not 1 <= i <= n_steps:
            raise JudgeParseError(f"line {lineno} names step {i}, the trace has {n_steps}")
        if i in verdicts:
            raise JudgeParseError(f"step {i} judged twice")
        verdicts[i] = m.group(2).lower() == "correct"
    missing = [i for i in range(1, n_steps + 1) if i not in verdicts]
    if missing:
        raise JudgeParseError("no verdict for step" + ("s " if len(missing) > 1 else " ")
                              + ", ".join(map(str, missing)))
    return [verdicts[i] for i in range(1, n_steps + 1)]


def judge_messages(trace: Trace, *, system: str = JUDGE_SYSTEM) -> list[dict[str, Any]]:
    """The judge's chat prompt for ``trace``: the problem, the numbered steps, the format rule."""
    steps = "\n".join(f"Step {i}: {' '.join(s.text.split())}" for i, s in enumerate(trace.steps, 1))
    user = (f"Problem: {trace.problem.text}\n\nSolution:\n{steps}\n\n"
            + _INSTRUCTION.format(n=len(trace.steps)))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class JudgeLabeler(RolloutLabeler):
    """Per-step verdicts from the judge ``policy`` (a built policy, a
    :class:`~prmkit.labelers.PolicySpec` or a backend name), with up to ``retries`` retries of an
    unparseable answer.

    >>> from prmkit.policies import ScriptedPolicy
    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("2+2?"), steps=[Step("2+2=5"), Step("The answer is 5.")])
    >>> judge = JudgeLabeler(ScriptedPolicy(["Looks fine!", "Step 1: incorrect\\nStep 2: incorrect"]))
    >>> r = judge.label([t])
    >>> [lab.value for lab in t.labels("judge")], r.counts["judge_unparseable"]
    ([-1, -1], 1)
    """

    name = "judge"
    sources = ("judge",)
    needs_answer = False
    # On the command line the judge is --judge-policy (else --policy), and its answer length and
    # temperature are the judge's options, as for consensus.
    option_names = {"policy": "judge_policy", "max_new_tokens": "judge_max_new_tokens",
                    "temperature": "judge_temperature"}

    def __init__(self, policy: Any, *, retries: int = 2, max_new_tokens: int = 256,
                 temperature: float = 0.7, top_p: float = 1.0, seed: int | None = 0,
                 allow_extra_text: bool = False, system: str = JUDGE_SYSTEM,
                 workers: int | None = None, ray_address: str | None = None) -> None:
        super().__init__()
        if not isinstance(retries, int) or retries < 0:
            raise PrmkitError(f"retries must be an integer >= 0, got {retries!r}")
        check_k(max_new_tokens, "max_new_tokens")
        self.retries = retries
        # The judge's answers are quoted in issues and notes: never with the backend's secrets (a
        # server may echo them; the openai_compat client removes its own, this covers any backend).
        self._secrets = secrets_of(getattr(policy, "kwargs", None) or {})
        self.allow_extra_text = allow_extra_text
        self.system = system
        self.channels["judge"] = Channel(
            "judge", policy, sampling_params(k=1, max_new_tokens=max_new_tokens,
                                             temperature=temperature, top_p=top_p, seed=seed),
            workers=workers, ray_address=ray_address,
            config={"system": system, "instruction": _INSTRUCTION})
        self.args.update({"policy": policy_args(policy), "retries": retries,
                          "max_new_tokens": max_new_tokens, "temperature": temperature,
                          "top_p": top_p, "seed": seed, "allow_extra_text": allow_extra_text})
        if system != JUDGE_SYSTEM:
            self.args["system"] = system

    def request(self, channel: str, trace: Trace, prefix: int) -> GenerationRequest:
        if channel != "judge":
            return super().request(channel, trace, prefix)
        return GenerationRequest(judge_messages(trace, system=self.system),
                                 key=f"{trace.id}@judge#{-1 - prefix}")

    def plan(self, trace: Trace) -> Plan:
        n = len(trace.steps)
        used: list[Rollout] = []
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            [[answer]] = yield [Need("judge", judge_prefix(attempt), (0,))]
            used.append(answer)
            try:
                verdicts = parse_verdicts(answer.text, n, allow_extra_text=self.allow_extra_text)
            except JudgeParseError as e:
                errors.append(redact_text(str(e), self._secrets))
                continue
            meta = {"attempts": attempt + 1}
            labels = [[self.make_label(1 if ok else -1, "judge", channel="judge", rollouts=used,
                                       meta=meta)] for ok in verdicts]
            return PlanResult(labels, counts=Counter({"judge_unparseable": len(errors)}),
                              notes={"attempts": attempt + 1, "unparseable": errors})
        return PlanResult([[] for _ in range(n)],
                          counts=Counter({"judge_unparseable": len(errors), "judge_failed": 1}),
                          notes={"attempts": len(used), "unparseable": errors},
                          issues=[f"judge answer unparseable in all {len(used)} attempts "
                                  f"(last: {errors[-1]}); steps left unlabelled"])
