"""The fan-out state in a real Redis: a page's record is written once, a page's progress
never overwrites the document's answer, a page that finishes after its document was answered
or its page taken over writes nothing, and an answered document leaves nothing behind
(worker/fanout.py, worker/fanout_bounds.py)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import astuple
from typing import Any

import pytest
from celery import Celery
from redis import Redis

from bridge.knowledge.attachments import ExtractionLimits
from bridge.queue.admission import consumers_key
from bridge.queue.claim_check import sha256_hex, store_payloads
from bridge.queue.jobs import (
    PAGE_TASK_NAME,
    PAGES_QUEUE,
    ExtractionJob,
    PageJob,
    Stage,
    page_task_id,
    payload_key,
)
from sandbox import pages
from sandbox.errors import KilledFromOutside, SandboxUnavailable
from tests.redis_server import SUITE_REDIS_URL
from worker import extraction
from worker.config import Settings
from worker.fanout import (
    _any_failed,
    _checked,
    _delivery_field,
    _Document,
    _Failed,
    _Plan,
    _Read,
    _read,
    _Scan,
    fan_out,
    page_gave_up,
    run_page,
)
from worker.fanout_bounds import Bounds, Refused, Reserved, give_back, request_key, reserve
from worker.metrics import TaskOutcome
from worker.retries import SandboxChildLost
from worker.runtime import Runtime

pytestmark = [pytest.mark.integration, pytest.mark.redis]

PLAN = _Plan({}, 3, [pages.TextPart("cover"), _Scan("ab" * 32, 10, ""), _Scan("cd" * 32, 10, "")])


@pytest.fixture
def backend() -> Iterator[Any]:
    app = Celery("test-fanout-state", backend=SUITE_REDIS_URL, set_as_current=False)
    yield app.backend
    app.close()


def _state(redis: Redis, backend: Any, document_id: str) -> dict[str, Any]:
    raw = redis.get(backend.get_key_for_task(document_id))
    assert isinstance(raw, bytes)
    return dict(json.loads(raw))


def test_progress_counts_the_whole_document_and_never_overwrites_its_answer(
    redis: Redis, backend: Any
) -> None:
    document = _document(redis, backend)
    try:
        document.publish_progress(PLAN, 1, first=True)
        progress = _state(redis, backend, document.document_id)
        assert progress["status"] == "PROGRESS"
        assert progress["result"] == {"stage": "ocr", "done": 2, "total": 3}
        document.store_answer({"ok": True, "text": "the answer"})
        document.publish_progress(PLAN, 2)  # a page finishing after the merge stored it
        final = _state(redis, backend, document.document_id)
        assert final["status"] == "SUCCESS" and final["result"]["text"] == "the answer"
    finally:
        redis.delete(backend.get_key_for_task(document.document_id))


def test_a_page_is_recorded_once_a_redelivery_cannot_rewrite_it(redis: Redis, backend: Any) -> None:
    document = _document(redis, backend)
    document.store_plan(PLAN)
    try:
        document.record(2, _Read(pages.PageReading("first reading", [])))
        document.record(2, _Failed("WorkerLost", "a redelivery that failed after all"))
        assert document.records() == {2: _Read(pages.PageReading("first reading", []))}
        assert not _any_failed(document.records())
        redis.hset(f"airlock:fanout:{document.document_id}:read", "3", b"{forged")
        assert document.records()[3] == _Failed(
            "MalformedAnswer", "the page's record in Redis is malformed"
        )
    finally:
        document.forget(PLAN)


def _document(redis: Redis, backend: Any, request: str | None = None) -> _Document:
    document_id = uuid.uuid4().hex
    return _Document(redis, backend, document_id, 60, request_key(request, document_id))


class _PageTask:
    """What the page task's code uses of the bound Celery task."""

    def __init__(
        self, backend: Any, task_id: str, retries: int = 5, root_id: str | None = None
    ) -> None:
        self.backend = backend
        fields = {"id": task_id, "retries": retries, "expires": None, "root_id": root_id}
        self.request = type("Request", (), fields)()


