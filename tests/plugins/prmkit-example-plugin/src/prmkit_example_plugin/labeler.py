"""A labeler in one file: a step that contains one of ``words`` is wrong (-1), any other right (+1).

``prmkit label --method example_keywords -o 'words=["BAD"]' IN OUT`` builds it: of the shared
options it takes ``seed`` (its ``__init__`` names it; recorded, nothing here is random) and no
other, and ``-o`` gives it ``words``.
"""

from __future__ import annotations

from collections.abc import Sequence

from prmkit.labelers import PlanResult, RolloutLabeler
from prmkit.trace import Trace


class KeywordLabeler(RolloutLabeler):
    """+1 for a step without any of ``words``, -1 for a step with one (case-insensitive)."""

    name = "example_keywords"
    sources = ("keywords",)
    needs_answer = False  # no rollouts: the trace's reference answer is not needed

    def __init__(self, *, words: Sequence[str] = ("wrong",), seed: int = 0) -> None:
        super().__init__()
        self.words = [w.lower() for w in words]
        self.args = {"words": list(words), "seed": seed}

    def plan(self, trace: Trace) -> PlanResult:
        # No generation, so the result at once (a labeler that rolls out yields Needs instead).
        return PlanResult([[self.make_label(-1 if any(w in s.text.lower() for w in self.words) else 1,
                                            "keywords")] for s in trace.steps])
