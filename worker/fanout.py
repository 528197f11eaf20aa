"""One scanned PDF's OCR spread over every OCR worker, page by page, and merged back in order.

The light stage splits a document that needs OCR and has more than ``fan_out_pages`` pages
(sandbox/pages.py); each page to OCR becomes a page task on the OCR queue with its own
delivery counting, retries and the caller's deadline; the page that completes the set runs
the merge and stores the answer under the document's own task id, where the caller waits.
Every step may run twice (a killed worker's message is delivered again), so each is
idempotent: a page's record is written once (``HSETNX``) and the answer is a function of the
records. See docs/queue.md, "Fan-out OCR".
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from redis import Redis, RedisError

from bridge.knowledge.attachments import (
    AttachmentRef,
    ExtractedAttachment,
    TextExtractor,
    extraction_outcome,
)
from bridge.knowledge.failures import (
    MALFORMED_ANSWER,
    PAYLOAD_UNAVAILABLE,
    Failure,
)
from bridge.queue.claim_check import PayloadUnavailable, fetch_payload, sha256_hex, store_payloads
from bridge.queue.envelope import answer_envelope
from bridge.queue.jobs import (
    PAGE_TASK_NAME,
    ExtractionJob,
    MalformedJob,
    PageJob,
    Stage,
    job_from_wire,
    page_job_from_wire,
    page_task_id,
)
from sandbox import pages
from worker import extraction, metrics
from worker.deliveries import delivery_key, record_delivery
from worker.metrics import TaskOutcome, TaskReport
from worker.retries import over_delivered, raise_if_retried
from worker.runtime import Runtime, deadline_of

_log = logging.getLogger(__name__)

_KEY_PREFIX = "airlock:fanout:"
#: How long a PROGRESS state lives when the backend sets no result expiry.
_PROGRESS_SECONDS = 86400
_PAGE_STAGE = "page"


class _Scan(msgspec.Struct, tag="scan", forbid_unknown_fields=True, frozen=True):
    """A page to OCR, as the plan in Redis holds it: the claim check of its one-page PDF."""

    sha256: str
    size: int
    fallback: str


class _Plan(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The document's job as its message carried it, and its pages."""

    job: dict[str, Any]
    page_count: int
    parts: list[pages.TextPart | _Scan]


class _Read(msgspec.Struct, tag="read", forbid_unknown_fields=True, frozen=True):
    reading: pages.PageReading


class _Failed(msgspec.Struct, tag="failed", forbid_unknown_fields=True, frozen=True):
    code: str
    reason: str


class _Skipped(msgspec.Struct, tag="skipped", forbid_unknown_fields=True, frozen=True):
    """Not read: another page of the document failed, so the document has its answer."""


_Record = _Read | _Failed | _Skipped

#: Publishes a PROGRESS state only over another PROGRESS state (or none): a page finishing late
#: must never overwrite the document's final answer, which another page may have stored.
_PROGRESS_SCRIPT = """
local current = redis.call('GET', KEYS[1])
if current and not string.find(current, '"status": "PROGRESS"', 1, true) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1
"""


def _decoded(untrusted_records: Mapping[Any, Any]) -> dict[int, _Record]:
    """Each page's record; one that does not decode is a failure of its page."""
    records: dict[int, _Record] = {}
    for untrusted_key, untrusted_value in untrusted_records.items():
        is_number = isinstance(untrusted_key, bytes) and untrusted_key.isdigit()
        page = int(untrusted_key) if is_number else 0
        try:
            records[page] = msgspec.json.decode(untrusted_value, type=_Record)
        except msgspec.DecodeError:
            records[page] = _Failed(MALFORMED_ANSWER, "the page's record in Redis is malformed")
    return records


def _any_failed(records: Mapping[int, _Record]) -> bool:
    return any(isinstance(record, _Failed) for record in records.values())


