"""The labeling app tests' traces: two problems, hand-set PRM scores, Monte Carlo labels and outcomes."""

from __future__ import annotations

from prmkit.trace import Problem, Step, StepLabel, Trace


def scored_traces() -> list[Trace]:
    """Four traces: ``a1`` / ``a2`` of problem A (answer 7), ``b1`` / ``b2`` of problem B (answer 3).
    PRM scores (``prm``) and Monte Carlo labels (``mc_soft``) are set by hand for the strategy tests."""
    a, b = Problem("What is 3 + 4?", answer="7", id="A"), Problem("What is 1 + 2?", answer="3", id="B")

    def steps(scores, mc):
        return [Step(f"step {i}: {s}", scores={"prm": s},
                     labels=[StepLabel(m, source="mc_soft", kind="soft", rollouts=4)])
                for i, (s, m) in enumerate(zip(scores, mc, strict=True))]

    return [
        Trace("a1", a, steps([0.9, 0.8], [1.0, 0.75]), final_answer="7", outcome="correct"),
        Trace("a2", a, steps([0.7, 0.6, 0.55], [1.0, 0.0, 0.0]), final_answer="8", outcome="incorrect"),
        Trace("b1", b, steps([0.95, 0.9], [1.0, 1.0]), final_answer="4", outcome="incorrect"),
        Trace("b2", b, steps([0.2, 0.4], [0.25, 0.5]), final_answer="3", outcome="correct"),
    ]



def write_scored(folder) -> object:
    """``scored_traces()`` written to ``folder / "scored.jsonl"``; returns the path."""
    from prmkit.trace import write_traces

    path = folder / "scored.jsonl"
    write_traces(scored_traces(), path)
    return path
