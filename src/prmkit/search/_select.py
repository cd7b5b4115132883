"""Selection: pick one of a problem's N traces, as named composable steps — aggregate, then select.

Aggregate turns each trace's step scores into one number (``min``, ``last``, ``prod``, ``mean``, ...;
see :func:`~prmkit.search.get_aggregator`). Select then picks a trace:

- ``bon`` (best-of-N): the trace with the highest score. Ties: the earliest trace. Unscored traces
  never win over a scored one; when none is scored there is no choice.
- ``weighted`` (weighted best-of-N): traces are grouped by equivalent final answers
  (:func:`~prmkit.data.answers_equal`); each group's weight is the sum of its traces' scores
  (an unscored trace adds 0). The heaviest group wins; ties go to the group with more traces, then to
  the group whose first trace came first. The chosen trace is the group's highest-scored (earliest on
  a tie).
- ``majority`` (self-consistency): the answer most traces give; scores are not used. Ties go to the
  answer that appeared first in sample order (the order of the file), so a tied vote depends on that
  order: :attr:`SelectionReport.ties` counts the problems decided this way and the summary says so.
  The chosen trace is the group's first.
- ``oracle`` (pass@N, a reference, not a method): the first correct trace; no choice when none is.

A NaN or infinite score is refused (:class:`~prmkit.errors.PrmkitError` naming the trace): NaN
compares false with everything, so it would win or lose by its position alone.

Traces without a final answer form a group of their own (``answer=None``) that is reported but never
wins a vote. Every :class:`Selection` says why it chose what it chose: the trace scores and the
answer groups with their votes and weights.

>>> from prmkit.trace import Problem, Step, Trace
>>> p = Problem("2 + 3?", answer="5", id="p")
>>> ts = [Trace(id=str(i), problem=p, steps=[Step(f"The answer is {a}.")], final_answer=a)
...       for i, a in enumerate(["5", "6", "6"])]
>>> select(ts, "majority").trace.final_answer, select(ts, "bon", scores=[[0.9], [0.2], [0.3]]).index
('6', 0)
>>> select(ts, "weighted", scores=[[0.9], [0.2], [0.3]]).trace.final_answer
'5'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from prmkit._registry import Registry
from prmkit._result import Record
from prmkit.data import answers_equal, normalize_answer
from prmkit.errors import FormatError, PrmkitError
from prmkit.scoring import check_finite, trace_score
from prmkit.trace import Trace
from prmkit.trace_queries import final_answer, is_correct, problem_key, stored_scores

__all__ = ["AnswerGroup", "Selection", "SelectionReport", "SELECTORS", "register_selector",
           "group_by_problem", "group_answers", "select", "select_problems",
           "best_of_n", "weighted_best_of_n", "majority_vote", "oracle"]


@dataclass
class AnswerGroup:
    """Traces of one problem that give equivalent final answers.

    ``answer``: the answer as its first trace wrote it (None: traces without an answer).
    ``members``: indices into the problem's traces, in sample order. ``weight``: the sum of their
    trace scores (unscored ones add 0), None when none is scored. ``best``: the highest trace score.
    """

    answer: str | None
    members: list[int] = field(default_factory=list)
    weight: float | None = None
    best: float | None = None
    correct: bool | None = None

    @property
    def votes(self) -> int:
        return len(self.members)

    def to_dict(self) -> dict[str, Any]:
        return {"answer": self.answer, "members": list(self.members), "votes": self.votes,
                "weight": self.weight, "best": self.best, "correct": self.correct}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AnswerGroup:
        """The group :meth:`to_dict` gave (``votes`` is the members' count)."""
        return cls(d.get("answer"), list(d.get("members") or []), d.get("weight"), d.get("best"),
                   d.get("correct"))


@dataclass
class Selection:
    """The choice made for one problem, and why.

    ``index``/``trace``: the chosen trace (None: no choice). ``scores``: each trace's aggregated
    score. ``groups``: the answer groups (for every method, so a report can show them). ``reason``: one
    sentence saying what decided it.
    """

    problem: str
    method: str
    aggregate: str | None
    traces: list[Trace]
    scores: list[float | None]
    groups: list[AnswerGroup]
    index: int | None
    reason: str

    @property
    def trace(self) -> Trace | None:
        return None if self.index is None else self.traces[self.index]

    @property
    def correct(self) -> bool | None:
        """Whether the chosen trace is right (False when nothing was chosen)."""
        return False if self.trace is None else is_correct(self.trace)

    def to_dict(self) -> dict[str, Any]:
        """What is written into a chosen trace's ``meta["selection"]`` (without the traces)."""
        return {"method": self.method, "aggregate": self.aggregate, "problem": self.problem,
                "index": self.index, "chosen": None if self.trace is None else self.trace.id,
                "reason": self.reason, "scores": list(self.scores),
                "groups": [g.to_dict() for g in self.groups]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], traces: Sequence[Trace] = ()) -> Selection:
        """The selection :meth:`to_dict` gave, over ``traces`` (the problem's, in sample order)."""
        return cls(problem=d["problem"], method=d["method"], aggregate=d.get("aggregate"),
                   traces=list(traces), scores=list(d.get("scores") or []),
                   groups=[AnswerGroup.from_dict(g) for g in d.get("groups") or []],
                   index=d.get("index"), reason=d.get("reason", ""))


