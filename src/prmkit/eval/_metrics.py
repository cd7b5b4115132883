"""Step-level metrics shared by training-time evaluation and the evaluation reports."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["auroc", "f1_score", "first_error_index", "first_error_accuracy"]


def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the probability that a random positive outscores a random negative
    (ties count half). None when one class is absent.

    >>> auroc([0.9, 0.8, 0.3, 0.1], [True, False, True, False])
    0.75
    >>> auroc([0.5, 0.5], [True, False]), auroc([0.2], [True])
    (0.5, None)
    """
    pairs = sorted(zip(scores, positives, strict=True), key=lambda p: p[0])
    n_pos = sum(1 for _, p in pairs if p)
    n_neg = len(pairs) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    # Mann-Whitney U with average ranks for ties.
    rank_sum = 0.0
    i = 0
    while i < len(pairs):
        j = i
        while j + 1 < len(pairs) and pairs[j + 1][0] == pairs[i][0]:
            j += 1
        avg_rank = (i + j) / 2 + 1
        rank_sum += avg_rank * sum(1 for k in range(i, j + 1) if pairs[k][1])
        i = j + 1
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


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
