"""``golden``: a scripted policy that writes arith solutions with seeded mistakes, for the golden tests.

It reads the problem from the prompt (``PROBLEMS``: problem text -> :class:`~prmkit.trace.Problem`, set
by the test), and writes the reference solution, or one with an arithmetic slip at a seeded step whose
error reaches the final answer (most of the time) or is compensated (a right answer through a wrong
step). A continuation (a request with a ``prefix``) writes the remaining lines the same way. Every
choice is a pure function of the request key, the prefix and how often that pair was asked, so the
same pipeline gives the same traces, whatever the batching.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

from prmkit.policies import ScriptedPolicy

#: Problem text -> Problem, filled by the test before the policy is used.
PROBLEMS: dict[str, Any] = {}


class GoldenPolicy(ScriptedPolicy):
    name = "golden"

    def __init__(self, **_ignored: Any) -> None:  # backends get batch_size, progress, ...
        super().__init__(self._write, model_id="golden-scripted")
        self.asked: Counter = Counter()

    def _write(self, request, index: int) -> str:
        user = next(m["content"] for m in reversed(request.messages) if m["role"] == "user")
        problem = next(p for text, p in PROBLEMS.items() if text in user)
        lines = problem.solution.split("\n")
        self.asked[(request.key, request.prefix)] += 1
        rng = random.Random(f"{request.key}|{request.prefix}|{self.asked[(request.key, request.prefix)]}")
        if rng.random() < 0.45:
            j = rng.randrange(len(lines) - 1)  # a slip in an operation line
            d = rng.choice([-2, -1, 1, 3])
            m = re.search(r"= (\d+)\.$", lines[j])
            if m:
                wrong = int(m.group(1)) + d
                lines[j] = lines[j][: m.start(1)] + str(wrong) + "."
                if rng.random() < 0.75:
                    lines[-1] = f"The answer is {int(problem.answer) + d}."
        done = len([ln for ln in request.prefix.split("\n") if ln.strip()])
        rest = "\n".join(lines[done:])
        return ("\n" + rest) if request.prefix and not request.prefix.endswith("\n") else rest
