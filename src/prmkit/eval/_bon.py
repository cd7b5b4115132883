"""Best-of-N curves: accuracy of each selection method as the number of candidates N grows, with
bootstrap intervals and paired comparisons between methods.

**Selection rules** are exactly those of :func:`prmkit.search.select` (see :mod:`prmkit.search._select`):

- ``bon``: the highest trace score, the earliest candidate on a tie; an unscored candidate is never
  picked; no choice when none of the N is scored.
- ``weighted``: candidates are grouped by equivalent final answers; a group weighs the sum of its
  scored candidates' scores; the heaviest group wins (ties: more candidates, then the group seen
  first); its highest-scored candidate is chosen. Candidates without a final answer never vote.
- ``majority``: the answer most of the N give (ties: the answer seen first); scores are not used.
- ``random``: the expected accuracy of picking one of the N uniformly: the fraction correct among
  them (a reference, with no sampling noise of its own).
- ``oracle``: whether any of the N is correct (pass@N; a ceiling, not a method).

A trace score is the aggregate (``min``, ``last``, ...; :func:`prmkit.scoring.get_aggregator`) of the
step scores ``step.scores[key]`` (computed once per trace), or, for a method without an aggregate (an
ORM), the trace-level score ``trace.meta["scores"][key]``.

**Answer groups** are computed once per problem on all its candidates
(:func:`prmkit.search.group_answers`); a subset of candidates uses the groups of its members, so
answer equivalence (which can be slow) never runs inside the bootstrap. This equals grouping the
subset itself whenever answer equivalence is transitive. Correctness comes from
:func:`prmkit.trace_queries.is_correct`; a problem none of whose candidates can be judged (no outcome, no
reference answer) is left out and counted in ``unjudged_problems``; an unjudged candidate of a judged
problem counts as wrong.

**The estimate.** ``ns`` defaults to 1, 2, 4, ... up to the smallest number of candidates any problem
has (that number included). Each of ``bootstrap`` replicates draws as many problems as there are, with
replacement, and for each drawn problem one random order of its candidates; the N candidates at size N
are the first N of that order (a uniform draw of N without replacement, nested across N), kept in
sample order so ties break as :func:`~prmkit.search.select` breaks them. A replicate's accuracy is the
mean over drawn problems of the chosen candidate's correctness (no choice counts as wrong). ``acc`` is
the mean over replicates, ``lo`` / ``hi`` their 2.5th / 97.5th percentiles: the interval covers both
the choice of problems and the choice of candidates. Where the percentiles miss the mean they are
widened to it (see :func:`~prmkit.eval.percentile_interval`): with few problems more than 2.5% of the
replicates can share one extreme value, and a constant's mean can differ from it in the last bit. Every method sees the
same draws in a replicate, so differences between methods are paired: :meth:`BonCurves.compare`
gives the mean difference and its percentile interval, widened the same way. search-and-learn (huggingface/search-and-learn) instead takes the first N
completions of each problem once; resampling candidates removes the dependence on sample order.

>>> from prmkit.trace import Problem, Step, Trace
>>> p = Problem("2 + 3?", answer="5", id="p")
>>> ts = [Trace(id=str(i), problem=p, steps=[Step("s", scores={"prm": s})], final_answer=a,
...             outcome="correct" if a == "5" else "incorrect")
...       for i, (a, s) in enumerate([("5", 0.9), ("6", 0.2)])]
>>> curves = bon_curves(ts, [BonMethod("PRM (min)", "bon", "prm", "min"), BonMethod("random", "random")],
...                     bootstrap=200)
>>> d = curves.to_dict()["methods"]
>>> curves.ns, d["PRM (min)"]["acc"][1], d["random"]["acc"][1]  # at N = 2 every draw holds both
([1, 2], 1.0, 0.5)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.eval._stats import auroc, bootstrap_summary, nested_resamples
from prmkit.scoring import check_finite, get_aggregator, trace_score
from prmkit.search import group_answers, group_by_problem
from prmkit.trace import Trace
from prmkit.trace_queries import is_correct, stored_scores

__all__ = ["BonMethod", "BonCurves", "SELECTOR_KINDS", "default_methods", "bon_curves", "bon_choices",
           "within_problem_auroc"]

#: The selectors a :class:`BonMethod` can use.
SELECTOR_KINDS = ("bon", "weighted", "majority", "random", "oracle")
_SCORED = ("bon", "weighted")

# Bound on the elements of one (replicates x problems x N-or-groups) block, so memory stays small
# for many problems or many candidates.
_BLOCK = 2_000_000


def _np():
    try:
        import numpy
    except ImportError:
        raise MissingDependencyError("numpy", None, "best-of-N curves") from None
    return numpy


@dataclass(frozen=True)
class BonMethod:
    """A named selection method for :func:`bon_curves`.

    ``selector``: one of :data:`SELECTOR_KINDS`. ``key``: the scorer whose scores ``bon`` and
    ``weighted`` use. ``aggregate``: how step scores ``step.scores[key]`` become a trace score
    (``"min"``, ``"last"``, ...); None reads the trace score ``trace.meta["scores"][key]`` (an ORM).

    >>> BonMethod("PRM (min)", "bon", key="prm", aggregate="min").to_dict()["selector"]
    'bon'
    """

    name: str
    selector: str
    key: str | None = None
    aggregate: str | None = None

    def __post_init__(self) -> None:
        if self.selector not in SELECTOR_KINDS:
            raise PrmkitError(f"method {self.name!r}: unknown selector {self.selector!r}; "
                              f"known: {', '.join(SELECTOR_KINDS)}")
        if self.selector in _SCORED and not self.key:
            raise PrmkitError(f"method {self.name!r}: selector {self.selector!r} needs the scorer key=")
        if self.aggregate is not None:
            get_aggregator(self.aggregate)  # an unknown name fails here, not in the middle of a run

    @property
    def scored(self) -> bool:
        return self.selector in _SCORED

    def trace_score(self, trace: Trace) -> float | None:
        """This method's score of ``trace`` (None: unscored); a NaN or infinite score is refused."""
        try:
            if self.aggregate is None:
                value = (trace.meta.get("scores") or {}).get(self.key)
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                if not ok:
                    return None
                check_finite([value], "trace score")
                return float(value)
            return trace_score(stored_scores(trace, self.key), self.aggregate)  # type: ignore[arg-type]
        except PrmkitError as e:
            raise PrmkitError(f"{self.name}: trace {trace.id!r}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "selector": self.selector, "key": self.key,
                "aggregate": self.aggregate}


