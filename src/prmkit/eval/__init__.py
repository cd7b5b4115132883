"""Evaluation: pass@k, step metrics, and (as they land) ProcessBench, PRMBench, best-of-N curves, probes."""

from prmkit.eval._metrics import auroc, first_error_accuracy, first_error_index
from prmkit.eval._passk import pass_at_k, pass_at_k_traces

__all__ = ["auroc", "first_error_accuracy", "first_error_index", "pass_at_k", "pass_at_k_traces"]
