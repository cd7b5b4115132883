"""Write a scorer's results into traces, and the ``prmkit score`` stage: file in, scored file out.

- :func:`score_traces`: score traces in memory; step scores and one aggregated trace score stored
  through :func:`prmkit.trace_queries.write_scores`.
- :func:`score_traces_or_skip`: the same in chunks, where a trace the scorer rejects (too long for an
  ORM, say) is reported and left unscored instead of costing its whole chunk;
- :func:`score_each`: per trace the scores or why the scorer refused it, in one call.
- :func:`score_file`: the stage's file-level entry point (``prmkit score``): reads any importable
  format, scores in chunks (a problem's N samples together share their prompt in the prefix cache),
  writes to a temporary file renamed on success, and says what it skipped.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from prmkit._durable import check_inputs, durable_file
from prmkit._progress import progress_bar
from prmkit._result import Record
from prmkit.data import ImportReport, count_records, read
from prmkit.errors import PrmkitError
from prmkit.provenance import ScoreProvenance
from prmkit.scoring._aggregate import Aggregator, check_finite, get_aggregator
from prmkit.scoring._protocol import StepScorer
from prmkit.trace import Trace, TraceWriter
from prmkit.trace_queries import partly_scored, stored_scores, write_scores

__all__ = ["score_traces", "score_traces_or_skip", "score_each", "add_trace_scores", "score_file", "ScoreReport"]

AggregateSpec = str | Aggregator | Callable[[Sequence[float | None]], float | None]


def _agg_name(aggregate: AggregateSpec, agg: Any) -> str:
    if isinstance(agg, Aggregator):
        return agg.spec
    return aggregate if isinstance(aggregate, str) else getattr(agg, "__name__", "custom")


def score_traces(scorer: StepScorer, traces: Sequence[Trace], key: str | None = None, *,
                 aggregate: AggregateSpec = "min") -> list[Trace]:
    """Score ``traces`` and store the results on them, plus the aggregated trace score:

    - PRM: ``step.scores[key]`` for every scored step (steps cut by ``max_length`` get none, and the
      trace is marked ``meta["scored_steps"][key]``, see :func:`~prmkit.trace_queries.partly_scored`) and
      ``trace.meta["scores"][f"{key}:{aggregate}"]`` (``"prm:min"``; absent when no step was scored);
    - ORM: ``trace.meta["scores"][key]``.

    ``key`` defaults to the scorer's ``kind``. A ``score`` provenance entry names the scorer and the
    aggregator. Returns ``traces``.

    >>> from prmkit.trace import Problem, Step
    >>> class Fixed:
    ...     kind, name = "prm", "fixed"
    ...     def score(self, traces):
    ...         return [[0.9, 0.2, None] for _ in traces]
    >>> t = Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b"), Step("c")])
    >>> _ = score_traces(Fixed(), [t], aggregate="mean")
    >>> [s.scores for s in t.steps], t.meta["scores"]
    ([{'prm': 0.9}, {'prm': 0.2}, {}], {'prm:mean': 0.55})
    """
    get_aggregator(aggregate)  # a bad aggregator fails before the scorer runs
    results = scorer.score(traces)
    if len(results) != len(traces):
        raise PrmkitError(f"scorer {scorer.name!r} returned {len(results)} results for {len(traces)} traces")
    # Every result is checked before any is stored, so a failure leaves no trace half-done.
    for t, s in zip(traces, results, strict=True):
        _check(scorer, t, s)
        _check_range(scorer, t, s)
    _store(scorer, traces, results, key, aggregate)
    return list(traces)


def _check(scorer: StepScorer, t: Trace, s: Sequence[float | None]) -> None:
    """A scorer's result for ``t``: one score per step (PRM), every one finite."""
    if scorer.kind == "prm" and len(s) != len(t.steps):
        raise PrmkitError(f"scorer {scorer.name!r}: trace {t.id!r} got {len(s)} scores for "
                          f"{len(t.steps)} steps")
    try:
        check_finite(list(s), f"scorer {scorer.name!r}")
    except PrmkitError as e:
        raise PrmkitError(f"trace {t.id!r}: {e}") from None


def _check_range(scorer: StepScorer, t: Trace, s: Sequence[float | None]) -> None:
    """A PRM's step scores are probabilities, as a reader checks them (:class:`~prmkit.trace.Step`):
    a score outside [0, 1] is a broken scorer, not a trace to skip, so it fails the run before a file
    that could not be read back is written."""
    if scorer.kind != "prm":
        return
    bad = next(((i, v) for i, v in enumerate(s) if v is not None and not 0.0 <= v <= 1.0), None)
    if bad is not None:
        raise PrmkitError(f"trace {t.id!r}: scorer {scorer.name!r} gave step {bad[0] + 1} the score "
                          f"{bad[1]!r}, outside [0, 1] (a step score is a probability); nothing written")


