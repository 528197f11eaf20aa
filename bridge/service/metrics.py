"""What the bridge service counts: requests by outcome, and how long answering took.

Outcomes come from a fixed vocabulary, never from a request, so a client cannot grow the label
set. See docs/operations.md, Metrics.
"""

from __future__ import annotations

from typing import get_args

from prometheus_client import Counter, Histogram

from bridge.metrics import bounded
from bridge.service.schema import ErrorType

#: Every way a request entry is settled.
OUTCOMES = frozenset({"selection", "duplicate", "dead_letter", "deleted", *get_args(ErrorType)})

_REQUESTS = Counter(
    "airlock_bridge_requests_total",
    "Request entries settled by the bridge service, by outcome.",
    ["outcome"],
)
_SECONDS = Histogram(
    "airlock_bridge_request_seconds",
    "Seconds from reading a request entry to publishing its answer.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)


def record(outcome: str, seconds: float | None = None) -> None:
    _REQUESTS.labels(outcome=bounded(outcome, OUTCOMES)).inc()
    if seconds is not None:
        _SECONDS.observe(seconds)
