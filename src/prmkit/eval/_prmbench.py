"""PRMBench evaluation (Song et al. 2025, arXiv:2501.03124), as the official evaluator computes it.

Every step is a binary decision: the PRM calls it correct (``step.scores[key] >= threshold``,
positive) or wrong. Against the labels (``error_steps`` -1, the rest +1), per error class
(``meta["prmbench"]["classification"]``):

- ``f1_positive``: F1 of the correct steps (positive class), ``f1_negative``: F1 of the wrong steps;
- **PRMScore** = 0.5 · f1_positive + 0.5 · f1_negative.

What the official code does (ssmisya/PRMBench: ``mr_eval/tasks/prmtest_classified/task.py``,
``evaluate_function`` and ``eval_on_hallucination_step``; the paper's tables from
``mr_visualize/eval_res_view/draw_tabs/form_latex_strs.ipynb``, ``get_prmscore_from_current_res_dict``),
and what this module does:

- **Confusion counts are pooled over steps**, per class, then F1 is computed once (not per trace).
- **Overall** is *pooled* too: one confusion matrix over the steps of every error-class sample, then
  PRMScore from it — not the mean of the class PRMScores. (``overall["class_mean"]`` gives that mean,
  for reference.)
- **Groups**: the paper's Simplicity (redundency, circular), Soundness (counterfactual,
  step_contradiction, domain_inconsistency, confidence) and Sensitivity (missing_condition,
  deception, multi_solutions) scores are the plain mean of their classes' PRMScores.
- **multi_solutions** has no wrong step, so its PRMScore is f1_positive alone (the official special
  case); here any class without a labelled wrong step is scored so.
- **Error-free originals**: the official loader adds ``original_process`` once per question as a
  sample of class ``"correct"``; its steps are reported under that class but kept out of the overall
  matrix. The same holds here for traces of class "correct"; :func:`prmbench_with_originals` adds
  them (via :func:`prmkit.data.prmbench_original`) — score them like the other traces.
- **Threshold**: the official PRM wrappers call a step correct when its score is ``> 0.5``
  (``validity_threshold``); here ``>= threshold`` (default 0.5), the prmkit convention shared with
  ProcessBench (wrong means below the threshold). They differ only for a score exactly equal to it.
- **Steps without a score** (cut when scoring): the official loop only visits the steps the model
  scored; here they are likewise left out, and counted (``unscored_steps``).
- **Out-of-range error steps** (an ``error_steps`` index past the last step; 78 rows of the 16
  files in shared/data): the official loop simply never meets that index, i.e. it scores the
  in-range labels — ``out_of_range="in_range"`` here. The default ``"exclude"`` drops those traces
  from the metric instead, since their labels are evidently broken. Either way the result counts
  the traces and bad indices, per class.
- Degenerate F1: the official code writes -1 for an undefined precision or recall and clips a
  negative PRMScore to 0; here an F1 with no example of its class and no prediction of it is None,
  and a class PRMScore with a None part is None.

>>> from prmkit.trace import Problem, Step, StepLabel, Trace
>>> def t(i, cls, scores, wrong):
...     steps = [Step(f"s{k}", labels=[StepLabel(-1 if k in wrong else 1)], scores={"prm": s})
...              for k, s in enumerate(scores)]
...     return Trace(i, Problem("q"), steps, meta={"prmbench": {"classification": cls}})
>>> r = evaluate_prmbench([t("a", "circular", [0.9, 0.2, 0.8], {1}),
...                        t("b", "circular", [0.9, 0.7], {1})])
>>> c = r.classes["circular"]
>>> round(c["f1_positive"], 4), round(c["f1_negative"], 4), round(c["prmscore"], 4)
(0.8571, 0.6667, 0.7619)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.eval._metrics import f1_score
from prmkit.trace import Trace, binarize

__all__ = ["OUT_OF_RANGE_EVAL_POLICIES", "PRMBENCH_GROUPS", "PRMBenchResult", "evaluate_prmbench",
           "prmbench_with_originals"]

#: What :func:`evaluate_prmbench` does with a trace whose ``error_steps`` named a step past the end.
OUT_OF_RANGE_EVAL_POLICIES: tuple[str, ...] = ("exclude", "in_range")

#: The paper's three dimensions and their classes (spellings as in the data, "redundency" included).
PRMBENCH_GROUPS: dict[str, tuple[str, ...]] = {
    "simplicity": ("redundency", "circular"),
    "soundness": ("counterfactual", "step_contradiction", "domain_inconsistency", "confidence"),
    "sensitivity": ("missing_condition", "deception", "multi_solutions"),
}

#: The class of the error-free originals, kept out of the overall score as in the official evaluator.
CORRECT_CLASS = "correct"

_NAME = "prmbench"


@dataclass
class _Counts:
    """Step confusion counts, positive = "the step is correct"."""

    tp: int = 0  # correct step called correct
    fn: int = 0  # correct step called wrong
    fp: int = 0  # wrong step called correct
    tn: int = 0  # wrong step called wrong
    traces: int = 0
    unscored: int = 0

    def add(self, other: _Counts) -> None:
        self.tp += other.tp
        self.fn += other.fn
        self.fp += other.fp
        self.tn += other.tn
        self.traces += other.traces
        self.unscored += other.unscored

    def metrics(self) -> dict[str, Any]:
        f1_pos = f1_score(self.tp, self.fp, self.fn)
        f1_neg = f1_score(self.tn, self.fn, self.fp)
        n_error = self.fp + self.tn
        if n_error == 0:
            prmscore = f1_pos  # no wrong step to find (multi_solutions, originals): official rule
        elif f1_pos is None or f1_neg is None:
            prmscore = None
        else:
            prmscore = 0.5 * f1_pos + 0.5 * f1_neg
        return {"prmscore": prmscore, "f1_positive": f1_pos, "f1_negative": f1_neg,
                "n_traces": self.traces, "n_steps": self.tp + self.fn + self.fp + self.tn,
                "n_error_steps": n_error, "unscored_steps": self.unscored,
                "confusion": {"tp": self.tp, "fn": self.fn, "fp": self.fp, "tn": self.tn}}


def _meta(trace: Trace) -> dict[str, Any]:
    m = trace.meta.get(_NAME)
    if not isinstance(m, dict) or not isinstance(m.get("classification"), str):
        raise PrmkitError(f"trace {trace.id}: no meta['prmbench']['classification']; read PRMBench "
                          f"files with prmkit.data.read(path, 'prmbench')")
    return m


def _count(trace: Trace, key: str, threshold: float, label_source: str | None) -> _Counts:
    c = _Counts(traces=1)
    for i, step in enumerate(trace.steps):
        truth = binarize(step.label(label_source))
        if truth is None:
            raise PrmkitError(f"trace {trace.id}: step {i} has no label"
                              f"{f' from source {label_source!r}' if label_source else ''}; PRMBench "
                              f"scores every step against its label")
        s = step.scores.get(key)
        if s is None:
            c.unscored += 1
            continue
        called_correct = s >= threshold
        if truth:
            c.tp += called_correct
            c.fn += not called_correct
        else:
            c.fp += called_correct
            c.tn += not called_correct
    return c


@dataclass
class PRMBenchResult:
    """What :func:`evaluate_prmbench` found; :meth:`to_dict` gives the report's shape.

    ``classes[name]`` and ``overall``: prmscore, f1_positive, f1_negative, n_traces, n_steps,
    n_error_steps (plus unscored_steps and the confusion counts; ``overall`` adds ``class_mean`` and
    ``averaging``). ``groups[name]``: prmscore (mean of its classes present) and classes.
    ``out_of_range``: policy, traces, indices, by_class (traces per class), indices_by_class.
    ``duplicates``: traces left out because an earlier trace had their id (the first copy is kept,
    as the official loader does), and their ids.
    """

    key: str
    threshold: float
    classes: dict[str, dict[str, Any]]
    overall: dict[str, Any]
    groups: dict[str, dict[str, Any]]
    out_of_range: dict[str, Any] = field(default_factory=dict)
    duplicates: dict[str, Any] = field(default_factory=lambda: {"traces": 0, "ids": []})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe data (the ``prmbench`` section of a report)."""
        def copy(m: dict[str, Any]) -> dict[str, Any]:
            return {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
                    for k, v in m.items()}

        return {"key": self.key, "threshold": self.threshold,
                "classes": {k: copy(v) for k, v in self.classes.items()},
                "overall": copy(self.overall),
                "groups": {k: copy(v) for k, v in self.groups.items()},
                "out_of_range": copy(self.out_of_range), "duplicates": copy(self.duplicates)}

    def lines(self) -> list[str]:
        """A short table: PRMScore, F1 of correct and of wrong steps (in %) per class, the overall and
        group scores, then what happened to out-of-range labels."""
        def pct(x: float | None) -> str:
            return "   n/a" if x is None else f"{100 * x:6.1f}"

        names = list(self.classes)
        width = max([8, *map(len, names)])
        out = [f"PRMBench (scores {self.key!r}, a step is called correct when its score >= "
               f"{self.threshold:g}; scores in %)",
               f"{'class':<{width}}  PRMScore   F1 ok  F1 err  traces  steps (wrong)"]
        for name in names:
            m = self.classes[name]
            out.append(f"{name:<{width}}    {pct(m['prmscore'])}  {pct(m['f1_positive'])}  "
                       f"{pct(m['f1_negative'])}  {m['n_traces']:6d}  {m['n_steps']} ({m['n_error_steps']})")
        o = self.overall
        out.append(f"{'overall':<{width}}    {pct(o['prmscore'])}  {pct(o['f1_positive'])}  "
                   f"{pct(o['f1_negative'])}  {o['n_traces']:6d}  {o['n_steps']} ({o['n_error_steps']})"
                   f"   [pooled steps]")
        out.append("groups: " + ", ".join(f"{g} {pct(v['prmscore']).strip()}"
                                          for g, v in self.groups.items()))
        r = self.out_of_range
        if r.get("traces"):
            action = "excluded" if r["policy"] == "exclude" else "kept, in-range labels scored"
            out.append(f"out-of-range error_steps: {r['traces']} traces ({r['indices']} indices), {action}")
        d = self.duplicates
        if d.get("traces"):
            ids = ", ".join(d["ids"][:5]) + (" …" if len(d["ids"]) > 5 else "")
            out.append(f"duplicate keys: {d['traces']} later copies left out, the first kept ({ids})")
        unscored = sum(m["unscored_steps"] for m in self.classes.values())
        if unscored:
            out.append(f"{unscored} steps had no score and were left out")
        return out