def _store(scorer: StepScorer, traces: Sequence[Trace], results: Sequence[Sequence[float | None]],
           key: str | None, aggregate: AggregateSpec) -> None:
    key = key or scorer.kind
    agg = get_aggregator(aggregate)
    agg_name = _agg_name(aggregate, agg)
    describe = getattr(scorer, "describe", None)
    info: dict[str, Any] = describe() if callable(describe) else {"model": scorer.name, "kind": scorer.kind}
    entry = ScoreProvenance.from_dict({**info, "aggregate": agg_name if scorer.kind == "prm" else None}, key)
    for t, s in zip(traces, results, strict=True):
        if scorer.kind == "prm":
            write_scores(t, s, kind="prm", key=key, trace_scores={f"{key}:{agg_name}": agg(s)})
        else:
            write_scores(t, s, kind="orm", key=key)
        t.add_provenance(entry)


def score_each(scorer: StepScorer, traces: Sequence[Trace]) -> list[tuple[list[float | None] | None, str | None]]:
    """Per trace ``(scores, None)``, or ``(None, reason)`` for one ``scorer`` refuses, in one call.

    A scorer with a ``score_each`` of its own (:class:`~prmkit.models.RewardModel`,
    :class:`~prmkit.scoring.PrefixCachingScorer`, :class:`~prmkit.serve.RemoteScorer`) says which
    traces it refuses and scores the rest together. Any other :class:`StepScorer` raises for the
    whole call: the call is then halved and each half retried, so one bad trace among n costs about
    2·log2(n) more calls and the others stay batched.
    """
    if not traces:
        return []
    own = getattr(scorer, "score_each", None)
    if callable(own):
        results = own(list(traces))
        if len(results) != len(traces):
            raise PrmkitError(f"scorer {scorer.name!r} returned {len(results)} results for {len(traces)} traces")
        return [(None if s is None else list(s), why) for s, why in results]
    try:
        scored = scorer.score(list(traces))
    except PrmkitError as e:
        if len(traces) == 1:
            return [(None, str(e))]
        half = len(traces) // 2
        return score_each(scorer, traces[:half]) + score_each(scorer, traces[half:])
    if len(scored) != len(traces):
        raise PrmkitError(f"scorer {scorer.name!r} returned {len(scored)} results for {len(traces)} traces")
    return [(list(s), None) for s in scored]


def score_traces_or_skip(scorer: StepScorer, traces: Sequence[Trace], key: str | None = None, *,
                         aggregate: AggregateSpec = "min", chunk: int = 64, progress: bool = False,
                         what: str = "scoring") -> list[tuple[str, str]]:
    """Score ``traces`` in place, ``chunk`` at a time; returns ``(trace id, reason)`` for each trace
    that could not be scored (no steps, or one the scorer refuses, see :func:`score_each`: one bad
    trace never costs the others)."""
    skipped: list[tuple[str, str]] = []
    with progress_bar(len(traces), what, enabled=progress, transient=False) as advance:
        for i in range(0, len(traces), max(1, chunk)):
            part = traces[i:i + max(1, chunk)]
            skipped += _score_chunk(scorer, part, key, aggregate)
            advance(len(part))
    return skipped


def _score_chunk(scorer: StepScorer, traces: Sequence[Trace], key: str | None,
                 aggregate: AggregateSpec) -> list[tuple[str, str]]:
    get_aggregator(aggregate)  # a bad aggregator fails before the scorer runs
    skipped = [(t.id, "no steps") for t in traces if not t.steps]
    todo = [t for t in traces if t.steps]
    done: list[tuple[Trace, list[float | None]]] = []
    for t, (s, why) in zip(todo, score_each(scorer, todo), strict=True):
        if s is not None:
            try:
                _check(scorer, t, s)
            except PrmkitError as e:
                s, why = None, str(e)
            else:
                _check_range(scorer, t, s)
        if s is None:
            skipped.append((t.id, why or "unscored"))
        else:
            done.append((t, s))
    _store(scorer, [t for t, _ in done], [s for _, s in done], key, aggregate)
    return skipped


def add_trace_scores(traces: Sequence[Trace], key: str, aggregates: Sequence[AggregateSpec]) -> None:
    """Store more trace scores from the step scores ``key`` already on ``traces``: for each
    aggregator ``a``, ``meta["scores"][f"{key}:{a}"]`` (nothing where no step carries a score), so
    best-of-N curves can compare aggregators without scoring again."""
    for t in traces:
        steps = stored_scores(t, key)
        values = {}
        for spec in aggregates:
            agg = get_aggregator(spec)
            values[f"{key}:{_agg_name(spec, agg)}"] = agg(steps) if steps else None
        write_scores(t, [], kind="prm", key=key, trace_scores=values)


