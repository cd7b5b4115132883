"""Dynamic batching: traces from concurrent requests share one scorer call.

Requests put their traces on a bounded queue and wait. One worker takes whatever is queued (waiting
``max_wait_ms`` for more after the first arrives, unless ``max_batch_traces`` are already there), runs
the scorer once on all of it in a thread of its own, and hands each request its own results. While the scorer
runs, new requests queue up, so under load batches grow by themselves. One call to
:class:`~prmkit.scoring.PrefixCachingScorer` runs the problem shared by N candidates once, even when
the candidates came as N requests, and its KV store reuses what earlier calls ran.

The queue is bounded in traces (``max_queued_traces``): a request that would overflow it is refused
at once with :class:`QueueFull` (the server answers 503 with Retry-After), so a burst costs callers a
retry, never the server its memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prmkit.errors import PrmkitError
from prmkit.scoring import StepScorer, score_each
from prmkit.serve._metrics import Metrics
from prmkit.trace import Trace

__all__ = ["DynamicBatcher", "QueueFull", "Result", "unscored_kind", "NO_STEPS", "TOO_LONG"]

log = logging.getLogger("prmkit.serve")

#: Per trace: its scores (None: not scored) and, when not scored, why.
Result = tuple[list[float | None] | None, str | None]

#: The reason given for a trace without steps, and the prefixes of the reasons for one the scorer
#: refused: too long for ``max_length`` (:func:`unscored_kind`), or anything else.
NO_STEPS = "no steps"
TOO_LONG = "too long for the model: "
REJECTED = "rejected by the scorer: "


class QueueFull(PrmkitError):
    """The queue holds ``max_queued_traces`` already; try again after ``retry_after`` seconds."""

    def __init__(self, queued: int, limit: int, retry_after: int) -> None:
        super().__init__(f"server busy: {queued} traces queued (limit {limit}); retry after {retry_after}s")
        self.retry_after = retry_after


@dataclass(eq=False)
class _Job:
    traces: list[Trace]
    future: asyncio.Future
    results: list[Result] = field(default_factory=list)


class DynamicBatcher:
    """Batches the traces of concurrent :meth:`score` calls into single scorer calls (module docs).

    ``max_wait_ms``: how long the worker waits for more requests after the first one arrives;
    ``max_batch_traces``: most traces per scorer call (a request with more is never split: it goes
    alone); ``max_queued_traces``: most traces waiting, beyond which :meth:`score` raises
    :class:`QueueFull`. ``metrics`` is updated with batch sizes, traces, steps and what was not scored.
    """

    def __init__(self, scorer: StepScorer, *, max_wait_ms: float = 5.0, max_batch_traces: int = 64,
                 max_queued_traces: int = 1024, metrics: Metrics | None = None) -> None:
        self.scorer = scorer
        self.max_wait = max(0.0, max_wait_ms) / 1000.0
        self.max_batch_traces = max(1, max_batch_traces)
        self.max_queued_traces = max(1, max_queued_traces)
        self.metrics = metrics or Metrics()
        self.queued_traces = 0
        self._pending: list[_Job] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._busy = False
        self._executor: ThreadPoolExecutor | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._wake = asyncio.Event()
        # One thread of its own runs every scorer call. asyncio's shared pool hands back-to-back calls
        # to whichever worker is free, and each thread that drives torch brings its own OpenMP team.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="prmkit-scorer")
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Finish what is queued and in flight, then stop the worker."""
        while self._pending or self._busy:
            await asyncio.sleep(0.01)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    @property
    def idle(self) -> bool:
        return not self._pending and not self._busy

    # -- requests ----------------------------------------------------------------------------------------
    async def score(self, traces: Sequence[Trace]) -> list[Result]:
        """Per trace ``(scores, None)`` or ``(None, reason)``; raises :class:`QueueFull` when the queue
        cannot take ``traces``."""
        if self._wake is None:
            raise PrmkitError("the batcher is not started")
        if not traces:
            return []
        n = len(traces)
        if self.queued_traces and self.queued_traces + n > self.max_queued_traces:
            self.metrics.rejected_full += 1
            raise QueueFull(self.queued_traces, self.max_queued_traces, self._retry_after())
        job = _Job(list(traces), asyncio.get_running_loop().create_future())
        self._pending.append(job)
        self.queued_traces += n
        self._wake.set()
        return await job.future

    def _retry_after(self) -> int:
        """Seconds a refused caller should wait: about one batch's worth, at least one."""
        return 1

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                if self.max_wait and sum(len(j.traces) for j in self._pending) < self.max_batch_traces:
                    await asyncio.sleep(self.max_wait)  # let concurrent requests join this batch
                jobs = self._take()
                live = [j for j in jobs if not j.future.done()]  # a cancelled caller (timeout, disconnect)
                if not live:
                    continue
                self._busy = True
                try:
                    await asyncio.get_running_loop().run_in_executor(self._executor, self._score_jobs, live)
                except Exception as e:  # a scorer bug: every waiting request fails, the server goes on
                    log.exception("scorer failed")
                    for j in live:
                        if not j.future.done():
                            j.future.set_exception(e)
                    continue
                finally:
                    self._busy = False
                for j in live:
                    self._account(j.results)
                    if not j.future.done():
                        j.future.set_result(j.results)

    def _take(self) -> list[_Job]:
        """The oldest jobs up to ``max_batch_traces`` traces (at least one job)."""
        taken, total = [], 0
        while self._pending:
            n = len(self._pending[0].traces)
            if taken and total + n > self.max_batch_traces:
                break
            taken.append(self._pending.pop(0))
            total += n
        self.queued_traces -= total
        return taken

    def _score_jobs(self, jobs: Sequence[_Job]) -> None:
        """One scorer call for every trace with steps (:func:`~prmkit.scoring.score_each`: a trace the
        scorer refuses costs the others nothing)."""
        todo = [t for j in jobs for t in j.traces if t.steps]
        self.metrics.scorer_calls += 1
        self.metrics.batch_traces.observe(len(todo))
        start = time.perf_counter()
        try:
            found = [(s, None if why is None else _reason(why)) for s, why in score_each(self.scorer, todo)]
        finally:
            self.metrics.scorer_seconds += time.perf_counter() - start
        at = iter(found)
        for j in jobs:
            j.results = [next(at) if t.steps else (None, NO_STEPS) for t in j.traces]

    def _account(self, results: Sequence[Result]) -> None:
        m = self.metrics
        for scores, reason in results:
            if scores is None:
                m.unscored[unscored_kind(reason)] += 1
                continue
            m.traces += 1
            m.steps += sum(s is not None for s in scores)
            if any(s is None for s in scores):
                m.unscored["partial"] += 1


def unscored_kind(reason: str | None) -> str:
    """The metric label of a reason a trace was not scored: ``no_steps``, ``too_long`` (its problem
    leaves no room for a step within the model's ``max_length``, or an ORM's whole trace does not
    fit) or ``rejected`` (any other refusal, e.g. a step that tokenises to nothing).

    >>> unscored_kind("no steps"), unscored_kind(TOO_LONG + "trace 'q0': not even the first step fits in max_length=512")
    ('no_steps', 'too_long')
    """
    if reason == NO_STEPS:
        return "no_steps"
    return "too_long" if reason and reason.startswith(TOO_LONG) else "rejected"


def _reason(why: str) -> str:
    # prmkit's length refusals (RewardModel.encode_each) all name max_length; every other refusal
    # names its own cause.
    return (TOO_LONG if "max_length" in why else REJECTED) + why
