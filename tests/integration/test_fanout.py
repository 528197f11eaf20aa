"""A scanned PDF spread page by page over real OCR workers, merged back into the one answer.

Every test here sets ``AIRLOCK_FAN_OUT_PAGES`` low so that a few corpus scans make a document
worth splitting; the single-task path (``0``: never split) and the local extractor are the
references the merged answer must equal byte for byte.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter
from pypdf.generic import NameObject, TextStringObject
from redis import Redis

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.queue.admission import consumers_key
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import PAGES_QUEUE
from bridge.queue.source import gather
from tests.integration.conftest import (
    FAST_RECOVERY,
    WorkerFactory,
    WorkerProcess,
    wait_for_marker,
)
from tests.integration.refs import local_selection
from tests.scanned_pdfs import scanned_pdf

pytestmark = [pytest.mark.integration, pytest.mark.redis]

LIMITS = ExtractionLimits(max_pages=30)
FAN_OUT = {"AIRLOCK_FAN_OUT_PAGES": "1"}
SINGLE = {"AIRLOCK_FAN_OUT_PAGES": "0"}
_FANNED_OUT = "extraction fanned_out"


def _scan_ref(corpus_dir: Path, pages: int, label: str = "scan.pdf") -> AttachmentRef:
    payload = scanned_pdf(corpus_dir, pages, text_page="A page with a text layer of its own")
    return AttachmentRef(label, "pdf", "application/pdf", payload)


def _with_directive(payload: bytes, page: int, directive: str) -> bytes:
    """``payload`` with a test-hook directive in page ``page``'s dictionary (from 0)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(payload)))
    writer.pages[page][NameObject("/AirlockTest")] = TextStringObject(directive)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _fanned_out(worker: WorkerProcess) -> int:
    return worker.log().count(_FANNED_OUT)


