"""``airlock bridge``: extraction requests from a Redis stream, answered through the workers.

Each request is extracted as ``bridge.queue.source.gather`` does and answered once; unparsable
ones are answered with an error or dead-lettered, infrastructure failures leave them pending.
See docs/bridge-service.md, Delivery.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from redis import Redis, RedisError

from bridge.knowledge.errors import ExtractionFailed, IngestionRejected
from bridge.knowledge.failures import EXTRACTION_FAILED, PAYLOAD_UNAVAILABLE, REFUSED
from bridge.queue.claim_check import PayloadUnavailable
from bridge.queue.source import ExtractionQueue, QueueUnavailable, gather
from bridge.service import metrics as service_metrics
from bridge.service.config import ServiceConfig
from bridge.service.payloads import resolve_attachments
from bridge.service.schema import (
    ErrorType,
    InvalidRequest,
    ServiceRequest,
    error_result,
    parse_request,
    request_bytes,
    selection_result,
)
from bridge.service.streams import SCAN_START, Entry, RequestStreams

_log = logging.getLogger(__name__)

_INFRASTRUCTURE_ERRORS = (RedisError, OSError)
#: A blocking read returns at least this often, so a stop request or a due lease renewal
#: waits at most this long.
_MAX_BLOCK_SECONDS = 1.0
_MAX_BACKOFF_SECONDS = 10.0
_NO_GROUP = "NOGROUP"


class BridgeService:
    """One consumer of the bridge's group: reads, dispatches, renews leases, answers."""

    def __init__(
        self, redis: Redis, payloads: Redis, queue: ExtractionQueue, config: ServiceConfig
    ) -> None:
        """``redis`` holds the clients' slots, the streams and the answers; ``payloads`` is the
        workers' Redis, where claim checks are stored (the same one unless clients have a
        Redis of their own, AIRLOCK_CLIENT_REDIS_URL)."""
        self._payloads = payloads
        self._queue = queue
        self._config = config
        self._streams = RequestStreams(redis, config)
        self._in_flight: dict[Future[None], str] = {}
        self._own_cursor: str | None = SCAN_START
        self._claim_cursor = SCAN_START
        self._claim_due = 0.0
        self._renewal_due = 0.0

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, then finish what is in flight (each request within its
        deadline) and return. Raises :class:`QueueUnavailable` when Redis is unreachable at
        start: a bridge that never reached its stream has nothing to drain."""
        try:
            self._streams.ensure_group()
        except _INFRASTRUCTURE_ERRORS as exc:
            raise QueueUnavailable(f"the request stream is unreachable ({exc})") from exc
        _log.info(
            "consumer %s of group %s reading %s",
            self._config.consumer,
            self._config.group,
            self._config.request_stream,
        )
        failures = 0
        with ThreadPoolExecutor(self._config.concurrency, "airlock-bridge") as pool:
            while not stop.is_set():
                try:
                    self._renew_if_due()
                    self._dispatch(pool)
                    failures = 0
                except _INFRASTRUCTURE_ERRORS as exc:
                    failures += 1
                    self._recover(exc, stop, failures)
                self._reap(block=len(self._in_flight) >= self._config.concurrency)
            _log.info("stopping: finishing %d requests in flight", len(self._in_flight))
            while self._in_flight:
                self._reap(block=True)
                try:
                    self._renew_if_due()
                except _INFRASTRUCTURE_ERRORS as exc:
                    _log.warning("could not renew leases while stopping: %s", exc)
        _log.info("stopped")

    def _recover(self, exc: Exception, stop: threading.Event, failures: int) -> None:
        if _NO_GROUP in str(exc):
            # The stream (and its group) was deleted under a running bridge: start over on
            # a new one rather than fail every read.
            _log.warning("the consumer group is gone; creating it again")
            self._own_cursor = None
            self._claim_cursor = SCAN_START
            with contextlib.suppress(*_INFRASTRUCTURE_ERRORS):  # the next failure backs off
                self._streams.ensure_group()
                # What the tenants held pointed into the old stream: no quota stays taken.
                self._streams.forget_held()
            return
        backoff = min(2.0 ** (failures - 1), _MAX_BACKOFF_SECONDS)
        _log.warning("Redis failed (%s); retrying in %.0f s", exc, backoff)
        stop.wait(backoff)

    def _renew_if_due(self) -> None:
        now = time.monotonic()
        if now < self._renewal_due:
            return
        self._renewal_due = now + self._config.renew_every_seconds
        self._streams.renew(list(self._in_flight.values()))

    def _dispatch(self, pool: ThreadPoolExecutor) -> None:
        free = self._config.concurrency - len(self._in_flight)
        if free <= 0:
            return
        running = set(self._in_flight.values())
        for entry in self._next_entries(free):
            # A lease of our own that lapsed comes back through XAUTOCLAIM; it is running.
            if entry.entry_id not in running:
                self._in_flight[pool.submit(self._handle, entry)] = entry.entry_id

    def _next_entries(self, count: int) -> list[Entry]:
        """Our own pending entries first (left by a previous run under this name), then
        entries of dead consumers, then new ones."""
        if self._own_cursor is not None:
            entries = self._streams.read_own_pending(self._own_cursor, count)
            if entries:
                self._own_cursor = entries[-1].entry_id
                return entries
            self._own_cursor = None
        now = time.monotonic()
        if now >= self._claim_due:
            self._claim_cursor, entries = self._streams.claim_idle(self._claim_cursor, count)
            if self._claim_cursor == SCAN_START:
                self._claim_due = now + self._config.renew_every_seconds
            if entries:
                return entries
        block = min(_MAX_BLOCK_SECONDS, self._config.renew_every_seconds)
        return self._streams.read_new(count, block)

    def _reap(self, *, block: bool) -> None:
        if not self._in_flight:
            return
        timeout = min(_MAX_BLOCK_SECONDS, self._config.renew_every_seconds) if block else 0
        done, _ = wait(self._in_flight, timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            entry_id = self._in_flight.pop(future)
            exc = future.exception()
            if exc is not None:
                # Only settling can fail here; the entry stays pending and is retried.
                _log.warning("entry %s left pending: %s: %s", entry_id, type(exc).__name__, exc)

    def _handle(self, entry: Entry) -> None:
        """Answer one entry, dead-letter it, or leave it pending (infrastructure failures)."""
        started = time.monotonic()
        if entry.oversized_bytes is not None:
            reason = (
                f"the entry is {entry.oversized_bytes} bytes, over the request cap of "
                f"{self._streams.entry_cap} bytes (AIRLOCK_BRIDGE_MAX_REQUEST_MB); it was not read"
            )
            self._dead_letter(entry, reason)
            return
        if entry.deleted:
            # Someone deleted it while it was pending (Redis's XAUTOCLAIM may also drop it from
            # the pending list on its own): there is no request left to answer or to report.
            self._streams.acknowledge(entry)
            service_metrics.record("deleted")
            _log.warning(
                "entry %s was deleted from the stream while pending; acknowledged",
                entry.entry_id,
                extra={"outcome": "deleted"},
            )
            return
        if entry.repeats_field:
            self._dead_letter(entry, "a request entry must not repeat a field name")
            return
        try:
            untrusted_raw = request_bytes(entry.untrusted_fields, self._config.max_request_bytes)
            request = parse_request(untrusted_raw, self._config.limits)
        except InvalidRequest as exc:
            if exc.request_id is None:
                self._dead_letter(entry, exc.reason)
            else:
                result = error_result(exc.request_id, "InvalidRequest", exc.reason)
                self._publish(entry, exc.request_id, result, "InvalidRequest", started)
            return
        if self._streams.is_answered(entry.tenant, request.request_id):
            # Answered before: a redelivery, or the same id sent again. Not run twice.
            self._streams.acknowledge(entry)
            service_metrics.record("duplicate")
            _log.info(
                "request %s was answered before; acknowledged",
                request.request_id,
                extra={"request_id": request.request_id, "outcome": "duplicate"},
            )
            return
        answer = self._answer(request)
        if answer is not None:
            result, outcome = answer
            self._publish(entry, request.request_id, result, outcome, started)

    def _dead_letter(self, entry: Entry, reason: str) -> None:
        self._streams.dead_letter(entry, reason)
        service_metrics.record("dead_letter")
        _log.warning(
            "entry %s dead-lettered: %s", entry.entry_id, reason, extra={"outcome": "dead_letter"}
        )

    def _answer(self, request: ServiceRequest) -> tuple[str, str] | None:
        """The result and its outcome; None to leave the request pending for a retry."""
        request_id = request.request_id
        error_type: ErrorType
        try:
            refs = resolve_attachments(self._payloads, request, self._config.max_request_bytes)
            selection = gather(
                refs,
                self._queue,
                limits=request.limits,
                on_rejection=request.on_rejection,
                deadline=request.deadline_seconds,
                ocr_language=request.ocr_language,
            )
        except InvalidRequest as exc:
            error_type, reason = "InvalidRequest", exc.reason
        except PayloadUnavailable as exc:
            error_type, reason = PAYLOAD_UNAVAILABLE, str(exc)
        except IngestionRejected as exc:  # on_rejection='raise'
            error_type, reason = REFUSED, str(exc)
        except ExtractionFailed as exc:
            error_type, reason = EXTRACTION_FAILED, str(exc)
        except (QueueUnavailable, *_INFRASTRUCTURE_ERRORS) as exc:
            _log.warning(
                "request %s left pending for a retry: %s",
                request_id,
                exc,
                extra={"request_id": request_id, "outcome": "retry"},
            )
            return None
        except Exception:  # noqa: BLE001 - a bug must answer, not loop through redeliveries
            _log.exception(
                "request %s failed inside the bridge",
                request_id,
                extra={"request_id": request_id, "outcome": "InternalError"},
            )
            error_type, reason = "InternalError", "the bridge failed on this request; see its log"
        else:
            return selection_result(request_id, selection, pages=request.pages), "selection"
        return error_result(request_id, error_type, reason), error_type

    def _publish(
        self, entry: Entry, request_id: str, result: str, outcome: str, started: float
    ) -> None:
        published = self._streams.publish(entry, request_id, result)
        duration = time.monotonic() - started
        service_metrics.record(outcome if published else "duplicate", duration)
        _log.info(
            "request %s: %s in %.3f s",
            request_id,
            outcome if published else "answered before; acknowledged",
            duration,
            extra={
                "request_id": request_id,
                "outcome": outcome if published else "duplicate",
                "duration_seconds": round(duration, 3),
            },
        )