Selector = Callable[[Sequence[Trace], Sequence[float | None], list[AnswerGroup]], tuple[int | None, str]]


# -- grouping --------------------------------------------------------------------------------------------

def group_by_problem(traces: Iterable[Trace]) -> dict[str, list[Trace]]:
    """Traces grouped by problem (id, else text), problems and traces in first-seen order."""
    out: dict[str, list[Trace]] = {}
    for t in traces:
        out.setdefault(problem_key(t.problem), []).append(t)
    return out


def group_answers(traces: Sequence[Trace], scores: Sequence[float | None] | None = None
                  ) -> list[AnswerGroup]:
    """Group traces by equivalent final answers, in order of first appearance.

    Two answers are equivalent when their normal forms match or ``answers_equal`` says so; a new answer
    joins the first group whose answer it equals (equivalence is checked against that group's first
    answer, so the grouping does not depend on later members).
    """
    scores = list(scores) if scores is not None else [None] * len(traces)
    check_finite(scores, "trace scores")
    groups: list[AnswerGroup] = []
    normals: list[str | None] = []
    for i, t in enumerate(traces):
        ans = final_answer(t)
        norm = None if ans is None else normalize_answer(ans)
        g = None
        for k, grp in enumerate(groups):
            if (ans is None) != (grp.answer is None):
                continue
            if ans is None or norm == normals[k] or answers_equal(ans, grp.answer):
                g = grp
                break
        if g is None:
            g = AnswerGroup(answer=ans)
            groups.append(g)
            normals.append(norm)
        g.members.append(i)
        s = scores[i]
        if s is not None:
            g.weight = (g.weight or 0.0) + s
            g.best = s if g.best is None else max(g.best, s)
    for g in groups:
        g.correct = is_correct(traces[g.members[0]]) if g.answer is not None else False
    return groups


def _fmt(x: float | None) -> str:
    return "unscored" if x is None else f"{x:.4g}"


# -- the selectors ---------------------------------------------------------------------------------------

def _argmax(indices: Iterable[int], scores: Sequence[float | None]) -> int | None:
    """The index with the highest score, the earliest on a tie; None when none is scored."""
    check_finite(scores, "trace scores")
    best = None
    for i in indices:
        if scores[i] is not None and (best is None or scores[i] > scores[best]):  # type: ignore[operator]
            best = i
    return best


def best_of_n(traces: Sequence[Trace], scores: Sequence[float | None], groups: list[AnswerGroup]
              ) -> tuple[int | None, str]:
    """The highest-scored trace (earliest on a tie)."""
    i = _argmax(range(len(traces)), scores)
    if i is None:
        return None, "no trace is scored"
    return i, f"trace {i} has the highest score ({_fmt(scores[i])})"


