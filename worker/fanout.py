"""One scanned PDF's OCR spread over every OCR worker, page by page, and merged back in order.

The light stage splits a document that needs OCR and has more than ``fan_out_pages`` pages
(sandbox/pages.py); each page to OCR becomes a page task on the OCR queue with its own
delivery counting, retries and the caller's deadline; the page that completes the set runs
the merge and stores the answer under the document's own task id, where the caller waits.
Every step may run twice (a killed worker's message is delivered again), so each is
idempotent: a page's record is written once (``HSETNX``) and the answer is a function of the
records. A document fans out only within its request's bounds (worker/fanout_bounds.py), and
once answered or abandoned holds nothing more: its state, its pages' PDFs and counts are
deleted, and a page delivery finishing later writes nothing. See docs/queue.md, "Fan-out OCR".
"""

from __future__ import annotations

import dataclasses
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
from bridge.queue.admission import consumers_key
from bridge.queue.claim_check import PayloadUnavailable, fetch_payload, sha256_hex, store_payloads
from bridge.queue.envelope import answer_envelope
from bridge.queue.jobs import (
    PAGE_ID_SEPARATOR,
    PAGE_TASK_NAME,
    PAGES_QUEUE,
    ExtractionJob,
    MalformedJob,
    PageJob,
    Stage,
    job_from_wire,
    page_job_from_wire,
    page_task_id,
    payload_key,
)
from sandbox import pages
from sandbox.document import PageLabel
from worker import extraction, fanout_bounds, metrics
from worker.deliveries import superseded
from worker.metrics import TaskOutcome, TaskReport
from worker.publishing import Message, publish
from worker.retries import over_delivered, raise_if_retried
from worker.runtime import Runtime, deadline_of
from worker.withdrawals import WithdrawalMark

_log = logging.getLogger(__name__)

_KEY_PREFIX = "airlock:fanout:"
#: How long a PROGRESS state lives when the backend sets no result expiry.
_PROGRESS_SECONDS = 86400
_PAGE_STAGE = "page"


class _Scan(
    msgspec.Struct, tag="scan", forbid_unknown_fields=True, frozen=True, omit_defaults=True
):
    """A page to OCR, as the plan in Redis holds it: the claim check of its one-page PDF. A
    label left at its default is not written, so a worker of the release before labels reads
    the plan while both run (docs/queue.md, "Upgrades")."""

    sha256: str
    size: int
    fallback: str
    label: PageLabel | None = None


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

#: Publishes a PROGRESS state only over another PROGRESS state: a page finishing late must never
#: overwrite the document's final answer, which another page may have stored. Only the fan-out
#: itself (ARGV[3] = 1) writes the first one: a page finishing after its caller read the answer
#: and deleted it wrote "page 1 of 12" where nobody would ever read or delete it.
_PROGRESS_SCRIPT = """
local current = redis.call('GET', KEYS[1])
if current then
  if not string.find(current, '"status": "PROGRESS"', 1, true) then return 0 end
elseif ARGV[3] ~= '1' then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1
"""

#: Records a page (ARGV[1], its record ARGV[2]) only while its document has a plan (KEYS[1]),
#: and answers every page's record (KEYS[2]); nil once the document was answered or abandoned.
#: A page task paused past the visibility timeout, whose page another worker read and merged,
#: re-created the finished document's records for an hour when it resumed.
_RECORD_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return redis.call('HGETALL', KEYS[2])
"""

#: Counts a page's delivery (ARGV[1], the field of the document's counts KEYS[2]) only while its
#: document has a plan (KEYS[1]); nil once it was answered or abandoned. Its counts are deleted
#: with the document: a page that began just as its caller's deadline passed re-created them.
_COUNT_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local count = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('EXPIRE', KEYS[2], ARGV[2])
return count
"""