def test_a_fanned_out_scan_is_answered_as_the_single_task_and_the_local_path_answer_it(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    refs = [_scan_ref(corpus_dir, 5), _scan_ref(corpus_dir, 3, "short.pdf")]
    single_worker = start_worker(env=SINGLE)
    single = gather(refs, client, limits=LIMITS, deadline=120, use_cache=False)
    single_worker.stop()
    assert _fanned_out(single_worker) == 0
    fanning_worker = start_worker(concurrency=2, env=FAN_OUT)
    fanned = gather(refs, client, limits=LIMITS, deadline=120, use_cache=False)
    assert _fanned_out(fanning_worker) == 2
    assert fanned == single == local_selection(refs, LIMITS)
    assert not single.dropped and "ATTACHMENT [short.pdf]" in single.text


def test_a_fanned_out_scans_text_is_cached_and_the_next_upload_is_not_split_again(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    worker = start_worker(concurrency=2, env=FAN_OUT)
    ref = _scan_ref(corpus_dir, 3, "cached.pdf")
    first = gather([ref], client, limits=LIMITS, deadline=120)
    again = gather([ref], client, limits=LIMITS, deadline=120)
    assert first == again and not first.dropped
    assert _fanned_out(worker) == 1
    assert _page_tasks_received(worker) == 2  # the second page has a text layer


def _page_ids(worker: WorkerProcess) -> list[str]:
    """The page tasks the worker received, by id, as often as it received each."""
    return re.findall(r"Task airlock\.extract_page\[([^\]]+)\] received", worker.log())


def _page_tasks_received(worker: WorkerProcess) -> int:
    return len(_page_ids(worker))


def _wait_for(condition: object, timeout: float, what: str | Callable[[], str]) -> None:
    """Wait for ``condition``; ``what`` says what failed (a callable: said as it is then)."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.05)


@pytest.mark.slow
def test_kill_9_of_an_ocr_worker_mid_document_loses_no_page_and_answers_once_in_order(
    own_workers: WorkerFactory, own_redis: object, corpus_dir: Path
) -> None:
    env = {**FAN_OUT, **FAST_RECOVERY}
    survivor = own_workers(env=env)
    doomed = own_workers(queues=("airlock.ocr", "airlock.pages"), env=env)
    ref = _scan_ref(corpus_dir, 6)
    url = own_workers.redis_url
    with closing(CeleryQueue(url, url)) as queue, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], queue, limits=LIMITS, deadline=120, use_cache=False)
        _wait_for(lambda: _page_tasks_received(doomed) > 0, 60, "no page reached the worker")
        time.sleep(0.5)  # inside tesseract, mid-page
        doomed.kill_everything()
        selection = pending.result()
    assert selection == local_selection([ref], LIMITS)
    assert not selection.dropped
    # The page the killed worker held was delivered again, to the survivor.
    assert set(_page_ids(doomed)) & set(_page_ids(survivor))
    with Redis.from_url(url) as redis:
        assert not list(redis.scan_iter("airlock:fanout:*")), "the document's state was left"
        assert not list(redis.scan_iter("celery-task-meta-*")), "an answer was stored twice"


def test_a_page_that_kills_its_worker_every_time_fails_the_document_naming_that_page(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path, marker_dir: Path
) -> None:
    start_worker(env=FAN_OUT)
    payload = _with_directive(scanned_pdf(corpus_dir, 3), 2, "airlock-test: crash pagekiller")
    killer = AttachmentRef("killer.pdf", "pdf", "application/pdf", payload)
    fine = AttachmentRef("fine.txt", "text", "text/plain", b"unaffected")
    selection = gather([killer, fine], client, limits=LIMITS, deadline=120, use_cache=False)
    assert selection.text == "ATTACHMENT [fine.txt]\nunaffected"
    [(label, reason)] = selection.dropped
    assert label == "killer.pdf"
    assert "WorkerLost: page 3 of 3: the worker failed 3 times on this job" in reason
    assert len(wait_for_marker(marker_dir / "pagekiller", lines=3)) == 3


def _active_pages(client: CeleryQueue, worker: WorkerProcess) -> list[object]:
    active = client._app.control.inspect(destination=[worker.nodename], timeout=2).active()
    assert active is not None, "the worker did not answer the inspection"
    return [task for task in active[worker.nodename] if task["name"] == "airlock.extract_page"]


def test_a_deadline_shorter_than_the_pages_ends_in_deadline_exceeded_and_runs_no_page_after_it(
    start_worker: WorkerFactory, client: CeleryQueue, redis: Redis, corpus_dir: Path
) -> None:
    worker = start_worker(concurrency=2, env=FAN_OUT)
    ref = _scan_ref(corpus_dir, 12)
    # The suite's Redis is shared with the tests before: what they left is not this one's.
    answers_before = set(redis.scan_iter("celery-task-meta-*"))
    state_before = set(redis.scan_iter("airlock:fanout:*"))
    selection = gather([ref], client, limits=LIMITS, deadline=4, use_cache=False)
    [(label, reason)] = selection.dropped
    assert label == "scan.pdf" and "DeadlineExceeded" in reason
    assert _page_tasks_received(worker) > 0, "the document was not spread over pages"
    # The page children running at the deadline are killed at it; the pages still queued
    # expired with it: within a moment nothing runs and nothing is left to run.
    _wait_for(lambda: not redis.llen(PAGES_QUEUE), 10, "page tasks were left in the queue")
    _wait_for(lambda: not _active_pages(client, worker), 5, "a page task ran on")
    read_after_deadline = worker.log().count("airlock.extract_page")
    time.sleep(2)
    assert worker.log().count("airlock.extract_page") == read_after_deadline

    # Nobody reads the document any more: neither its fan-out state nor an answer is kept.
    def left() -> dict[bytes, int]:
        return {
            key: redis.ttl(key) for key in set(redis.scan_iter("airlock:fanout:*")) - state_before
        }

    _wait_for(lambda: not left(), 10, lambda: f"fan-out state was left (key: TTL): {left()}")
    assert set(redis.scan_iter("celery-task-meta-*")) <= answers_before


def test_a_page_the_broker_lost_is_published_again_and_the_pages_read_are_kept(
    start_worker: WorkerFactory, redis_url: str, redis: Redis, corpus_dir: Path
) -> None:
    """The BRPOP-before-unacked window (celery#7950) for a page: a stand-in consumer pops one
    page and drops it, as a main process killed right then would. Once no other page holds
    the document, the caller publishes the document again under its id; the light task finds
    the plan and the pages already read, and sends only the lost one."""
    ref = _scan_ref(corpus_dir, 4)
    light = start_worker(queues=("airlock.light",), env=FAN_OUT)
    # A page worker has announced itself but takes nothing yet: the document is split.
    redis.set(consumers_key(PAGES_QUEUE), "stand-in", ex=120)
    client = CeleryQueue(redis_url, redis_url, require_consumers=False)  # OCR workers come later
    with closing(client), ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], client, limits=LIMITS, deadline=120, use_cache=False)
        _wait_for(lambda: redis.llen(PAGES_QUEUE) == 3, 60, "the pages were not published")
        lost = redis.brpop([PAGES_QUEUE], timeout=10)
        assert lost is not None  # now in no queue and no unacked entry
        ocr = start_worker(queues=("airlock.ocr", "airlock.pages"), env=FAN_OUT)
        selection = pending.result()
    assert selection == local_selection([ref], LIMITS)
    assert _fanned_out(light) == 2  # split again when published again
    lost_id = json.loads(lost[1])["headers"]["id"]
    received = _page_ids(ocr)
    assert sorted(received) == sorted({*received}) and len(received) == 3  # each page read once
    assert received.count(lost_id) == 1
