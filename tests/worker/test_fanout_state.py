"""The fan-out state in a real Redis: a page's record is written once, and a page's progress
never overwrites the document's answer (worker/fanout.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from redis import Redis

from sandbox import pages
from tests.redis_server import SUITE_REDIS_URL
from worker.fanout import _Document, _Failed, _Plan, _Read, _Scan

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
        assert document.read_pages() == {2} and not document.any_failed()
        redis.hset(f"airlock:fanout:{document.document_id}:read", "3", b"{forged")
        assert document.records()[3] == _Failed(
            "MalformedAnswer", "the page's record in Redis is malformed"
        )
    finally:
        document.forget()