class _Document:
    """The fan-out state of one document in Redis: its plan and its pages' records."""

    def __init__(self, redis: Redis, backend: Any, document_id: str, ttl: int) -> None:
        self._redis = redis
        self._backend = backend
        self.document_id = document_id
        self._plan_key = f"{_KEY_PREFIX}{document_id}:plan"
        self._read_key = f"{_KEY_PREFIX}{document_id}:read"
        self._ttl = ttl

    def store_plan(self, plan: _Plan) -> None:
        self._redis.set(self._plan_key, msgspec.json.encode(plan), ex=self._ttl)

    def plan(self) -> _Plan | None:
        """The plan, or None once the document was answered (or its state expired)."""
        untrusted_raw = self._redis.get(self._plan_key)
        if not isinstance(untrusted_raw, bytes):
            return None
        try:
            return msgspec.json.decode(untrusted_raw, type=_Plan)
        except msgspec.DecodeError as exc:
            raise MalformedJob(f"the document's page plan in Redis is malformed: {exc}") from None

    def record(self, page: int, record: _Record) -> dict[int, _Record]:
        """Keep the first record of a page (a redelivered page never rewrites its answer), and
        return every page's record as it stands after this one."""
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self._read_key, str(page), msgspec.json.encode(record))
            pipe.expire(self._read_key, self._ttl)
            pipe.hgetall(self._read_key)
            *_, untrusted_records = pipe.execute()
        return _decoded(untrusted_records)

    def records(self) -> dict[int, _Record]:
        return _decoded(self._redis.hgetall(self._read_key))

    def forget(self) -> None:
        self._redis.delete(self._plan_key, self._read_key)

    def store_answer(self, envelope: dict[str, object]) -> None:
        """The document's final answer, under its own task id, where the caller waits."""
        self._backend.store_result(self.document_id, envelope, "SUCCESS")

    def publish_progress(self, plan: _Plan, read: int) -> None:
        """Pages done of the whole document (its text pages count as done), as one counter."""
        done = sum(isinstance(part, pages.TextPart) for part in plan.parts) + read
        meta: dict[str, object] = {
            "status": "PROGRESS",
            "result": {
                "stage": Stage.OCR.value,
                "done": min(done, plan.page_count),
                "total": plan.page_count,
            },
            "traceback": None,
            "children": [],
            "date_done": None,
            "task_id": self.document_id,
        }
        self._redis.eval(
            _PROGRESS_SCRIPT,
            1,
            self._backend.get_key_for_task(self.document_id).decode(),
            self._backend.encode(meta),
            int(self._backend.expires or _PROGRESS_SECONDS),
        )


def split(
    runtime: Runtime, job: ExtractionJob, payload: bytes, deadline: float | None
) -> pages.Plan | None:
    """The pages of a scan the light stage found long enough to split (``SplitRequired``);
    None to read it in one OCR job (one whose text the OCR stage cached, or a split that
    failed: the single job is always right, only slower)."""
    settings = runtime.settings
    if extraction.cached_text(settings, runtime.redis, Stage.OCR, job) is not None:
        return None  # the OCR job answers from the cache at once
    splitter = extraction.sandbox_extractor(settings, Stage.LIGHT, job.limits, deadline=deadline)
    try:
        untrusted_plan = splitter.extract(
            pages.SPLIT_KIND, pages.PDF_MEDIA_TYPE, payload, max_pages=job.limits.max_pages
        )
        plan = pages.read_plan(untrusted_plan, job.limits.max_pages)
    except Exception as exc:  # noqa: BLE001 - any failure of the split leaves the single job
        _log.warning("the split of %s failed, read in one OCR job: %s", job.sha256[:12], exc)
        return None
    return plan if plan.parts is not None else None


def fan_out(task: Any, job: ExtractionJob, plan: pages.Plan, runtime: Runtime) -> None:
    """Store the pages' PDFs and the plan, and publish one page task per page not yet read.

    A document published again (its light task redelivered, or the caller republishing it
    after a loss) finds its pages already read kept, and sends only the others.
    """
    settings = runtime.settings
    document = _Document(runtime.redis, task.backend, task.request.id, settings.payload_ttl)
    scans = plan.scans  # largest first
    claims = {
        index: _Scan(sha256_hex(part.pdf), len(part.pdf), part.fallback) for index, part in scans
    }
    store_payloads(
        runtime.redis,
        {claims[index].sha256: part.pdf for index, part in scans},
        settings.payload_ttl,
    )
    parts: list[pages.TextPart | _Scan] = [
        part if isinstance(part, pages.TextPart) else claims[index]
        for index, part in enumerate(plan.parts or ())
    ]
    stored = _Plan(job.to_wire(), plan.pages, parts)
    document.store_plan(stored)
    if not scans:
        _after_record(document, stored, job, runtime, _Attempt.of(task), {})
        return
    read = document.records()
    publication = uuid.uuid4().hex
    with task.app.producer_or_acquire() as producer:
        for index, _ in scans:
            if index + 1 in read:
                continue
            claim = claims[index]
            page_job = PageJob(
                task.request.id, index + 1, plan.pages, claim.sha256, claim.size, publication
            )
            task.app.send_task(
                PAGE_TASK_NAME,
                args=(page_job.to_wire(),),
                task_id=page_task_id(task.request.id, index + 1),
                expires=task.request.expires,
                producer=producer,
            )
    document.publish_progress(stored, len(read))