@dataclass
class ScoreReport(Record):
    """What :func:`score_file` did: traces read and written, how many got a trace score, their mean,
    how many a PRM scored only in part (``partial``: steps past ``max_length`` left unscored, marked
    in ``meta.scored_steps``), the traces it could not score (id, reason), and the wall time of
    reading, scoring and writing (``seconds``).

    ``scorer_kind`` is the scorer's kind (``prm`` or ``orm``); a dict written when that field was named
    ``kind`` (the name every result now gives its own kind, ``"score"`` here) reads back the same.

    >>> r = ScoreReport("o.jsonl", "scripted", "prm", "prm", "min", traces=2, skipped=[("t", "empty")])
    >>> ScoreReport.from_dict(r.to_dict()) == r, r.to_dict()["skipped"]
    (True, [['t', 'empty']])
    """

    kind: ClassVar[str] = "score"
    out: str
    scorer: str
    scorer_kind: str
    key: str
    aggregate: str | None
    traces: int = 0
    scored: int = 0
    mean_score: float | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    invalid: int = 0
    partial: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "skipped": [list(s) for s in self.skipped]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, where: str | None = None) -> ScoreReport:
        if "kind" in d and "scorer_kind" not in d:  # written before the field was renamed
            d = {("scorer_kind" if k == "kind" else k): v for k, v in d.items()}
        r = super().from_dict(d, where=where or cls.kind)
        r.skipped = [(str(tid), str(why)) for tid, why in r.skipped]
        return r

    def lines(self) -> list[str]:
        """A summary for the terminal: one line, up to ten unscored traces, then the time and rate."""
        mean = f"; mean trace score {self.mean_score:.4f}" if self.mean_score is not None else ""
        agg = f", {self.aggregate}" if self.aggregate else ""
        rate = f" ({self.traces / self.seconds:.1f} traces/s)" if self.seconds > 0 else ""
        out = [f"{self.out}: {self.traces} traces, {self.scored} scored by {self.scorer} "
               f"({self.scorer_kind}{agg}){mean}"]
        if self.partial:
            out.append(f"{self.partial} of {self.scored} scored only in part (steps past max_length "
                       f"unscored; meta.scored_steps says how many were): their trace score covers "
                       f"the steps that fit")
        if self.invalid:
            out.append(f"{self.invalid} malformed input records skipped")
        out += [f"unscored {tid}: {why}" for tid, why in self.skipped[:10]]
        if len(self.skipped) > 10:
            out.append(f"… and {len(self.skipped) - 10} more unscored")
        out.append(f"{self.seconds:.1f} s{rate}")
        return out


def score_file(inp: str | os.PathLike, out: str | os.PathLike, scorer: StepScorer, *,
               key: str | None = None, aggregate: str = "min", chunk: int = 256, fmt: str | None = None,
               skip_invalid: bool = False, progress: bool = True) -> ScoreReport:
    """Score every trace of ``inp`` (prmkit JSONL or any importable format) and write them to ``out``
    (prmkit JSONL): a PRM's step scores under ``step.scores[key]`` and the trace score under
    ``meta.scores["key:aggregate"]``, an ORM's under ``meta.scores[key]`` (``key`` defaults to the
    scorer's kind). Traces that cannot be scored are written unchanged and listed in the report.

    ``out`` is written to a temporary file beside it and renamed when complete: a failure leaves an
    existing ``out`` (and always ``inp``) as it was.
    """
    inp, out = Path(inp), Path(out)
    if not inp.exists():
        raise PrmkitError(f"{inp}: no such file")
    sides = [f"{out}.skipped.jsonl" if skip_invalid else None]
    check_inputs(out, [inp], sides)
    key = key or scorer.kind
    agg_key = f"{key}:{aggregate}" if scorer.kind == "prm" else key
    report = ScoreReport(str(out), scorer.name, scorer.kind, key,
                         aggregate if scorer.kind == "prm" else None)
    imported = ImportReport()
    values: list[float] = []
    t0 = time.perf_counter()
    traces = iter(read(inp, fmt, skip_invalid=skip_invalid, report=imported))
    total = count_records(inp, fmt)
    with durable_file(out, inputs=[inp], side_files=sides) as partial, TraceWriter(partial) as w, \
            progress_bar(total, "scoring", enabled=progress, transient=False) as advance:
        while batch := list(itertools.islice(traces, max(1, chunk))):
            with advance.inflight(len(batch)):
                report.skipped += _score_chunk(scorer, batch, key, aggregate)
            for t in batch:
                v = (t.meta.get("scores") or {}).get(agg_key)
                if v is not None:
                    values.append(v)
                    if scorer.kind == "prm" and partly_scored(t, key):
                        report.partial += 1
                w.write(t)
            report.traces += len(batch)
            advance(len(batch))
    report.seconds = time.perf_counter() - t0
    report.scored = len(values)
    report.mean_score = sum(values) / len(values) if values else None
    report.invalid = len(imported.skipped)
    return report
