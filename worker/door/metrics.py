"""The door's own Prometheus metrics, served at ``/metrics`` on the door's port."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class DoorMetrics:
    """A registry of its own: two doors in one test process must not share counters."""

    def __init__(self) -> None:
        self._registry = CollectorRegistry()
        self._requests = Counter(
            "airlock_http_requests",
            "HTTP requests answered, by route and status.",
            ["route", "status"],
            registry=self._registry,
        )
        self._seconds = Histogram(
            "airlock_http_request_seconds",
            "Time to answer a request, by route.",
            ["route"],
            buckets=_SECONDS_BUCKETS,
            registry=self._registry,
        )
        self._in_flight = Gauge(
            "airlock_http_jobs_in_flight",
            "Jobs queued or running in this door.",
            registry=self._registry,
        )

        self._held = Gauge(
            "airlock_http_held_bytes",
            "Upload bytes held in memory: bodies arriving and jobs queued or running "
            "(bounded by AIRLOCK_HTTP_MAX_HELD_MB).",
            registry=self._registry,
        )

    def observe(self, route: str, status: int, seconds: float) -> None:
        """``route`` is a name from the app's own route table, never from a request: the
        label's values are bounded by that table."""
        self._requests.labels(route, str(status)).inc()
        self._seconds.labels(route).observe(seconds)

    def exposition(self, in_flight: int, held_bytes: int) -> tuple[bytes, str]:
        self._in_flight.set(in_flight)
        self._held.set(held_bytes)
        return generate_latest(self._registry), CONTENT_TYPE_LATEST
