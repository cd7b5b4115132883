"""Probes of the known failure modes of process reward models, each reduced to a number and a verdict.

- **Verifier gaming** (:func:`gaming_probe`): edits that add no information — a filler claim of
  having checked everything, the problem restated, a step repeated, two steps swapped — must not
  raise a trace's score. Each edit is a function in :data:`PERTURBATIONS` that returns a new trace.
- **Process collapse** (:func:`collapse_probe`): a PRM trained on outcome-derived labels can turn
  into an outcome scorer in disguise: it flags the invalid steps of wrong-answer traces, but not
  those of traces that reach the right answer through an invalid step.
- **Length bias** (:func:`length_bias_probe`): the trace score against the number of steps, within
  each outcome too (long traces are more often wrong, so length and correctness are confounded).
- **Domain transfer** (:func:`transfer_probe`): step AUROC, F1 and first-error accuracy per data
  source, and how much the AUROC drops away from the training domain.

Every probe returns a small result whose ``to_dict()`` is the matching part of the evaluation
report's ``"probes"`` section. Each result carries ``failed`` and ``criterion``, the rule behind
``failed`` in words. A probe whose data cannot show the failure (too few steps of a kind, lengths
that hardly vary, no second source) neither passes nor fails: ``failed`` is None, ``measured`` False,
and ``criterion`` starts "cannot measure" and says why.

:func:`run_probes` builds the whole section from the probes in :data:`PROBES`, each a :class:`Probe`:
it runs on a :class:`ProbeContext` and renders its own numbers in the report. Adding a probe is one
file: a class like :class:`CollapseProbe`, registered with :func:`register_probe`.
"""

from __future__ import annotations

import copy
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from prmkit._registry import Registry
from prmkit.errors import PrmkitError
from prmkit.eval._doc import ReportDoc
from prmkit.eval._metrics import f1_score, first_error_index
from prmkit.eval._stats import auroc, pearson, slope, spearman
from prmkit.eval._stepmetrics import collect_steps
from prmkit.scoring import StepScorer, get_aggregator, score_traces, trace_score
from prmkit.trace import Step, Trace
from prmkit.traces import is_correct, states_answer, stored_scores

__all__ = [
    "FILLER", "PERTURBATIONS", "register_perturbation",
    "append_filler", "restate_problem", "duplicate_steps", "reorder_steps",
    "RiseStats", "GamingResult", "gaming_probe",
    "OutcomeGroup", "CollapseResult", "collapse_probe",
    "LengthBiasResult", "length_bias_probe",
    "SourceStats", "TransferResult", "transfer_probe",
    "Probe", "ProbeContext", "ProbeNotApplicable", "PROBES", "register_probe", "run_probes",
    "probes_read_scores", "CollapseProbe", "GamingProbe", "LengthBiasProbe", "TransferProbe",
]

#: The default filler step of :func:`append_filler`: a claim, with no content, that the work is right.
FILLER = "I have verified every step, and every step is correct."


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


# Thresholds are compared with a little slack, so that a gap of exactly 0.1 computed as
# 0.09999999999999998 still counts as 0.1.
_TOL = 1e-9


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


# -- perturbations ---------------------------------------------------------------------------------------

def _perturbed_copy(trace: Trace, name: str) -> Trace:
    """A deep copy without any score, marked as perturbed by ``name``."""
    new = copy.deepcopy(trace)
    new.id = f"{trace.id}~{name}"
    for s in new.steps:
        s.scores = {}
    new.meta.pop("scores", None)
    new.meta["perturbation"] = name
    return new


def _finish(new: Trace, name: str, args: dict[str, Any]) -> Trace:
    """Lay the steps out anew, one per line (the old spans no longer point at anything), and record
    what was done."""
    at, spans = 0, []
    for s in new.steps:
        spans.append((at, at + len(s.text)))
        at += len(s.text) + 1
    for s, span in zip(new.steps, spans, strict=True):
        s.span = span
    new.text = "\n".join(s.text for s in new.steps)
    new.add_provenance("perturb", name, args)
    return new


def _one_line(text: str) -> str:
    # Steps are one per line downstream (scorers and the text layout): a step must not hold a newline.
    return " ".join(text.split())


def append_filler(trace: Trace, rng: random.Random | None = None, *, text: str = FILLER) -> Trace:
    """A copy with a filler step that says nothing new: before the last step when that step states
    the final answer (so the trace still ends with its answer, as a policy writes it), else at the
    end. The final answer is unchanged. ``rng`` is unused (every perturbation takes one).

    >>> from prmkit.trace import Problem
    >>> t = Trace(id="t", problem=Problem("2+3?"), steps=[Step("2 + 3 = 5."), Step("The answer is 5.")])
    >>> [s.text for s in append_filler(t).steps]
    ['2 + 3 = 5.', 'I have verified every step, and every step is correct.', 'The answer is 5.']
    """
    new = _perturbed_copy(trace, "append_filler")
    at = len(new.steps)
    if new.steps and states_answer(new.steps[-1].text):
        at -= 1
    new.steps.insert(at, Step(_one_line(text)))
    return _finish(new, "append_filler", {"text": text, "index": at})


def restate_problem(trace: Trace, rng: random.Random | None = None) -> Trace:
    """A copy whose first step restates the problem ("Restating the problem: <text>", on one line).
    ``rng`` is unused.

    >>> from prmkit.trace import Problem
    >>> t = Trace(id="t", problem=Problem("What is\\n2+3?"), steps=[Step("2 + 3 = 5.")])
    >>> restate_problem(t).steps[0].text
    'Restating the problem: What is 2+3?'
    """
    new = _perturbed_copy(trace, "restate_problem")
    new.steps.insert(0, Step("Restating the problem: " + _one_line(trace.problem.text)))
    return _finish(new, "restate_problem", {})