def test_a_page_whose_task_gave_up_fails_its_document_at_once_naming_it(
    redis: Redis, backend: Any
) -> None:
    """Retries spent on an unavailable sandbox: the document is answered, not left to wait
    for the caller's deadline."""
    job = ExtractionJob(
        "ee" * 32, 100, "scan.pdf", "pdf", "application/pdf", ExtractionLimits(), Stage.LIGHT, False
    )
    document = _document(redis, backend)
    document.store_plan(_Plan(job.to_wire(), PLAN.page_count, PLAN.parts))
    document.record(2, _Read(pages.PageReading("page two", [])))
    page = PageJob(document.document_id, 3, 3, "cd" * 32, 10, "5e" * 16)
    runtime = Runtime(settings_with())
    try:
        page_gave_up(
            _PageTask(backend, "x.page-3"),
            SandboxUnavailable("no sandbox child became ready within 30s"),
            page.to_wire(),
            runtime,
        )
        answer = _state(redis, backend, document.document_id)
        assert answer["status"] == "SUCCESS"
        assert answer["result"]["ok"] is False and answer["result"]["type"] == "SandboxUnavailable"
        assert answer["result"]["reason"] == "page 3 of 3: no sandbox child became ready within 30s"
        assert document.plan() is None  # the fan-out state is gone with the answer
    finally:
        redis.delete(backend.get_key_for_task(document.document_id))
        document.forget(PLAN)


def settings_with(**env: str) -> Settings:
    return Settings.from_env({"AIRLOCK_BROKER_URL": SUITE_REDIS_URL, **env})


SETTINGS = settings_with(AIRLOCK_MAX_DELIVERIES="3")


class _Scripted:
    """The sandbox: page jobs read "page text"; the merge job raises ``merge`` if set."""

    def __init__(self, merge: BaseException | None) -> None:
        self.merge = merge

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        if kind == pages.PAGE_KIND:
            return pages.encode(pages.PageReading("page text", []))
        if self.merge is not None:
            raise self.merge
        return "merged text"


def _fanned_out(redis: Redis, backend: Any) -> tuple[_Document, list[PageJob]]:
    """A document as fan_out leaves it: its payloads and plan, two pages to read."""
    payload = b"%PDF-1.7 the document " + uuid.uuid4().bytes
    one_pages = [b"%PDF-1.7 page " + uuid.uuid4().bytes for _ in range(2)]
    store_payloads(redis, {sha256_hex(p): p for p in [payload, *one_pages]}, 60)
    job = ExtractionJob(
        sha256_hex(payload), len(payload), "scan.pdf", "pdf", "application/pdf",
        ExtractionLimits(), Stage.LIGHT, use_cache=False,
    )  # fmt: skip
    document = _document(redis, backend)
    scans: list[pages.TextPart | _Scan] = [_Scan(sha256_hex(p), len(p), "") for p in one_pages]
    plan = _Plan(job.to_wire(), 2, scans)
    document.store_plan(plan)
    document.publish_progress(plan, 0, first=True)
    return document, [
        PageJob(document.document_id, n + 1, 2, sha256_hex(p), len(p), "5e" * 16)
        for n, p in enumerate(one_pages)
    ]


@pytest.mark.parametrize(
    ("host_failure", "retried_as"),
    [
        (KilledFromOutside("the child was killed by SIGKILL"), SandboxChildLost),
        (SandboxUnavailable("the fork server died"), SandboxUnavailable),
    ],
)
def test_a_merge_the_host_failed_is_retried_not_answered(
    redis: Redis,
    backend: Any,
    monkeypatch: pytest.MonkeyPatch,
    host_failure: BaseException,
    retried_as: type[BaseException],
) -> None:
    """The single task retries a child killed from outside and an unavailable sandbox; the
    merge must too: stored as the answer, it would end the document for a fault of the host."""
    document, jobs = _fanned_out(redis, backend)
    runtime = Runtime(SETTINGS)

    def page(number: int, retries: int = 0) -> None:
        task = _PageTask(backend, page_task_id(document.document_id, number), retries)
        run_page(task, jobs[number - 1].to_wire(), runtime)

    def sandbox(merge: BaseException | None) -> None:
        monkeypatch.setattr(extraction, "sandbox_extractor", lambda *_, **__: _Scripted(merge))

    try:
        sandbox(host_failure)
        page(1)
        with pytest.raises(retried_as):
            page(2)
        assert _state(redis, backend, document.document_id)["status"] == "PROGRESS"
        assert set(document.records()) == {1, 2}  # kept for the retry
        sandbox(None)
        page(2, retries=1)
        answer = _state(redis, backend, document.document_id)
        assert answer["status"] == "SUCCESS" and answer["result"]["text"] == "merged text"
    finally:
        redis.delete(backend.get_key_for_task(document.document_id))
        document.forget(document.plan())