def run_page(task: Any, untrusted_page_job: object, runtime: Runtime) -> None:
    """The body of the page task: read one page, record it, and merge if it was the last."""
    started = time.monotonic()
    page = page_job_from_wire(untrusted_page_job)
    document = _Document(
        runtime.redis, task.backend, page.document_id, runtime.settings.payload_ttl
    )
    plan = document.plan()
    if plan is None:
        _log.info("page %d of %s: the document was answered already", page.page, page.document_id)
        return
    job = _checked(plan, page)
    records = document.records()
    if page.page not in records:
        if _any_failed(records):
            records = document.record(page.page, _Skipped())
        else:
            read = _read(task, page, job, runtime)
            records = document.record(page.page, read.record)
            _report(task, job, read, time.monotonic() - started)
    _after_record(document, plan, job, runtime, _Attempt.of(task), records)


@dataclass(frozen=True)
class _Attempt:
    """The running task, as the merge needs it: whether it may still be retried, and by when
    its caller needs the answer."""

    #: The task's retries so far; None when it may not be retried (it already failed for good).
    retries: int | None
    deadline: float | None

    @classmethod
    def of(cls, task: Any) -> _Attempt:
        return cls(task.request.retries, deadline_of(task))


def _after_record(  # noqa: PLR0917 - each is a separate thing the merge needs
    document: _Document,
    plan: _Plan,
    job: ExtractionJob,
    runtime: Runtime,
    attempt: _Attempt,
    records: Mapping[int, _Record],
) -> None:
    """Store the document's answer once every page to OCR has its record; else say how far it
    is.

    Any page task may get here more than once (two pages finishing together, a redelivery):
    the answer depends only on the records, which never change once written, so storing it
    again stores the same answer. A merge the host failed (its child killed from outside, no
    sandbox) is not an answer: the task is retried, the records kept, and merges again.
    """
    scans = [index + 1 for index, part in enumerate(plan.parts) if isinstance(part, _Scan)]
    if any(page not in records for page in scans):
        document.publish_progress(plan, len(records))
        return
    answer = _merged(plan, job, records, runtime, attempt)
    document.store_answer(answer_envelope(answer, job.label, job.sha256))
    document.forget()


def page_gave_up(
    task: Any, exc: BaseException, untrusted_page_job: object, runtime: Runtime
) -> None:
    """Record a page whose task failed for good (its retries spent on an unavailable sandbox
    or Redis, or an error of its own) as a failed page: otherwise its document would wait for
    it until the caller's deadline, and answer nothing."""
    try:
        page = page_job_from_wire(untrusted_page_job)
        document = _Document(
            runtime.redis, task.backend, page.document_id, runtime.settings.payload_ttl
        )
        plan = document.plan()
        if plan is None:
            return
        job = _checked(plan, page)
        failure = Failure.of(exc)
        reason = failure.reason or f"the page task raised {failure.code}"
        records = document.record(page.page, _Failed(failure.code, reason))
        _after_record(document, plan, job, runtime, _Attempt(None, deadline_of(task)), records)
    except (MalformedJob, RedisError) as error:
        _log.warning("page task %s failed and could not be recorded: %s", task.request.id, error)


def _checked(plan: _Plan, page: PageJob) -> ExtractionJob:
    """The document's job, once the page message agrees with the plan it names."""
    job = job_from_wire(plan.job)
    part = plan.parts[page.page - 1] if plan.page_count == page.pages == len(plan.parts) else None
    if not (isinstance(part, _Scan) and (part.sha256, part.size) == (page.sha256, page.size)):
        raise MalformedJob(
            f"the page job for page {page.page} of {page.pages} does not match the document's plan"
        )
    return job


@dataclass(frozen=True)
class _PageRead:
    """How one delivery of a page task ended."""

    record: _Record
    outcome: TaskOutcome
    deliveries: int


def _failed(failure: Failure, deliveries: int) -> _PageRead:
    return _PageRead(_Failed(failure.code, failure.reason), TaskOutcome.FAILED, deliveries)