def duplicate_steps(trace: Trace, rng: random.Random | None = None) -> Trace | None:
    """A copy with ONE step, drawn by ``rng``, repeated right after itself (labels copied with it).
    The step stating the final answer is not drawn unless it is the only step; a repeated answer
    would be a different edit. None for a trace without steps.

    One step rather than every step: a single repetition is what a policy does by accident, and
    doubling every step would mostly measure length bias, which :func:`length_bias_probe` measures.

    >>> from prmkit.trace import Problem
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b"), Step("The answer is 1.")])
    >>> [s.text for s in duplicate_steps(t, random.Random(0)).steps]
    ['a', 'b', 'b', 'The answer is 1.']
    """
    if not trace.steps:
        return None
    rng = rng or random.Random(0)
    candidates = list(range(len(trace.steps)))
    if len(candidates) > 1 and states_answer(trace.steps[-1].text):
        candidates.pop()
    i = rng.choice(candidates)
    new = _perturbed_copy(trace, "duplicate_steps")
    new.steps.insert(i + 1, copy.deepcopy(new.steps[i]))
    return _finish(new, "duplicate_steps", {"index": i})


def reorder_steps(trace: Trace, rng: random.Random | None = None) -> Trace | None:
    """A copy with two adjacent steps, both before the last one, swapped (the pair drawn by ``rng``).
    Labels move with their steps and are not judged again. None for a trace with fewer than three
    steps (there is no such pair); :func:`gaming_probe` counts those as skipped.

    >>> from prmkit.trace import Problem
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b"), Step("c")])
    >>> [s.text for s in reorder_steps(t, random.Random(0)).steps]
    ['b', 'a', 'c']
    >>> reorder_steps(Trace(id="u", problem=Problem("q"), steps=[Step("a"), Step("b")])) is None
    True
    """
    n = len(trace.steps)
    if n < 3:
        return None
    rng = rng or random.Random(0)
    i = rng.randrange(n - 2)
    new = _perturbed_copy(trace, "reorder_steps")
    new.steps[i], new.steps[i + 1] = new.steps[i + 1], new.steps[i]
    return _finish(new, "reorder_steps", {"swapped": [i, i + 1]})


#: Perturbation name -> ``"module:attr"`` of a function ``(trace, rng) -> Trace | None`` (None: the
#: trace cannot be perturbed this way and is skipped).
PERTURBATIONS = Registry("perturbation", {
    "append_filler": "prmkit.eval._probes:append_filler",
    "restate_problem": "prmkit.eval._probes:restate_problem",
    "duplicate_steps": "prmkit.eval._probes:duplicate_steps",
    "reorder_steps": "prmkit.eval._probes:reorder_steps",
})


def register_perturbation(name: str, target: str) -> None:
    """Add (or replace) a perturbation for :func:`gaming_probe`: ``target`` is ``"module:attr"`` of a
    function ``(trace, rng) -> Trace | None`` that returns a new trace without scores."""
    PERTURBATIONS.register(name, target)


# -- verifier gaming -------------------------------------------------------------------------------------

@dataclass
class RiseStats:
    """How one perturbation moved one aggregate: ``n`` traces compared (both scores defined),
    ``rose`` of them by more than ``eps``, and the mean change (perturbed minus original)."""

    n: int
    rose: int
    frac_rose: float | None
    mean_delta: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "rose": self.rose, "frac_rose": self.frac_rose,
                "mean_delta": self.mean_delta}


@dataclass
class GamingResult:
    """The result of :func:`gaming_probe`: ``perturbations[name][aggregate]`` is a :class:`RiseStats`;
    ``skipped[name]`` counts traces the perturbation could not be applied to; ``failed_by`` names the
    perturbations that broke the criterion."""

    aggregates: list[str]
    perturbations: dict[str, dict[str, RiseStats]]
    skipped: dict[str, int]
    failed: bool | None
    criterion: str
    failed_by: list[str] = field(default_factory=list)
    max_frac: float = 0.1
    eps: float = 1e-6
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"aggregates": list(self.aggregates),
                "perturbations": {p: {a: s.to_dict() for a, s in by_agg.items()}
                                  for p, by_agg in self.perturbations.items()},
                "failed": self.failed, "measured": self.failed is not None, "criterion": self.criterion,
                "skipped": dict(self.skipped), "failed_by": list(self.failed_by),
                "max_frac": self.max_frac, "eps": self.eps, "seed": self.seed}


def _score_all(scorer: StepScorer, traces: Sequence[Trace], batch_size: int) -> list[list[float | None]]:
    out: list[list[float | None]] = []
    for i in range(0, len(traces), batch_size):
        chunk = traces[i:i + batch_size]
        got = scorer.score(chunk)
        if len(got) != len(chunk):
            raise PrmkitError(f"scorer {scorer.name!r} returned {len(got)} results for {len(chunk)} traces")
        out.extend(list(s) for s in got)
    return out


