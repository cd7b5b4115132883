"""``symbolic``: ground-truth step labels from :class:`~prmkit.envs.SymbolicChecker`.

On the ``arith`` environment every intermediate quantity is known, so each step's claims can be
checked exactly (see :mod:`prmkit.envs._checker`); on other problems the checker reads the numbers
of the problem text. No policy, no rollouts: a step is +1 when the checker finds it ``correct`` (or
``no_claim``) and -1 otherwise, with the verdict and reason in the label's meta. ``strict_path=True``
(the default, as ``prmkit generate`` uses) also flags correct arithmetic off the problem's path.
"""

from __future__ import annotations

from collections import Counter

from prmkit.envs import SymbolicChecker
from prmkit.labelers._base import RolloutLabeler
from prmkit.labelers._plan import PlanResult
from prmkit.trace import Trace

__all__ = ["SymbolicLabeler"]


class SymbolicLabeler(RolloutLabeler):
    """Symbolic step checking as a labeler (same report, provenance and CLI as the others).

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("Tom has 3 apples and buys 5 more."),
    ...           steps=[Step("3 + 5 = 8"), Step("8 + 5 = 14")])
    >>> SymbolicLabeler().label([t]).labels["symbolic"]
    2
    >>> [lab.value for lab in t.labels("symbolic")]
    [1, -1]
    """

    name = "symbolic"
    sources = ("symbolic",)
    needs_answer = False

    def __init__(self, *, strict_path: bool = True) -> None:
        super().__init__()
        self.strict_path = strict_path
        self.args = {"strict_path": strict_path}

    def plan(self, trace: Trace) -> PlanResult:  # no rollouts: the result at once
        checker = SymbolicChecker.for_problem(trace.problem, strict_path=self.strict_path)
        checks = checker.check_steps([s.text for s in trace.steps])
        labels = [[self.make_label(1 if c.ok else -1, "symbolic",
                                   meta={"verdict": c.verdict, "reason": c.reason})] for c in checks]
        return PlanResult(labels, counts=Counter(f"verdict_{c.verdict}" for c in checks))