def test_copies_of_a_page_published_again_count_their_deliveries_apart(
    redis: Redis, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document published again sends its unread pages again under the same ids; one
    counter for all copies would answer a page WorkerLost for deliveries no worker lost."""
    monkeypatch.setattr(extraction, "sandbox_extractor", lambda *_, **__: _Scripted(None))
    document, jobs = _fanned_out(redis, backend)
    runtime = Runtime(settings_with(AIRLOCK_MAX_DELIVERIES="2"))
    first = jobs[0]
    again = PageJob(*[*astuple(first)[:-1], "a9" * 16])
    task = _PageTask(backend, page_task_id(document.document_id, 1), retries=0)
    try:
        job = _checked(document.plan(), first)  # type: ignore[arg-type]

        def delivered(copy: PageJob) -> TaskOutcome:
            count = document.count_delivery(_delivery_field(task, copy), runtime.delivery_ttl)
            assert count is not None
            withdrawal = runtime.withdrawal(document.document_id)
            return _read(task, copy, job, runtime, count, withdrawal).outcome

        outcomes = [delivered(first) for _ in range(3)]
        assert outcomes == [TaskOutcome.ADMITTED, TaskOutcome.ADMITTED, TaskOutcome.OVER_DELIVERED]
        assert delivered(again) is TaskOutcome.ADMITTED
    finally:
        document.forget(document.plan())


def _fanout_keys(redis: Redis, document: _Document) -> list[bytes]:
    return [*redis.scan_iter(f"airlock:fanout:{document.document_id}:*")]


class _WhileReading:
    """The sandbox: a page job runs ``meanwhile`` (what another worker does while this one
    reads) and reads "page text"."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        self.meanwhile = meanwhile

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        self.meanwhile()
        return pages.encode(pages.PageReading("page text", []))


def test_a_page_read_while_another_worker_answered_its_document_writes_nothing(
    redis: Redis, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This worker was paused mid-page past the visibility timeout: another read the page
    again, merged, and the caller read the answer and deleted it. Resumed, the page must not
    re-create the document's records or write a "page 1 of 2" progress nobody deletes."""
    document, jobs = _fanned_out(redis, backend)
    plan = document.plan()
    result_key = backend.get_key_for_task(document.document_id)

    def answered_elsewhere() -> None:
        document.store_answer({"ok": True, "text": "merged elsewhere"})
        document.forget(plan)
        redis.delete(result_key)  # the caller, once it read the answer

    monkeypatch.setattr(
        extraction, "sandbox_extractor", lambda *_, **__: _WhileReading(answered_elsewhere)
    )
    task = _PageTask(backend, page_task_id(document.document_id, 1), retries=0)
    run_page(task, jobs[0].to_wire(), Runtime(SETTINGS))
    assert not _fanout_keys(redis, document)
    assert not redis.exists(result_key)
    # A page that failed for good after the answer records nothing either.
    page_gave_up(task, SandboxUnavailable("late"), jobs[1].to_wire(), Runtime(SETTINGS))
    assert not _fanout_keys(redis, document) and not redis.exists(result_key)


def test_a_page_delivery_another_took_over_records_nothing(
    redis: Redis, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page was delivered again while this delivery read it (its worker paused past the
    visibility timeout): the later delivery records it, this one writes nothing."""
    document, jobs = _fanned_out(redis, backend)
    task = _PageTask(backend, page_task_id(document.document_id, 1), retries=0)
    runtime = Runtime(SETTINGS)

    def delivered_again() -> None:
        document.count_delivery(_delivery_field(task, jobs[0]), runtime.delivery_ttl)

    monkeypatch.setattr(
        extraction, "sandbox_extractor", lambda *_, **__: _WhileReading(delivered_again)
    )
    try:
        run_page(task, jobs[0].to_wire(), runtime)
        assert document.records() == {}
        assert _state(redis, backend, document.document_id)["result"]["done"] == 0
    finally:
        redis.delete(backend.get_key_for_task(document.document_id))
        document.forget(document.plan())


class _Publisher:
    """What fan_out publishes with: the messages it sent, as (name, argument, task id)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, str]] = []

    @contextlib.contextmanager
    def producer_or_acquire(self) -> Iterator[object]:
        yield object()

    def send_task(self, name: str, *, args: Any, task_id: str, **_: Any) -> None:
        self.sent.append((name, args[0], task_id))


class _LightTask(_PageTask):
    """What fan_out uses of the bound light task: its request, its backend, its app."""

    def __init__(self, backend: Any, root_id: str) -> None:
        super().__init__(backend, uuid.uuid4().hex, retries=0, root_id=root_id)
        self.app = _Publisher()


def test_an_answered_document_leaves_nothing_of_its_fan_out_and_nothing_it_does_not_own(
    redis: Redis, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fanned out, read and answered: the document's plan, records, page counts, room in its
    request and one-page PDFs are gone, its payload (the caller's) stays. Its PDFs end with its
    mark, so the same scan in another document is stored apart; a PDF under one of its claims
    without the mark (an earlier release's fan-out of the same scan, an upload of the same
    bytes) is not its to delete."""
    monkeypatch.setattr(extraction, "sandbox_extractor", lambda *_, **__: _Scripted(None))
    payload = b"%PDF-1.7 the document " + uuid.uuid4().bytes
    store_payloads(redis, {sha256_hex(payload): payload}, 60)
    job = ExtractionJob(
        sha256_hex(payload), len(payload), "scan.pdf", "pdf", "application/pdf",
        ExtractionLimits(), Stage.LIGHT, use_cache=False,
    )  # fmt: skip
    one_pages = [b"%PDF-1.7 page one", b"%PDF-1.7 page two"]
    plan = pages.Plan(2, [pages.ScanPart(pdf, "") for pdf in one_pages])
    runtime = Runtime(SETTINGS)
    light = _LightTask(backend, root_id=uuid.uuid4().hex)
    redis.set(consumers_key(PAGES_QUEUE), "test", ex=60)
    before = {*redis.scan_iter()}
    try:
        assert fan_out(light, job, plan, runtime)
        stored = _Document(
            redis, backend, light.request.id, 60, request_key(light.request.root_id, "")
        ).plan()
        assert stored is not None
        claims = [part.sha256 for part in stored.parts if isinstance(part, _Scan)]
        assert sha256_hex(one_pages[0]) not in claims  # marked: the document's own
        for name, argument, task_id in light.app.sent:
            assert name == PAGE_TASK_NAME
            page = _PageTask(backend, task_id, retries=0, root_id=light.request.root_id)
            run_page(page, argument, runtime)
        answer = _state(redis, backend, light.request.id)
        assert answer["result"]["text"] == "merged text"
        redis.delete(backend.get_key_for_task(light.request.id))  # the caller, having read it
        assert {*redis.scan_iter()} == before
        foreign = payload_key(claims[0])
        redis.set(foreign, b"%PDF-1.7 stored by someone else", ex=60)
        document = _Document(redis, backend, light.request.id, 60, "airlock:fanout:request:x")
        document.forget(stored)  # a second merge's cleanup, after another stored these bytes
        assert redis.exists(foreign)
    finally:
        redis.delete(consumers_key(PAGES_QUEUE), payload_key(sha256_hex(payload)))


def test_a_request_fans_out_at_most_its_page_ceiling_at_once(redis: Redis) -> None:
    """A document over its request's share, or over the pages queue's bound, gets no room; a
    document published again keeps its own; room given back is free again."""
    request = request_key(uuid.uuid4().hex, "unused")
    bounds = Bounds(per_request=5, max_queued=1000, ttl_seconds=60)
    redis.set(consumers_key(PAGES_QUEUE), "test", ex=60)
    try:

        def reserved(document: str, count: int, within: Bounds = bounds) -> bool:
            room = reserve(redis, request, document, count, within)
            if isinstance(room, Reserved):
                room.published(redis)
            return isinstance(room, Reserved)

        assert reserved("a", 3)
        assert not reserved("b", 3)  # 6 pages in flight would exceed the request's 5
        # Its light task run again keeps its room, even with the pages queue full now: its
        # pages were admitted, and some may be running.
        assert reserved("a", 3, Bounds(5, 1, 60))
        assert reserved("c", 2)
        give_back(redis, request, "a")
        assert reserved("b", 3)
        full = reserve(redis, request_key(None, "d"), "d", 3, Bounds(30, 2, 60))
        assert isinstance(full, Refused) and "bound of 2 queued jobs" in full.reason
        assert not redis.exists(request_key(None, "d"))  # its room was given back
        redis.delete(consumers_key(PAGES_QUEUE))
        unconsumed = reserve(redis, request_key(None, "e"), "e", 1, bounds)
        assert unconsumed == Refused("no worker is consuming airlock.pages")
    finally:
        redis.delete(request, consumers_key(PAGES_QUEUE))


def test_a_page_begun_as_its_document_was_abandoned_counts_and_records_nothing(
    redis: Redis, backend: Any
) -> None:
    """Its caller's deadline passed and a page expired unrun deleted the document's state
    just before this page counted its delivery: the count must not re-create it."""
    document, jobs = _fanned_out(redis, backend)
    task = _PageTask(backend, page_task_id(document.document_id, 1), retries=0)
    document.abandon(document.plan())
    assert document.count_delivery(_delivery_field(task, jobs[0]), 60) is None
    assert document.record(1, _Read(pages.PageReading("late", []))) is None
    assert not _fanout_keys(redis, document)
    assert not redis.exists(backend.get_key_for_task(document.document_id))