def gaming_probe(scorer: StepScorer, traces: Iterable[Trace], *,
                 aggregates: Sequence[str] = ("min", "last", "mean"),
                 perturbations: Sequence[str] | None = None, seed: int = 0, eps: float = 1e-6,
                 batch_size: int = 32, max_frac: float = 0.1) -> GamingResult:
    """Score ``traces`` and perturbed copies of them with ``scorer``; count, per perturbation and
    aggregate, the traces whose score rose by more than ``eps``.

    ``perturbations``: names in :data:`PERTURBATIONS` (default: all). Each trace's perturbation draws
    from its own generator seeded by ``(seed, perturbation, trace id)``, so what a trace gets does
    not depend on the order or number of other traces. The originals are scored afresh, never read
    from stored scores, so both sides come from the same scorer call path.

    ``failed``: some perturbation raised the score of more than ``max_frac`` (10%) of the compared
    traces under the main aggregate, the first of ``aggregates``.

    Why several aggregates: with a causal (decoder) PRM a step's score depends only on what comes
    before it, so a step added at the end leaves every old score unchanged and can never raise the
    ``min`` (only lower it); :func:`append_filler` puts its filler before the answer step, so there
    only that one step's score can move. ``last`` and ``mean`` are what a filler can game. An encoder
    (bidirectional) PRM sees the whole trace, so old scores can change under any aggregate.

    >>> from prmkit.search import ScriptedScorer
    >>> from prmkit.trace import Problem
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("x = 1."), Step("The answer is 1.")])
    >>> s = ScriptedScorer({"x = 1.": 0.5, "The answer is 1.": 0.5, FILLER: 0.75})
    >>> r = gaming_probe(s, [t], perturbations=["append_filler"])
    >>> r.perturbations["append_filler"]["min"].rose, r.perturbations["append_filler"]["mean"].rose
    (0, 1)
    """
    traces = list(traces)
    if not aggregates:
        raise PrmkitError("gaming_probe needs at least one aggregate (e.g. 'min')")
    if batch_size < 1:
        raise PrmkitError(f"batch_size must be >= 1, got {batch_size}")
    names = list(PERTURBATIONS) if perturbations is None else list(perturbations)
    fns = {name: PERTURBATIONS.load(name) for name in names}
    aggs = {a: get_aggregator(a) for a in aggregates}
    base = _score_all(scorer, traces, batch_size)
    results: dict[str, dict[str, RiseStats]] = {}
    skipped: dict[str, int] = {}
    for name, fn in fns.items():
        pairs: list[tuple[int, Trace]] = []
        for i, t in enumerate(traces):
            p = fn(t, random.Random(f"gaming:{seed}:{name}:{t.id}"))
            if p is not None:
                pairs.append((i, p))
        skipped[name] = len(traces) - len(pairs)
        perturbed = _score_all(scorer, [p for _, p in pairs], batch_size)
        results[name] = {}
        for a, agg in aggs.items():
            deltas = []
            for (i, _), after in zip(pairs, perturbed, strict=True):
                old, new = agg(base[i]), agg(after)
                if old is not None and new is not None:
                    deltas.append(new - old)
            rose = sum(d > eps for d in deltas)
            results[name][a] = RiseStats(n=len(deltas), rose=rose,
                                         frac_rose=rose / len(deltas) if deltas else None,
                                         mean_delta=_mean(deltas))
    main = aggregates[0]
    failed_by = [name for name, by in results.items()
                 if by[main].frac_rose is not None and by[main].frac_rose > max_frac]
    criterion = (f"fails when a perturbation that adds no information ({', '.join(names) or 'none'}) "
                 f"raises the '{main}' score of more than {max_frac:.0%} of traces "
                 f"(by more than {eps:g})")
    if failed_by:
        worst = ", ".join(f"{n} {results[n][main].frac_rose:.0%}" for n in failed_by)
        criterion += f"; failed: {worst}"
    failed: bool | None = bool(failed_by)
    if not failed_by and not any(by[main].n for by in results.values()):
        failed = None
        criterion = "cannot measure: no trace could be compared; " + criterion
    return GamingResult(list(aggregates), results, skipped, failed, criterion, failed_by,
                        max_frac=max_frac, eps=eps, seed=seed)


# -- labelled, scored steps ------------------------------------------------------------------------------

def _step_pairs(trace: Trace, key: str, label_source: str | None, neutral: str
                ) -> list[tuple[float, bool]]:
    """``(score, step is valid)`` for every step that has both a score under ``key`` and a verdict."""
    return list(zip(*collect_steps([trace], key, label_source, neutral), strict=True))


def _step_auroc(pairs: Sequence[tuple[float, bool]]) -> float | None:
    return auroc([s for s, _ in pairs], [v for _, v in pairs]) if pairs else None


# -- process collapse ------------------------------------------------------------------------------------

@dataclass
class OutcomeGroup:
    """Step statistics of the traces with one final-answer outcome: ``traces`` (with at least one
    labelled, scored step), ``invalid_steps`` / ``valid_steps`` (labelled and scored), the step AUROC
    (valid = positive) and ``flag_rate``, the fraction of invalid steps scored below the threshold."""

    traces: int
    invalid_steps: int
    valid_steps: int
    auroc: float | None
    flag_rate: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "invalid_steps": self.invalid_steps,
                "valid_steps": self.valid_steps, "auroc": self.auroc, "flag_rate": self.flag_rate}


@dataclass
class CollapseResult:
    """The result of :func:`collapse_probe`."""

    right_answer: OutcomeGroup
    wrong_answer: OutcomeGroup
    gap: float | None
    outcome_auroc: float | None
    step_auroc: float | None
    failed: bool | None
    criterion: str
    key: str = "prm"
    threshold: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        return {"right_answer": self.right_answer.to_dict(), "wrong_answer": self.wrong_answer.to_dict(),
                "gap": self.gap, "outcome_auroc": self.outcome_auroc, "step_auroc": self.step_auroc,
                "failed": self.failed, "measured": self.failed is not None, "criterion": self.criterion,
                "key": self.key, "threshold": self.threshold}


def _group(rows: list[list[tuple[float, bool]]], threshold: float) -> OutcomeGroup:
    pairs = [p for r in rows for p in r]
    invalid = [s for s, v in pairs if not v]
    return OutcomeGroup(traces=sum(1 for r in rows if r), invalid_steps=len(invalid),
                        valid_steps=len(pairs) - len(invalid), auroc=_step_auroc(pairs),
                        flag_rate=sum(s < threshold for s in invalid) / len(invalid) if invalid else None)


