"""A simulated annotator: takes traces from the queue as a person would and answers with a label the
traces already carry (the symbolic checker's on ``arith``, say), optionally wrong at a set rate.

It is what an active-learning comparison needs (the same annotator under every strategy, labels spent
counted step by step) and a way to try the whole loop (queue, label, export, train) without a person.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from prmkit._result import Record
from prmkit.annotate._store import Store
from prmkit.errors import PrmkitError
from prmkit.trace import binarize

__all__ = ["SimulationResult", "simulate"]


@dataclass
class SimulationResult(Record):
    """What :func:`simulate` did: traces finished, step labels given, traces flagged (no label to copy)."""

    kind = "annotate_simulation"
    annotator: str = ""
    source: str | None = None
    traces: int = 0
    labels: int = 0
    flipped: int = 0
    flagged: int = 0
    extra: dict = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"{self.annotator} (answering with {self.source or 'each step’s latest'} labels) finished "
                f"{self.traces} traces with {self.labels} step labels ({self.flipped} made wrong on purpose); "
                f"{self.flagged} flagged for want of a label"]


def simulate(db: str | os.PathLike, annotator: str = "simulated", *, source: str | None = None,
             budget: int | None = None, error_rate: float = 0.0, stop_at_first_wrong: bool = False,
             seed: int = 0, seconds: float = 0.0) -> SimulationResult:
    """Label ``db``'s queue as ``annotator`` (added when missing) with each step's ``source`` label
    (hard labels as they are, soft ones binarized to -1 / +1), until the queue is empty or ``budget``
    step labels are spent (a trace the budget cut short is taken up again by the next call, from its
    first unrated step). ``error_rate``: the chance a label is replaced by another value (drawn
    with ``seed``). A trace with a step that has no such label is flagged ``unclear`` and left."""
    if not 0.0 <= error_rate <= 1.0:
        raise PrmkitError(f"--error-rate is a fraction in [0, 1], got {error_rate}")
    if budget is not None and budget < 1:
        raise PrmkitError(f"--budget must be >= 1, got {budget}")
    if not os.path.exists(db):
        raise PrmkitError(f"{db}: no such labeling database")
    store = Store(db)
    user = store.user_by_name(annotator) or store.add_user(annotator)[0]
    rng = random.Random(seed)
    out = SimulationResult(annotator=annotator, source=source)
    while budget is None or out.labels < budget:
        item_id = store.next_item(user)
        if item_id is None:
            break
        trace = store.item(item_id).trace
        answers = []
        for step in trace.steps:
            lab = step.label(source)
            if lab is None:
                answers.append(None)
            else:
                answers.append((1 if binarize(lab) else -1) if lab.kind == "soft" else int(lab.value))
        if None in answers:
            store.finish(user, item_id, flag="unclear", note=f"no {source or 'label'} to copy on a step")
            out.flagged += 1
            continue
        # a trace left part-way (the budget ran out there) goes on where it stopped: a step already
        # rated is neither rated nor counted again
        rated = {r.step: r.value for r in store.ratings(item_id, user)}
        if stop_at_first_wrong and -1 in rated.values():
            store.finish(user, item_id)
            out.traces += 1
            continue
        for i, value in enumerate(answers):
            if i in rated:
                continue
            if budget is not None and out.labels >= budget:
                return out
            if error_rate and rng.random() < error_rate:
                value = rng.choice([v for v in (-1, 0, 1) if v != value])
                out.flipped += 1
            store.rate(user, item_id, i, value, seconds=seconds)
            out.labels += 1
            if stop_at_first_wrong and value == -1:
                break
        store.finish(user, item_id)
        out.traces += 1
    return out
