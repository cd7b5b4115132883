"""A probe in one file: fails when the traces' mean number of steps is above ``max_mean_steps``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prmkit.eval import ProbeContext


class StepCountProbe:
    """How many steps the traces have: a stand-in for any check a plugin might add."""

    name = "example_step_count"
    title = "mean steps per trace"
    max_mean_steps = 10.0

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        counts = [len(t.steps) for t in ctx.traces]
        mean = sum(counts) / len(counts) if counts else 0.0
        return {"failed": mean > self.max_mean_steps,
                "criterion": f"fails when the mean number of steps exceeds {self.max_mean_steps:g}",
                "traces": len(counts), "mean_steps": mean}

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"{result['mean_steps']:.1f} steps per trace"

    def details(self, doc: Any, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        doc.para(f"{result['traces']} traces, {result['mean_steps']:.2f} steps each on average.")
        return ["traces", "mean_steps"]