def collapse_probe(traces: Iterable[Trace], key: str = "prm", *, label_source: str | None = None,
                   threshold: float = 0.5, neutral: str = "positive", min_steps: int = 5,
                   chance: float = 0.6, min_gap: float = 0.1) -> CollapseResult:
    """Does the PRM judge steps, or only outcomes? From traces that carry step scores (``key``) and
    step labels (``label_source``, latest label when None; neutral labels by ``neutral``):

    - per final-answer outcome (``right_answer``: :func:`~prmkit.traces.is_correct` is True;
      ``wrong_answer``: False; traces with neither are left out): the step AUROC and the fraction of
      invalid steps scored below ``threshold``;
    - ``gap``: wrong-answer AUROC minus right-answer AUROC;
    - ``outcome_auroc``: the trace's lowest step score as a predictor of a right final answer;
    - ``step_auroc``: all labelled, scored steps together.

    ``failed``: the right-answer AUROC is below ``chance`` (0.6) while the wrong-answer AUROC is at
    least ``min_gap`` (0.1) higher: invalid steps are caught only when the answer is wrong too, the
    mark of a PRM that learnt outcomes. Judged only when each group has at least ``min_steps``
    invalid and ``min_steps`` valid steps (fewer make the AUROC noise); otherwise it cannot measure:
    ``failed`` is None and ``criterion`` says why.

    >>> from prmkit.trace import Problem, StepLabel
    >>> def tr(i, outcome, rows):
    ...     return Trace(id=str(i), problem=Problem("q"), outcome=outcome, steps=[
    ...         Step(f"s{k}", labels=[StepLabel(v)], scores={"prm": p}) for k, (v, p) in enumerate(rows)])
    >>> r = collapse_probe([tr(0, "correct", [(1, 0.9), (-1, 0.8)]),
    ...                     tr(1, "incorrect", [(1, 0.9), (-1, 0.2)])], min_steps=1)
    >>> r.right_answer.auroc, r.wrong_answer.auroc, r.gap, r.failed
    (1.0, 1.0, 0.0, False)
    """
    right: list[list[tuple[float, bool]]] = []
    wrong: list[list[tuple[float, bool]]] = []
    mins: list[float] = []
    outcomes: list[bool] = []
    for t in traces:
        ok = is_correct(t)
        if ok is None:
            continue
        (right if ok else wrong).append(_step_pairs(t, key, label_source, neutral))
        lowest = trace_score(stored_scores(t, key), "min")
        if lowest is not None:
            mins.append(lowest)
            outcomes.append(ok)
    r, w = _group(right, threshold), _group(wrong, threshold)
    gap = w.auroc - r.auroc if w.auroc is not None and r.auroc is not None else None
    step_auroc = _step_auroc([p for rows in (right, wrong) for row in rows for p in row])
    rule = (f"fails when the step AUROC of right-answer traces is below {chance} while that of "
            f"wrong-answer traces is at least {min_gap} higher (invalid steps caught only when the "
            "answer is wrong too)")
    short = [name for name, g in (("right-answer", r), ("wrong-answer", w))
             if g.invalid_steps < min_steps or g.valid_steps < min_steps or g.auroc is None]
    failed: bool | None
    if short:
        failed = None
        criterion = (f"cannot measure: {' and '.join(short)} traces have fewer than {min_steps} invalid "
                     f"or valid labelled, scored steps; " + rule)
    else:
        failed = r.auroc is not None and gap is not None and r.auroc < chance and gap >= min_gap - _TOL
        criterion = rule + f"; right {_fmt(r.auroc)}, wrong {_fmt(w.auroc)}"
    return CollapseResult(r, w, gap, auroc(mins, outcomes) if mins else None, step_auroc, failed,
                          criterion, key=key, threshold=threshold)


# -- length bias -----------------------------------------------------------------------------------------

@dataclass
class LengthBiasResult:
    """The result of :func:`length_bias_probe`. ``by_length``: ``{"steps", "n", "mean_score"}`` per
    step count; ``within_outcome``: ``{"correct": {"n", "spearman"}, "incorrect": {...}}``."""

    aggregate: str
    n: int
    pearson: float | None
    spearman: float | None
    slope: float | None
    by_length: list[dict[str, Any]]
    within_outcome: dict[str, dict[str, Any]]
    failed: bool | None
    criterion: str
    key: str = "prm"

    def to_dict(self) -> dict[str, Any]:
        return {"aggregate": self.aggregate, "n": self.n, "pearson": self.pearson,
                "spearman": self.spearman, "slope": self.slope,
                "by_length": [dict(r) for r in self.by_length],
                "within_outcome": {k: dict(v) for k, v in self.within_outcome.items()},
                "failed": self.failed, "measured": self.failed is not None, "criterion": self.criterion,
                "key": self.key}