def _read(task: Any, page: PageJob, job: ExtractionJob, runtime: Runtime) -> _PageRead:
    settings = runtime.settings
    key = delivery_key(f"{task.request.id}.{page.publication}", _PAGE_STAGE, task.request.retries)
    deliveries = record_delivery(runtime.redis, key, runtime.delivery_ttl)
    if deliveries > settings.max_deliveries:
        failure = over_delivered(deliveries)
        return _PageRead(
            _Failed(failure.code, failure.reason), TaskOutcome.OVER_DELIVERED, deliveries
        )
    try:
        payload = fetch_payload(runtime.redis, page)
    except PayloadUnavailable as exc:
        return _failed(Failure(PAYLOAD_UNAVAILABLE, str(exc)), deliveries)
    reader = extraction.sandbox_extractor(
        settings, Stage.OCR, job.limits, deadline=deadline_of(task)
    )
    try:
        untrusted_reading = reader.extract(
            pages.PAGE_KIND, pages.PDF_MEDIA_TYPE, payload, max_pages=1
        )
        reading = pages.read_page(untrusted_reading)
    except Exception as exc:  # noqa: BLE001 - typed below, as extract_attachment types it
        failure = Failure.of(exc)
        raise_if_retried(failure, task.request.retries, settings.max_deliveries)
        return _failed(failure, deliveries)
    metrics.count_ocr_page()
    return _PageRead(_Read(reading), TaskOutcome.ADMITTED, deliveries)


def _report(task: Any, job: ExtractionJob, read: _PageRead, seconds: float) -> None:
    record = read.record
    failure = Failure(record.code, record.reason) if isinstance(record, _Failed) else None
    report = TaskReport(
        request_id=task.request.id,
        label=job.label,
        sha256=job.sha256,
        kind=job.kind,
        stage=_PAGE_STAGE,
        outcome=read.outcome,
        seconds=seconds,
        deliveries=read.deliveries,
        failure=failure,
    )
    metrics.account(report, _log)


def _merged(
    plan: _Plan,
    job: ExtractionJob,
    records: Mapping[int, _Record],
    runtime: Runtime,
    attempt: _Attempt,
) -> ExtractedAttachment | Failure:
    """The document's answer: its first failed page's failure, or its pages merged."""
    readings: dict[int, pages.PageReading] = {}
    for page in sorted(records):
        record = records[page]
        if isinstance(record, _Failed):
            return Failure(record.code, f"page {page} of {plan.page_count}: {record.reason}")
        if isinstance(record, _Read):
            readings[page - 1] = record.reading
    unread = [
        index + 1
        for index, part in enumerate(plan.parts)
        if isinstance(part, _Scan) and index not in readings
    ]
    if unread:
        # Skipped pages without a failed one: only a forged record makes this.
        return Failure(MALFORMED_ANSWER, f"page {unread[0]} of {plan.page_count} was never read")
    try:
        payload = fetch_payload(runtime.redis, job)
    except PayloadUnavailable as exc:
        return Failure(PAYLOAD_UNAVAILABLE, str(exc))
    ref = AttachmentRef(job.label, job.kind, job.media_type, payload)
    merger = _Merger(
        extraction.sandbox_extractor(
            runtime.settings, Stage.OCR, job.limits, deadline=attempt.deadline
        ),
        pages.merge_payload(plan.parts, readings),
    )
    # Cached as the single OCR job's text is: the next upload of the document is not read again.
    extractor = extraction.extractor_for(
        runtime.settings,
        runtime.redis,
        Stage.OCR,
        job.limits,
        payload_sha256=job.sha256 if job.use_cache else None,
        reader=merger,
    )
    outcome = extraction_outcome(ref, extractor, job.limits)
    if isinstance(outcome, ExtractedAttachment):
        return outcome
    if attempt.retries is not None:
        raise_if_retried(outcome.failure, attempt.retries, runtime.settings.max_deliveries)
    return outcome.failure


class _Merger:
    """The document's extractor for the merge: the sandbox's merge job over its pages, so the
    bridge's guards and admission see the document exactly as the single job gives it."""

    def __init__(self, sandbox: TextExtractor, merge: bytes) -> None:
        self._sandbox = sandbox
        self._merge = merge

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        return self._sandbox.extract(
            pages.MERGE_KIND, "application/json", self._merge, max_pages=max_pages
        )
