"""File-level monitoring: flags written into traces, and the deployment mode that stops an episode
before ``submit``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import check_inputs, durable_file
from prmkit._result import Record
from prmkit.data import read
from prmkit.errors import PrmkitError
from prmkit.monitor._base import VIEWS, Monitor, flags_in_view, load_monitor, tool_call_of
from prmkit.trace import Trace, TraceWriter

__all__ = ["monitor_traces", "monitor_file", "MonitorRunReport", "before_submit", "load_monitors",
           "parse_monitor_args"]


def before_submit(trace: Trace) -> Trace | None:
    """The trajectory a deployment monitor sees: every step up to and including the first ``submit``
    call (not its result); None when the trace never submits."""
    for i, s in enumerate(trace.steps):
        call = tool_call_of(s)
        if call is not None and call[0] == "submit":
            return Trace(id=trace.id, problem=trace.problem, steps=trace.steps[:i + 1],
                         source=trace.source, meta={k: v for k, v in trace.meta.items()
                                                    if k == "messages"})
    return None


def monitor_traces(monitor: Monitor, traces: Sequence[Trace], *, view: str = "all",
                   deploy: bool = False) -> float:
    """Run ``monitor`` and write its findings into each trace: ``meta["monitor"][name]`` holds
    ``flagged``, ``flags`` (step, evidence, score) and ``view``; with ``deploy`` the monitor sees
    only what precedes the submission (:func:`before_submit`) and a flagged trace is marked
    ``stopped`` (the episode would have ended before ``submit``), with the latency per trace.
    Returns the seconds the monitor took."""
    if deploy:
        cut = [before_submit(t) for t in traces]
        seen = [c if c is not None else t for c, t in zip(cut, traces, strict=True)]
    else:
        cut, seen = [None] * len(traces), list(traces)
    found, seconds = flags_in_view(monitor, seen, view)
    for t, flags, c in zip(traces, found, cut, strict=True):
        entry: dict[str, Any] = {"flagged": bool(flags), "flags": [f.to_dict() for f in flags],
                                 "view": view}
        if deploy:
            entry["deploy"] = {"stopped": bool(flags) and c is not None,
                               "submits": c is not None,
                               "latency_s": round(seconds / max(len(traces), 1), 6)}
        t.meta.setdefault("monitor", {})[monitor.name] = entry
        t.add_provenance("monitor", monitor.name, {**monitor.describe(), "view": view, "deploy": deploy})
    return seconds


@dataclass
class MonitorRunReport(Record):
    """What :func:`monitor_file` did: traces read, flagged and stopped per monitor, and seconds."""

    kind: ClassVar[str] = "monitor_run"
    traces: int = 0
    flagged: dict[str, int] = field(default_factory=dict)
    stopped: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = []
        for name in self.flagged:
            s = f"{name}: flagged {self.flagged[name]}/{self.traces} traces"
            if name in self.stopped:
                s += (f", {self.stopped[name]} stopped before submit "
                      f"({self.seconds[name] / max(self.traces, 1) * 1000:.2f} ms per trajectory)")
            out.append(s + f" in {self.seconds[name]:.2f} s")
        return out


def parse_monitor_args(pairs: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """``["prm.threshold=0.3", "judge.model=qwen"]`` -> ``{"prm": {"threshold": 0.3}, ...}`` (values
    read as JSON where they parse)."""
    import json

    out: dict[str, dict[str, Any]] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        name, dot, arg = key.partition(".")
        if not sep or not dot or not name or not arg:
            raise PrmkitError(f"monitor argument {pair!r} is not MONITOR.KEY=VALUE (e.g. prm.threshold=0.3)")
        try:
            out.setdefault(name, {})[arg] = json.loads(value)
        except json.JSONDecodeError:
            out.setdefault(name, {})[arg] = value
    return out


def load_monitors(specs: Sequence[str], args: Sequence[str] | None = None) -> list[Monitor]:
    """Monitors from ``--monitor`` specs and ``--monitor-arg MONITOR.KEY=VALUE`` settings (keyed by
    the spec's kind, ``rule`` / ``prm`` / ``judge``)."""
    if not specs:
        raise PrmkitError("give at least one --monitor (rule, rule:RULES.yaml, prm:MODEL_DIR, judge)")
    options = parse_monitor_args(args)
    monitors = [load_monitor(s, options.get(s.partition(":")[0])) for s in specs]
    unknown = set(options) - {s.partition(":")[0] for s in specs}
    if unknown:
        raise PrmkitError(f"--monitor-arg for {', '.join(sorted(unknown))}, which no --monitor names")
    names = [m.name for m in monitors]
    if len(set(names)) != len(names):
        raise PrmkitError(f"two monitors share a name ({', '.join(names)}); give one a name= argument")
    return monitors


def monitor_file(inp: str | os.PathLike, out: str | os.PathLike, monitors: Sequence[Monitor], *,
                 view: str = "all", deploy: bool = False, overwrite: bool = False) -> MonitorRunReport:
    """Read traces from ``inp``, run each monitor (:func:`monitor_traces`), and write them to ``out``
    through a temporary file renamed on success. ``out`` must differ from ``inp``; an existing ``out``
    is refused unless ``overwrite``."""
    inp, out = Path(inp), Path(out)
    if view not in VIEWS:
        raise PrmkitError(f"unknown view {view!r}; views: {', '.join(VIEWS)}")
    check_inputs(out, [inp])
    if out.exists() and not overwrite:
        raise PrmkitError(f"{out} exists; pass --overwrite to replace it")
    traces = list(read(inp))  # any format prmkit reads: an Inspect log too
    report = MonitorRunReport(traces=len(traces))
    for m in monitors:
        report.seconds[m.name] = monitor_traces(m, traces, view=view, deploy=deploy)
        report.flagged[m.name] = sum(t.meta["monitor"][m.name]["flagged"] for t in traces)
        if deploy:
            report.stopped[m.name] = sum(t.meta["monitor"][m.name]["deploy"]["stopped"] for t in traces)
    with durable_file(out, inputs=[inp]) as tmp, TraceWriter(tmp) as w:
        for t in traces:
            w.write(t)
    return report


