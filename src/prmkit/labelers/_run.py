"""Labeling a file: read traces (any format), label them, write prmkit JSONL; resumable.

:func:`label_file` is what ``prmkit label`` runs. Rollouts go to the label store as they complete
(by default ``OUT.labels.sqlite`` next to the output), so rerunning the same command after an
interrupt makes only the rollouts that are missing and writes the same labels an uninterrupted run
would have written. The output is written to a temporary file beside it and renamed to ``OUT`` when
complete (:mod:`prmkit._durable`, which also refuses a second run writing the same ``OUT``): a file
at ``OUT`` is always a finished run.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from prmkit._durable import check_inputs, durable_file
from prmkit._progress import progress_bar
from prmkit.data import ImportReport, count_records, detect_format, read
from prmkit.errors import PrmkitError
from prmkit.labelers._base import RolloutLabeler
from prmkit.labelers._engine import label_stream
from prmkit.labelers._plan import LabelReport
from prmkit.labelers._store import LabelStore
from prmkit.trace import TraceWriter

__all__ = ["label_file", "default_store_path"]


def default_store_path(out: str | os.PathLike) -> Path:
    """Where ``prmkit label`` keeps rollouts for ``out``: ``<out>.labels.sqlite`` beside it."""
    out = Path(out)
    return out.with_name(out.name + ".labels.sqlite")


def label_file(inp: str | os.PathLike, out: str | os.PathLike, labeler: RolloutLabeler, *,
               store: str | os.PathLike | LabelStore | None = None, fmt: str | None = None,
               skip_invalid: bool = False, progress: bool = True, window: int = 64,
               import_report: ImportReport | None = None) -> LabelReport:
    """Label every trace of ``inp`` with ``labeler`` and write them to ``out`` (prmkit JSONL).

    ``store``: the label store (a path or a :class:`~prmkit.labelers.LabelStore`); default
    :func:`default_store_path`, or memory only for a labeler that generates nothing (no channels);
    the report's ``store`` says which. ``fmt``: the input format (detected when None). Traces a
    labeler cannot label (no steps, no reference answer) are written unchanged and listed in the
    report.
    """
    inp, out = Path(inp), Path(out)
    if not inp.exists():
        raise PrmkitError(f"{inp}: no such file")
    if store is None:
        store = default_store_path(out) if labeler.channels else ":memory:"
    store_path = store.path if isinstance(store, LabelStore) else store
    sides = [store_path, f"{out}.skipped.jsonl" if skip_invalid else None]
    check_inputs(out, [inp], sides)
    fmt = fmt or detect_format(inp)
    total = count_records(inp, fmt)
    report = LabelReport(labeler.name)
    own = not isinstance(store, LabelStore)
    created = own and str(store) != ":memory:" and not Path(store).exists()
    try:
        st = store if isinstance(store, LabelStore) else LabelStore(store)
    except sqlite3.Error as e:
        raise _store_error(store, e) from e
    report.store = None if st.path == ":memory:" else st.path
    t0 = time.perf_counter()
    discard_store = False
    try:
        traces = read(inp, fmt, skip_invalid=skip_invalid, report=import_report)
        with durable_file(out, inputs=[inp], side_files=sides) as partial, \
                progress_bar(total, f"labeling ({labeler.name})", enabled=progress,
                             transient=False) as advance, TraceWriter(partial) as w:
            for trace in label_stream(labeler, traces, store=st, report=report, window=window):
                w.write(trace)
                advance(1)
    except BaseException as e:
        # The temporary output is gone; the store keeps the work, and a rerun writes the output...
        # ...unless there is none: a run that failed before storing a rollout (say on a bad input
        # line) leaves no store behind that it created.
        discard_store = created and _holds_nothing(st)
        if isinstance(e, sqlite3.Error):
            raise _store_error(st.path, e) from e
        raise
    finally:
        report.wall_seconds += time.perf_counter() - t0
        if own:
            st.close()
        if discard_store:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{store}{suffix}").unlink(missing_ok=True)
    return report


def _store_error(store: object, e: sqlite3.Error) -> PrmkitError:
    """A label store that cannot be opened or written, in the user's terms."""
    text = " ".join(str(e).split())
    if "full" in text.lower():
        return PrmkitError(f"no space left on device writing the label store {store} (the rollouts "
                           "stored before are kept; free space and rerun to resume)")
    if "readonly" in text.lower() or "read-only" in text.lower() or "unable to open" in text.lower():
        return PrmkitError(f"{store}: the label store cannot be written ({text}); check the file's and its "
                           "folder's permissions, or give another with --store")
    return PrmkitError(f"{store}: label store error ({text})")


def _holds_nothing(store: LabelStore) -> bool:
    try:
        return store.count() == 0
    except Exception:  # a store that cannot even be counted is kept; the original error goes on
        return False
