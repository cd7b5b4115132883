"""ProcessBench evaluation (Zheng et al. 2024, arXiv:2412.06559), as the official code computes it.

The task: name the earliest wrong step of a solution, or say that none is wrong (-1). Per split, the
official scripts (QwenLM/ProcessBench ``code/run_eval_prm_trl.py``, ``code/run_eval_prm_rlhflow.py``)
report

- **error acc**: on the samples with an error (label != -1), the fraction whose predicted index equals
  the label exactly (flagging a later step, or an earlier correct one, is a miss);
- **correct acc**: on the error-free samples (label == -1), the fraction predicted -1;
- **F1**: the harmonic mean of the two; and over splits, the plain mean of the split F1s.

**Prediction from a scalar PRM.** The official PRM scripts take the first step the PRM calls wrong:
``run_eval_prm_trl.py`` takes the argmax of the two-class step logits and returns the first step
whose argmax is the "wrong" class, i.e. P(step correct) < 0.5 (an exact tie at 0.5 also counts as
wrong there, since argmax returns the first maximal index); ``run_eval_prm_rlhflow.py`` takes the
first step whose greedy judgement is not "+". Here a step is wrong when ``step.scores[key] <
threshold`` (default 0.5, the official convention up to that tie), and the prediction is the first
such step, else -1. The released scripts fix the cut at 0.5; a PRM whose scores are not calibrated
around 0.5 is better served by a tuned threshold, which this module chooses on a *different* split
than the one it reports (``tune_on=`` or ``cross_split=True``), never on the reported one.

**Where the misses on erroneous samples fall** (not in the official scripts; what tells a PRM that
calls right steps wrong from one that does not see errors): ``flagged_early`` counts the samples whose
first flagged step is a right step before the error, ``flagged_late`` those flagged only after it, and
``not_flagged`` those with no step below the threshold; with the hits they add up to ``n_error``.

Steps without a score (cut by ``max_length`` when scoring) are skipped — the prediction is the first
*scored* step below the threshold — and counted in ``unscored_steps``.

Ground truth is ``trace.first_error()`` (the ProcessBench importer labels the steps before the error
+1, the error -1 and leaves later steps unlabelled); a trace whose first error is unknown (an
unlabelled step before any wrong one) is refused with its id.

>>> from prmkit.trace import Problem, Step, StepLabel, Trace
>>> def t(i, scores, label):
...     steps = [Step(f"s{k}", scores={"prm": s}) for k, s in enumerate(scores)]
...     for k, st in enumerate(steps):
...         if label == -1 or k <= label:
...             st.labels.append(StepLabel(-1 if k == label else 1))
...     return Trace(i, Problem("q"), steps)
>>> split = [t("a", [0.9, 0.2], 1), t("b", [0.9, 0.8], -1), t("c", [0.3, 0.9], -1)]
>>> r = evaluate_processbench({"toy": split})
>>> s = r.splits["toy"]
>>> s["error_acc"], s["correct_acc"], round(s["f1"], 4), r.threshold_source
(1.0, 0.5, 0.6667, 'fixed')
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.trace import Trace

__all__ = ["ProcessBenchResult", "default_thresholds", "evaluate_processbench", "predict_first_error",
           "processbench_split", "threshold_sweep"]

#: The threshold used when none is given or tuned: the official scripts' argmax cut.
DEFAULT_THRESHOLD = 0.5
# More distinct scores than this and the sweep takes evenly spaced quantiles of them instead, so the
# sweep stored in a report stays a few thousand numbers at most.
_MAX_DISTINCT = 1000


# -- one trace ---------------------------------------------------------------------------------------
def predict_first_error(trace: Trace, key: str = "prm", threshold: float = DEFAULT_THRESHOLD) -> int:
    """Index of the first step whose ``scores[key]`` is below ``threshold`` (steps without that score
    are skipped), or -1 when no scored step is below it.

    >>> from prmkit.trace import Problem, Step, Trace
    >>> tr = Trace("x", Problem("q"), [Step("a", scores={"prm": 0.9}), Step("b"),
    ...                                Step("c", scores={"prm": 0.4})])
    >>> predict_first_error(tr), predict_first_error(tr, threshold=0.3)
    (2, -1)
    """
    for i, step in enumerate(trace.steps):
        s = step.scores.get(key)
        if s is not None and s < threshold:
            return i
    return -1


def _label(trace: Trace, label_source: str | None) -> int:
    label = trace.first_error(label_source)
    if label is None:
        gap = next(i for i, lab in enumerate(trace.labels(label_source)) if lab is None)
        where = f" from source {label_source!r}" if label_source else ""
        raise PrmkitError(f"trace {trace.id}: its first error is unknown (step {gap} has no label"
                          f"{where} and no earlier step is wrong); ProcessBench needs the index of "
                          f"the first wrong step or -1 — label the trace or leave it out")
    return label


def _unscored(trace: Trace, key: str) -> int:
    return sum(1 for s in trace.steps if s.scores.get(key) is None)


def _dropped(trace: Trace, key: str) -> bool:
    """No step has a score under ``key``: the scorer could not take the trace (say it could not be
    encoded). Its "prediction" would be -1, a hit whenever the trace is error-free, so it counts as
    a miss instead, on either side."""
    return bool(trace.steps) and _unscored(trace, key) == len(trace.steps)


def _f1(error_acc: float | None, correct_acc: float | None) -> float | None:
    if error_acc is None or correct_acc is None:
        return None
    if error_acc + correct_acc == 0:
        return 0.0
    return 2 * error_acc * correct_acc / (error_acc + correct_acc)


def _metrics(hits_error: int, n_error: int, hits_correct: int, n_correct: int) -> dict[str, Any]:
    error_acc = hits_error / n_error if n_error else None
    correct_acc = hits_correct / n_correct if n_correct else None
    return {"error_acc": error_acc, "correct_acc": correct_acc, "f1": _f1(error_acc, correct_acc),
            "n_error": n_error, "n_correct": n_correct}


# -- one split ---------------------------------------------------------------------------------------
def processbench_split(traces: Iterable[Trace], key: str = "prm", threshold: float = DEFAULT_THRESHOLD,
                       *, label_source: str | None = None) -> dict[str, Any]:
    """The official numbers of one split at a fixed ``threshold``.

    Returns ``{"error_acc", "correct_acc", "f1", "n_error", "n_correct", "flagged_early",
    "flagged_late", "not_flagged", "threshold", "unscored_steps", "unscored_traces"}``: an accuracy is
    None when its side has no sample, F1 is None when either accuracy is None and 0.0 when both are 0;
    the three counts split the misses on erroneous samples (module docstring; a dropped trace is
    ``not_flagged``). ``label_source`` picks which labels give the
    truth (default: each step's latest label). A trace with no scored step at all (one the scorer
    dropped) stays in its side's count and is a miss, never a hit: ``unscored_traces`` counts them.

    >>> processbench_split([], threshold=0.5)["f1"] is None
    True
    """
    hits_error = n_error = hits_correct = n_correct = unscored = dropped = early = late = not_flagged = 0
    for t in traces:
        label = _label(t, label_source)
        gone = _dropped(t, key)
        dropped += gone
        pred = -1 if gone else predict_first_error(t, key, threshold)
        hit = not gone and pred == label
        unscored += _unscored(t, key)
        if label == -1:
            n_correct += 1
            hits_correct += hit
        else:
            n_error += 1
            hits_error += hit
            early += 0 <= pred < label
            late += pred > label
            not_flagged += pred == -1
    out = _metrics(hits_error, n_error, hits_correct, n_correct)
    out.update(flagged_early=early, flagged_late=late, not_flagged=not_flagged, threshold=threshold,
               unscored_steps=unscored, unscored_traces=dropped)
    return out


# -- threshold sweep ---------------------------------------------------------------------------------
def default_thresholds(scores: Iterable[float] = ()) -> list[float]:
    """The sweep grid: 0.01, 0.02, ..., 0.99, plus the distinct ``scores`` (all of them up to 1000,
    else 1000 evenly spaced quantiles of them), sorted. A prediction only changes where the threshold
    crosses a score, so the distinct scores make the sweep exact for PRMs whose scores are not
    probabilities.

    >>> g = default_thresholds([0.123, 0.5])
    >>> len(g), g[0], g[-1], 0.123 in g
    (100, 0.01, 0.99, True)
    """
    grid = {round(i / 100, 2) for i in range(1, 100)}
    distinct = sorted(set(scores))
    if len(distinct) > _MAX_DISTINCT:
        step = (len(distinct) - 1) / (_MAX_DISTINCT - 1)
        distinct = [distinct[round(i * step)] for i in range(_MAX_DISTINCT)]
    return sorted(grid | set(distinct))


def _hit_interval(trace: Trace, key: str, label: int) -> tuple[float, float] | None:
    """The thresholds ``t`` with ``lo < t <= hi`` are those at which the prediction equals ``label``
    (None: no threshold does). Prediction == label iff every scored step before it is >= t and, for
    an error label, the labelled step is scored and < t. A trace with no scored step is a miss at
    every threshold (see :func:`processbench_split`)."""
    if _dropped(trace, key):
        return None
    lo, hi = float("-inf"), float("inf")
    for i, step in enumerate(trace.steps):
        s = step.scores.get(key)
        if i == label:
            if s is None:  # the wrong step has no score: never predicted
                return None
            lo = s
            break
        if s is not None:
            hi = min(hi, s)
    return (lo, hi) if lo < hi else None


def _sweep_counts(traces: Sequence[Trace], key: str, thresholds: Sequence[float],
                  label_source: str | None) -> list[dict[str, Any]]:
    # Each trace is a hit on an interval of thresholds; a difference array over the sorted thresholds
    # gives every threshold's hits in O((traces + thresholds) log thresholds), so a fine sweep stays
    # cheap on the 3,400-sample benchmark.
    m = len(thresholds)
    diff = {True: [0] * (m + 1), False: [0] * (m + 1)}
    n = {True: 0, False: 0}  # True: samples with an error
    for t in traces:
        label = _label(t, label_source)
        side = label != -1
        n[side] += 1
        iv = _hit_interval(t, key, label)
        if iv is None:
            continue
        a, b = bisect_right(thresholds, iv[0]), bisect_right(thresholds, iv[1])
        if a < b:
            diff[side][a] += 1
            diff[side][b] -= 1
    out = []
    run = {True: 0, False: 0}
    for j in range(m):
        for side in (True, False):
            run[side] += diff[side][j]
        out.append(_metrics(run[True], n[True], run[False], n[False]))
    return out


def _pool(traces_or_splits: Iterable[Trace] | Mapping[str, Iterable[Trace]]) -> list[Trace]:
    if isinstance(traces_or_splits, Mapping):
        return [t for split in traces_or_splits.values() for t in split]
    return list(traces_or_splits)


def threshold_sweep(traces_or_splits: Iterable[Trace] | Mapping[str, Iterable[Trace]], key: str = "prm",
                    thresholds: Sequence[float] | None = None, *, label_source: str | None = None
                    ) -> tuple[list[float], list[float | None], float]:
    """F1 at every threshold of a sweep over ``traces_or_splits`` (a list of traces, or a dict of
    splits whose traces are pooled), and the best threshold.

    Returns ``(thresholds, f1s, best)``. ``thresholds`` defaults to :func:`default_thresholds` of the
    scores present. ``best`` has the highest F1; among ties, the one nearest 0.5 (the official cut),
    then the lower one. Raises :class:`PrmkitError` when F1 is undefined (the traces lack error or
    error-free samples) or no step carries ``scores[key]``.

    >>> from prmkit.trace import Problem, Step, StepLabel, Trace
    >>> ok = Trace("a", Problem("q"), [Step("s", labels=[StepLabel(1)], scores={"prm": 0.3})])
    >>> bad = Trace("b", Problem("q"), [Step("s", labels=[StepLabel(-1)], scores={"prm": 0.1})])
    >>> ths, f1s, best = threshold_sweep([ok, bad], thresholds=[0.05, 0.2, 0.5])
    >>> f1s, best
    ([0.0, 1.0, 0.0], 0.2)
    """
    traces = _pool(traces_or_splits)
    _require_scores(traces, key, "the tuning traces")
    if thresholds is None:
        thresholds = default_thresholds(s.scores[key] for t in traces for s in t.steps
                                        if s.scores.get(key) is not None)
    else:
        thresholds = sorted(float(x) for x in thresholds)
        if not thresholds:
            raise PrmkitError("threshold_sweep: thresholds is empty; give at least one or leave it None")
    rows = _sweep_counts(traces, key, thresholds, label_source)
    f1s = [r["f1"] for r in rows]
    if rows[0]["n_error"] == 0 or rows[0]["n_correct"] == 0:
        raise PrmkitError(f"cannot tune a threshold on {len(traces)} traces with "
                          f"{rows[0]['n_error']} erroneous and {rows[0]['n_correct']} error-free "
                          f"samples: ProcessBench's F1 needs both")
    best = min(range(len(thresholds)),
               key=lambda j: (-f1s[j], abs(thresholds[j] - DEFAULT_THRESHOLD), thresholds[j]))
    return list(thresholds), f1s, thresholds[best]


def _require_scores(traces: Sequence[Trace], key: str, what: str) -> None:
    if traces and not any(s.scores.get(key) is not None for t in traces for s in t.steps):
        raise PrmkitError(f"no step of {what} has a score under key {key!r}: score the traces first "
                          f"(prmkit score) or pass the key the scorer wrote")


# -- the whole benchmark -----------------------------------------------------------------------------
@dataclass
class ProcessBenchResult:
    """What :func:`evaluate_processbench` found; :meth:`to_dict` gives the report's shape.

    ``splits[name]``: error_acc, correct_acc, f1, n_error, n_correct, threshold, threshold_source,
    unscored_steps. ``by_generator[name][generator]``: error_acc, correct_acc, f1, n_error, n_correct.
    ``sweep``: one entry per tuning (``tuned_on``, ``thresholds``, ``f1``, ``best``); empty for a fixed
    threshold. ``threshold`` is None only when the per-split thresholds differ.
    """

    key: str
    threshold: float | None
    threshold_source: str
    splits: dict[str, dict[str, Any]]
    average_f1: float | None
    by_generator: dict[str, dict[str, dict[str, Any]]]
    sweep: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data (the ``processbench`` section of a report)."""
        return {"key": self.key, "threshold": self.threshold, "threshold_source": self.threshold_source,
                "splits": {k: dict(v) for k, v in self.splits.items()},
                "average_f1": self.average_f1,
                "by_generator": {k: {g: dict(m) for g, m in v.items()}
                                 for k, v in self.by_generator.items()},
                "sweep": [{"tuned_on": s["tuned_on"], "thresholds": list(s["thresholds"]),
                           "f1": list(s["f1"]), "best": s["best"]} for s in self.sweep]}

    def lines(self, *, by_generator: bool = False) -> list[str]:
        """A short table: per split error acc, correct acc and F1 (in %), then the average F1 and the
        threshold with where it came from; ``by_generator`` adds a row per generator of each split."""
        def pct(x: float | None) -> str:
            return "   n/a" if x is None else f"{100 * x:6.1f}"

        width = max([5, *map(len, self.splits)])
        out = [f"ProcessBench (scores {self.key!r}; accuracies and F1 in %)",
               f"{'split':<{width}}  error acc  correct acc      F1  (errors / correct)  threshold"]
        for name, s in self.splits.items():
            out.append(f"{name:<{width}}     {pct(s['error_acc'])}       {pct(s['correct_acc'])}  "
                       f"{pct(s['f1'])}  ({s['n_error']} / {s['n_correct']})  {s['threshold']:g}")
            if s["n_error"] and "not_flagged" in s:
                out.append(f"  {_misses(s)}")
            for gen, g in (self.by_generator.get(name, {}) if by_generator else {}).items():
                out.append(f"  {gen}: error acc {pct(g['error_acc']).strip()}, correct acc "
                           f"{pct(g['correct_acc']).strip()}, F1 {pct(g['f1']).strip()} "
                           f"({g['n_error']} / {g['n_correct']})")
        out.append(f"average F1 {pct(self.average_f1).strip()}")
        th = "per split" if self.threshold is None else f"{self.threshold:g}"
        out.append(f"threshold {th} ({self.threshold_source})")
        dropped = sum(s.get("unscored_traces", 0) for s in self.splits.values())
        if dropped:
            out.append(f"{dropped} traces had no score at all (the scorer could not take them): counted "
                       "as misses")
        unscored = sum(s["unscored_steps"] for s in self.splits.values())
        if unscored:
            out.append(f"{unscored} steps had no score and were skipped")
        return out


