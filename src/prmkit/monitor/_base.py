"""The monitor interface: ``flags(traces) -> list of flags per trace``, each flag naming the step and
the evidence; the three views a monitor can be given; and the registry of monitor kinds."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.trace import Trace

__all__ = ["Flag", "Monitor", "MONITORS", "VIEWS", "view_of", "flags_in_view", "load_monitor",
           "tool_call_of"]

#: What a monitor may see: every step (``all``: reasoning + actions), the actions alone (tool calls and
#: observations), or the reasoning alone (plan, reasoning and final messages).
VIEWS: dict[str, tuple[str, ...]] = {
    "all": ("plan", "reasoning", "tool_call", "observation", "final"),
    "actions": ("tool_call", "observation"),
    "reasoning": ("plan", "reasoning", "final"),
}


@dataclass(frozen=True)
class Flag:
    """One finding: ``step`` (0-based index into the trace's steps), the ``monitor`` that raised it,
    the ``evidence`` (a rule id and what matched, a score, a judge's words), and a ``score`` when the
    monitor has one."""

    step: int
    monitor: str
    evidence: str
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"step": self.step, "monitor": self.monitor, "evidence": self.evidence}
        if self.score is not None:
            d["score"] = self.score
        return d


@runtime_checkable
class Monitor(Protocol):
    """A batched monitor. ``name`` identifies it in flags and provenance."""

    name: str

    def flags(self, traces: Sequence[Trace]) -> list[list[Flag]]:
        """The flags of each trace, in order (an empty list: nothing found)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Settings for provenance."""
        ...


def tool_call_of(step: Any) -> tuple[str, Any] | None:
    """``(tool name, arguments)`` of a ``tool_call`` step (arguments decoded from JSON when they
    are a JSON string), or None."""
    import json

    call = step.meta.get("tool_call") if step.kind == "tool_call" else None
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return None
    fn = call["function"]
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            pass
    return str(fn.get("name")), args


def view_of(trace: Trace, view: str) -> tuple[Trace, list[int]]:
    """The trace with only the steps ``view`` shows, and each kept step's index in the original."""
    if view not in VIEWS:
        raise PrmkitError(f"unknown view {view!r}; views: {', '.join(VIEWS)}")
    keep = [i for i, s in enumerate(trace.steps) if s.kind in VIEWS[view]]
    shown = Trace(id=trace.id, problem=trace.problem, steps=[trace.steps[i] for i in keep],
                  source=trace.source, meta={k: v for k, v in trace.meta.items() if k == "messages"})
    return shown, keep


def flags_in_view(monitor: Monitor, traces: Sequence[Trace], view: str = "all"
                  ) -> tuple[list[list[Flag]], float]:
    """Run ``monitor`` on what ``view`` shows of each trace; flags point at the original steps.
    Returns the flags and the seconds the monitor took."""
    shown = [view_of(t, view) for t in traces]
    started = time.perf_counter()
    found = monitor.flags([s for s, _ in shown])
    seconds = time.perf_counter() - started
    if len(found) != len(traces):
        raise PrmkitError(f"monitor {monitor.name!r} returned {len(found)} flag lists for "
                          f"{len(traces)} traces")
    out = []
    for (_, keep), flags in zip(shown, found, strict=True):
        out.append([Flag(keep[f.step] if 0 <= f.step < len(keep) else -1, f.monitor, f.evidence, f.score)
                    for f in flags])
    return out, seconds


#: name -> "module:attr" of a monitor factory.
MONITORS = Registry("monitor", {
    "rule": "prmkit.monitor._rule:RuleMonitor",
    "prm": "prmkit.monitor._prm:PRMMonitor",
    "judge": "prmkit.monitor._judge:JudgeMonitor",
}, group="prmkit.monitors")


def load_monitor(spec: str, options: dict[str, Any] | None = None) -> Monitor:
    """A monitor from a command-line spec: ``rule`` (the built-in rules), ``rule:RULES.yaml``,
    ``prm:MODEL_DIR`` (a PRM checkpoint; ``scorer=scripted`` and friends through ``options``),
    ``judge`` (``policy=...`` and the backend's settings through ``options``).

    >>> load_monitor("rule").name
    'rule'
    """
    kind, _, arg = spec.partition(":")
    kwargs = dict(options or {})
    if arg:
        kwargs[{"rule": "rules", "prm": "model", "judge": "policy"}.get(kind, "path")] = arg
    return MONITORS.create(kind, **kwargs)