def _has_step_scores(traces: Sequence[Trace], key: str) -> bool:
    return any(key in s.scores for t in traces for s in t.steps)


def _has_trace_scores(traces: Sequence[Trace], key: str) -> bool:
    for t in traces:
        v = (t.meta.get("scores") or {}).get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return True
    return False


def default_methods(traces: Iterable[Trace], prm_key: str = "prm", orm_key: str = "orm",
                    aggregates: Sequence[str] = ("min", "last", "prod", "mean", "geo_mean"),
                    weighted_aggregates: Sequence[str] | None = None) -> list[BonMethod]:
    """The usual comparison for ``traces``: for the PRM (when any step carries ``prm_key``) one
    ``bon`` per aggregate ("PRM (min)", ...) and ``weighted`` for each of ``weighted_aggregates``
    (default: the first aggregate, "PRM weighted (min)"); for the ORM (when any trace carries
    ``meta["scores"][orm_key]``) "ORM" and "ORM weighted"; then "majority", "random" and
    "oracle (pass@N)". A key other than "prm" / "orm" names the methods itself ("prm2 (min)").

    >>> [m.name for m in default_methods([], aggregates=("min",))]
    ['majority', 'random', 'oracle (pass@N)']
    """
    traces = list(traces)
    out: list[BonMethod] = []
    if _has_step_scores(traces, prm_key):
        label = "PRM" if prm_key == "prm" else prm_key
        out += [BonMethod(f"{label} ({a})", "bon", prm_key, a) for a in aggregates]
        weighted = list(aggregates[:1]) if weighted_aggregates is None else list(weighted_aggregates)
        out += [BonMethod(f"{label} weighted ({a})", "weighted", prm_key, a) for a in weighted]
    if _has_trace_scores(traces, orm_key):
        label = "ORM" if orm_key == "orm" else orm_key
        out += [BonMethod(label, "bon", orm_key), BonMethod(f"{label} weighted", "weighted", orm_key)]
    out += [BonMethod("majority", "majority"), BonMethod("random", "random"),
            BonMethod("oracle (pass@N)", "oracle")]
    return out