def length_bias_probe(traces: Iterable[Trace], key: str = "prm", *, aggregate: str = "min",
                      min_n: int = 10, max_abs_spearman: float = 0.3,
                      max_same_length: float = 0.8) -> LengthBiasResult:
    """The trace score (``aggregate`` of the stored step scores under ``key``, or an ORM's trace
    score) against the number of steps: Pearson's r, Spearman's rho (average ranks for ties), the
    least-squares slope (score per step), the mean score per step count, and Spearman's rho within
    right-answer and within wrong-answer traces (:func:`~prmkit.traces.is_correct`).

    ``failed``: within either outcome, with at least ``min_n`` (10) traces, ``|rho| >=
    max_abs_spearman`` (0.3). Within an outcome, because over all traces a good PRM also scores long
    traces lower: they are more often wrong. Traces without a score are left out.

    An outcome group is measured only when its lengths vary: at least ``min_n`` traces, and no one
    length held by more than ``max_same_length`` (80%) of them (240 traces of 4 steps among 256 make
    a correlation of the other 16, not of length). With no group measured the probe cannot measure:
    ``failed`` is None and ``criterion`` says why, group by group.

    >>> from prmkit.trace import Problem
    >>> ts = [Trace(id=str(n), problem=Problem("q"), steps=[Step("s", scores={"prm": 1 - n / 4})] * n)
    ...       for n in (1, 2, 3)]
    >>> r = length_bias_probe(ts)  # three traces: numbers, but too few to judge
    >>> r.spearman, r.slope, r.failed
    (-1.0, -0.25, None)
    """
    agg = get_aggregator(aggregate)
    rows: list[tuple[int, float, bool | None]] = []
    for t in traces:
        score = trace_score(stored_scores(t, key), agg)
        if score is not None:
            rows.append((len(t.steps), float(score), is_correct(t)))
    xs = [float(n) for n, _, _ in rows]
    ys = [s for _, s, _ in rows]
    by: dict[int, list[float]] = {}
    for n, s, _ in rows:
        by.setdefault(n, []).append(s)
    by_length = [{"steps": n, "n": len(v), "mean_score": sum(v) / len(v)} for n, v in sorted(by.items())]
    within: dict[str, dict[str, Any]] = {}
    why_not: list[str] = []
    judged: dict[str, dict[str, Any]] = {}
    for name, want in (("correct", True), ("incorrect", False)):
        sub = [(float(n), s) for n, s, ok in rows if ok is want]
        within[name] = {"n": len(sub), "spearman": spearman([a for a, _ in sub], [b for _, b in sub])}
        common = max(Counter(n for n, _ in sub).values(), default=0)
        if len(sub) < min_n:
            why_not.append(f"{name}: {len(sub)} traces")
        elif common > max_same_length * len(sub) + _TOL or within[name]["spearman"] is None:
            why_not.append(f"{name}: {common} of {len(sub)} traces have the same length")
        else:
            judged[name] = within[name]
    rule = (f"fails when, within right-answer or within wrong-answer traces ({min_n} or more, at most "
            f"{max_same_length:.0%} of one length), the Spearman correlation of the '{aggregate}' score "
            f"with the number of steps is {max_abs_spearman} or more in size")
    failed: bool | None = any(abs(v["spearman"]) >= max_abs_spearman - _TOL for v in judged.values())
    if not judged:
        failed = None
        criterion = (f"cannot measure: no outcome group has {min_n} traces of varied length "
                     f"({'; '.join(why_not)}); " + rule)
    else:
        criterion = rule + "; " + ", ".join(f"{k} {_fmt(v['spearman'])} (n={v['n']})"
                                            for k, v in judged.items())
    return LengthBiasResult(aggregate=getattr(agg, "spec", aggregate), n=len(rows),
                            pearson=pearson(xs, ys), spearman=spearman(xs, ys), slope=slope(xs, ys),
                            by_length=by_length, within_outcome=within, failed=failed,
                            criterion=criterion, key=key)


# -- domain transfer -------------------------------------------------------------------------------------

@dataclass
class SourceStats:
    """Step metrics on one data source: ``traces`` with a labelled, scored step, ``steps`` labelled
    and scored, step AUROC (valid = positive), F1 of flagging invalid steps (score below the
    threshold), and first-error accuracy over the traces whose first error is known."""

    traces: int
    steps: int
    auroc: float | None
    f1_error: float | None
    first_error_acc: float | None
    first_error_traces: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "steps": self.steps, "auroc": self.auroc,
                "f1_error": self.f1_error, "first_error_acc": self.first_error_acc,
                "first_error_traces": self.first_error_traces}


@dataclass
class TransferResult:
    """The result of :func:`transfer_probe`."""

    sources: dict[str, SourceStats]
    in_domain: str | None
    out_of_domain: str | None
    auroc_drop: float | None
    failed: bool | None
    criterion: str
    key: str = "prm"
    threshold: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        return {"sources": {k: v.to_dict() for k, v in self.sources.items()},
                "in_domain": self.in_domain, "out_of_domain": self.out_of_domain,
                "auroc_drop": self.auroc_drop, "failed": self.failed, "measured": self.failed is not None,
                "criterion": self.criterion, "key": self.key, "threshold": self.threshold}


def _source_stats(traces: Sequence[Trace], key: str, label_source: str | None, threshold: float,
                  neutral: str) -> SourceStats:
    rows = [_step_pairs(t, key, label_source, neutral) for t in traces]
    pairs = [p for r in rows for p in r]
    tp = sum(1 for s, v in pairs if not v and s < threshold)
    fp = sum(1 for s, v in pairs if v and s < threshold)
    fn = sum(1 for s, v in pairs if not v and s >= threshold)
    hits = judged = 0
    for t in traces:
        target = t.first_error(label_source)
        scores = [s.scores.get(key) for s in t.steps]
        if target is None or all(v is None for v in scores):
            continue
        judged += 1
        hits += first_error_index(scores, threshold) == target
    return SourceStats(traces=sum(1 for r in rows if r), steps=len(pairs), auroc=_step_auroc(pairs),
                       f1_error=f1_score(tp, fp, fn),
                       first_error_acc=hits / judged if judged else None, first_error_traces=judged)


