"""Dynamic batching: traces from concurrent requests share one scorer call.

Requests put their traces on a bounded queue and wait. One worker takes whatever is queued (waiting
``max_wait_ms`` for more after the first arrives, unless ``max_batch_traces`` are already there), runs
the scorer on all of it in a thread of its own, and hands each request its own results. While the scorer
runs, new requests queue up, so under load batches grow by themselves. One call to
:class:`~prmkit.scoring.PrefixCachingScorer` runs the problem shared by N candidates once, even when
the candidates came as N requests, and its KV store reuses what earlier calls ran.

The queue is bounded in traces (``max_queued_traces``): a request that would overflow it is refused
at once with :class:`QueueFull` (the server answers 503 with Retry-After), so a burst costs callers a
retry, never the server its memory.

Work nobody waits for is dropped: a request that timed out or was cancelled leaves the queue at once
(its slots free for others), and a batch is scored in calls of at most ``max_batch_steps`` steps, the
traces of a request that stopped waiting skipped between calls. A call
that has started cannot be interrupted; the bound on its size is what bounds how long it holds the
scorer. :meth:`DynamicBatcher.abort` (bounded shutdown) fails every waiting request with
:class:`ShuttingDown`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prmkit.errors import PrmkitError
from prmkit.scoring import StepScorer, score_each
from prmkit.serve._metrics import Metrics
from prmkit.trace import Trace

__all__ = ["DynamicBatcher", "QueueFull", "ShuttingDown", "Result", "unscored_kind", "over_limit", "NO_STEPS",
           "TOO_LONG", "OVER_LIMIT"]

log = logging.getLogger("prmkit.serve")

#: Per trace: its scores (None: not scored) and, when not scored, why.
Result = tuple[list[float | None] | None, str | None]

#: The reason given for a trace without steps, and the prefixes of the reasons for one the scorer
#: refused: too long for ``max_length`` (:func:`unscored_kind`), or anything else; and for one the
#: server would not score (over ``--max-steps`` or ``--max-trace-chars``, ``/get_reward`` only).
NO_STEPS = "no steps"
TOO_LONG = "too long for the model: "
REJECTED = "rejected by the scorer: "
OVER_LIMIT = "over the server's limit: "


class QueueFull(PrmkitError):
    """The queue holds ``max_queued_traces`` already; try again after ``retry_after`` seconds."""

    def __init__(self, queued: int, limit: int, retry_after: int) -> None:
        super().__init__(f"server busy: {queued} traces queued (limit {limit}); retry after {retry_after}s")
        self.retry_after = retry_after


class ShuttingDown(PrmkitError):
    """The server stopped before this request was scored (the server answers 503 + Retry-After)."""


@dataclass(eq=False)
class _Job:
    traces: list[Trace]
    future: asyncio.Future
    results: list[Result | None] = field(default_factory=list)
    #: Set on the event loop when nobody waits for the results any more; read by the scoring thread
    #: between calls (a plain attribute: the GIL makes the read safe).
    dropped: bool = False


class _ScorerThread:
    """The one thread every scorer call runs on. A daemon: the process may exit while a call runs
    (bounded shutdown); ``ThreadPoolExecutor`` threads are joined at interpreter exit, which would
    make the process wait for the call however long it takes."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((future, fn, args))
        return future

    def close(self) -> None:
        """Stop after the call in progress, if any (not waited for)."""
        self._queue.put(None)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # handed to the waiting coroutine, which logs it
                future.set_exception(e)