def weighted_best_of_n(traces: Sequence[Trace], scores: Sequence[float | None],
                       groups: list[AnswerGroup]) -> tuple[int | None, str]:
    """The best trace of the answer group with the largest summed score."""
    voting = [g for g in groups if g.answer is not None and g.weight is not None]
    if not voting:
        return None, "no scored trace has a final answer"
    # max() keeps the first of equal keys; groups are in first-appearance order.
    win = max(voting, key=lambda g: (g.weight, g.votes))
    i = _argmax(win.members, scores)
    return i, (f"answer {win.answer!r} has the largest total score {_fmt(win.weight)} "
               f"over {win.votes} trace(s); trace {i} is its best ({_fmt(scores[i])})")


def majority_vote(traces: Sequence[Trace], scores: Sequence[float | None], groups: list[AnswerGroup]
                  ) -> tuple[int | None, str]:
    """The first trace of the most common answer (the earliest answer on a tie)."""
    voting = [g for g in groups if g.answer is not None]
    if not voting:
        return None, "no trace has a final answer"
    win = max(voting, key=lambda g: g.votes)
    tied = sum(g.votes == win.votes for g in voting) > 1
    return win.members[0], (f"answer {win.answer!r} has the most votes ({win.votes} of {len(traces)})"
                            + ("; tied, the earliest answer wins" if tied else ""))


def oracle(traces: Sequence[Trace], scores: Sequence[float | None], groups: list[AnswerGroup]
           ) -> tuple[int | None, str]:
    """The first correct trace (pass@N: whether any sample is right)."""
    for i, t in enumerate(traces):
        if is_correct(t):
            return i, f"trace {i} is correct"
    return None, "no trace is correct"


#: name -> "module:attr" of a selector ``(traces, trace scores, answer groups) -> (index, reason)``.
SELECTORS = Registry("selection method", {
    "bon": "prmkit.search._select:best_of_n",
    "weighted": "prmkit.search._select:weighted_best_of_n",
    "majority": "prmkit.search._select:majority_vote",
    "oracle": "prmkit.search._select:oracle",
}, group="prmkit.selectors")

#: Methods that need trace scores.
SCORED_METHODS = ("bon", "weighted")


def register_selector(name: str, target: str) -> None:
    """Register a selector function as ``"module:attr"`` under ``name``."""
    SELECTORS.register(name, target)


def select(traces: Sequence[Trace], method: str = "bon", *, aggregate: str = "min",
           key: str | None = None, scores: Sequence[Sequence[float | None]] | None = None) -> Selection:
    """Choose one of a problem's traces: aggregate each trace's step scores, then select by ``method``.

    Step scores come from ``scores`` (per trace, as a scorer returns them) or, when it is None, from
    the traces themselves (``step.scores[key]``, or ``meta["scores"][key]`` for an ORM). An ORM's
    trace score is used as it is: the selection's ``aggregate`` is then None, not ``aggregate``.
    """
    traces = list(traces)
    if not traces:
        raise PrmkitError("nothing to select from: no traces")
    fn = SELECTORS.load(method)
    needs_scores = needs_aggregate = method in SCORED_METHODS
    if scores is None:
        if key is None and needs_scores:
            raise PrmkitError(f"selection {method!r} needs scores: pass scores= or the scorer key=")
        scores = [stored_scores(t, key) if key else [] for t in traces]
        if key and not any(key in st.scores for t in traces for st in t.steps):
            needs_aggregate = False  # an ORM's score per trace (or none): nothing was aggregated
    if len(scores) != len(traces):
        raise PrmkitError(f"{len(scores)} score lists for {len(traces)} traces")
    agg = []
    for t, s in zip(traces, scores, strict=True):
        try:
            agg.append(trace_score(s, aggregate))
        except PrmkitError as e:
            raise PrmkitError(f"trace {t.id!r}: {e}") from None
    groups = group_answers(traces, agg)
    index, reason = fn(traces, agg, groups)
    return Selection(problem=problem_key(traces[0].problem), method=method,
                     aggregate=aggregate if needs_aggregate else None, traces=traces, scores=agg,
                     groups=groups, index=index, reason=reason)


