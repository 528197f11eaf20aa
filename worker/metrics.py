"""What a worker measures, and how its pool processes' measurements reach one endpoint.

Pool processes write their values to files (prometheus_client's multiprocess mode) that the main
process sums at scrape time; every label takes values from a fixed set. See docs/operations.md
(Metrics).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from celery import signals
from prometheus_client import Counter, Histogram, multiprocess, values

from bridge.knowledge.attachments import EXTRACTABLE_KINDS, TextExtractor
from bridge.knowledge.failures import PAYLOAD_UNAVAILABLE, WORKER_LOST, Failure
from bridge.knowledge.labels import safe_label
from bridge.metrics import MetricsEndpoint, QueueDepthCollector, bounded, serve_metrics
from sandbox.errors import ALL_ERRORS
from worker.config import Settings

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


#: Failure types a worker answers with; any other (a parser's own) is counted as ``other``.
_FAILURE_TYPES = frozenset(
    {cls.reported_as for cls in ALL_ERRORS} | {PAYLOAD_UNAVAILABLE, WORKER_LOST}
)
#: Failures that mean the sandbox stopped the job at one of its limits, by the cause's label.
_KILL_CAUSES = {cls.reported_as: cls.kill_cause for cls in ALL_ERRORS if cls.kill_cause is not None}
# Light jobs take milliseconds, OCR seconds per page, up to the 120 s default wall clock.
_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class TaskOutcome(StrEnum):
    """How one delivery of the extract task ended."""

    ADMITTED = "admitted"
    REJECTED = "rejected"  # a guard refused the file (IngestionRejected)
    FAILED = "failed"  # the parser, the sandbox or the payload store lost (ExtractionFailed)
    HANDED_ON = "handed_on"  # replaced by the same job on the OCR queue
    FANNED_OUT = "fanned_out"  # its pages published to the OCR queue, to answer in its place
    OVER_DELIVERED = "over_delivered"  # answered as WorkerLost instead of being run again
    WITHDRAWN = "withdrawn"  # its caller withdrew it: stopped, or never started, unanswered


@dataclass(frozen=True)
class TaskReport:
    """What one delivery did, for the metrics and the log line: never payload or text."""

    request_id: str
    label: str
    sha256: str
    kind: str
    stage: str
    outcome: TaskOutcome
    seconds: float
    deliveries: int
    payload_bytes: int = 0
    #: What the delivery answered instead of text, if it did.
    failure: Failure | None = None

    @property
    def reason_class(self) -> str | None:
        """``IngestionRejected``, or ``ExtractionFailed:<code>`` for a typed failure."""
        if self.failure is None:
            return None
        if self.failure.code == self.failure.error:
            return self.failure.error
        return f"{self.failure.error}:{bounded(self.failure.code, _FAILURE_TYPES)}"

    @property
    def kill_cause(self) -> str | None:
        return None if self.failure is None else _KILL_CAUSES.get(self.failure.code)

    def log_fields(self) -> dict[str, object]:
        """The ``extra`` of the task's log line (the fields ``bridge.logs`` writes)."""
        return {
            "request_id": self.request_id,
            "label": safe_label(self.label),
            "sha256": self.sha256,
            "kind": bounded(self.kind, EXTRACTABLE_KINDS),
            "stage": self.stage,
            "outcome": self.outcome.value,
            "reason_class": self.reason_class,
            "duration_seconds": round(self.seconds, 6),
            "deliveries": self.deliveries,
        }


@dataclass(frozen=True)
class _WorkerMetrics:
    tasks: Counter
    rejections: Counter
    kills: Counter
    extraction_seconds: Histogram
    ocr_pages: Counter
    payload_bytes: Counter
    cache_refused: Counter


@functools.cache
def _metrics() -> _WorkerMetrics:
    # Created on first use, in the pool process: a value made before the worker chose its
    # multiprocess directory would be kept in this process's memory, where no scrape sees it.
    return _WorkerMetrics(
        tasks=Counter(
            "airlock_tasks", "Extract task deliveries by kind and outcome.", ["kind", "outcome"]
        ),
        rejections=Counter(
            "airlock_rejections", "Jobs answered with an error, by class.", ["reason_class"]
        ),
        kills=Counter(
            "airlock_sandbox_kills", "Jobs the sandbox stopped at a limit, by cause.", ["cause"]
        ),
        extraction_seconds=Histogram(
            "airlock_extraction_seconds",
            "Time one job spent in the sandbox.",
            ["kind"],
            buckets=_SECONDS_BUCKETS,
        ),
        ocr_pages=Counter("airlock_ocr_pages", "Images and scanned documents run through OCR."),
        payload_bytes=Counter(
            "airlock_payload_bytes", "Payload bytes fetched by workers.", ["kind"]
        ),
        cache_refused=Counter(
            "airlock_cache_entries_refused",
            "Result-cache entries ignored because the workers' MAC did not verify.",
        ),
    )