# -- per-problem data, computed once ------------------------------------------------------------------

@dataclass
class _Data:
    """Every judged problem's candidates as padded arrays (problems x max candidates)."""

    keys: list[str]
    sizes: Any            # (P,) candidates per problem
    correct: Any          # (P, M) bool
    groups: Any           # (P, M) int: answer group, -1 = no final answer (and padding)
    n_groups: int         # the most answer groups any problem has
    scores: dict[tuple[str, str | None], Any]   # (key, aggregate) -> (P, M) float, NaN = unscored
    unjudged: int


def _prepare(traces: Iterable[Trace], methods: Sequence[BonMethod]) -> _Data:
    np = _np()
    problems = []
    unjudged = 0
    for key, ts in group_by_problem(traces).items():
        verdicts = [is_correct(t) for t in ts]
        if all(v is None for v in verdicts):
            unjudged += 1
            continue
        problems.append((key, ts, [bool(v) for v in verdicts]))
    if not problems:
        raise PrmkitError("no problem has a candidate whose correctness is known: traces need an "
                          "outcome, or a problem answer to compare the final answer with")
    n_p = len(problems)
    width = max(len(ts) for _, ts, _ in problems)
    sizes = np.array([len(ts) for _, ts, _ in problems])
    correct = np.zeros((n_p, width), dtype=bool)
    groups = np.full((n_p, width), -1, dtype=np.int64)
    n_groups = 1
    for i, (_, ts, verdicts) in enumerate(problems):
        correct[i, :len(ts)] = verdicts
        answered = [g for g in group_answers(ts) if g.answer is not None]
        n_groups = max(n_groups, len(answered))
        for gid, g in enumerate(answered):
            groups[i, g.members] = gid
    scores: dict[tuple[str, str | None], Any] = {}
    for m in methods:
        if not m.scored or (m.key, m.aggregate) in scores:
            continue
        arr = np.full((n_p, width), np.nan)
        for i, (_, ts, _) in enumerate(problems):
            for j, t in enumerate(ts):
                s = m.trace_score(t)
                if s is not None:
                    arr[i, j] = s
        scores[(m.key, m.aggregate)] = arr  # type: ignore[index]
    return _Data([k for k, _, _ in problems], sizes, correct, groups, n_groups, scores, unjudged)


# -- vectorised selection over rows of N candidates ----------------------------------------------------
# Every function takes (R, N) arrays (one row per drawn problem, candidates in sample order) and
# returns the chosen position in each row, -1 for no choice.

def _best(np: Any, s: Any, allowed: Any) -> Any:
    """Position of the highest score among ``allowed`` (earliest on a tie), -1 when none is."""
    masked = np.where(allowed, s, -np.inf)
    hit = allowed & (masked == masked.max(axis=1, keepdims=True))
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


def _first_of_max(np: Any, value: Any, allowed: Any, first: Any, fill: Any) -> tuple[Any, Any]:
    """Among ``allowed`` columns, those with the largest ``value``; returns that mask and the
    column seen first (smallest ``first``) among them."""
    masked = np.where(allowed, value, fill)
    top = allowed & (masked == masked.max(axis=1, keepdims=True))
    big = np.iinfo(np.int64).max
    return top, np.where(top, first, big).argmin(axis=1)


@dataclass
class _GroupStats:
    votes: Any    # (R, G) candidates of each answer group among the N
    first: Any    # (R, G) position of the group's first candidate (N when absent)


def _group_stats(np: Any, g: Any, n_groups: int) -> _GroupStats:
    rows, n = g.shape
    gids = np.arange(n_groups)
    votes = np.zeros((rows, n_groups), dtype=np.int64)
    first = np.full((rows, n_groups), n, dtype=np.int64)
    for k in range(n):
        hit = g[:, k, None] == gids[None, :]
        votes += hit
        first = np.where(hit & (first == n), k, first)
    return _GroupStats(votes, first)


def _choose_majority(np: Any, g: Any, stats: _GroupStats) -> Any:
    present = stats.votes > 0
    _, win = _first_of_max(np, stats.votes, present, stats.first, -1)
    pos = np.take_along_axis(stats.first, win[:, None], axis=1)[:, 0]
    return np.where(present.any(axis=1), pos, -1)