#: Deletes a document's fan-out state (KEYS[1..3]) and each of its one-page PDFs (KEYS[4..])
#: that ends with its mark (ARGV[1]): a PDF stored under the same key by anyone else (an
#: earlier release's fan-out of the same scan, an upload of the same bytes) is left alone.
_FORGET_SCRIPT = """
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
for i = 4, #KEYS do
  if redis.call('GETRANGE', KEYS[i], -#ARGV[1], -1) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
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


def _keys(document_id: str) -> tuple[str, str, str]:
    """Where a document's plan, its pages' records and its pages' delivery counts are kept."""
    return (
        f"{_KEY_PREFIX}{document_id}:plan",
        f"{_KEY_PREFIX}{document_id}:read",
        f"{_KEY_PREFIX}{document_id}:deliveries",
    )


def _stored_plan(redis: Redis, plan_key: str) -> _Plan | None:
    """The plan, or None once the document was answered (or its state expired)."""
    untrusted_raw = redis.get(plan_key)
    if not isinstance(untrusted_raw, bytes):
        return None
    try:
        return msgspec.json.decode(untrusted_raw, type=_Plan)
    except msgspec.DecodeError as exc:
        raise MalformedJob(f"the document's page plan in Redis is malformed: {exc}") from None


def _mark(document_id: str) -> bytes:
    """What each one-page PDF of a document ends with, after its ``%%EOF`` (a comment, which
    PDF readers skip): the PDF's claim check is then the document's own, never shared with
    another document's page (the same scan twice in one request), an upload's or an earlier
    release's, so the document's answer can delete it."""
    return b"\n%airlock-fanout " + document_id.encode() + b"\n"


def _forget(redis: Redis, document_id: str, request: str, plan: _Plan | None) -> None:
    """Delete all a document holds for its fan-out: its state, its one-page PDFs and its room
    in its request. Without this, a 6 KB PDF of 20 pages held 21 one-page PDFs and 21 delivery
    counts (43,888 bytes) after its answer, for up to an hour."""
    claims = {part.sha256 for part in plan.parts if isinstance(part, _Scan)} if plan else set()
    keys = [*_keys(document_id), *(payload_key(sha256) for sha256 in sorted(claims))]
    redis.eval(_FORGET_SCRIPT, len(keys), *keys, _mark(document_id))
    fanout_bounds.give_back(redis, request, document_id)


class _Document:
    """The fan-out state of one document in Redis: its plan, its pages' records and delivery
    counts; ``request`` is where its request counts its pages in flight."""

    def __init__(
        self, redis: Redis, backend: Any, document_id: str, ttl: int, request: str
    ) -> None:
        self._redis = redis
        self._backend = backend
        self.document_id = document_id
        self.request = request
        self._plan_key, self._read_key, self.deliveries_key = _keys(document_id)
        self._ttl = ttl

    def store_plan(self, plan: _Plan) -> None:
        self._redis.set(self._plan_key, msgspec.json.encode(plan), ex=self._ttl)

    def plan(self) -> _Plan | None:
        """The plan, or None once the document was answered (or its state expired)."""
        return _stored_plan(self._redis, self._plan_key)

    def record(self, page: int, record: _Record) -> dict[int, _Record] | None:
        """Keep the first record of a page (a redelivered page never rewrites its answer), and
        return every page's record as it stands after this one; None, recording nothing, once
        the document was answered or abandoned."""
        untrusted_reply = self._redis.eval(
            _RECORD_SCRIPT,
            2,
            self._plan_key,
            self._read_key,
            str(page),
            msgspec.json.encode(record),
            self._ttl,
        )
        if not isinstance(untrusted_reply, list):
            return None
        pairs = iter(untrusted_reply)
        return _decoded(dict(zip(pairs, pairs, strict=True)))

    def records(self) -> dict[int, _Record]:
        return _decoded(self._redis.hgetall(self._read_key))

    def count_delivery(self, field: str, ttl_seconds: int) -> int | None:
        """Count a page's delivery under ``field`` and return how many there have been, this
        one included; None, counting nothing, once the document was answered or abandoned."""
        untrusted_count = self._redis.eval(
            _COUNT_SCRIPT, 2, self._plan_key, self.deliveries_key, field, ttl_seconds
        )
        return untrusted_count if isinstance(untrusted_count, int) else None

    def forget(self, plan: _Plan | None) -> None:
        _forget(self._redis, self.document_id, self.request, plan)

    def abandon(self, plan: _Plan | None) -> None:
        """Delete everything of a document whose caller gave up on it."""
        abandon(self._backend, self.document_id, self.request, plan)

    def store_answer(self, envelope: dict[str, object]) -> None:
        """The document's final answer, under its own task id, where the caller waits."""
        self._backend.store_result(self.document_id, envelope, "SUCCESS")

    def publish_progress(self, plan: _Plan, read: int, *, first: bool = False) -> None:
        """Pages done of the whole document (its text pages count as done), as one counter;
        only the ``first`` (the fan-out's) may write it where no state is stored."""
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
            int(first),
        )