class DynamicBatcher:
    """Batches the traces of concurrent :meth:`score` calls into single scorer calls (module docs).

    ``max_wait_ms``: how long the worker waits for more requests after the first one arrives;
    ``max_batch_traces``: most traces per batch (a request with more is never split by it: it goes
    alone); ``max_batch_steps``: most steps per scorer call (a batch with more is scored in several
    calls; a trace with more goes alone);
    ``max_queued_traces``: most traces waiting, beyond which :meth:`score` raises
    :class:`QueueFull`. ``metrics`` is updated with batch sizes, traces, steps and what was not scored.
    """

    def __init__(self, scorer: StepScorer, *, max_wait_ms: float = 5.0, max_batch_traces: int = 64,
                 max_batch_steps: int = 2048, max_queued_traces: int = 1024,
                 metrics: Metrics | None = None) -> None:
        self.scorer = scorer
        self.max_wait = max(0.0, max_wait_ms) / 1000.0
        self.max_batch_traces = max(1, max_batch_traces)
        self.max_batch_steps = max(1, max_batch_steps)
        self.max_queued_traces = max(1, max_queued_traces)
        self.metrics = metrics or Metrics()
        self.queued_traces = 0
        self._pending: list[_Job] = []
        self._running: list[_Job] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._loop_ref: asyncio.AbstractEventLoop | None = None
        self._busy = False
        self._worker: _ScorerThread | None = None
        self._abort_at: float | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._wake = asyncio.Event()
        # One thread of its own runs every scorer call. asyncio's shared pool hands back-to-back calls
        # to whichever worker is free, and each thread that drives torch brings its own OpenMP team.
        self._worker = _ScorerThread("prmkit-scorer")
        self._loop_ref = asyncio.get_running_loop()
        self._task = self._loop_ref.create_task(self._loop())

    def drain(self, timeout: float) -> None:
        """Fail what is still waiting ``timeout`` seconds from now with :class:`ShuttingDown`
        (:meth:`abort`). Safe to call from any thread (a signal handler, a test)."""
        loop = self._loop_ref
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._schedule_abort, max(0.0, timeout))

    def _schedule_abort(self, timeout: float) -> None:
        assert self._loop_ref is not None
        at = self._loop_ref.time() + timeout
        if self._abort_at is None or at < self._abort_at:
            self._abort_at = at
            self._loop_ref.call_at(at, self.abort)

    def abort(self, message: str = "server shutting down before this request was scored") -> None:
        """Fail every request still queued or being scored with :class:`ShuttingDown`; the scoring
        thread skips their traces after the call in progress. On the event loop's thread."""
        for job in [*self._pending, *self._running]:
            job.dropped = True
            if not job.future.done():
                job.future.set_exception(ShuttingDown(message))
        self._pending.clear()
        self.queued_traces = 0

    async def stop(self, timeout: float | None = None) -> None:
        """Finish what is queued and in flight (for at most ``timeout`` seconds, or what is left of a
        :meth:`drain`'s), fail the rest (:meth:`abort`), then stop the worker without waiting for a
        scorer call in progress."""
        loop = asyncio.get_running_loop()
        deadline = self._abort_at if self._abort_at is not None else (
            None if timeout is None else loop.time() + timeout)
        while not self.idle and (deadline is None or loop.time() < deadline):
            await asyncio.sleep(0.01)
        self.abort()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    @property
    def idle(self) -> bool:
        return not self._pending and not self._busy

    # -- requests ----------------------------------------------------------------------------------------
    async def score(self, traces: Sequence[Trace]) -> list[Result]:
        """Per trace ``(scores, None)`` or ``(None, reason)``; raises :class:`QueueFull` when the queue
        cannot take ``traces``. Cancelling the call (a timeout) takes its traces off the queue."""
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
        try:
            return await job.future
        except asyncio.CancelledError:
            job.dropped = True
            if job in self._pending:  # not taken yet: its slots are free for others now
                self._pending.remove(job)
                self.queued_traces -= n
            raise

    def _retry_after(self) -> int:
        """Seconds a refused caller should wait: about one batch's worth, at least one."""
        return 1

    async def _loop(self) -> None:
        assert self._wake is not None and self._worker is not None
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
                self._running = live
                try:
                    await asyncio.wrap_future(self._worker.submit(self._score_jobs, live))
                except Exception as e:  # a scorer bug: every waiting request fails, the server goes on
                    log.exception("scorer failed")
                    for j in live:
                        if not j.future.done():
                            j.future.set_exception(e)
                    continue
                finally:
                    self._busy = False
                    self._running = []
                for j in live:
                    if not j.future.done() and not j.dropped:
                        self._account(j.results)
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
        """The traces with steps, in calls of at most ``max_batch_steps`` steps
        (:func:`~prmkit.scoring.score_each`: a trace the scorer refuses costs the others nothing); a
        job dropped meanwhile is skipped from the next call on."""
        for j in jobs:
            j.results = [None if t.steps else (None, NO_STEPS) for t in j.traces]
        todo = [(j, i) for j in jobs for i, t in enumerate(j.traces) if t.steps]
        at = 0
        while at < len(todo):
            call: list[tuple[_Job, int]] = []
            steps = 0
            while at < len(todo):
                j, i = todo[at]
                if j.dropped:
                    at += 1
                    continue
                n = len(j.traces[i].steps)
                if call and steps + n > self.max_batch_steps:
                    break
                call.append((j, i))
                steps += n
                at += 1
            if not call:
                continue
            self.metrics.scorer_calls += 1
            self.metrics.batch_traces.observe(len(call))
            start = time.perf_counter()
            try:
                found = score_each(self.scorer, [j.traces[i] for j, i in call])
            finally:
                self.metrics.scorer_seconds += time.perf_counter() - start
            for (j, i), (s, why) in zip(call, found, strict=True):
                j.results[i] = (s, None if why is None else _reason(why))

    def _account(self, results: Sequence[Result | None]) -> None:
        m = self.metrics
        for r in results:
            if r is None:
                continue
            scores, reason = r
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
    fit), ``over_limit`` (more steps or characters than the server takes, ``--max-steps`` /
    ``--max-trace-chars``) or ``rejected`` (any other refusal, e.g. a step that tokenises to nothing).

    >>> unscored_kind("no steps"), unscored_kind(TOO_LONG + "trace 'q0': not even the first step fits in max_length=512")
    ('no_steps', 'too_long')
    """
    if reason == NO_STEPS:
        return "no_steps"
    if reason and reason.startswith(OVER_LIMIT):
        return "over_limit"
    return "too_long" if reason and reason.startswith(TOO_LONG) else "rejected"


def over_limit(trace: Trace, max_steps: int | None, max_trace_chars: int | None) -> str | None:
    """Why a server with these per-trace limits will not score ``trace`` (the option is named), or
    None; used by the server and by :class:`~prmkit.serve.RemoteScorer` before sending.

    >>> from prmkit.trace import Problem, Step
    >>> over_limit(Trace(id="t", problem=Problem("q"), steps=[Step("a"), Step("b")]), 1, None)
    '2 steps; the limit is 1 steps per trace (--max-steps)'
    """
    n = len(trace.steps)
    if max_steps is not None and n > max_steps:
        return f"{n} steps; the limit is {max_steps} steps per trace (--max-steps)"
    if max_trace_chars is not None:
        chars = len(trace.problem.text) + sum(len(s.text) for s in trace.steps)
        if chars > max_trace_chars:
            return (f"{chars} characters of problem and steps; the limit is {max_trace_chars} per trace "
                    "(--max-trace-chars)")
    return None


def _reason(why: str) -> str:
    # prmkit's length refusals (RewardModel.encode_each) all name max_length; every other refusal
    # names its own cause.
    return (TOO_LONG if "max_length" in why else REJECTED) + why
