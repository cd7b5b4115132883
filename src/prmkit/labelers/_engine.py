"""The engine that drives labeling plans: store look-ups, fan-out, commits, labels, accounting.

:func:`label_stream` takes traces one by one, keeps up to ``window`` of them in progress, and yields
them back in input order as their plans finish. For each need of a plan it builds the request, reads
the rollouts the store already holds for it, and submits only the missing ones to the channel's
executor; each result is committed to the store the moment it returns, before any label is computed,
so a run killed at any point loses at most the generations in flight.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

from prmkit.errors import PrmkitError
from prmkit.labelers._executors import Executor
from prmkit.labelers._plan import (
    Channel,
    LabelReport,
    Need,
    Plan,
    PlanResult,
    Rollout,
    cost_of,
    reached_answer,
    request_hash,
)
from prmkit.labelers._store import LabelStore
from prmkit.policies import GenerationRequest, derive_seed
from prmkit.provenance import LabelProvenance, PolicyRef
from prmkit.trace import Trace

__all__ = ["PlanningLabeler", "label_stream", "run_labeler"]


class PlanningLabeler(Protocol):
    """What the engine needs of a labeler (:class:`~prmkit.labelers.RolloutLabeler` is one): plans,
    the channels they draw on, and the executors behind them."""

    name: str
    args: dict[str, Any]
    sources: tuple[str, ...]
    answer_method: str
    channels: dict[str, Channel]

    def start(self) -> Mapping[str, Executor]: ...

    def skip_reason(self, trace: Trace) -> str | None: ...

    def plan(self, trace: Trace) -> Plan | PlanResult: ...

    def request(self, channel: str, trace: Trace, prefix: int) -> GenerationRequest: ...


# -- the engine ------------------------------------------------------------------------------------------

@dataclass
class _Runtime:
    """A started channel: its executor, store run key and request builder."""

    name: str
    channel: Channel
    executor: Any
    run_key: str
    request: Callable[[Trace, int], GenerationRequest]
    queue: deque = field(default_factory=deque)
    inflight: int = 0


@dataclass
class _Task:
    seq: int
    trace: Trace
    plan: Plan | None
    started: bool = False
    needs: list[Need] = field(default_factory=list)
    results: list[list[Rollout] | None] = field(default_factory=list)
    waiting: int = 0
    used: dict[tuple[str, int, int], Rollout] = field(default_factory=dict)
    done: bool = False


@dataclass
class _Submission:
    task: _Task
    slot: int
    need: Need
    request: GenerationRequest
    hash: str
    stored: dict[int, Rollout]
    missing: list[int]


def _run_config(labeler: PlanningLabeler, name: str, ch: Channel) -> dict[str, Any]:
    info = ch.info
    describe = {k: v for k, v in (info.describe if info else {}).items() if k != "device"}
    params = ch.params.to_dict()
    params.pop("n", None)
    return {"channel": ch.kind, "policy": describe, "params": params, "shots": ch.shots,
            "answer_method": labeler.answer_method, **({"config": ch.config} if ch.config else {})}


def _runtimes(labeler: PlanningLabeler, store: LabelStore) -> dict[str, _Runtime]:
    executors = labeler.start()
    out = {}
    for name, ch in labeler.channels.items():
        out[name] = _Runtime(name, ch, executors[name],
                             store.run_key(_run_config(labeler, name, ch)),
                             lambda trace, p, _n=name: labeler.request(_n, trace, p))
    return out


def _finish(labeler: PlanningLabeler, task: _Task, result: PlanResult | None, report: LabelReport,
            skip: str | None) -> None:
    trace = task.trace
    task.done = True
    report.traces += 1
    n = len(trace.steps)
    if skip is not None or result is None:
        report.skipped.append((trace.id, skip or "no result"))
        return
    if len(result.labels) != n:
        raise PrmkitError(f"labeler {labeler.name!r} returned labels for {len(result.labels)} of "
                          f"{n} steps of trace {trace.id}")
    new_pairs = {(lab.labeler, lab.source) for labs in result.labels for lab in labs}
    new_pairs |= {(labeler.name, s) for s in labeler.sources}
    for step, labs in zip(trace.steps, result.labels, strict=True):
        step.labels = [lab for lab in step.labels if (lab.labeler, lab.source) not in new_pairs]
        step.labels.extend(labs)
    used = list(task.used.values())
    by_kind = {"rollout": 0, "judge": 0}
    for (ch, _, _), _r in task.used.items():
        by_kind[labeler.channels[ch].kind] = by_kind.get(labeler.channels[ch].kind, 0) + 1
    cost = cost_of(used)
    summary: dict[str, Any] = {"rollouts": by_kind["rollout"]}
    if by_kind["judge"]:
        summary["judge_calls"] = by_kind["judge"]
    summary.update(cost)
    summary.update(result.notes)
    trace.meta.setdefault("labeling", {})[labeler.name] = summary
    trace.add_provenance(LabelProvenance(labeler.name, args=dict(labeler.args), policies={
        ch: PolicyRef.from_dict(c.info.describe) if c.info else None for ch, c in labeler.channels.items()}))
    report.labelled += 1
    report.steps += n
    report.unlabelled_steps += sum(1 for labs in result.labels if not labs)
    for labs in result.labels:
        for lab in labs:
            report.labels[lab.source] += 1
    report.rollouts += by_kind["rollout"]
    report.judge_calls += by_kind["judge"]
    report.reused += sum(1 for r in used if not r.fresh)
    report.tokens += int(cost["tokens"])
    report.seconds += cost["seconds"]
    report.counts.update(result.counts)
    report.issues.extend(f"{trace.id}: {i}" for i in result.issues)


def _warn_unreproducible(runtimes: dict[str, _Runtime], store: LabelStore, report: LabelReport) -> None:
    """A resumed run equals an uninterrupted one only if the policy gives a request the same
    completions whatever came before; say so where a backend cannot promise it."""
    stored = {r["run_key"]: r["rollouts"] for r in store.runs()}
    for rt in runtimes.values():
        info = rt.channel.info
        if info is not None and info.reproducible is False and stored.get(rt.run_key):
            report.issues.append(
                f"resuming with policy {info.name!r} ({rt.channel.kind}), which cannot promise the same "
                f"completions for the same request: the rollouts made now may differ from those an "
                f"uninterrupted run would have made (reproducible: hf, torch, ct2 with "
                f"batch_invariant=true, scripted)")


def label_stream(labeler: PlanningLabeler, traces: Iterable[Trace], *, store: LabelStore,
                 report: LabelReport, window: int = 64) -> Iterator[Trace]:
    """Label ``traces`` (in place) and yield each back, in input order, once its plan is done.

    Up to ``window`` traces are in progress at once (their needs in flight together, within each
    executor's capacity).
    """
    if window < 1:
        raise PrmkitError(f"window must be >= 1, got {window}")
    runtimes = _runtimes(labeler, store)
    _warn_unreproducible(runtimes, store, report)
    it = iter(traces)
    exhausted = False
    order: deque[_Task] = deque()   # admitted, not yet yielded, in input order
    ready: deque[tuple[_Task, Any]] = deque()
    inflight: dict[Future, _Submission] = {}
    seq = 0

    def admit() -> None:
        nonlocal exhausted, seq
        while not exhausted and len(order) < window:
            try:
                trace = next(it)
            except StopIteration:
                exhausted = True
                return
            task = _Task(seq, trace, None)
            seq += 1
            order.append(task)
            skip = labeler.skip_reason(trace)
            if skip is not None:
                _finish(labeler, task, None, report, skip)
                continue
            plan = labeler.plan(trace)
            if isinstance(plan, PlanResult):  # a labeler that needs no rollouts
                _finish(labeler, task, plan, report, None)
                continue
            task.plan = plan
            ready.append((task, None))

    def advance(task: _Task, value: Any) -> None:
        assert task.plan is not None
        while True:
            try:
                needs = task.plan.send(value) if task.started else next(task.plan)
                task.started = True
            except StopIteration as stop:
                _finish(labeler, task, stop.value, report, None)
                return
            if needs:
                break
            value = []
        task.needs = list(needs)
        task.results = [None] * len(needs)
        task.waiting = 0
        answer = task.trace.problem.answer
        for j, need in enumerate(task.needs):
            if need.channel not in runtimes:
                raise PrmkitError(f"labeler {labeler.name!r} asked for unknown channel {need.channel!r}")
            if not need.indices:
                task.results[j] = []
                continue
            rt = runtimes[need.channel]
            req = rt.request(task.trace, need.prefix)
            h = request_hash(req, answer)
            stored = store.get(rt.run_key, task.trace.id, need.prefix, request_hash=h)
            missing = [i for i in need.indices if i not in stored]
            if missing:
                task.waiting += 1
                rt.queue.append(_Submission(task, j, need, req, h, stored, missing))
            else:
                _deliver(task, j, need, stored)
        if task.waiting == 0:
            ready.append((task, task.results))

    def _deliver(task: _Task, j: int, need: Need, stored: dict[int, Rollout]) -> None:
        rs = [stored[i] for i in need.indices]
        for r in rs:
            task.used.setdefault((need.channel, need.prefix, r.index), r)
        task.results[j] = rs

    def submit() -> None:
        for rt in runtimes.values():
            while rt.queue and rt.inflight < rt.executor.capacity:
                sub = rt.queue.popleft()
                n = max(sub.missing) + 1
                params = dataclasses.replace(rt.channel.params, n=n)
                fut = rt.executor.submit(sub.request, params)
                rt.inflight += 1
                inflight[fut] = sub

    def complete(fut: Future) -> None:
        sub = inflight.pop(fut)
        rt = runtimes[sub.need.channel]
        rt.inflight -= 1
        comps, seconds = fut.result()
        per = seconds / max(1, len(comps))
        params = rt.channel.params
        answer = sub.task.trace.problem.answer
        new = []
        for i in sub.missing:
            c = comps[i]
            reached = (reached_answer(sub.request.prefix, c.text, answer, method=labeler.answer_method)
                       if rt.channel.kind == "rollout" else None)
            new.append(Rollout(sub.task.trace.id, sub.need.prefix, i,
                               derive_seed(params.seed, sub.request.key, i), c.text,
                               tokens=int(c.num_tokens), prompt_tokens=int(c.prompt_tokens),
                               seconds=per, reached=reached, finish_reason=c.finish_reason,
                               request_hash=sub.hash, fresh=True))
        store.add(rt.run_key, new)  # committed before anything is computed from it
        report.generated += len(new)
        report.wasted += len(comps) - len(new)
        sub.stored.update({r.index: r for r in new})
        task = sub.task
        _deliver(task, sub.slot, sub.need, sub.stored)
        task.waiting -= 1
        if task.waiting == 0:
            ready.append((task, task.results))

    try:
        admit()
        while order:
            while ready:
                task, value = ready.popleft()
                advance(task, value)
            while order and order[0].done:
                yield order.popleft().trace
                admit()
            if ready:
                continue
            submit()
            for rt in runtimes.values():
                rt.executor.flush()
            if inflight:
                done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                for fut in done:
                    complete(fut)
            elif order and not ready and not order[0].done:
                raise PrmkitError(f"labeler {labeler.name!r}: trace {order[0].trace.id} is waiting "
                                  "for rollouts that were never requested")
    finally:
        for fut in inflight:
            fut.cancel()


def run_labeler(labeler: PlanningLabeler, traces: list[Trace], *,
                store: LabelStore | str | os.PathLike | None = None, progress: bool = False,
                report: LabelReport | None = None, window: int = 64) -> LabelReport:
    """Label ``traces`` in place with ``labeler`` (what
    :meth:`~prmkit.labelers.RolloutLabeler.label` runs)."""
    from prmkit._progress import progress_bar

    report = report or LabelReport(labeler.name)
    own = not isinstance(store, LabelStore)
    st = store if isinstance(store, LabelStore) else LabelStore(store or ":memory:")
    t0 = time.perf_counter()
    try:
        with progress_bar(len(traces), f"labeling ({labeler.name})", enabled=progress) as advance:
            for _ in label_stream(labeler, traces, store=st, report=report, window=window):
                advance(1)
    finally:
        report.wall_seconds += time.perf_counter() - t0
        if own:
            st.close()
    return report
