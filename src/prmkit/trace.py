"""The record that flows through every stage: :class:`Trace` of :class:`Step` with :class:`StepLabel`.

A trace is one attempt at one problem: a chain-of-thought solution or an agent trajectory. Each step
keeps the character span it was cut from (``trace.text[step.span[0]:step.span[1]] == step.text``), every
label it was given (human, symbolic, Monte Carlo, judge, ...), with who produced it and at what cost,
and every score a model gave it. Each stage that touches a trace appends a :class:`Provenance` entry,
so a report can say what stood behind every number.

JSON Lines of ``Trace.to_dict()`` is the interchange format:

>>> t = Trace(id="t1", problem=Problem("1+1?", answer="2"),
...           steps=[Step("1+1=2", labels=[StepLabel(1, source="human")])], final_answer="2")
>>> Trace.from_dict(t.to_dict()) == t
True
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from prmkit._fields import Fields
from prmkit._jsonio import ensure_parent, iter_json_records, open_text, write_jsonl_line
from prmkit.errors import FormatError
from prmkit.provenance import Entry, redact_secrets
from prmkit.provenance import parse as parse_provenance

__all__ = [
    "STEP_KINDS", "OUTCOMES", "LABEL_SOURCES", "StepKind", "Outcome",
    "StepLabel", "Step", "Problem", "Provenance", "Trace",
    "read_traces", "write_traces", "TraceWriter", "now", "binarize", "NEUTRAL_POLICIES",
]

StepKind = Literal["reasoning", "plan", "tool_call", "observation", "final"]
Outcome = Literal["correct", "incorrect", "unknown"]
STEP_KINDS: tuple[str, ...] = ("reasoning", "plan", "tool_call", "observation", "final")
OUTCOMES: tuple[str, ...] = ("correct", "incorrect", "unknown")
#: Label sources prmkit itself writes. Others are allowed (a user's own labeler), these are the known ones.
LABEL_SOURCES: tuple[str, ...] = (
    "human", "symbolic", "mc_hard", "mc_soft", "binary_search", "advantage", "judge", "consensus",
    "outcome", "synthetic", "automatic",
)

SCHEMA_VERSION = 1


def now() -> str:
    """UTC time in ISO 8601, the format of every timestamp prmkit writes."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    """Drop keys whose value is None or an empty container (defaults restore them on read)."""
    return {k: v for k, v in d.items() if v is not None and v != {} and v != []}


@dataclass
class StepLabel:
    """One judgement of one step.

    ``kind="hard"``: ``value`` is -1 (wrong), 0 (neutral / okay) or +1 (right).
    ``kind="soft"``: ``value`` is a probability in [0, 1] that the step is right (or, for advantage
    labels, a real-valued reward; ``source`` says which).

    Provenance: ``labeler`` (the component or annotator), ``args`` (its arguments), ``model`` (model id),
    ``rollouts`` (completions it took), ``cost`` (tokens, seconds, ...), ``time``; ``meta`` is free.
    """

    value: float
    source: str = "human"
    kind: Literal["hard", "soft"] = "hard"
    labeler: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    rollouts: int | None = None
    cost: dict[str, float] = field(default_factory=dict)
    time: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind == "hard" and self.value not in (-1, 0, 1):
            raise ValueError(f"a hard label is -1, 0 or 1, got {self.value!r}")
        if self.kind not in ("hard", "soft"):
            raise ValueError(f"label kind is 'hard' or 'soft', got {self.kind!r}")
        if self.kind == "soft" and (why := soft_value_problem(self.value, self.source)):
            raise ValueError(why)
        self.args = redact_secrets(self.args)

    @property
    def positive(self) -> bool | None:
        """True / False for a clear verdict, None for a neutral hard label (0)."""
        if self.kind == "hard":
            return None if self.value == 0 else self.value > 0
        return self.value >= 0.5

    def to_dict(self) -> dict[str, Any]:
        d = {"value": self.value, "source": self.source, "kind": self.kind}
        d.update(_clean({"labeler": self.labeler, "args": self.args, "model": self.model,
                         "rollouts": self.rollouts, "cost": self.cost, "time": self.time,
                         "meta": self.meta}))
        return d

    @classmethod
    def from_fields(cls, f: Fields) -> StepLabel:
        f.only(("value", "source", "kind", "labeler", "args", "model", "rollouts", "cost", "time",
                "meta"))
        kind = f.str("kind", "hard")
        if kind not in ("hard", "soft"):
            raise f.error("kind", f"must be 'hard' or 'soft', got {kind!r}")
        value = f.get("value", (int, float))
        if kind == "hard" and value not in (-1, 0, 1):
            raise f.error("value", f"a hard label is -1, 0 or 1, got {value!r}")
        source = f.str("source", "human")
        if kind == "soft" and (why := soft_value_problem(value, source)):
            raise f.error("value", why)
        rollouts = f.get("rollouts", (int, type(None)), None)
        return cls(value=value, source=source, kind=kind,
                   labeler=f.str("labeler", None, nullable=True), args=f.get("args", dict, {}),
                   model=f.str("model", None, nullable=True), rollouts=rollouts,
                   cost=f.get("cost", dict, {}), time=f.str("time", None, nullable=True),
                   meta=f.get("meta", dict, {}))


#: What a neutral hard label (PRM800K's rating 0, "okay") becomes for training: "positive" (the
#: convention of "Let's Verify Step by Step", where okay steps were not errors), "negative", or "ignore"
#: (no training label: the step is masked out).
NEUTRAL_POLICIES: tuple[str, ...] = ("positive", "negative", "ignore")


def binarize(label: StepLabel | None, *, neutral: str = "positive",
             threshold: float = 0.5) -> bool | None:
    """The training verdict of a label: True (right), False (wrong) or None (no label / ignored).

    Hard labels: +1 -> True, -1 -> False, 0 -> by ``neutral`` (see :data:`NEUTRAL_POLICIES`).
    Soft labels: ``value >= threshold``.

    >>> binarize(StepLabel(0)), binarize(StepLabel(0), neutral="ignore"), binarize(StepLabel(-1))
    (True, None, False)
    >>> binarize(StepLabel(0.25, kind="soft"), threshold=0.2)
    True
    """
    if neutral not in NEUTRAL_POLICIES:
        raise ValueError(f"neutral policy must be one of {NEUTRAL_POLICIES}, got {neutral!r}")
    if label is None:
        return None
    if label.kind == "soft":
        return label.value >= threshold
    if label.value == 0:
        return {"positive": True, "negative": False, "ignore": None}[neutral]
    return label.value > 0


@dataclass
class Step:
    """One step of a trace: a reasoning step, or a plan / tool call / observation / final answer.

    ``span`` is the ``(start, end)`` character range of ``text`` in the trace's ``text`` (None when the
    step was not cut from a text). ``scores`` maps a scorer name to the probability it gave.
    """

    text: str
    kind: str = "reasoning"
    span: tuple[int, int] | None = None
    labels: list[StepLabel] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"step kind must be one of {STEP_KINDS}, got {self.kind!r}")
        if self.span is not None:
            self.span = (int(self.span[0]), int(self.span[1]))

    def label(self, source: str | None = None) -> StepLabel | None:
        """The latest label (from ``source`` when given), or None."""
        for lab in reversed(self.labels):
            if source is None or lab.source == source:
                return lab
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"text": self.text}
        if self.kind != "reasoning":
            d["kind"] = self.kind
        if self.span is not None:
            d["span"] = list(self.span)
        d.update(_clean({"labels": [lab.to_dict() for lab in self.labels], "scores": self.scores,
                         "meta": self.meta}))
        return d

    @classmethod
    def from_fields(cls, f: Fields) -> Step:
        f.only(("text", "kind", "span", "labels", "scores", "meta"))
        kind = f.str("kind", "reasoning")
        if kind not in STEP_KINDS:
            raise f.error("kind", f"must be one of {', '.join(STEP_KINDS)}, got {kind!r}")
        span = f.typed_list("span", int, None, nullable=True)
        if span is not None and (len(span) != 2 or not 0 <= span[0] <= span[1]):
            raise f.error("span", f"must be [start, end] with 0 <= start <= end, got {span!r}")
        scores = f.get("scores", dict, {})
        for k, v in scores.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise f.sub("scores").error(k, "score must be a number")
            if not 0.0 <= v <= 1.0:  # NaN fails this too
                raise f.sub("scores").error(k, f"a step score is a probability in [0, 1], got {v!r}")
        return cls(text=f.str("text"), kind=kind, span=tuple(span) if span else None,
                   labels=[StepLabel.from_fields(x)
                           for x in (f.sub_list("labels") if "labels" in f.obj else [])],
                   scores=scores, meta=f.get("meta", dict, {}))


@dataclass
class Problem:
    """The task a trace attempts: its text, reference answer and reference solution when known."""

    text: str
    answer: str | None = None
    solution: str | None = None
    id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, **_clean({"answer": self.answer, "solution": self.solution,
                                             "id": self.id, "meta": self.meta})}

    @classmethod
    def from_fields(cls, f: Fields) -> Problem:
        f.only(("text", "answer", "solution", "id", "meta"))
        return cls(text=f.str("text"), answer=f.str("answer", None, nullable=True),
                   solution=f.str("solution", None, nullable=True),
                   id=f.str("id", None, nullable=True), meta=f.get("meta", dict, {}))


@dataclass
class Provenance:
    """What one stage did to a trace: ``stage`` (import, generate, label, score, ...), the component
    ``name`` and its ``args``, the prmkit ``version`` and the ``time``.

    ``args`` is what is written; :attr:`typed` reads it as the stage's dataclass
    (:mod:`prmkit.provenance`), so readers use fields instead of dict keys.
    """

    stage: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    version: str | None = None
    time: str | None = None

    def __post_init__(self) -> None:
        self.args = redact_secrets(self.args)

    @property
    def typed(self) -> Entry | None:
        """The stage's typed entry (:class:`~prmkit.provenance.GenerateProvenance`, ...) read from
        ``args``; None for a stage without one (import, split, derive, ...).

        >>> Provenance("score", "prm", {"model": "m", "kind": "prm"}).typed.kind
        'prm'
        """
        return parse_provenance(self.stage, self.name, self.args)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "name": self.name,
                **_clean({"args": self.args, "version": self.version, "time": self.time})}

    @classmethod
    def from_fields(cls, f: Fields) -> Provenance:
        f.only(("stage", "name", "args", "version", "time"))
        return cls(stage=f.str("stage"), name=f.str("name"), args=f.get("args", dict, {}),
                   version=f.str("version", None, nullable=True),
                   time=f.str("time", None, nullable=True))


@dataclass
class Trace:
    """One attempt at one problem, as a list of steps.

    ``text`` is the source text the steps were cut from, when there was one: each step's ``span``
    indexes into it, so the original is recovered exactly. ``outcome`` says whether the final answer
    is right. ``source`` names the dataset or policy that produced the trace; ``meta`` keeps whatever
    a format has that has no field here (so exporters can write it back).
    """

    id: str
    problem: Problem
    steps: list[Step] = field(default_factory=list)
    final_answer: str | None = None
    outcome: str = "unknown"
    source: str | None = None
    text: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    provenance: list[Provenance] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    # -- labels --------------------------------------------------------------------------------------
    def labels(self, source: str | None = None) -> list[StepLabel | None]:
        """The latest label of every step (from ``source`` when given); None where a step has none."""
        return [s.label(source) for s in self.steps]

    def first_error(self, source: str | None = None) -> int | None:
        """0-based index of the first step labelled wrong, -1 if every step is labelled and none is
        wrong, None if a step before any wrong one is unlabelled (the answer is then unknown)."""
        for i, lab in enumerate(self.labels(source)):
            if lab is None:
                return None
            if lab.positive is False:
                return i
        return -1

    def add_provenance(self, stage: str | Entry, name: str | None = None,
                       args: dict[str, Any] | None = None) -> None:
        """Append what a stage did (version and time filled in): a typed entry
        (``add_provenance(GenerateProvenance(...))``, its stage and name its own), or
        ``stage, name, args`` for a stage without one."""
        from prmkit import __version__

        if not isinstance(stage, str):
            if name is not None or args is not None:
                raise TypeError("add_provenance(entry) takes no name or args: the entry has them")
            stage, name, args = stage.stage, stage.name, stage.to_dict()
        elif name is None:
            raise TypeError("add_provenance(stage, name, args): name is required")
        self.provenance.append(Provenance(stage, name, dict(args or {}), __version__, now()))

    def check_spans(self) -> None:
        """Raise ValueError unless every step's span points at its text inside ``self.text``."""
        for i, s in enumerate(self.steps):
            if s.span is None:
                continue
            if self.text is None:
                raise ValueError(f"trace {self.id}: step {i} has a span but the trace has no text")
            a, b = s.span
            if self.text[a:b] != s.text:
                raise ValueError(f"trace {self.id}: step {i} span {s.span} does not hold its text")

    # -- (de)serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``Trace.from_dict(t.to_dict()) == t``."""
        d: dict[str, Any] = {"id": self.id, "problem": self.problem.to_dict(),
                             "steps": [s.to_dict() for s in self.steps]}
        d.update(_clean({"final_answer": self.final_answer, "source": self.source,
                         "text": self.text, "meta": self.meta,
                         "provenance": [p.to_dict() for p in self.provenance]}))
        if self.outcome != "unknown":
            d["outcome"] = self.outcome
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, path: str | None = None, line: int | None = None) -> Trace:
        """Parse a dict made by :meth:`to_dict`; malformed input raises :class:`FormatError`."""
        return cls.from_fields(Fields(obj, path=path, line=line))

    @classmethod
    def from_fields(cls, f: Fields) -> Trace:
        f.only(("id", "problem", "steps", "final_answer", "outcome", "source", "text", "meta",
                "provenance", "schema"))
        trace_id = f.str("id")
        problem = f.get("problem", (dict, str))
        problem_f = (Problem(problem) if isinstance(problem, str)
                     else Problem.from_fields(f.sub("problem")))
        outcome = f.str("outcome", "unknown")
        if outcome not in OUTCOMES:
            raise f.error("outcome", f"must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        meta = f.get("meta", dict, {})
        if "scores" in meta:
            _check_trace_scores(f.sub("meta"))
        trace = cls(
            id=trace_id, problem=problem_f,
            steps=[Step.from_fields(s) for s in f.sub_list("steps")],
            final_answer=f.str("final_answer", None, nullable=True), outcome=outcome,
            source=f.str("source", None, nullable=True), text=f.str("text", None, nullable=True),
            meta=meta,
            provenance=[Provenance.from_fields(p) for p in f.sub_list("provenance")]
            if "provenance" in f.obj else [],
        )
        for i, s in enumerate(trace.steps):
            if s.span is not None and (trace.text is None or trace.text[s.span[0]:s.span[1]] != s.text):
                raise FormatError("does not point at the step's text inside the trace's text",
                                  path=f.path, line=f.line, field=f"steps[{i}].span")
        return trace


def soft_value_problem(value: float, source: str) -> str | None:
    """Why ``value`` cannot be a soft label from ``source`` (None when it can): a soft label is a
    probability in [0, 1]; an ``advantage`` label is a difference of two such (in [-1, 1]).
    NaN and infinities are refused, as every comparison with them is false.

    >>> soft_value_problem(0.25, "mc_soft") is None, soft_value_problem(-0.5, "advantage") is None
    (True, True)
    >>> soft_value_problem(float("nan"), "mc_soft")
    'a soft label is a probability in [0, 1], got nan'
    """
    low = -1.0 if source == "advantage" else 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= 1.0:
        what = "an advantage label lies in [-1, 1]" if low else "a soft label is a probability in [0, 1]"
        return f"{what}, got {value!r}"
    return None


def _check_trace_scores(meta: Fields) -> None:
    """``meta.scores`` holds trace scores that selection compares: finite numbers only."""
    scores = meta.sub("scores")
    for k, v in scores.obj.items():
        if v is None:
            continue
        scores.get(k, float)


# -- streaming JSON Lines ----------------------------------------------------------------------------

def read_traces(path: str | os.PathLike, *, skip_invalid: bool = False,
                errors: list[FormatError] | None = None) -> Iterator[Trace]:
    """Stream traces from a prmkit JSONL file (``.gz`` too), one line at a time.

    Malformed lines raise :class:`FormatError`; with ``skip_invalid`` they are skipped and, when an
    ``errors`` list is given, appended to it.
    """
    if skip_invalid and errors is None:
        errors = []
    for line, obj in iter_json_records(path, container="jsonl",
                                       errors=errors if skip_invalid else None):
        try:
            yield Trace.from_dict(obj, path=str(path), line=line)
        except FormatError as e:
            if not skip_invalid:
                raise
            if errors is not None:
                errors.append(e)


class TraceWriter:
    """Append traces to a JSONL file, one flushed line each, so an interrupt loses nothing written.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.jsonl")
    >>> with TraceWriter(p) as w:
    ...     w.write(Trace(id="a", problem=Problem("q")))
    >>> [t.id for t in read_traces(p)]
    ['a']
    """

    def __init__(self, path: str | os.PathLike, *, append: bool = False) -> None:
        ensure_parent(path)
        self.path = str(path)
        self._f = open_text(path, "a" if append else "w")
        self.count = 0

    def write(self, trace: Trace) -> None:
        write_jsonl_line(self._f, trace.to_dict())
        self._f.flush()
        self.count += 1

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_traces(traces: Iterable[Trace], path: str | os.PathLike, *, append: bool = False) -> int:
    """Write ``traces`` to a JSONL file (streamed; ``.gz`` compresses). Returns how many.

    A new file is written to a temporary file beside ``path`` and renamed when complete, so a failure
    leaves an existing ``path`` as it was; ``append`` adds to ``path`` itself, under a lock."""
    from prmkit._durable import durable_file, output_lock

    with (output_lock(path) if append else durable_file(path)) as tmp:
        with TraceWriter(path if append else tmp, append=append) as w:
            for t in traces:
                w.write(t)
            return w.count
