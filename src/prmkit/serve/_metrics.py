"""The server's counters, in Prometheus text exposition format (version 0.0.4) for ``GET /metrics``.

A dozen counters and two histograms do not need a client library: the text format is a few lines per
series (https://prometheus.io/docs/instrumenting/exposition_formats/). Updated from the event loop
only (the scoring thread reports back through it), so no lock is needed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["Metrics", "Histogram"]

#: Request latency buckets, seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Traces per scorer call (dynamic batch size) buckets.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Histogram:
    """Cumulative buckets, a sum and a count, as Prometheus histograms are exposed."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * len(self.buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, b in enumerate(self.buckets):
            if value <= b:
                self.counts[i] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out = [f'{name}_bucket{{{labels}{sep}le="{_num(b)}"}} {c}' for b, c in zip(self.buckets, self.counts,
                                                                                   strict=True)]
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}')
        tail = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{tail} {self.sum:.6g}", f"{name}_count{tail} {self.count}"]
        return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


class Metrics:
    """What the server did: requests by endpoint and status, traces and steps scored, traces it
    could not score by reason, dynamic batch sizes, request latency; the scorer's token counts
    (computed vs reused by the prefix cache) are read from its ``stats`` when it has them."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()
        self.traces = 0
        self.steps = 0
        self.unscored: Counter[str] = Counter()
        self.scorer_calls = 0
        self.batch_traces = Histogram(BATCH_BUCKETS)
        self.latency: dict[str, Histogram] = {}
        self.rejected_full = 0
        #: Seconds spent inside scorer calls: over wall time, how busy the model was.
        self.scorer_seconds = 0.0

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests[(endpoint, status)] += 1
        self.latency.setdefault(endpoint, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def render(self, scorer: Any, queued_traces: int) -> str:
        """The exposition text."""
        lines = ["# HELP prmkit_requests_total HTTP requests by endpoint and status.",
                 "# TYPE prmkit_requests_total counter"]
        for (ep, status), n in sorted(self.requests.items()):
            lines.append(f'prmkit_requests_total{{endpoint="{ep}",status="{status}"}} {n}')
        lines += ["# HELP prmkit_traces_total Traces scored.", "# TYPE prmkit_traces_total counter",
                  f"prmkit_traces_total {self.traces}",
                  "# HELP prmkit_steps_total Steps scored.", "# TYPE prmkit_steps_total counter",
                  f"prmkit_steps_total {self.steps}",
                  "# HELP prmkit_unscored_total Traces not scored, by reason.",
                  "# TYPE prmkit_unscored_total counter"]
        for reason, n in sorted(self.unscored.items()):
            lines.append(f'prmkit_unscored_total{{reason="{reason}"}} {n}')
        lines += ["# HELP prmkit_queue_full_total Requests refused with 503 because the queue was full.",
                  "# TYPE prmkit_queue_full_total counter", f"prmkit_queue_full_total {self.rejected_full}",
                  "# HELP prmkit_queued_traces Traces waiting for the scorer.",
                  "# TYPE prmkit_queued_traces gauge", f"prmkit_queued_traces {queued_traces}",
                  "# HELP prmkit_scorer_calls_total Scorer calls (one per dynamic batch).",
                  "# TYPE prmkit_scorer_calls_total counter", f"prmkit_scorer_calls_total {self.scorer_calls}",
                  "# HELP prmkit_scorer_seconds_total Seconds inside scorer calls (busy time of the model).",
                  "# TYPE prmkit_scorer_seconds_total counter",
                  f"prmkit_scorer_seconds_total {self.scorer_seconds:.6g}",
                  "# HELP prmkit_batch_traces Traces per scorer call (dynamic batch size).",
                  "# TYPE prmkit_batch_traces histogram", *self.batch_traces.lines("prmkit_batch_traces")]
        stats = getattr(scorer, "stats", None)
        if stats is not None and hasattr(stats, "to_dict"):
            d = stats.to_dict()
            for key in ("tokens_requested", "tokens_computed", "tokens_reused", "forward_passes"):
                if key in d:
                    lines += [f"# HELP prmkit_{key}_total Scorer {key.replace('_', ' ')}.",
                              f"# TYPE prmkit_{key}_total counter", f"prmkit_{key}_total {d[key]}"]
        lines += ["# HELP prmkit_request_seconds Request latency by endpoint.",
                  "# TYPE prmkit_request_seconds histogram"]
        for ep, h in sorted(self.latency.items()):
            lines += h.lines("prmkit_request_seconds", f'endpoint="{ep}"')
        return "\n".join(lines) + "\n"
