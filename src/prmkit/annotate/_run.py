"""The file-level entry points of ``prmkit annotate``: serve, add a user, queue, summarize, export."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from prmkit._durable import check_inputs
from prmkit._net import is_loopback
from prmkit._result import Record
from prmkit.annotate._app import AppConfig, create_app
from prmkit.annotate._store import Store
from prmkit.annotate._strategies import build_queue
from prmkit.annotate._summary import AnnotationSummary, summarize
from prmkit.errors import MissingDependencyError, PrmkitError
from prmkit.trace import Trace, read_traces

__all__ = ["serve", "add_user", "queue_file", "QueueResult", "summary_of", "is_loopback", "check_bind",
           "load_traces", "make_app"]

log = logging.getLogger("prmkit.annotate")


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback ``host`` unless ``allow_remote``: the app serves plain HTTP, and a token
    sent over it can be read on the way."""
    if not is_loopback(host) and not allow_remote:
        raise PrmkitError(f"refusing to serve on {host}: only this machine can reach 127.0.0.1; to let "
                          "others in, pass --allow-remote (and put HTTPS in front: tokens and ratings "
                          "travel in clear over plain HTTP)")


def _open(db: str | os.PathLike, *, create: bool) -> Store:
    if not create and not os.path.exists(db):
        raise PrmkitError(f"{db}: no such labeling database (prmkit annotate add-user NAME --db {db} makes one)")
    return Store(db)


def load_traces(path: str | os.PathLike) -> list[Trace]:
    """The traces of a prmkit JSONL file (a malformed line is an error naming file, line and field)."""
    if not os.path.exists(path):
        raise PrmkitError(f"{path}: no such file")
    traces = list(read_traces(path))
    for t in traces:
        if not t.steps:
            raise PrmkitError(f"{path}: trace {t.id} has no steps to label")
    return traces


def add_user(db: str | os.PathLike, name: str, *, admin: bool = False) -> str:
    """Add an annotator to ``db`` (made when missing); returns their token (shown once: only its hash
    is stored)."""
    return _open(db, create=True).add_user(name, admin=admin)[1]


@dataclass
class QueueResult(Record):
    """What :func:`queue_file` queued: the strategy, traces read, queued, double-labelled."""

    kind = "annotate_queue"
    strategy: str = ""
    traces: int = 0
    queued: int = 0
    double: int = 0
    already_labelled: int = 0
    extra: dict = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"queued {self.queued} of {self.traces} traces by {self.strategy} ({self.double} for two "
                f"annotators; {self.already_labelled} of them labelled already)"]


def queue_file(path: str | os.PathLike, db: str | os.PathLike, *, strategy: str = "random",
               per_problem_cap: int | None = None, overlap: float = 0.0, limit: int | None = None,
               seed: int = 0, score_key: str | None = None, aggregate: str = "min",
               against: str | None = None) -> QueueResult:
    """Store the (scored) traces of ``path`` in ``db`` and replace its queue with their order under
    ``strategy`` (:func:`~prmkit.annotate.build_queue`). Ratings already made are kept: after
    retraining the PRM, score the traces again and queue them again."""
    traces = load_traces(path)
    entries = build_queue(traces, strategy, per_problem_cap=per_problem_cap, overlap=overlap, limit=limit,
                          seed=seed, key=score_key, aggregate=aggregate, against=against)
    store = _open(db, create=True)
    ids = store.add_traces(traces)
    args: dict[str, Any] = {"path": os.path.basename(os.fspath(path)), "per_problem_cap": per_problem_cap,
                            "overlap": overlap, "limit": limit, "seed": seed, "score_key": score_key,
                            "aggregate": aggregate, "against": against}
    store.set_queue([(ids[e.index], e.copies, e.priority) for e in entries], strategy=strategy,
                    args={k: v for k, v in args.items() if v is not None})
    rated = {r.item_id for r in store.ratings()}
    return QueueResult(strategy=strategy, traces=len(traces), queued=len(entries),
                       double=sum(e.copies > 1 for e in entries),
                       already_labelled=sum(ids[e.index] in rated for e in entries))


def summary_of(db: str | os.PathLike, *, results: str | os.PathLike | None = None) -> AnnotationSummary:
    """Progress, agreement and cost of the labeling database ``db``; with ``results``, also written
    there as the report's ``annotation`` section (a JSON results file: ``prmkit report FILE ...``
    renders it as "Human labels: agreement and cost", beside the other sections)."""
    summary = summarize(_open(db, create=False))
    if results is not None:
        from prmkit.eval import save_section

        check_inputs(results, [db])
        save_section("annotation", {"db": os.path.basename(os.fspath(db)), **summary.to_dict()}, results)
    return summary


def make_app(traces: str | os.PathLike | None, db: str | os.PathLike, *, show_answer: bool = False) -> Any:
    """The app over ``db``, with the traces of ``traces`` stored first; they are queued in file order
    when the database has no queue yet (``prmkit annotate queue`` orders it by a strategy)."""
    loaded = load_traces(traces) if traces is not None else None  # a bad file touches no database
    store = _open(db, create=True)
    if loaded is not None:
        ids = store.add_traces(loaded)
        if not store.queue():
            store.set_queue([(i, 1, None) for i in ids], strategy="file order",
                            args={"path": os.path.basename(os.fspath(traces))})
    if not store.users():
        log.warning("%s has no users yet: add one with prmkit annotate add-user NAME --db %s", db, db)
    return create_app(store, AppConfig(show_answer=show_answer))


def serve(traces: str | os.PathLike | None, db: str | os.PathLike, *, host: str = "127.0.0.1", port: int = 8765,
          allow_remote: bool = False, show_answer: bool = False, log_level: str = "info") -> None:
    """Serve the labeling app until interrupted (refuses a non-loopback ``host`` without
    ``allow_remote``)."""
    check_bind(host, allow_remote)
    if not 0 <= port <= 65535:
        raise PrmkitError(f"--port must be between 0 and 65535 (0: any free port), got {port}")
    try:
        import uvicorn
    except ImportError:
        raise MissingDependencyError("uvicorn", "annotate", "prmkit annotate serve") from None
    app = make_app(traces, db, show_answer=show_answer)
    log.info("labeling app on http://%s:%d (log in with a token from prmkit annotate add-user)", host, port)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