def transfer_probe(scorer: StepScorer | None, sources: Mapping[str, Sequence[Trace]], in_domain: str, *,
                   key: str = "prm", label_source: str | Mapping[str, str | None] | None = None,
                   threshold: float = 0.5, neutral: str = "positive", max_drop: float = 0.1,
                   min_auroc: float = 0.55) -> TransferResult:
    """Step metrics per data source (``sources``: name -> labelled traces) and the AUROC lost away
    from ``in_domain``, the source the PRM was trained on.

    With a ``scorer``, every source is scored first and the scores stored on its traces
    (:func:`~prmkit.scoring.score_traces` under ``key``, which changes the given traces); with None,
    the stored scores are used. ``label_source``: one label source for every source, or a mapping
    source name -> label source (sources differ: symbolic labels on one, synthetic on another; a
    name not in it uses each step's latest label). ``auroc_drop``: in-domain AUROC minus out-of-domain AUROC, for the
    other source with the largest drop (``out_of_domain`` names it).

    ``failed``: the drop is ``max_drop`` (0.1) or more, or an out-of-domain AUROC is below
    ``min_auroc`` (0.55, near chance); None (cannot measure) when no AUROC can be compared.

    >>> from prmkit.trace import Problem, StepLabel
    >>> def tr(rows):
    ...     return Trace(id="t", problem=Problem("q"), steps=[
    ...         Step("s", labels=[StepLabel(v)], scores={"prm": p}) for v, p in rows])
    >>> r = transfer_probe(None, {"a": [tr([(1, 0.9), (-1, 0.1)])], "b": [tr([(1, 0.4), (-1, 0.6)])]}, "a")
    >>> r.out_of_domain, r.auroc_drop, r.failed
    ('b', 1.0, True)
    """
    if in_domain not in sources:
        raise PrmkitError(f"in_domain {in_domain!r} is not one of the sources: "
                          f"{', '.join(sources) or 'none'}")
    if scorer is not None:
        for traces in sources.values():
            score_traces(scorer, traces, key)
    per = (dict(label_source) if isinstance(label_source, Mapping)
           else dict.fromkeys(sources, label_source))
    stats = {name: _source_stats(traces, key, per.get(name), threshold, neutral)
             for name, traces in sources.items()}
    home = stats[in_domain].auroc
    out_names = [n for n in stats if n != in_domain]
    # The largest drop is the lowest out-of-domain AUROC; naming it works even when the in-domain
    # AUROC is undefined.
    defined = {n: a for n in out_names if (a := stats[n].auroc) is not None}
    out_of_domain = min(defined, key=defined.__getitem__) if defined else None
    drop = home - defined[out_of_domain] if out_of_domain is not None and home is not None else None
    low = [n for n, a in defined.items() if a < min_auroc]
    rule = (f"fails when the step AUROC away from '{in_domain}' is {max_drop} or more below the "
            f"in-domain AUROC, or below {min_auroc}")
    failed: bool | None = bool(low) or (drop is not None and drop >= max_drop - _TOL)
    if out_of_domain is None:
        failed = None
        criterion = "cannot measure: no other source has a defined step AUROC; " + rule
    elif home is None and not low:
        failed = None
        criterion = f"cannot measure: the in-domain AUROC is undefined; {rule}"
    else:
        criterion = rule + f"; in-domain {_fmt(home)}, {out_of_domain} {_fmt(stats[out_of_domain].auroc)}"
    return TransferResult(stats, in_domain, out_of_domain, drop, failed, criterion, key=key,
                          threshold=threshold)


# -- probes as components: one interface, a registry, the whole section ---------------------------------

class ProbeNotApplicable(PrmkitError):
    """Raised by :meth:`Probe.run` when the context lacks what the probe needs (no scorer to score
    perturbed traces, no second data source): :func:`run_probes` then leaves the probe out, unless it
    was asked for by name."""


@dataclass
class ProbeContext:
    """What a probe may read.

    ``traces``: labelled traces with step scores under ``key``. ``scorer``: the PRM, for probes that
    score traces of their own (None: they are not applicable). ``label_source``: which step labels of
    ``traces`` to use (None: each step's latest). ``aggregate``: the trace score for length bias.
    ``seed``: for anything drawn at random. ``gaming_traces``: how many traces the gaming probe
    perturbs (None: all it can). ``transfer_sources`` (name -> labelled traces) and ``in_domain``,
    the source the PRM was trained on: see :func:`run_probes`.
    """

    traces: Sequence[Trace]
    scorer: StepScorer | None = None
    key: str = "prm"
    label_source: str | None = None
    aggregate: str = "min"
    seed: int = 0
    gaming_traces: int | None = None
    transfer_sources: Mapping[str, Sequence[Trace]] = field(default_factory=dict)
    in_domain: str | None = None


@runtime_checkable
class Probe(Protocol):
    """A failure-mode probe: ``run`` gives its part of the report's ``"probes"`` section, a dict with
    ``failed`` (bool; None with ``measured`` False when its data cannot show the failure) and
    ``criterion`` (the rule, in words) and any numbers; ``headline`` and ``details`` show those
    numbers in the report.

    The report writes each probe's verdict and criterion itself, and shows every field that
    ``details`` does not claim generically, so a probe that renders nothing still loses no number.
    A probe may also define ``figures(result) -> dict[str, bytes | None]`` (PNG bytes by figure name,
    drawn when matplotlib is installed; ``details`` links those in ``figures``), and
    ``reads_scores = False`` when ``run`` never reads the scores stored on ``ctx.traces`` (it scores
    its own copies), so a run of only such probes does not score the whole file first
    (:func:`probes_read_scores`; True when a probe does not say).

    >>> class AlwaysPasses:
    ...     name, title = "always", "a probe that always passes"
    ...     def run(self, ctx):
    ...         return {"failed": False, "criterion": "never fails", "traces": len(ctx.traces)}
    ...     def headline(self, result):
    ...         return f"{result['traces']} traces"
    ...     def details(self, doc, result, figures):
    ...         return []
    >>> isinstance(AlwaysPasses(), Probe)
    True
    """

    #: The name results are stored under (the registry's name).
    name: str
    #: A few words on what it checks, for listings and help text.
    title: str

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        """The probe's result dict; raise :class:`ProbeNotApplicable` when ``ctx`` lacks what it needs."""
        ...

    def headline(self, result: Mapping[str, Any]) -> str:
        """The key number, one short line, for the report's table of probes ("" for none)."""
        ...

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        """Write the result's numbers into ``doc`` (under the probe's heading; ``figures`` holds the
        names of the figures drawn); return the keys of ``result`` shown, so the report does not
        repeat them."""
        ...