def _choose_weighted(np: Any, g: Any, s: Any, stats: _GroupStats) -> Any:
    rows, n = g.shape
    n_groups = stats.votes.shape[1]
    gids = np.arange(n_groups)
    scored = ~np.isnan(s)
    weight = np.zeros((rows, n_groups))
    voting = np.zeros((rows, n_groups), dtype=bool)
    for k in range(n):
        add = (g[:, k, None] == gids[None, :]) & scored[:, k, None]
        # Summed one candidate at a time in sample order, as select() sums, so float ties agree.
        weight = np.where(add, weight + np.where(scored[:, k, None], s[:, k, None], 0.0), weight)
        voting |= add
    heaviest, _ = _first_of_max(np, weight, voting, stats.first, -np.inf)
    _, win = _first_of_max(np, stats.votes, heaviest, stats.first, -1)
    pos = _best(np, s, scored & (g == win[:, None]))
    return np.where(voting.any(axis=1), pos, -1)


def _choose(np: Any, method: BonMethod, c: Any, g: Any, s: Any | None,
            stats: _GroupStats) -> Any:
    """Position chosen by ``method`` in each row (-1: none); not for ``random``."""
    if method.selector == "bon":
        return _best(np, s, ~np.isnan(s))
    if method.selector == "weighted":
        return _choose_weighted(np, g, s, stats)
    if method.selector == "majority":
        return _choose_majority(np, g, stats)
    return np.where(c.any(axis=1), c.argmax(axis=1), -1)   # oracle: the first correct


def _row_accuracy(np: Any, method: BonMethod, c: Any, g: Any, s: Any | None,
                  stats: _GroupStats) -> Any:
    """Per row: the chosen candidate's correctness (random: the expected one)."""
    if method.selector == "random":
        return c.mean(axis=1)
    if method.selector == "oracle":
        return c.any(axis=1).astype(float)
    pos = _choose(np, method, c, g, s, stats)
    hit = np.take_along_axis(c, np.maximum(pos, 0)[:, None], axis=1)[:, 0]
    return (hit & (pos >= 0)).astype(float)


# -- results --------------------------------------------------------------------------------------------

def _f(x: Any) -> float:
    return float(x)


@dataclass
class BonCurves:
    """Best-of-N accuracy per method and N with bootstrap intervals (see the module docstring).

    ``acc`` / ``lo`` / ``hi``: method name -> one value per N in ``ns``. ``replicates``: method name ->
    the per-replicate accuracies, an array (bootstrap x len(ns)) kept for :meth:`compare` (not in
    :meth:`to_dict`). ``comparisons``: the paired differences asked for, one entry per pair and N.
    """

    ns: list[int]
    problems: int
    candidates: int
    bootstrap: int
    seed: int
    methods: list[BonMethod]
    acc: dict[str, list[float]]
    lo: dict[str, list[float]]
    hi: dict[str, list[float]]
    replicates: dict[str, Any] = field(repr=False)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    unjudged_problems: int = 0

    def _method(self, name: str) -> BonMethod:
        for m in self.methods:
            if m.name == name:
                return m
        raise PrmkitError(f"no method {name!r} in these curves; known: "
                          + ", ".join(m.name for m in self.methods))

    def compare(self, a: str, b: str, n: int | None = None) -> dict[str, Any]:
        """Accuracy of ``a`` minus ``b`` at ``n`` candidates (default: the largest N), paired over
        the same replicates: ``{"a", "b", "n", "diff", "lo", "hi"}`` (mean and 2.5 / 97.5
        percentiles of the per-replicate differences)."""
        self._method(a)
        self._method(b)
        n = self.ns[-1] if n is None else n
        if n not in self.ns:
            raise PrmkitError(f"N={n} is not on these curves; Ns: {self.ns}")
        j = self.ns.index(n)
        d = self.replicates[a][:, j] - self.replicates[b][:, j]
        mean, lo, hi = bootstrap_summary(d)
        return {"a": a, "b": b, "n": n, "diff": _f(mean), "lo": _f(lo), "hi": _f(hi)}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data in the report's ``bon`` shape."""
        return {"ns": list(self.ns), "problems": self.problems, "candidates": self.candidates,
                "bootstrap": self.bootstrap, "seed": self.seed,
                "unjudged_problems": self.unjudged_problems,
                "methods": {m.name: {"selector": m.selector, "key": m.key, "aggregate": m.aggregate,
                                     "acc": list(self.acc[m.name]), "lo": list(self.lo[m.name]),
                                     "hi": list(self.hi[m.name])} for m in self.methods},
                "comparisons": [dict(c) for c in self.comparisons]}

    def lines(self) -> list[str]:
        """A compact text table: one row per method, ``acc [lo, hi]`` per N."""
        width = max([len(m.name) for m in self.methods] + [6])
        cells = [[f"{self.acc[m.name][j]:.3f} [{self.lo[m.name][j]:.2f},{self.hi[m.name][j]:.2f}]"
                  for j in range(len(self.ns))] for m in self.methods]
        cw = max([len(c) for row in cells for c in row] + [6])
        out = [f"{'method':<{width}}  " + "  ".join(f"{'N=' + str(n):>{cw}}" for n in self.ns)]
        for m, row in zip(self.methods, cells, strict=True):
            out.append(f"{m.name:<{width}}  " + "  ".join(f"{c:>{cw}}" for c in row))
        out.append(f"({self.problems} problems, >= {self.candidates} candidates each, "
                   f"{self.bootstrap} bootstrap replicates, seed {self.seed}; [2.5%, 97.5%])")
        return out


