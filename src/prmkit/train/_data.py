"""Training data: traces -> targets -> encoded examples, with a count of everything left out and why;
length-bucketed batches."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from prmkit._result import Record
from prmkit.errors import PrmkitError
from prmkit.models import AlignmentError, Encoded, RewardModel
from prmkit.trace import Trace, binarize

__all__ = ["DataReport", "step_targets", "outcome_target", "encode_traces", "length_batches",
           "split_by_problem", "read_trace_files", "TOOL_CHECKS", "tool_settled"]


@dataclass
class DataReport(Record):
    """What became of the traces given to training: used, rejected (by reason), steps cut.

    :meth:`to_dict` names ``settled`` ``settled_by_tool`` and gives ``positive`` (the sum of the
    labelled positions' targets) as ``positive_fraction`` (of the labelled positions), the shape
    training summaries have always had; :meth:`from_dict` reads the sum back from the fraction: exact
    for hard labels (a whole number), to within float rounding for a sum of soft targets.

    >>> r = DataReport(traces=3, used=2, labelled=4, positive=1.5, rejected=Counter({"no labels": 1}))
    >>> DataReport.from_dict(r.to_dict()) == r, r.to_dict()["positive_fraction"]
    (True, 0.375)
    """

    kind: ClassVar[str] = "train_data"
    traces: int = 0
    used: int = 0
    positions: int = 0
    labelled: int = 0
    positive: float = 0.0
    dropped_steps: int = 0
    truncated_traces: int = 0
    rejected: Counter = field(default_factory=Counter)
    outcome_rules: Counter = field(default_factory=Counter)
    tokens: int = 0
    settled: int = 0  #: labelled steps left out of the loss because a tool check settles them
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "used": self.used, "positions": self.positions,
                "labelled": self.labelled, "positive_fraction": self.positive / max(self.labelled, 1),
                "dropped_steps": self.dropped_steps, "truncated_traces": self.truncated_traces,
                "rejected": dict(self.rejected), "outcome_rules": dict(self.outcome_rules),
                "tokens": self.tokens, "settled_by_tool": self.settled, **self.extra}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> DataReport:
        d = dict(d)
        fraction = d.pop("positive_fraction", None)
        if "settled_by_tool" in d:
            d["settled"] = d.pop("settled_by_tool")
        if isinstance(fraction, (int, float)) and isinstance(d.get("labelled"), int):
            positive = fraction * max(d["labelled"], 1)
            d["positive"] = float(round(positive)) if abs(positive - round(positive)) < 1e-9 else positive
        return super().from_dict(d, where=where)

    def lines(self) -> list[str]:
        """What a terminal shows of it (the one way every result prints; :meth:`summary` is its line)."""
        return [self.summary()]

    def summary(self) -> str:
        s = (f"{self.used}/{self.traces} traces used, {self.labelled} labelled positions "
             f"({self.positive / max(self.labelled, 1):.1%} positive), {self.tokens} tokens")
        if self.settled:
            s += f"; {self.settled} labelled steps left to the tool check"
        if self.truncated_traces:
            s += f"; {self.dropped_steps} trailing steps of {self.truncated_traces} traces cut by max_length"
        if self.rejected:
            s += "; rejected: " + ", ".join(f"{n} {r}" for r, n in self.rejected.most_common())
        return s


def step_targets(trace: Trace, *, source: str | None = None, neutral: str = "positive",
                 soft: bool = False) -> list[float | None]:
    """Per step: 1.0 (right), 0.0 (wrong), a probability (``soft`` and a soft label), or None (no
    label, or a neutral label under ``neutral="ignore"``).

    >>> from prmkit.trace import Step, StepLabel, Problem
    >>> t = Trace("t", Problem("q"), [Step("a", labels=[StepLabel(1)]), Step("b", labels=[StepLabel(0)]),
    ...     Step("c", labels=[StepLabel(0.25, source="mc_soft", kind="soft")]), Step("d")])
    >>> step_targets(t, neutral="ignore"), step_targets(t, soft=True)
    ([1.0, None, 0.0, None], [1.0, 1.0, 0.25, None])
    """
    out: list[float | None] = []
    for step in trace.steps:
        label = step.label(source)
        if label is not None and soft and label.kind == "soft":
            if not 0.0 <= label.value <= 1.0:
                raise PrmkitError(f"trace {trace.id!r}: soft label {label.value} from source "
                                  f"{label.source!r} is not a probability; binarize it or pick another source")
            out.append(float(label.value))
            continue
        b = binarize(label, neutral=neutral)
        out.append(None if b is None else float(b))
    return out


def outcome_target(trace: Trace, rule: str = "auto", **label_kw: Any) -> tuple[float | None, str]:
    """The ORM target of a trace and the rule that gave it.

    ``outcome``: the trace's ``outcome`` field; ``answer``: final answer vs the reference answer;
    ``steps``: 1 when no labelled step is wrong (error-free trace, as ProcessBench counts it);
    ``auto``: the first of those that is known.
    """
    rules = ("outcome", "answer", "steps") if rule == "auto" else (rule,)
    for r in rules:
        if r == "outcome" and trace.outcome in ("correct", "incorrect"):
            return float(trace.outcome == "correct"), r
        if r == "answer" and trace.final_answer is not None and trace.problem.answer is not None:
            from prmkit.data import answers_equal

            return float(answers_equal(trace.final_answer, trace.problem.answer)), r
        if r == "steps":
            t = [x for x in step_targets(trace, **label_kw) if x is not None]
            if t:
                return float(all(x >= 0.5 for x in t)), r
    return None, rule


#: Tool checks a PRM can be trained around (``TrainConfig.tool_check``).
TOOL_CHECKS = ("calculator",)


def tool_settled(trace: Trace, tool: str) -> int | None:
    """The first step a tool check flags (from there on the tool settles the trace: a flagged step
    scores 0 whatever the PRM says), or None. ``calculator``: a step with a wrong written equation
    (:func:`~prmkit.scoring.step_flagged`, the test :class:`~prmkit.scoring.CalculatorScorer` applies).

    >>> from prmkit.trace import Problem, Step
    >>> tool_settled(Trace("t", Problem("q"), [Step("2 + 2 = 4."), Step("4 * 3 = 13."), Step("Done.")]),
    ...              "calculator")
    1
    """
    if tool not in TOOL_CHECKS:
        raise PrmkitError(f"unknown tool check {tool!r}; known: {', '.join(TOOL_CHECKS)}")
    from prmkit.scoring import step_flagged

    for i, step in enumerate(trace.steps):
        if step_flagged(step.text):
            return i
    return None


def encode_traces(rm: RewardModel, traces: Iterable[Trace], *, kind: str | None = None,
                  label_source: str | None = None, neutral: str = "positive", soft: bool = False,
                  outcome: str = "auto", tool_check: str | None = None,
                  report: DataReport | None = None) -> list[Encoded]:
    """Encode traces for training; each one left out is counted in ``report.rejected`` by reason.

    ``kind`` (prm: step targets, orm: one outcome target) defaults to the model's and must match it.
    ``tool_check`` (PRM only; see :data:`TOOL_CHECKS`): the labels from the first step the tool flags
    on are left out of the loss (counted in ``report.settled``), so that the PRM spends its capacity
    on what the tool cannot see — for a PRM that is used with the same check
    (``--model DIR -s check=calculator``).
    """
    kind = kind or rm.kind
    if kind != rm.kind:
        raise PrmkitError(f"cannot encode {kind.upper()} targets for a {rm.kind.upper()} reward model "
                          f"(make it with kind={kind!r})")
    report = report if report is not None else DataReport()
    out: list[Encoded] = []
    kw = {"source": label_source, "neutral": neutral, "soft": soft}
    for trace in traces:
        report.traces += 1
        if not trace.steps:
            report.rejected["no steps"] += 1
            continue
        if kind == "orm":
            target, rule = outcome_target(trace, outcome, **kw)
            if target is None:
                report.rejected[f"no outcome ({rule})"] += 1
                continue
            targets: list[float | None] = [target]
        else:
            targets = step_targets(trace, **kw)
            if all(t is None for t in targets):
                report.rejected["no step labels" + (f" from {label_source!r}" if label_source else "")] += 1
                continue
            first = tool_settled(trace, tool_check) if tool_check else None
            if first is not None:
                report.settled += sum(t is not None for t in targets[first:])
                targets = targets[:first] + [None] * (len(targets) - first)
                if all(t is None for t in targets):
                    report.rejected[f"every labelled step settled by the {tool_check}"] += 1
                    continue
        try:
            e = rm.encode(trace, targets)
        except AlignmentError as err:
            report.rejected[_reason(err.reason)] += 1
            continue
        if e.targets is None or all(t is None for t in e.targets):
            report.rejected["every labelled step cut by max_length"] += 1
            continue
        report.used += 1
        if kind == "orm":  # counted for the traces used, like every other total here
            report.outcome_rules[rule] += 1
        report.positions += len(e.positions)
        labelled = [t for t in e.targets if t is not None]
        report.labelled += len(labelled)
        report.positive += sum(labelled)
        report.tokens += len(e)
        if e.dropped:
            report.truncated_traces += 1
            report.dropped_steps += e.dropped
        out.append(e)
    return out


def _reason(reason: str) -> str:
    """Group alignment reasons (their quoted token texts differ from trace to trace)."""
    return reason.split(" (")[0].split(" {")[0].split(" '")[0]


def length_batches(lengths: Sequence[int], batch_size: int, *, seed: int, bucketing: bool = True,
                   window: int = 64) -> list[list[int]]:
    """Batches of example indices for one epoch, shuffled by ``seed``.

    With ``bucketing``, examples are shuffled, cut into windows of ``window`` batches, sorted by
    length inside a window, batched, and the batches shuffled: batches hold similar lengths (little
    padding) while the order stays random.

    >>> length_batches([5, 1, 4, 2, 3, 6], 2, seed=0, window=8)  # longest first inside a batch
    [[5, 0], [3, 1], [2, 4]]
    """
    rng = random.Random(seed)
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    if not bucketing:
        return [idx[i:i + batch_size] for i in range(0, len(idx), batch_size)]
    batches: list[list[int]] = []
    span = batch_size * window
    for w in range(0, len(idx), span):
        chunk = sorted(idx[w:w + span], key=lambda i: lengths[i], reverse=True)
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def split_by_problem(traces: list[Trace], fraction: float, seed: int = 0) -> tuple[list[Trace], list[Trace]]:
    """Hold out ``fraction`` of the problems (all their traces), by a stable hash of problem text."""
    if fraction <= 0:
        return traces, []

    def bucket(t: Trace) -> float:
        key = f"{seed}:{t.problem.id or t.problem.text}".encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64

    train = [t for t in traces if bucket(t) >= fraction]
    held = [t for t in traces if bucket(t) < fraction]
    return train, held


def read_trace_files(paths: Sequence[str], fmt: str | None = None, limit: int | None = None) -> list[Trace]:
    """Traces from files in any prmkit format (errors name file, line and field)."""
    from prmkit.data import read

    out: list[Trace] = []
    for p in paths:
        for t in read(p, fmt) if fmt else read(p):
            out.append(t)
            if limit is not None and len(out) >= limit:
                return out
    return out