def evaluate_prmbench(traces: Iterable[Trace], key: str = "prm", threshold: float = 0.5, *,
                      out_of_range: str = "exclude", label_source: str | None = None) -> PRMBenchResult:
    """PRMBench scores of ``traces`` (read with ``prmkit.data.read(path, "prmbench")`` and scored).

    A step is called correct when ``step.scores[key] >= threshold``. ``out_of_range`` says what to do
    with traces whose ``error_steps`` named a step past the end (``meta["prmbench"]["out_of_range"]``):
    ``"exclude"`` (default) leaves them out of every score, ``"in_range"`` keeps them and scores the
    labels of their existing steps (what the official evaluator does). A trace whose id an earlier
    trace had (the released files repeat a few keys) is left out: the first copy counts, as in the
    official loader, and the result counts the rest (``duplicates``). Traces of class "correct"
    (see :func:`prmbench_with_originals`) get their own class entry and stay out of ``overall``.
    ``label_source`` picks which labels are the truth (default: each step's latest).
    """
    if out_of_range not in OUT_OF_RANGE_EVAL_POLICIES:
        raise PrmkitError(f"out_of_range must be one of {', '.join(OUT_OF_RANGE_EVAL_POLICIES)}, "
                          f"got {out_of_range!r}")
    per_class: dict[str, _Counts] = {}
    oor_traces: dict[str, int] = {}
    oor_indices: dict[str, int] = {}
    seen: set[str] = set()
    duplicates: list[str] = []
    scored_any = False
    n = 0
    for t in traces:
        n += 1
        if t.id in seen:  # keep the first copy, as the official loader does
            duplicates.append(t.id)
            continue
        seen.add(t.id)
        m = _meta(t)
        cls = m["classification"]
        counts = per_class.setdefault(cls, _Counts())
        oor_traces.setdefault(cls, 0)
        oor_indices.setdefault(cls, 0)
        bad = m.get("out_of_range") or []
        if bad:
            oor_traces[cls] += 1
            oor_indices[cls] += len(bad)
            if out_of_range == "exclude":
                continue
        c = _count(t, key, threshold, label_source)
        scored_any = scored_any or c.tp + c.fn + c.fp + c.tn > 0
        counts.add(c)
    if n == 0:
        raise PrmkitError("evaluate_prmbench: no traces given")
    if not scored_any:
        raise PrmkitError(f"no step has a score under key {key!r}: score the traces first "
                          f"(prmkit score) or pass the key the scorer wrote")

    classes = {cls: per_class[cls].metrics() for cls in sorted(per_class)}
    pooled = _Counts()
    for cls, c in per_class.items():
        if cls != CORRECT_CLASS:
            pooled.add(c)
    overall = pooled.metrics()
    error_classes = [v["prmscore"] for k, v in classes.items() if k != CORRECT_CLASS]
    overall["class_mean"] = (None if not error_classes or any(x is None for x in error_classes)
                             else sum(error_classes) / len(error_classes))
    overall["averaging"] = ("pooled: one step confusion matrix over every error-class sample "
                            "(originals excluded), as the official evaluator")

    groups = {}
    for g, members in PRMBENCH_GROUPS.items():
        present = [c for c in members if c in classes]
        scores = [classes[c]["prmscore"] for c in present]
        groups[g] = {"prmscore": (None if not scores or any(s is None for s in scores)
                                  else sum(scores) / len(scores)),
                     "classes": present}

    report = {"policy": out_of_range, "traces": sum(oor_traces.values()),
              "indices": sum(oor_indices.values()),
              "by_class": dict(sorted(oor_traces.items())),
              "indices_by_class": dict(sorted(oor_indices.items()))}
    return PRMBenchResult(key=key, threshold=float(threshold), classes=classes, overall=overall,
                          groups=groups, out_of_range=report,
                          duplicates={"traces": len(duplicates), "ids": duplicates})


def prmbench_with_originals(traces: Iterable[Trace]) -> list[Trace]:
    """``traces`` plus the error-free original of each question, once (class "correct"), as the
    official loader builds its evaluation set. Score the result, then :func:`evaluate_prmbench` it.

    The official loader takes the originals from the "redundency" rows; here from the first trace of
    each question, whatever its class (the same set when every question has a redundency row, as in
    the released files).
    """
    from prmkit.data import prmbench_original

    out = list(traces)
    originals: dict[str, Trace] = {}
    for t in out:
        if _meta(t)["classification"] == CORRECT_CLASS:
            originals.setdefault(t.id, t)
    extra = []
    for t in out:
        if _meta(t)["classification"] == CORRECT_CLASS:
            continue
        o = prmbench_original(t)
        if o.id not in originals:
            originals[o.id] = o
            extra.append(o)
    return out + extra