def past(deadline: float | None) -> bool:
    """Whether the caller's ``deadline`` (:func:`time.monotonic`) has passed."""
    return deadline is not None and time.monotonic() > deadline


def abandon(backend: Any, document_id: str, request: str, plan: _Plan | None) -> None:
    """Delete a document's fan-out state and the progress its pages published under its id:
    its caller's deadline passed, so nobody reads either, and the progress would otherwise
    stay an hour (the result backend's expiry)."""
    _forget(backend.client, document_id, request, plan)
    backend.client.delete(backend.get_key_for_task(document_id))


def abandon_document_of(backend: Any, page_task_id: str, untrusted_request_id: object) -> None:
    """:func:`abandon` the document a page task (by its id and its root id) belongs to."""
    document_id, separator, _ = page_task_id.rpartition(PAGE_ID_SEPARATOR)
    if not separator:
        return
    try:
        plan = _stored_plan(backend.client, _keys(document_id)[0])
    except MalformedJob:
        plan = None  # its pages' PDFs expire with their time to live
    request = fanout_bounds.request_key(untrusted_request_id, document_id)
    abandon(backend, document_id, request, plan)


def _page_document(task: Any, page: PageJob, runtime: Runtime) -> _Document:
    """The document a page task reads for, with the request its light task published it in
    (the page task inherits that task's root id)."""
    request = fanout_bounds.request_key(task.request.root_id, page.document_id)
    return _Document(
        runtime.redis, task.backend, page.document_id, runtime.settings.payload_ttl, request
    )


def split(
    runtime: Runtime,
    job: ExtractionJob,
    payload: bytes,
    deadline: float | None,
    withdrawal: WithdrawalMark,
) -> pages.Plan | None:
    """The pages of a scan the light stage found long enough to split (``SplitRequired``);
    None to read it in one OCR job (one whose text the OCR stage cached, or a split that
    failed: the single job is always right, only slower). The split's child is killed when
    its caller withdraws the document."""
    settings = runtime.settings
    if extraction.cached_text(settings, runtime.redis, Stage.OCR, job) is not None:
        return None  # the OCR job answers from the cache at once
    if not runtime.redis.exists(consumers_key(PAGES_QUEUE)):
        # No live worker takes pages (a fleet mid-upgrade from a release without them, or
        # OCR workers not given the queue): the single OCR job reads it.
        return None
    splitter = extraction.sandbox_extractor(
        settings,
        Stage.LIGHT,
        job.limits,
        ocr_language=job.ocr_language,
        deadline=deadline,
        withdrawn=withdrawal,
    )
    try:
        untrusted_plan = splitter.extract(
            pages.SPLIT_KIND, pages.PDF_MEDIA_TYPE, payload, max_pages=job.limits.max_pages
        )
        plan = pages.read_plan(untrusted_plan, job.limits.max_pages)
    except Exception as exc:  # noqa: BLE001 - any failure of the split leaves the single job
        _log.warning("the split of %s failed, read in one OCR job: %s", job.sha256[:12], exc)
        return None
    return plan if plan.parts is not None else None