def miss_words(early: Any, late: Any, not_flagged: Any) -> str:
    """Where the misses on erroneous samples fall, in words (the printed table and the report)."""
    return (f"{early} flagged a right step first, {late} flagged only after the error, "
            f"{not_flagged} flagged no step")


def _misses(s: Mapping[str, Any]) -> str:
    early, late, none = s["flagged_early"], s["flagged_late"], s["not_flagged"]
    return f"{early + late + none} erroneous samples missed: " + miss_words(early, late, none)


def _generator(trace: Trace) -> str:
    meta = trace.meta.get("processbench")
    if isinstance(meta, dict) and meta.get("generator") is not None:
        return str(meta["generator"])
    return trace.source or "unknown"


def _by_generator(traces: Sequence[Trace], key: str, threshold: float,
                  label_source: str | None) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Trace]] = {}
    for t in traces:
        groups.setdefault(_generator(t), []).append(t)
    out = {}
    for g in sorted(groups):
        m = processbench_split(groups[g], key, threshold, label_source=label_source)
        out[g] = {k: m[k] for k in ("error_acc", "correct_acc", "f1", "n_error", "n_correct")}
    return out


def _check_disjoint(tuning: Mapping[str, Sequence[Trace]], reported: Mapping[str, Sequence[Trace]]) -> None:
    same = sorted(set(tuning) & set(reported))
    if same:
        raise PrmkitError(f"split {', '.join(same)} is both tuned on and reported: a threshold chosen on "
                          f"the split it is reported on inflates its F1; tune on another split")
    tune_ids = {t.id: name for name, ts in tuning.items() for t in ts}
    for name, ts in reported.items():
        for t in ts:
            if t.id in tune_ids:
                raise PrmkitError(f"trace {t.id} is in tuning split {tune_ids[t.id]!r} and reported "
                                  f"split {name!r}: tuning and reported splits must not share traces")