@dataclass
class SelectionReport(Record):
    """Selections over many problems and their accuracy (a problem without a choice counts as
    wrong; problems whose correctness is unknown are left out of ``accuracy``).

    :meth:`to_dict` holds each selection (:meth:`Selection.to_dict`) with its problem's traces, and,
    for a reader, ``accuracy``, ``judged``, ``no_choice`` and ``ties`` (computed again on reading)."""

    kind: ClassVar[str] = "selection"
    method: str
    aggregate: str | None
    selections: list[Selection]
    extra: dict[str, Any] = field(default_factory=dict)

    #: Keys of :meth:`to_dict` that are computed from the selections.
    _DERIVED: ClassVar[tuple[str, ...]] = ("accuracy", "judged", "no_choice", "ties")

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "aggregate": self.aggregate, "accuracy": self.accuracy,
                "judged": len(self.judged), "no_choice": self.no_choice, "ties": self.ties,
                "selections": [{**s.to_dict(), "traces": [t.to_dict() for t in s.traces]}
                               for s in self.selections], **self.extra}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> SelectionReport:
        where = where or cls.kind
        if not isinstance(d, Mapping):
            raise FormatError(f"must be an object, got {type(d).__name__}", field=where)
        sels = []
        for i, s in enumerate(d.get("selections") or []):
            try:
                sels.append(Selection.from_dict(s, [Trace.from_dict(t) for t in s.get("traces") or []]))
            except (KeyError, AttributeError, TypeError) as e:
                raise FormatError(f"not a selection ({type(e).__name__}: {e})",
                                  field=f"{where}.selections[{i}]") from None
        known = {"method", "aggregate", "selections", *cls._DERIVED}
        return cls(d.get("method", ""), d.get("aggregate"), sels,
                   extra={k: v for k, v in d.items() if k not in known})

    @property
    def judged(self) -> list[Selection]:
        return [s for s in self.selections if s.correct is not None]

    @property
    def accuracy(self) -> float | None:
        judged = self.judged
        return sum(bool(s.correct) for s in judged) / len(judged) if judged else None

    @property
    def no_choice(self) -> int:
        return sum(s.index is None for s in self.selections)

    @property
    def ties(self) -> int:
        """Majority vote: problems where several answers had the most votes, so the tie rule (the
        earliest answer in sample order) chose, not the votes; 0 for the other methods."""
        if self.method != "majority":
            return 0
        n = 0
        for s in self.selections:
            votes = [g.votes for g in s.groups if g.answer is not None]
            n += int(bool(votes) and votes.count(max(votes)) > 1)
        return n

    def lines(self) -> list[str]:
        """What a terminal shows of it (the one way every result prints; :meth:`summary` is its line)."""
        return [self.summary()]

    def summary(self) -> str:
        acc = "n/a" if self.accuracy is None else f"{self.accuracy:.1%}"
        agg = (f" (aggregate {self.aggregate})" if self.aggregate else
               " (trace scores)" if self.method in SCORED_METHODS else "")
        return (f"{self.method}{agg}: accuracy {acc} on {len(self.judged)} problems"
                + (f"; {self.no_choice} without a choice" if self.no_choice else "")
                + (f"; {self.ties} tied, the earliest answer in sample order chosen" if self.ties else ""))


def select_problems(traces: Iterable[Trace], method: str = "bon", *, aggregate: str = "min",
                    key: str | None = None) -> SelectionReport:
    """:func:`select` on every problem of ``traces`` (grouped by problem), reading stored scores."""
    sels = [select(ts, method, aggregate=aggregate, key=key)
            for ts in group_by_problem(traces).values()]
    # The report's aggregate is the selections' own: None when the key held an ORM's trace scores.
    used = aggregate if any(s.aggregate for s in sels) else None
    return SelectionReport(method, used if method in SCORED_METHODS else None, sels)
