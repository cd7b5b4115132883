"""Summary statistics of a set of traces: what ``prmkit data stats`` shows."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prmkit.trace import StepLabel, Trace

__all__ = ["TraceStats", "compute_stats", "label_bucket"]


def label_bucket(label: StepLabel | None) -> str:
    """A display bucket: "+1" / "0" / "-1" for hard labels, "soft [a,b)" deciles, "none"."""
    if label is None:
        return "none"
    if label.kind == "hard":
        return {1: "+1", 0: "0", -1: "-1"}[int(label.value)]
    lo = min(int(label.value * 10), 9) / 10 if 0 <= label.value <= 1 else None
    return f"soft [{lo:.1f},{lo + 0.1:.1f}{']' if lo == 0.9 else ')'}" if lo is not None else "soft other"


@dataclass
class TraceStats:
    """Counts over traces. ``first_error`` maps a 0-based index, -1 (no wrong step) or None
    (unknown: an unlabelled step comes before any wrong one) to a number of traces."""

    traces: int = 0
    steps: int = 0
    steps_per_trace: list[int] = field(default_factory=list)
    labels: Counter[tuple[str, str]] = field(default_factory=Counter)
    first_error: Counter[int | None] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    sources: Counter[str] = field(default_factory=Counter)

    @property
    def no_error(self) -> int:
        """Traces whose every step is labelled and none is wrong."""
        return self.first_error[-1]

    def steps_summary(self) -> dict[str, float]:
        s = self.steps_per_trace
        if not s:
            return {"min": 0, "mean": 0.0, "median": 0.0, "max": 0}
        return {"min": min(s), "mean": statistics.fmean(s), "median": statistics.median(s),
                "max": max(s)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "traces": self.traces, "steps": self.steps, "steps_per_trace": self.steps_summary(),
            "labels": {f"{src}:{b}": n for (src, b), n in sorted(self.labels.items())},
            "first_error": {("unknown" if k is None else str(k)): n
                            for k, n in sorted(self.first_error.items(),
                                               key=lambda kv: (kv[0] is None, kv[0] or 0))},
            "outcomes": dict(self.outcomes), "kinds": dict(self.kinds), "sources": dict(self.sources),
        }


def compute_stats(traces: Iterable[Trace], *, label_source: str | None = None) -> TraceStats:
    """Stream ``traces`` once and count; ``label_source`` restricts labels to one source.

    >>> from prmkit import Problem, Step, StepLabel, Trace
    >>> t = Trace("a", Problem("q"), [Step("x", labels=[StepLabel(1)]), Step("y", labels=[StepLabel(-1)])])
    >>> s = compute_stats([t]); (s.traces, s.steps, s.first_error[1], s.labels[("human", "-1")])
    (1, 2, 1, 1)
    """
    st = TraceStats()
    for t in traces:
        st.traces += 1
        st.steps += len(t.steps)
        st.steps_per_trace.append(len(t.steps))
        st.outcomes[t.outcome] += 1
        st.sources[t.source or "unknown"] += 1
        for s in t.steps:
            st.kinds[s.kind] += 1
            lab = s.label(label_source)
            st.labels[(lab.source if lab else (label_source or "-"), label_bucket(lab))] += 1
        st.first_error[t.first_error(label_source)] += 1
    return st