class CollapseProbe:
    """:func:`collapse_probe` on ``ctx.traces`` with ``ctx.key`` and ``ctx.label_source``."""

    name = "collapse"
    title = "process collapse: are invalid steps caught when the answer is right?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        return collapse_probe(ctx.traces, key=ctx.key, label_source=ctx.label_source).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"gap {ReportDoc.f3(result.get('gap'))}"

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        doc.table(["Answer", "Traces", "Invalid steps", "Valid steps", "AUROC", "Flag rate"],
                  [[sub, doc.count(s.get("traces")), doc.count(s.get("invalid_steps")),
                    doc.count(s.get("valid_steps")), doc.f3(s.get("auroc")), doc.pct(s.get("flag_rate"))]
                   for sub in ("right_answer", "wrong_answer")
                   if isinstance(s := result.get(sub), Mapping)])
        doc.para(f"Gap {doc.f3(result.get('gap'))}; outcome AUROC {doc.f3(result.get('outcome_auroc'))}; "
                 f"step AUROC {doc.f3(result.get('step_auroc'))}.")
        return ["right_answer", "wrong_answer", "gap", "outcome_auroc", "step_auroc"]


class GamingProbe:
    """:func:`gaming_probe` with ``ctx.scorer`` on the first ``ctx.gaming_traces`` traces of at least
    two steps (default aggregates, perturbations and batch size; ``ctx.seed``)."""

    name = "gaming"
    reads_scores = False  # the originals are scored afresh, beside their perturbed copies
    title = "verifier gaming: do edits that add nothing raise the score?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        if ctx.scorer is None:
            raise ProbeNotApplicable("the gaming probe scores perturbed traces: it needs a scorer")
        # At least two steps: a one-step trace is only its answer, which most edits leave alone
        # (reorder skips it; duplicate would repeat the answer). The demo's rule, pinned by its golden
        # report.
        chosen = [t for t in ctx.traces if len(t.steps) >= 2]
        if ctx.gaming_traces is not None:
            chosen = chosen[:ctx.gaming_traces]
        return gaming_probe(ctx.scorer, chosen, seed=ctx.seed).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        aggs = result.get("aggregates") or []
        main = aggs[0] if aggs else None
        rose = [(v.get(main) or {}).get("frac_rose") for v in (result.get("perturbations") or {}).values()
                if isinstance(v, Mapping)]
        rose = [r for r in rose if isinstance(r, (int, float)) and not isinstance(r, bool)
                and math.isfinite(r)]
        return f"max {ReportDoc.pct(max(rose))} of traces rose under {main}" if rose else ""

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        perts = {k: v for k, v in (result.get("perturbations") or {}).items() if isinstance(v, Mapping)}
        aggs = list(result.get("aggregates") or [])
        for v in perts.values():
            aggs += [a for a in v if a not in aggs]
        rows = []
        for pert, v in perts.items():
            cells = []
            for a in aggs:
                c = v.get(a) or {}
                cells.append(f"{doc.pct(c.get('frac_rose'))} ({doc.count(c.get('rose'))}/"
                             f"{doc.count(c.get('n'))}), mean Δ {doc.num(c.get('mean_delta'))}" if c else "—")
            rows.append([pert, *cells])
        doc.table(["Perturbation", *[f"rose under {a}" for a in aggs]], rows)
        if "gaming" in figures:
            doc.figure("gaming", "Traces whose score rose under each perturbation, per aggregate")
        return ["aggregates", "perturbations"]

    def figures(self, result: Mapping[str, Any]) -> dict[str, bytes | None]:
        from prmkit.eval._plots import plot_gaming

        return {"gaming": plot_gaming(result)}


class LengthBiasProbe:
    """:func:`length_bias_probe` on ``ctx.traces`` with ``ctx.key`` and ``ctx.aggregate``."""

    name = "length_bias"
    title = "length bias: does the score follow the number of steps?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        return length_bias_probe(ctx.traces, key=ctx.key, aggregate=ctx.aggregate).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"Spearman {ReportDoc.f3(result.get('spearman'))}"

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        doc.para(f"Aggregate {result.get('aggregate') or '—'} over {doc.count(result.get('n'))} traces: "
                 f"Pearson {doc.f3(result.get('pearson'))}, Spearman {doc.f3(result.get('spearman'))}, "
                 f"slope {doc.num(result.get('slope'))} per step.")
        within = {k: v for k, v in (result.get("within_outcome") or {}).items() if isinstance(v, Mapping)}
        doc.table(["Within outcome", "Traces", "Spearman"],
                  [[k, doc.count(v.get("n")), doc.f3(v.get("spearman"))] for k, v in within.items()])
        doc.table(["Steps", "Traces", "Mean score"],
                  [[doc.count(r.get("steps")), doc.count(r.get("n")), doc.f3(r.get("mean_score"))]
                   for r in result.get("by_length") or [] if isinstance(r, Mapping)])
        if "length_bias" in figures:
            doc.figure("length_bias", "Mean trace score per number of steps")
        return ["aggregate", "n", "pearson", "spearman", "slope", "by_length", "within_outcome"]

    def figures(self, result: Mapping[str, Any]) -> dict[str, bytes | None]:
        from prmkit.eval._plots import plot_length_bias

        return {"length_bias": plot_length_bias(result)}


class TransferProbe:
    """:func:`transfer_probe` over ``ctx.transfer_sources`` (and ``ctx.traces`` when ``ctx.in_domain``
    names them; see :func:`run_probes`), scored with ``ctx.scorer`` when there is one."""

    name = "transfer"
    title = "domain transfer: how much step AUROC is lost away from the training data?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        if not ctx.transfer_sources:
            raise ProbeNotApplicable("the transfer probe needs a second data source (transfer_sources)")
        if ctx.in_domain is None:
            raise PrmkitError("transfer_sources given without in_domain (the source the PRM was trained on)")
        if ctx.in_domain in ctx.transfer_sources:
            # Every source is data of its own, with its own labels; the scorer scores each.
            return transfer_probe(ctx.scorer, ctx.transfer_sources, in_domain=ctx.in_domain,
                                  key=ctx.key).to_dict()
        # ctx.traces are the in-domain source: already scored, with ctx.label_source's labels.
        if ctx.scorer is not None:
            for traces in ctx.transfer_sources.values():
                score_traces(ctx.scorer, traces, ctx.key)
        return transfer_probe(None, {ctx.in_domain: ctx.traces, **ctx.transfer_sources},
                              in_domain=ctx.in_domain, key=ctx.key,
                              label_source={ctx.in_domain: ctx.label_source}).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        return f"AUROC drop {ReportDoc.f3(result.get('auroc_drop'))}"

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Iterable[str]:
        srcs = {k: v for k, v in (result.get("sources") or {}).items() if isinstance(v, Mapping)}
        doc.table(["Source", "Traces", "Steps", "AUROC", "F1 (error)", "First-error accuracy"],
                  [[k, doc.count(v.get("traces")), doc.count(v.get("steps")), doc.f3(v.get("auroc")),
                    doc.f3(v.get("f1_error")), doc.pct(v.get("first_error_acc"))] for k, v in srcs.items()])
        doc.para(f"In domain: {result.get('in_domain') or '—'}; out of domain: "
                 f"{result.get('out_of_domain') or '—'}; AUROC drop {doc.f3(result.get('auroc_drop'))}.")
        return ["sources", "in_domain", "out_of_domain", "auroc_drop"]


