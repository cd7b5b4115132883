"""Evaluation: pass@k, and (as they land) ProcessBench, PRMBench, best-of-N curves, probes."""

from prmkit.eval._passk import pass_at_k, pass_at_k_traces

__all__ = ["pass_at_k", "pass_at_k_traces"]