def fan_out(task: Any, job: ExtractionJob, plan: pages.Plan, runtime: Runtime) -> bool:
    """Store the pages' PDFs and the plan, and publish one page task per page not yet read;
    False, storing and publishing nothing, when the document's request or the pages queue has
    no room for its pages (worker/fanout_bounds.py): one OCR job reads it then.

    A document published again (its light task redelivered, or the caller republishing it
    after a loss) keeps its room and its pages already read, and sends only the others.
    """
    settings = runtime.settings
    request = fanout_bounds.request_key(task.request.root_id, task.request.id)
    document = _Document(
        runtime.redis, task.backend, task.request.id, settings.payload_ttl, request
    )
    scans = plan.scans  # largest first
    marked = {index: part.pdf + _mark(task.request.id) for index, part in scans}
    claims = {
        index: _Scan(sha256_hex(marked[index]), len(marked[index]), part.fallback, part.label)
        for index, part in scans
    }
    parts: list[pages.TextPart | _Scan] = [
        part if isinstance(part, pages.TextPart) else claims[index]
        for index, part in enumerate(plan.parts or ())
    ]
    stored = _Plan(job.to_wire(), plan.pages, parts)
    if not scans:
        document.store_plan(stored)
        _after_record(document, stored, job, runtime, _Attempt.of(task), {})
        return True
    bounds = fanout_bounds.Bounds(job.limits.max_pages, settings.max_queued, settings.payload_ttl)
    room = fanout_bounds.reserve(runtime.redis, request, task.request.id, len(scans), bounds)
    if isinstance(room, fanout_bounds.Refused):
        _log.info(
            "document %s is read by one OCR job, not in %d page tasks: %s",
            task.request.id,
            len(scans),
            room.reason,
        )
        return False
    try:
        store_payloads(
            runtime.redis,
            {claims[index].sha256: pdf for index, pdf in marked.items()},
            settings.payload_ttl,
        )
        document.store_plan(stored)
        read = document.records()
        # Before the pages: a page's progress only updates this one, so none is left behind
        # for a document its caller already read.
        document.publish_progress(stored, len(read), first=True)
        publication = uuid.uuid4().hex
        publish(
            task.app,
            (
                Message(
                    PAGE_TASK_NAME,
                    PageJob(
                        task.request.id,
                        index + 1,
                        plan.pages,
                        claims[index].sha256,
                        claims[index].size,
                        publication,
                    ).to_wire(),
                    page_task_id(task.request.id, index + 1),
                    task.request.expires,
                )
                for index, _ in scans
                if index + 1 not in read
            ),
        )
    finally:
        room.published(runtime.redis)
    return True


def run_page(task: Any, untrusted_page_job: object, runtime: Runtime) -> None:
    """The body of the page task: read one page, record it, and merge if it was the last.

    A delivery that finds, once its page is read, that its document was answered or abandoned
    meanwhile, or that the page was delivered again (its worker was paused past the visibility
    timeout), records nothing: the document's answer is another delivery's to give.
    """
    started = time.monotonic()
    page = page_job_from_wire(untrusted_page_job)
    document = _page_document(task, page, runtime)
    plan = document.plan()
    if plan is None:
        _log.info("page %d of %s: the document was answered already", page.page, page.document_id)
        return
    job = _checked(plan, page)
    # One command against seconds of tesseract: the pages of a document its caller withdrew
    # are not read, and a page being read is killed (worker/withdrawals.py).
    withdrawal = runtime.withdrawal(page.document_id, look_now=True)
    records = document.records()
    recorded: dict[int, _Record] | None = records  # a page read already: check completion
    if page.page not in records and _any_failed(records):
        recorded = document.record(page.page, _Skipped())
    elif page.page not in records and not withdrawal.is_set():
        recorded = _read_and_record(task, page, job, document, runtime, started, withdrawal)
    if withdrawal.is_set():
        _log.info("page %d of %s: its caller withdrew the document", page.page, page.document_id)
        document.abandon(plan)
        return
    if recorded is None:
        _log.info(
            "page %d of %s: answered, abandoned or taken over while this delivery ran; "
            "nothing recorded",
            page.page,
            page.document_id,
        )
        return
    _after_record(document, plan, job, runtime, _Attempt.of(task), recorded)