def record(report: TaskReport) -> None:
    """Count one finished delivery."""
    metrics = _metrics()
    kind = bounded(report.kind, EXTRACTABLE_KINDS)
    metrics.tasks.labels(kind, report.outcome.value).inc()
    if report.payload_bytes:
        metrics.payload_bytes.labels(kind).inc(report.payload_bytes)
    if report.reason_class is not None:
        metrics.rejections.labels(report.reason_class).inc()
    if report.kill_cause is not None:
        metrics.kills.labels(report.kill_cause).inc()


def account(report: TaskReport, log: logging.Logger) -> None:
    """The one place a delivery's outcome is counted and logged (document and page tasks)."""
    record(report)
    fields = report.log_fields()
    log.info(
        "extraction %s: %s (%s, %s stage) in %.3f s",
        report.outcome.value,
        fields["label"],
        fields["kind"],
        report.stage,
        report.seconds,
        extra=fields,
    )


@dataclass(frozen=True)
class MeteredExtractor:
    """The sandbox extractor, timed. It sits under the result cache, so a hit is not counted."""

    inner: TextExtractor

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        metrics = _metrics()
        started = time.perf_counter()
        try:
            text = self.inner.extract(kind, media_type, payload, max_pages=max_pages)
        finally:
            metrics.extraction_seconds.labels(bounded(kind, EXTRACTABLE_KINDS)).observe(
                time.perf_counter() - started
            )
        return text


def count_refused_cache_entry() -> None:
    """A result-cache entry that something other than a worker wrote (or corrupted)."""
    _metrics().cache_refused.inc()


def count_ocr_page(pages: int = 1) -> None:
    """Pages or frames finished by a job on the OCR stage."""
    _metrics().ocr_pages.inc(pages)


def _use_multiprocess_dir(directory: str) -> None:
    """Make every metric value created from now on, here and in later forks, live in files.

    prometheus_client chooses between in-memory and file-backed values once, when it is
    first imported; the worker decides on its directory later, at start, so it chooses again.
    """
    os.environ[MULTIPROC_VARIABLE] = directory
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]


class _Endpoint:
    """The metrics endpoint of one worker's main process, from worker start to shutdown."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self._app = app
        self._settings = settings
        self._directory = ""
        self._private_dir: str | None = None
        self._endpoint: MetricsEndpoint | None = None
        self._queue_depth: QueueDepthCollector | None = None

    def prepare(self, sender: Any, **_: object) -> None:
        """At worker start, before the pool forks: its processes inherit the directory."""
        if sender.app is not self._app:
            return
        # Read here, not in worker.config: it is prometheus_client's own variable, which the
        # library reads itself, so an operator's choice of directory must reach both unchanged.
        self._directory = os.environ.get(MULTIPROC_VARIABLE, "")
        if not self._directory:
            self._directory = self._private_dir = tempfile.mkdtemp(prefix="airlock-metrics-")
        _use_multiprocess_dir(self._directory)

    def serve(self, sender: Any, **_: object) -> None:
        """Once the worker is ready (its logging is set up, so a failure here is seen)."""
        if sender.app is not self._app:
            return
        self._queue_depth = QueueDepthCollector(self._settings.broker_url)
        self._endpoint = serve_metrics(
            self._settings.worker_metrics_port,
            self._queue_depth,
            multiprocess_dir=self._directory,
            addr=self._settings.metrics_host,
        )

    def stop(self, sender: Any, **_: object) -> None:
        if sender.app is not self._app:
            return
        if self._endpoint is not None:
            self._endpoint.close()
        if self._queue_depth is not None:
            self._queue_depth.close()
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)


def _forget_live_gauges(pid: int, **_: object) -> None:
    # Sent in a pool process as it exits. Counters and histograms of a dead process must stay
    # summed; only "live" gauges (none of airlock's so far) must go with their process.
    if MULTIPROC_VARIABLE in os.environ:
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def install(app: Any, settings: Settings) -> None:
    """Serve ``app``'s worker metrics from its main process (unless the port is 0)."""
    if not settings.worker_metrics_port:
        return
    endpoint = _Endpoint(app, settings)
    signals.worker_init.connect(endpoint.prepare, weak=False)
    signals.worker_ready.connect(endpoint.serve, weak=False)
    signals.worker_shutdown.connect(endpoint.stop, weak=False)
    signals.worker_process_shutdown.connect(_forget_live_gauges, weak=False)
