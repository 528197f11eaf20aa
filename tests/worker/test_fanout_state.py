"""The fan-out state in a real Redis: a page's record is written once, and a page's progress
never overwrites the document's answer (worker/fanout.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import astuple
from typing import Any

import pytest
from celery import Celery
from redis import Redis

from bridge.knowledge.attachments import ExtractionLimits
from bridge.queue.claim_check import sha256_hex, store_payloads
from bridge.queue.jobs import ExtractionJob, PageJob, Stage, page_task_id
from sandbox import pages
from sandbox.errors import KilledFromOutside, SandboxUnavailable
from tests.redis_server import SUITE_REDIS_URL
from worker import extraction
from worker.config import Settings
from worker.fanout import (
    _any_failed,
    _checked,
    _Document,
    _Failed,
    _Plan,
    _Read,
    _read,
    _Scan,
    page_gave_up,
    run_page,
)
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
    document = _Document(redis, backend, uuid.uuid4().hex, 60)
    try:
        document.publish_progress(PLAN, 1)
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
    document = _Document(redis, backend, uuid.uuid4().hex, 60)
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
        document.forget()


class _PageTask:
    """What the page task's code uses of the bound Celery task."""

    def __init__(self, backend: Any, task_id: str, retries: int = 5) -> None:
        self.backend = backend
        self.request = type("Request", (), {"id": task_id, "retries": retries, "expires": None})()


def test_a_page_whose_task_gave_up_fails_its_document_at_once_naming_it(
    redis: Redis, backend: Any
) -> None:
    """Retries spent on an unavailable sandbox: the document is answered, not left to wait
    for the caller's deadline."""
    job = ExtractionJob(
        "ee" * 32, 100, "scan.pdf", "pdf", "application/pdf", ExtractionLimits(), Stage.LIGHT, False
    )
    document = _Document(redis, backend, uuid.uuid4().hex, 60)
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
        document.forget()


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
    document = _Document(redis, backend, uuid.uuid4().hex, 60)
    scans: list[pages.TextPart | _Scan] = [_Scan(sha256_hex(p), len(p), "") for p in one_pages]
    document.store_plan(_Plan(job.to_wire(), 2, scans))
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
        document.forget()


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
        outcomes = [_read(task, first, job, runtime).outcome for _ in range(3)]
        assert outcomes == [TaskOutcome.ADMITTED, TaskOutcome.ADMITTED, TaskOutcome.OVER_DELIVERED]
        assert _read(task, again, job, runtime).outcome is TaskOutcome.ADMITTED
    finally:
        document.forget()
