"""A user's own benchmark in one file, as a user would write it: an evaluation task that counts steps
and labelled errors per trace. ``prmkit eval run step_count --tasks-from user_task_example.py
--data step_count=traces.jsonl`` imports this file, which registers the task (tests/eval/test_tasks.py
runs exactly that)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from prmkit import read_traces
from prmkit.eval import DataSource, EvalTask, Record, TaskContext, TaskOption, register_eval_task


@dataclass
class StepCountSection(Record):
    """The report section ``step_count``."""

    kind: ClassVar[str] = "step_count"
    traces: int = 0
    long_traces: int = 0
    mean_steps: float | None = None
    error_rate: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run(ctx: TaskContext) -> StepCountSection:
    traces = list(read_traces(ctx.data[0]))
    steps = [len(t.steps) for t in traces]
    # A trace "has an error" when any step's latest label is negative.
    errors = [any(s.labels and s.labels[-1].value < 0 for s in t.steps) for t in traces]
    out = StepCountSection(traces=len(traces), long_traces=sum(n >= ctx.options["min_steps"] for n in steps),
                           mean_steps=sum(steps) / len(steps) if steps else None,
                           error_rate=sum(errors) / len(errors) if errors else None)
    ctx.say([f"step_count: {out.traces} traces, {out.mean_steps} steps on average, "
             f"{out.long_traces} with at least {ctx.options['min_steps']} steps"])
    return out


STEP_COUNT = register_eval_task(EvalTask(
    name="step_count",
    description="steps per trace and the share of traces with a labelled wrong step",
    data=DataSource("labelled traces (prmkit JSONL)", many=False),
    metric="mean steps per trace; fraction of traces with a wrong step",
    sections=("step_count",),
    run=run,
    options=(TaskOption("min_steps", int, 3, "a trace this long or longer counts as long", minimum=1),),
))
