"""The Prometheus endpoint every airlock process serves, and the queue depth it reports.

Shared by the workers and the bridge service (which must not import the worker); each process
defines its own counters on top. Metric names: docs/operations.md (Metrics).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from redis import RedisError

from bridge.queue.jobs import QUEUES
from bridge.redis_client import redis_client

_log = logging.getLogger(__name__)

METRICS_PORT_VARIABLE = "AIRLOCK_METRICS_PORT"
METRICS_HOST_VARIABLE = "AIRLOCK_METRICS_HOST"
#: Loopback unless told otherwise: a metrics page names queues and rejection counts, and a
#: host's other interfaces are not the operator's to open by default (the image, whose
#: scraper is in another container, sets 0.0.0.0).
DEFAULT_METRICS_HOST = "127.0.0.1"
#: What a label value becomes when it is not one of the values the label is declared with.
OTHER = "other"
#: A scrape must answer even when Redis does not: every Redis call of a scrape gets this long.
_QUEUE_DEPTH_TIMEOUT_SECONDS = 1.0
_MAX_PORT = 65535


def metrics_port(env: Mapping[str, str], default: int) -> int:
    """``AIRLOCK_METRICS_PORT``, or ``default`` when unset; 0 means no endpoint.

    Raises :class:`ValueError` naming the variable for anything that is not a port.
    """
    raw = env.get(METRICS_PORT_VARIABLE, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) > _MAX_PORT:
        raise ValueError(f"{METRICS_PORT_VARIABLE}={raw!r} must be a port number, or 0 to disable")
    return int(raw)


def metrics_host(env: Mapping[str, str]) -> str:
    """``AIRLOCK_METRICS_HOST`` (an IP address to listen on), or loopback when unset.

    Raises :class:`ValueError` naming the variable for anything that is not an address.
    """
    raw = env.get(METRICS_HOST_VARIABLE, "").strip() or DEFAULT_METRICS_HOST
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        raise ValueError(
            f"{METRICS_HOST_VARIABLE}={raw!r} must be an IP address to listen on "
            "(127.0.0.1, 0.0.0.0, ::)"
        ) from None


def bounded(value: str, known: Iterable[str]) -> str:
    """``value`` if it is one of ``known``, else :data:`OTHER`.

    Every label value becomes a time series of its own; a value taken from a message (a
    forged kind, an unexpected error type) must not be able to create them without bound.
    """
    return value if value in known else OTHER


class QueueDepthCollector(Collector):
    """``airlock_queue_depth{queue}``: jobs waiting in each extraction queue, read at scrape time.

    Celery's Redis transport keeps a queue as a list named after it, so the depth is its
    ``LLEN`` (what KEDA reads too); jobs being run are not in the list. When Redis does not
    answer within a second the gauge is left out of that scrape, rather than reported as 0,
    which an autoscaler would act on, and ``airlock_queue_depth_errors_total`` counts the miss.
    """

    def __init__(self, redis_url: str, queues: Iterable[str] = QUEUES) -> None:
        self._queues = tuple(queues)
        self._redis = redis_client(redis_url, timeout=_QUEUE_DEPTH_TIMEOUT_SECONDS)
        self._errors = 0
        self._lock = threading.Lock()  # scrapes are served on concurrent threads

    def _families(self) -> tuple[GaugeMetricFamily, CounterMetricFamily]:
        depth = GaugeMetricFamily(
            "airlock_queue_depth", "Jobs waiting in an extraction queue.", labels=["queue"]
        )
        errors = CounterMetricFamily(
            "airlock_queue_depth_errors",
            "Scrapes that could not read the queue depth from Redis.",
        )
        return depth, errors

    def describe(self) -> Iterator[Metric]:
        # Lets a registry learn the names without a Redis round trip at registration.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        depth, errors = self._families()
        try:
            with self._redis.pipeline(transaction=False) as pipe:
                for queue in self._queues:
                    pipe.llen(queue)
                lengths = pipe.execute()
        except RedisError:
            with self._lock:
                self._errors += 1
        else:
            for queue, length in zip(self._queues, lengths, strict=True):
                depth.add_metric([queue], float(length))
            yield depth
        with self._lock:
            errors.add_metric([], float(self._errors))
        yield errors

    def close(self) -> None:
        self._redis.close()


@dataclass(frozen=True)
class MetricsEndpoint:
    """A running ``/metrics`` HTTP server; :meth:`close` stops it and frees the port."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def start_endpoint(
    port: int,
    *collectors: Collector,
    multiprocess_dir: str | None = None,
    addr: str = DEFAULT_METRICS_HOST,
) -> MetricsEndpoint:
    """Serve this process's metrics, plus ``collectors``, on ``port`` from a daemon thread.

    With ``multiprocess_dir`` the served values are those every process writes there
    (prometheus_client's multiprocess mode, for a prefork pool); without it, this process's
    own default registry. Raises :class:`OSError` when the port cannot be bound.
    """
    registry = CollectorRegistry()
    if multiprocess_dir is None:
        registry.register(REGISTRY)
    else:
        MultiProcessCollector(registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
    for collector in collectors:
        registry.register(collector)
    server, thread = start_http_server(port, addr=addr, registry=registry)
    return MetricsEndpoint(server, thread)


def serve_metrics(
    port: int,
    *collectors: Collector,
    multiprocess_dir: str | None = None,
    addr: str = DEFAULT_METRICS_HOST,
) -> MetricsEndpoint | None:
    """:func:`start_endpoint`, or None with the failure logged when ``port`` cannot be bound.

    Extraction is the service: a taken port (a worker and the bridge on one host both
    defaulted to 9808, and the bridge exited) costs the metrics, not the process. The log
    line names the address and the variables that move it, since the operator who reads it
    has to pick another port.
    """
    try:
        endpoint = start_endpoint(port, *collectors, multiprocess_dir=multiprocess_dir, addr=addr)
    except OSError as exc:
        _log.error(
            "metrics endpoint not started on %s port %d: %s; set %s to a free port (0: no "
            "endpoint) or %s to another address",
            addr,
            port,
            exc.strerror or exc,
            METRICS_PORT_VARIABLE,
            METRICS_HOST_VARIABLE,
        )
        return None
    _log.info("metrics served on %s port %d", addr, endpoint.port)
    return endpoint