def _read_and_record(  # noqa: PLR0917 - each is a separate thing the page needs
    task: Any,
    page: PageJob,
    job: ExtractionJob,
    document: _Document,
    runtime: Runtime,
    started: float,
    withdrawal: WithdrawalMark,
) -> dict[int, _Record] | None:
    """Count this delivery, read the page and record it; None, recording nothing, when the
    document was answered, abandoned or withdrawn, or the page delivered again, before it is
    recorded."""
    field = _delivery_field(task, page)
    deliveries = document.count_delivery(field, runtime.delivery_ttl)
    if deliveries is None:
        return None
    read = _read(task, page, job, runtime, deliveries, withdrawal)
    if withdrawal.is_set_now():
        read = dataclasses.replace(read, outcome=TaskOutcome.WITHDRAWN)
    _report(task, job, read, time.monotonic() - started)
    if read.outcome is TaskOutcome.WITHDRAWN or superseded(
        runtime.redis, document.deliveries_key, deliveries, field
    ):
        return None
    return document.record(page.page, read.record)


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
    if past(attempt.deadline):
        document.abandon(plan)  # its caller stopped waiting: nobody reads an answer stored now
        return
    scans = [index + 1 for index, part in enumerate(plan.parts) if isinstance(part, _Scan)]
    if any(page not in records for page in scans):
        document.publish_progress(plan, len(records))
        return
    answer = _merged(plan, job, records, runtime, attempt)
    document.store_answer(answer_envelope(answer, job.label, job.sha256))
    document.forget(plan)


def page_gave_up(
    task: Any, exc: BaseException, untrusted_page_job: object, runtime: Runtime
) -> None:
    """Record a page whose task failed for good (its retries spent on an unavailable sandbox
    or Redis, or an error of its own) as a failed page: otherwise its document would wait for
    it until the caller's deadline, and answer nothing."""
    try:
        page = page_job_from_wire(untrusted_page_job)
        document = _page_document(task, page, runtime)
        plan = document.plan()
        if plan is None:
            return
        job = _checked(plan, page)
        failure = Failure.of(exc)
        reason = failure.reason or f"the page task raised {failure.code}"
        records = document.record(page.page, _Failed(failure.code, reason))
        if records is None:
            return
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


def _delivery_field(task: Any, page: PageJob) -> str:
    """Where a page delivery is counted in its document's counts: per page, per publication
    (copies sent by a second publication count apart) and per retry, as a task's own are."""
    return f"{page.page}.{page.publication}:{_PAGE_STAGE}:{task.request.retries}"


def _read(  # noqa: PLR0917 - each is a separate thing the read needs
    task: Any,
    page: PageJob,
    job: ExtractionJob,
    runtime: Runtime,
    deliveries: int,
    withdrawal: WithdrawalMark,
) -> _PageRead:
    """Read the page, in this delivery (``deliveries`` counted so far, this one included)."""
    settings = runtime.settings
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
        settings,
        Stage.OCR,
        job.limits,
        ocr_language=job.ocr_language,
        deadline=deadline_of(task),
        withdrawn=withdrawal,
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
            runtime.settings,
            Stage.OCR,
            job.limits,
            ocr_language=job.ocr_language,
            deadline=attempt.deadline,
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
        ocr_language=job.ocr_language,
        deadline=attempt.deadline,
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
