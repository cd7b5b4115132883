"""Step-level metrics shared by training-time evaluation and the evaluation reports (AUROC and the
other statistics are in ``_stats.py``)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["f1_score", "first_error_index", "first_error_accuracy"]


def f1_score(tp: int, fp: int, fn: int) -> float | None:
    """F1 of one class from its counts: ``2 tp / (2 tp + fp + fn)``; None when the class is neither
    present nor predicted.

    >>> f1_score(3, 1, 1), f1_score(0, 2, 0), f1_score(0, 0, 0)
    (0.75, 0.0, None)
    """
    denom = 2 * tp + fp + fn
    return 2 * tp / denom if denom else None


def first_error_index(values: Sequence[float | None], threshold: float = 0.5) -> int:
    """Index of the first value below ``threshold`` (None values are skipped), or -1.

    >>> first_error_index([0.9, None, 0.2, 0.1]), first_error_index([0.9, 0.8])
    (2, -1)
    """
    for i, v in enumerate(values):
        if v is not None and v < threshold:
            return i
    return -1


def first_error_accuracy(predicted: Sequence[Sequence[float | None]],
                         targets: Sequence[Sequence[float | None]], threshold: float = 0.5) -> float | None:
    """Fraction of traces whose predicted first error (first score below ``threshold``, or -1 for
    none) equals the labelled one (ProcessBench's criterion).

    >>> first_error_accuracy([[0.9, 0.1], [0.8, 0.7]], [[1, 0], [1, 0]])
    0.5
    """
    if not targets:
        return None
    hits = sum(first_error_index(p, threshold) == first_error_index(t, 0.5)
               for p, t in zip(predicted, targets, strict=True))
    return hits / len(targets)
