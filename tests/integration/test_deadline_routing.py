"""Deadlines account for every ref; routing keeps images (and OCR hand-offs) on the OCR queue."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from bridge.knowledge.attachments import AttachmentRef, AttachmentSource
from bridge.knowledge.contracts import ContextRequest, IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import LIGHT_QUEUE, OCR_QUEUE
from bridge.queue.source import gather
from sandbox.extractor import SandboxExtractor
from tests.integration.conftest import WorkerFactory, WorkerProcess, wait_until_empty

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def local(refs: list[AttachmentRef]) -> IngestSelection:
    return AttachmentSource(refs, SandboxExtractor()).select(ContextRequest("x"))


class RecordingQueue(CeleryQueue):
    """The real client, remembering the task ids it published (to look for them later).

    It queues jobs whether or not a worker consumes their queue: these tests are about what
    becomes of jobs nobody answers in time (tests/integration/test_admission.py has the
    NoWorkers answer)."""

    def __init__(self, redis_url: str) -> None:
        self.task_ids: list[str] = []
        super().__init__(redis_url, redis_url, new_task_id=self._record, require_consumers=False)

    def _record(self) -> str:
        task_id = uuid.uuid4().hex
        self.task_ids.append(task_id)
        return task_id


@pytest.fixture
def recording(redis_url: str) -> Iterator[RecordingQueue]:
    queue = RecordingQueue(redis_url)
    yield queue
    queue.close()


def received(worker: WorkerProcess, task_id: str) -> bool:
    """Whether the worker was handed the task (it also logs ids it is told to revoke)."""
    return f"airlock.extract[{task_id}] received" in worker.log()


def test_without_workers_every_ref_is_dropped_within_the_deadline_and_stays_stale(
    start_worker: WorkerFactory, recording: RecordingQueue, redis: Redis, corpus_dir: Path
) -> None:
    image = (corpus_dir / "tesseract_phototest-rotated-R.png").read_bytes()
    refs = [
        AttachmentRef("a.txt", "text", "text/plain", b"first request, first file"),
        AttachmentRef("b.png", "image", "image/png", image),
        AttachmentRef("empty.txt", "text", "text/plain", b""),
    ]
    started = time.monotonic()
    selection = gather(refs, recording, deadline=1.0, use_cache=False)
    assert time.monotonic() - started < 1.3  # the deadline, one last MGET and the revoke
    assert selection.text == "" and selection.revision == ""
    assert [label for label, _ in selection.dropped] == ["a.txt", "b.png", "empty.txt"]
    for _, reason in selection.dropped[:2]:
        assert "DeadlineExceeded: no answer within the deadline of 1 seconds" in reason
    assert "empty payload" in selection.dropped[2][1]  # refused before dispatch, never queued
    stale_ids = list(recording.task_ids)
    assert len(stale_ids) == 2

    # A worker that turns up later sees the stale jobs first; it must drop them unrun, and a
    # new request (same labels, new content) must get its own answers only.
    start_worker()
    later = [
        AttachmentRef("a.txt", "text", "text/plain", b"second request, new content"),
        AttachmentRef("b.png", "image", "image/png", image),
    ]
    assert gather(later, recording, deadline=60, use_cache=False) == local(later)
    wait_until_empty(redis, [LIGHT_QUEUE, OCR_QUEUE])
    for task_id in stale_ids:
        assert not redis.keys(f"airlock:deliveries:{task_id}:*"), "a stale job was run"


@pytest.mark.slow
def test_images_reach_only_the_ocr_queue(
    start_worker: WorkerFactory, recording: RecordingQueue, redis: Redis, corpus_dir: Path
) -> None:
    light = start_worker(queues=[LIGHT_QUEUE])
    image = AttachmentRef(
        "scan.png",
        "image",
        "image/png",
        (corpus_dir / "tesseract_phototest-rotated-R.png").read_bytes(),
    )
    text = AttachmentRef("note.txt", "text", "text/plain", b"light work")
    selection = gather([text, image], recording, deadline=3, use_cache=False)
    assert selection.text == "ATTACHMENT [note.txt]\nlight work"
    assert "DeadlineExceeded" in dict(selection.dropped)["scan.png"]
    text_id, image_id = recording.task_ids
    assert redis.llen(OCR_QUEUE) == 1  # still waiting for an OCR worker
    assert received(light, text_id) and not received(light, image_id)

    ocr = start_worker(queues=[OCR_QUEUE])
    assert gather([image], recording, deadline=60, use_cache=False) == local([image])
    assert received(ocr, recording.task_ids[-1])
    assert not received(light, recording.task_ids[-1])


@pytest.mark.slow
def test_scanned_pdf_is_handed_from_the_light_to_the_ocr_queue(
    start_worker: WorkerFactory, recording: RecordingQueue, corpus_dir: Path
) -> None:
    light = start_worker(queues=[LIGHT_QUEUE])
    payload = (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes()
    scanned = AttachmentRef("scan.pdf", "pdf", "application/pdf", payload)
    selection = gather([scanned], recording, deadline=3, use_cache=False)
    # The light worker runs without OCR and hands the job on; no OCR worker answers yet.
    assert "DeadlineExceeded" in selection.dropped[0][1]
    assert received(light, recording.task_ids[-1])

    ocr = start_worker(queues=[OCR_QUEUE])
    selection = gather([scanned], recording, deadline=60, use_cache=False)
    assert selection == local([scanned])
    assert "Docling bundles PDF document conversion" in selection.text
    assert received(light, recording.task_ids[-1]) and received(ocr, recording.task_ids[-1])
