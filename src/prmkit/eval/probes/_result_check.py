"""Does the PRM check a step's result? A counterfactual probe.

A verifier must tell ``24 - 15 = 9`` from ``24 - 15 = 11``. A PRM can reach a good step AUROC without
doing so: on the embedded default most of the policy's slips are subtractions, so a PRM that scores
every subtraction low ranks steps well across traces and still cannot tell two candidate solutions of
one problem apart, which is what best-of-N needs. This probe asks the question directly. For a step
that its labels call valid and that writes a result (the last number after an ``=``), it scores the
trace cut after that step twice: as written, and with the result moved by 1, 2, 3 or 10 (up or down,
never below zero). Everything before the result is the same, so a PRM that checks the result scores
the changed step lower; one that reads only the kind of step scores both alike. Answer lines
("The answer is 9") are not eligible, although the likelihood scorer's ``RESULT`` reads them: moving
the final answer changes the outcome, so a pair would test outcome checking, not step checking.

``accuracy`` is the fraction of pairs in which the step as written scores higher (a tie counts a
half): 0.5 is a PRM blind to results. The probe fails below ``min_accuracy`` (0.9) and cannot measure
with fewer than ``min_pairs`` (20) eligible steps (traces without ``=`` results, such as agent
trajectories, or without step labels).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prmkit._result import Record
from prmkit.errors import PrmkitError
from prmkit.eval._doc import ReportDoc
from prmkit.eval.probes._base import ProbeContext, ProbeNotApplicable
from prmkit.eval.probes._common import _score_all
from prmkit.eval.probes._perturbations import _finish, _perturbed_copy
from prmkit.scoring import StepScorer
from prmkit.trace import Trace, binarize

__all__ = ["ResultCheckProbe", "ResultCheckResult", "change_result", "claimed_result", "result_check_probe"]

#: A result a step claims: a number right after ``=`` (thousands commas and a decimal part allowed).
_CLAIM = re.compile(r"=\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)")
_DELTAS = (1, 2, 3, 10)


def claimed_result(text: str) -> re.Match[str] | None:
    """The last number written after an ``=`` in ``text`` (the step's result), or None.

    >>> claimed_result("He gives away 15: 24 - 15 = 9.").group(1)
    '9'
    >>> claimed_result("The answer is 9.") is None
    True
    """
    found = list(_CLAIM.finditer(text))
    return found[-1] if found else None


def _moved(written: str, rng: random.Random) -> str:
    """``written`` (an integer or decimal, maybe with commas) moved by 1, 2, 3 or 10, up or down, kept
    at or above zero when it was."""
    decimals = len(written.split(".")[1]) if "." in written else 0
    value = float(written.replace(",", ""))
    delta = rng.choice(_DELTAS) * rng.choice((-1, 1))
    new = value + delta
    if new < 0 <= value:
        new = value + abs(delta)
    return f"{new:{',' if ',' in written else ''}.{decimals}f}"


def change_result(trace: Trace, index: int, rng: random.Random | None = None) -> Trace | None:
    """A copy of ``trace`` cut after step ``index``, whose step ``index`` claims another result (see
    the module docs); None when that step writes no result. The copy has no scores.

    >>> from prmkit.trace import Problem, Step
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("9 * 4 = 36."), Step("36 - 15 = 21."),
    ...                                                Step("The answer is 21.")])
    >>> new = change_result(t, 1, random.Random(0))
    >>> [s.text for s in new.steps], new.id
    (['9 * 4 = 36.', '36 - 15 = 31.'], 't~change_result@1')
    """
    if not 0 <= index < len(trace.steps):
        raise PrmkitError(f"trace {trace.id!r} has no step {index}")
    m = claimed_result(trace.steps[index].text)
    if m is None:
        return None
    rng = rng or random.Random(0)
    new = _cut_copy(trace, index, "change_result")
    step = new.steps[index]
    old = m.group(1)
    step.text = step.text[:m.start(1)] + _moved(old, rng) + step.text[m.end(1):]
    return _finish(new, "change_result", {"step": index, "was": old})


def _cut_copy(trace: Trace, index: int, name: str) -> Trace:
    """An unscored copy of ``trace`` cut after step ``index``, with no final answer; not yet laid out."""
    new = _perturbed_copy(trace, name)
    new.id = f"{trace.id}~{name}@{index}"
    new.steps = new.steps[:index + 1]
    new.final_answer = None
    new.outcome = "unknown"
    return new


def _cut(trace: Trace, index: int) -> Trace:
    return _finish(_cut_copy(trace, index, "cut"), "cut", {"step": index})


@dataclass
class ResultCheckResult(Record):
    """The result of :func:`result_check_probe` (see the module docs; a :class:`~prmkit._result.Record`:
    its ``to_dict`` is the probe's part of the report, ``from_dict`` reads it back)."""

    n: int | None = None                # pairs compared (both scores defined)
    caught: int | None = None           # pairs in which the step as written scored higher by more than eps
    ties: int | None = None
    accuracy: float | None = None       # (caught + ties / 2) / n
    mean_drop: float | None = None      # mean of (as written - changed)
    eligible: int | None = None         # valid, labelled steps that write a result (one drawn per trace)
    failed: bool | None = None
    measured: bool | None = None        # False when too few pairs to judge (failed None)
    criterion: str | None = None
    min_accuracy: float | None = 0.9
    seed: int | None = 0
    extra: dict[str, Any] = field(default_factory=dict)


def result_check_probe(scorer: StepScorer, traces: Iterable[Trace], *, label_source: str | None = None,
                       max_traces: int | None = None, seed: int = 0, eps: float = 1e-6,
                       min_accuracy: float = 0.9, min_pairs: int = 20,
                       batch_size: int = 32) -> ResultCheckResult:
    """Score, for one valid result-writing step per trace (drawn with a generator seeded by ``(seed,
    trace id)``), the trace cut after that step as written and with its result changed; count the
    pairs in which the written result scores higher. ``label_source``: which step labels say
    "valid" (None: each step's latest). ``max_traces``: use the first N traces that have such a step.

    >>> from prmkit.search import ScriptedScorer
    >>> from prmkit.trace import Problem, Step, StepLabel
    >>> ts = [Trace(id=f"t{i}", problem=Problem("q"), steps=[Step(f"2 + {i} = {2 + i}.", labels=[StepLabel(1)])])
    ...       for i in range(3)]
    >>> blind = ScriptedScorer({}, default=0.5)            # scores every step alike
    >>> r = result_check_probe(blind, ts, min_pairs=3)
    >>> r.n, r.ties, r.accuracy, r.failed
    (3, 3, 0.5, True)
    """
    rng0 = f"result_check:{seed}"
    pairs: list[tuple[Trace, Trace]] = []
    for t in traces:
        steps = [i for i, s in enumerate(t.steps)
                 if binarize(s.label(label_source)) is True and claimed_result(s.text) is not None]
        if not steps:
            continue
        rng = random.Random(f"{rng0}:{t.id}")
        i = rng.choice(steps)
        changed = change_result(t, i, rng)
        if changed is not None:
            pairs.append((_cut(t, i), changed))
        if max_traces is not None and len(pairs) >= max_traces:
            break
    written = _score_all(scorer, [a for a, _ in pairs], batch_size)
    moved = _score_all(scorer, [b for _, b in pairs], batch_size)
    diffs = [w[-1] - m[-1] for w, m in zip(written, moved, strict=True)
             if w and m and w[-1] is not None and m[-1] is not None]
    caught = sum(d > eps for d in diffs)
    ties = sum(abs(d) <= eps for d in diffs)
    accuracy = (caught + ties / 2) / len(diffs) if diffs else None
    criterion = (f"fails when a valid step outscores the same step with its result changed in fewer than "
                 f"{min_accuracy:.0%} of pairs (0.5: the score does not read results)")
    failed: bool | None
    if len(diffs) < min_pairs:
        failed = None
        criterion = (f"cannot measure: {len(diffs)} valid steps that write a result after '=' "
                     f"(needs {min_pairs}); " + criterion)
    else:
        failed = accuracy < min_accuracy
    return ResultCheckResult(n=len(diffs), caught=caught, ties=ties, accuracy=accuracy,
                             mean_drop=sum(diffs) / len(diffs) if diffs else None, eligible=len(pairs),
                             failed=failed, measured=failed is not None, criterion=criterion,
                             min_accuracy=min_accuracy, seed=seed)


class ResultCheckProbe:
    """:func:`result_check_probe` with ``ctx.scorer`` on ``ctx.traces`` (at most ``ctx.gaming_traces``
    pairs, the budget the gaming probe has; ``ctx.label_source``, ``ctx.seed``)."""

    name = "result_check"
    reads_scores = False  # both sides of each pair are scored here, in the same context
    title = "result check: does a step with its result changed score lower?"

    def run(self, ctx: ProbeContext) -> dict[str, Any]:
        if ctx.scorer is None:
            raise ProbeNotApplicable("the result-check probe scores changed steps: it needs a scorer")
        return result_check_probe(ctx.scorer, ctx.traces, label_source=ctx.label_source,
                                  max_traces=ctx.gaming_traces, seed=ctx.seed).to_dict()

    def headline(self, result: Mapping[str, Any]) -> str:
        acc = ResultCheckResult.from_dict(result).accuracy  # the report hands it as JSON
        return f"written result preferred in {ReportDoc.pct(acc)} of pairs" if acc is not None else ""

    def details(self, doc: ReportDoc, result: Mapping[str, Any], figures: set[str]) -> Sequence[str]:
        r = ResultCheckResult.from_dict(result, where="probes.result_check")
        doc.para(f"{doc.count(r.n)} valid steps, each scored as written and with its result "
                 f"changed: the written one scored higher in {doc.count(r.caught)}, the same in "
                 f"{doc.count(r.ties)}; accuracy {doc.pct(r.accuracy)} "
                 f"(0.5: blind to results; passes at {doc.pct(r.min_accuracy)}), mean drop "
                 f"{doc.num(r.mean_drop)}.")
        return ["n", "caught", "ties", "accuracy", "mean_drop", "eligible", "min_accuracy"]