def evaluate_processbench(splits: Mapping[str, Iterable[Trace]], key: str = "prm",
                          threshold: float | None = None, *,
                          tune_on: Mapping[str, Iterable[Trace]] | None = None,
                          cross_split: bool = False, thresholds: Sequence[float] | None = None,
                          label_source: str | None = None) -> ProcessBenchResult:
    """ProcessBench on ``splits`` (name -> scored traces), with the threshold set one of three ways:

    - ``threshold=x`` (or nothing: 0.5): fixed, ``threshold_source == "fixed"``;
    - ``tune_on={name: traces}``: chosen by :func:`threshold_sweep` on those splits (pooled), then
      applied to every split of ``splits``; ``"tuned on <names>"``. Refused when a tuning split is
      also reported (same name, or a shared trace id);
    - ``cross_split=True`` (two splits or more): each split's threshold is chosen on the union of the
      *other* splits; ``"cross-split"``, and the top-level ``threshold`` is None unless all agree.

    ``thresholds`` overrides the sweep grid. ``by_generator`` breaks each split down by
    ``trace.meta["processbench"]["generator"]`` (else ``trace.source``) at that split's threshold.
    ``average_f1`` is the mean of the split F1s (None if any is None).
    """
    if not splits:
        raise PrmkitError("evaluate_processbench: no splits given (pass {name: traces})")
    if threshold is not None and (tune_on is not None or cross_split):
        raise PrmkitError("give either a fixed threshold or a way to tune one (tune_on / cross_split), "
                          "not both")
    if tune_on is not None and cross_split:
        raise PrmkitError("tune_on and cross_split are two ways to tune the threshold; pick one")
    data = {name: list(ts) for name, ts in splits.items()}
    for name, ts in data.items():
        _require_scores(ts, key, f"split {name!r}")

    sweep: list[dict[str, Any]] = []
    per_split: dict[str, tuple[float, str]] = {}
    if cross_split:
        if len(data) < 2:
            raise PrmkitError("cross_split needs at least two splits: each split's threshold is chosen "
                              "on the others")
        for name in data:
            others = {o: ts for o, ts in data.items() if o != name}
            _check_disjoint(others, {name: data[name]})
            ths, f1s, best = threshold_sweep(others, key, thresholds, label_source=label_source)
            tuned_on = ", ".join(others)
            sweep.append({"tuned_on": tuned_on, "thresholds": ths, "f1": f1s, "best": best})
            per_split[name] = (best, f"tuned on {tuned_on}")
        values = {v for v, _ in per_split.values()}
        top, source = (values.pop() if len(values) == 1 else None), "cross-split"
    elif tune_on is not None:
        tuning = {name: list(ts) for name, ts in tune_on.items()}
        if not tuning:
            raise PrmkitError("tune_on is empty: give {name: traces} to choose the threshold on")
        _check_disjoint(tuning, data)
        ths, f1s, best = threshold_sweep(tuning, key, thresholds, label_source=label_source)
        source = f"tuned on {', '.join(tuning)}"
        sweep.append({"tuned_on": ", ".join(tuning), "thresholds": ths, "f1": f1s, "best": best})
        per_split = {name: (best, source) for name in data}
        top = best
    else:
        top = DEFAULT_THRESHOLD if threshold is None else float(threshold)
        source = "fixed"
        per_split = {name: (top, source) for name in data}

    results: dict[str, dict[str, Any]] = {}
    by_gen: dict[str, dict[str, dict[str, Any]]] = {}
    for name, ts in data.items():
        th, th_source = per_split[name]
        m = processbench_split(ts, key, th, label_source=label_source)
        m["threshold_source"] = th_source
        results[name] = m
        by_gen[name] = _by_generator(ts, key, th, label_source)
    f1s_split = [m["f1"] for m in results.values()]
    average = None if any(f is None for f in f1s_split) else sum(f1s_split) / len(f1s_split)
    return ProcessBenchResult(key=key, threshold=top, threshold_source=source, splits=results,
                              average_f1=average, by_generator=by_gen, sweep=sweep)