def _default_ns(smallest: int) -> list[int]:
    ns, n = [], 1
    while n <= smallest:
        ns.append(n)
        n *= 2
    if ns[-1] != smallest:
        ns.append(smallest)
    return ns


def _check_methods(methods: Sequence[BonMethod]) -> None:
    names = [m.name for m in methods]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise PrmkitError(f"method names must be unique; repeated: {', '.join(dup)}")
    if not methods:
        raise PrmkitError("no methods to evaluate")


def bon_curves(traces: Iterable[Trace], methods: Sequence[BonMethod] | None = None,
               ns: Sequence[int] | None = None, bootstrap: int = 1000, seed: int = 0,
               comparisons: Sequence[tuple[str, str]] | None = None) -> BonCurves:
    """Best-of-N accuracy curves of ``methods`` (default: :func:`default_methods`) over the
    problems of ``traces``, with bootstrap intervals; see the module docstring for the estimate.

    ``ns``: the candidate counts (default 1, 2, 4, ... up to the smallest problem's count, which is
    included). ``comparisons``: ``(a, b)`` method-name pairs whose paired difference ``a - b`` is
    reported at every N (also available later through :meth:`BonCurves.compare`).
    """
    np = _np()
    traces = list(traces)
    if not traces:
        raise PrmkitError("no traces to evaluate")
    methods = list(default_methods(traces) if methods is None else methods)
    _check_methods(methods)
    if not isinstance(bootstrap, int) or bootstrap < 1:
        raise PrmkitError(f"bootstrap must be a positive number of replicates, got {bootstrap!r}")
    names = {m.name for m in methods}
    pairs = [tuple(p) for p in (comparisons or [])]
    for p in pairs:
        unknown = [x for x in p if x not in names]
        if len(p) != 2 or unknown:
            raise PrmkitError(f"comparison {p!r}: give two method names among "
                              + ", ".join(m.name for m in methods))

    data = _prepare(traces, methods)
    smallest = int(data.sizes.min())
    if ns is None:
        ns = _default_ns(smallest)
    else:
        ns = sorted({int(n) for n in ns})
        bad = [n for n in ns if not 1 <= n <= smallest]
        if bad or not ns:
            raise PrmkitError(f"every N must lie in 1..{smallest} (the fewest candidates a problem "
                              f"has); got {list(ns) or 'none'}")
    n_p, width = data.correct.shape

    reps = {m.name: np.zeros((bootstrap, len(ns))) for m in methods}
    chunk = max(1, _BLOCK // (n_p * max(width, data.n_groups)))
    for start, prob, order in nested_resamples(data.sizes, bootstrap, seed, chunk=chunk):
        rows = prob.shape[0] * n_p                              # prob: (C, P) problem indices
        for j, n in enumerate(ns):
            idx = np.sort(order[..., :n], axis=-1)              # sample order within the draw
            at = (prob[..., None], idx)
            c = data.correct[at].reshape(rows, n)
            g = data.groups[at].reshape(rows, n)
            stats = _group_stats(np, g, data.n_groups)
            for m in methods:
                s = data.scores[(m.key, m.aggregate)][at].reshape(rows, n) if m.scored else None
                acc = _row_accuracy(np, m, c, g, s, stats).reshape(prob.shape[0], n_p)
                reps[m.name][start:start + chunk, j] = acc.mean(axis=1)

    acc, lo, hi = {}, {}, {}
    for m in methods:
        mean, p_lo, p_hi = bootstrap_summary(reps[m.name])
        acc[m.name] = [_f(x) for x in mean]
        lo[m.name] = [_f(x) for x in p_lo]
        hi[m.name] = [_f(x) for x in p_hi]
    out = BonCurves(ns=list(ns), problems=n_p, candidates=smallest, bootstrap=bootstrap, seed=seed,
                    methods=methods, acc=acc, lo=lo, hi=hi, replicates=reps,
                    unjudged_problems=data.unjudged)
    out.comparisons = [out.compare(a, b, n) for a, b in pairs for n in ns]
    return out


def bon_choices(traces: Iterable[Trace], methods: Sequence[BonMethod] | None = None
                ) -> dict[str, dict[str, int | None]]:
    """What each method picks from all of a problem's candidates, by the same code as
    :func:`bon_curves`: method name -> problem key -> index into the problem's traces (None: no
    choice). ``random`` has no single choice and is left out. Equals
    :func:`prmkit.search.select`'s ``index`` for every problem (problems that cannot be judged are
    left out, as in :func:`bon_curves`).
    """
    np = _np()
    traces = list(traces)
    methods = [m for m in (default_methods(traces) if methods is None else methods)
               if m.selector != "random"]
    _check_methods(methods)
    data = _prepare(traces, methods)
    out: dict[str, dict[str, int | None]] = {m.name: {} for m in methods}
    for i, key in enumerate(data.keys):
        n = int(data.sizes[i])
        c, g = data.correct[i:i + 1, :n], data.groups[i:i + 1, :n]
        stats = _group_stats(np, g, data.n_groups)
        for m in methods:
            s = data.scores[(m.key, m.aggregate)][i:i + 1, :n] if m.scored else None
            pos = int(_choose(np, m, c, g, s, stats)[0])
            out[m.name][key] = None if pos < 0 else pos
    return out


def within_problem_auroc(traces: Iterable[Trace], key: str, aggregate: str | None = "min"
                         ) -> tuple[float | None, int]:
    """How well ``key``'s trace score ranks a problem's right samples above its wrong ones: the mean,
    over problems with both right and wrong judged samples, of the AUROC of the trace score
    (``aggregate`` of the step scores; None: the trace-level score, an ORM) for a right final answer
    (ties count half); and the number of such problems. This is what best-of-N needs, unlike a step
    AUROC pooled over problems (which easy-vs-hard problems alone can raise). Unscored or unjudged
    samples are left out; (None, 0) when no problem qualifies.

    >>> from prmkit.trace import Problem, Step, Trace
    >>> def t(pid, s, a):
    ...     return Trace(id=f"{pid}{s}", problem=Problem("q", answer="1", id=pid),
    ...                  steps=[Step("x", scores={"prm": s})], final_answer=a)
    >>> within_problem_auroc([t("a", 0.9, "1"), t("a", 0.2, "2"), t("a", 0.5, "1"),   # 1.0
    ...                       t("b", 0.3, "1"), t("b", 0.6, "2"), t("b", 0.3, "2"),   # 0.25
    ...                       t("c", 0.1, "1")], "prm")                               # one class only
    (0.625, 2)
    """
    groups: dict[str, list[tuple[float, bool]]] = {}
    for trace in traces:
        scores = stored_scores(trace, key)
        value = trace_score(scores, aggregate) if aggregate else (scores[0] if len(scores) == 1 else None)
        ok = is_correct(trace)
        if value is not None and ok is not None:
            groups.setdefault(trace.problem.id or trace.problem.text, []).append((value, ok))
    aucs = [a for rows in groups.values()
            if (a := auroc([v for v, _ in rows], [ok for _, ok in rows])) is not None]
    return (sum(aucs) / len(aucs) if aucs else None), len(aucs)