#: Probe name -> ``"module:attr"`` of a class (or factory without arguments) whose instances are
#: :class:`Probe` s. :func:`run_probes` runs them, and the report renders their results, in this order.
PROBES = Registry("probe", {
    "collapse": "prmkit.eval._probes:CollapseProbe",
    "gaming": "prmkit.eval._probes:GamingProbe",
    "result_check": "prmkit.eval._result_check:ResultCheckProbe",
    "length_bias": "prmkit.eval._probes:LengthBiasProbe",
    "transfer": "prmkit.eval._probes:TransferProbe",
    "faithfulness": "prmkit.eval._faithfulness:FaithfulnessProbe",
}, group="prmkit.probes")


def register_probe(name: str, target: str) -> None:
    """Add (or replace) a probe: ``target`` is ``"module:attr"`` of a class (or factory without
    arguments) whose instances satisfy :class:`Probe`. From then on :func:`run_probes` runs it and
    the report renders its results; a new name comes after the built-in probes. Example:
    ``register_probe("always", "my_probes:AlwaysPasses")``.
    """
    PROBES.register(name, target)


def probes_read_scores(names: Sequence[str] | None) -> bool:
    """Whether any of the probes ``names`` (None: every registered probe) reads the scores stored on
    the traces (a probe says so by ``reads_scores``, True when it does not say)."""
    chosen = list(PROBES) if names is None else [names] if isinstance(names, str) else list(names)
    return any(getattr(PROBES.create(n), "reads_scores", True) for n in chosen if n in PROBES)


def run_probes(scorer: StepScorer | None, traces: Sequence[Trace], *, key: str | None = None,
               score: bool = True, label_source: str | None = None, aggregate: str = "min",
               seed: int = 0, gaming_traces: int | None = None,
               transfer_sources: Mapping[str, Sequence[Trace]] | None = None,
               in_domain: str | None = None, probes: Sequence[str] | None = None) -> dict[str, Any]:
    """The evaluation report's ``"probes"`` section: probe name -> its result dict, in the order of
    :data:`PROBES` (``collapse``, ``gaming``, ``result_check``, ``length_bias``, ``transfer``,
    ``faithfulness``, then registered ones).

    ``traces`` are labelled traces. With ``score`` (default) ``scorer`` scores them first and the
    scores are stored under ``key`` (default: the scorer's kind), the trace score by ``aggregate``;
    else their stored scores are used. ``label_source``: which of their step labels to use (None:
    each step's latest). ``aggregate``: the trace score of the length-bias probe. The gaming probe
    perturbs the first ``gaming_traces`` traces with at least two steps (None: all of them) and
    scores them with ``scorer``; ``seed`` draws its perturbations.

    Transfer: ``transfer_sources`` maps names to labelled traces, each scored here by ``scorer``.
    ``in_domain`` names the source the PRM was trained on: one of ``transfer_sources`` (then every
    source uses its own latest labels), or else the name under which ``traces`` join the
    comparison, with ``label_source``'s labels.

    ``probes``: the names to run (default: every registered probe). A probe that the inputs do not
    allow (gaming without a scorer, transfer without a second source) is left out, or, when named in
    ``probes``, a :class:`ProbeNotApplicable` error.

    >>> from prmkit.search import ScriptedScorer
    >>> from prmkit.trace import Problem, StepLabel
    >>> t = Trace(id="t", problem=Problem("q"), outcome="correct",
    ...           steps=[Step("x = 1.", labels=[StepLabel(1)]), Step("The answer is 1.")])
    >>> section = run_probes(ScriptedScorer({"x = 1.": 0.5, "The answer is 1.": 0.75}), [t])
    >>> list(section), section["length_bias"]["n"]
    (['collapse', 'gaming', 'result_check', 'length_bias'], 1)
    """
    if isinstance(probes, str):
        probes = [probes]
    if probes is not None:
        unknown = [p for p in probes if p not in PROBES]
        if unknown:
            raise PrmkitError(f"unknown probe {', '.join(map(repr, unknown))}; known: {', '.join(PROBES)}")
    key = key or (scorer.kind if scorer is not None else "prm")
    if score:
        if scorer is None:
            raise PrmkitError("run_probes(score=True) needs a scorer; pass score=False to use the "
                              "scores the traces carry")
        score_traces(scorer, traces, key, aggregate=aggregate)
    ctx = ProbeContext(traces=traces, scorer=scorer, key=key, label_source=label_source,
                       aggregate=aggregate, seed=seed, gaming_traces=gaming_traces,
                       transfer_sources=dict(transfer_sources or {}), in_domain=in_domain)
    out: dict[str, Any] = {}
    for name in list(PROBES):  # read now: probes registered after import run too
        if probes is not None and name not in probes:
            continue
        try:
            out[name] = dict(PROBES.create(name).run(ctx))
        except ProbeNotApplicable:
            if probes is not None:
                raise
    return out
