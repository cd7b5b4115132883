"""Agreement between two label sources on the same steps (say, symbolic ground truth and Monte Carlo).

Labels are binarised with :func:`prmkit.trace.binarize` (hard ±1, soft at 0.5); a step counts when
both sources labelled it. Cohen's kappa corrects the raw agreement for what two independent labelers
with the same marginal rates would agree on by chance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prmkit.eval._stats import cohen_kappa
from prmkit.trace import Trace, binarize

__all__ = ["label_agreement"]


def label_agreement(traces: Sequence[Trace], a: str, b: str) -> dict[str, Any]:
    """Step agreement, Cohen's kappa and first-error agreement between label sources ``a`` and ``b``
    (the ``labels`` section of a report).

    >>> from prmkit.trace import Problem, Step, StepLabel
    >>> def step(x, y):
    ...     return Step("s", labels=[StepLabel(x, source="symbolic"), StepLabel(y, source="mc_hard")])
    >>> t = Trace(id="t", problem=Problem("q"), steps=[step(1, 1), step(-1, 1), step(-1, -1)])
    >>> r = label_agreement([t], "symbolic", "mc_hard")
    >>> r["pairs"][0]["steps"], round(r["pairs"][0]["agreement"], 4), r["first_error_agreement"]
    (3, 0.6667, 0.0)
    """
    xs: list[bool] = []
    ys: list[bool] = []
    first_hits = first_n = 0
    traces_with_both = 0
    for t in traces:
        la = [binarize(lab) for lab in t.labels(a)]
        lb = [binarize(lab) for lab in t.labels(b)]
        both = False
        for x, y in zip(la, lb, strict=True):
            if x is not None and y is not None:
                xs.append(x)
                ys.append(y)
                both = True
        traces_with_both += both
        fa, fb = t.first_error(a), t.first_error(b)
        if fa is not None and fb is not None:
            first_n += 1
            first_hits += fa == fb
    agreement = sum(x == y for x, y in zip(xs, ys, strict=True)) / len(xs) if xs else None
    return {
        "sources": [a, b],
        "traces": traces_with_both,
        "pairs": [{"a": a, "b": b, "steps": len(xs), "agreement": agreement,
                   "kappa": cohen_kappa(xs, ys),
                   "a_wrong": sum(not x for x in xs), "b_wrong": sum(not y for y in ys)}],
        "first_error_agreement": first_hits / first_n if first_n else None,
        "first_error_traces": first_n,
    }
