"""``airlock serve`` with a broker: the same files give the same selection through the queue as
in the door's own sandbox and as ``airlock extract --json``, byte for byte; with no worker
consuming, a request is answered 503 with Retry-After, never left to hang; DELETE stops a job
the workers are running (its sandbox child killed, a scan's remaining pages never read) and a
job they hold queued never runs."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from bridge.knowledge.attachments import AttachmentRef
from bridge.queue import gather
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import LIGHT_QUEUE
from tests.door.serving import Door, busy_child, cpu_until_gone
from tests.integration.conftest import WorkerFactory
from tests.integration.load import wait_until
from tests.pdf_builders import slow_text_pdf
from tests.redis_server import RedisServer
from tests.scanned_pdfs import scanned_pdf

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

DOCUMENTS = ("docling_multi_page.pdf", "docling_docx_lists.docx", "csv-spectrum_utf8.csv")


def _answers(door: Door, corpus_dir: Path) -> list[bytes]:
    answers = []
    for name in DOCUMENTS:
        answered = httpx.post(
            f"{door.url}/v1/extract?wait=120",
            content=(corpus_dir / name).read_bytes(),
            headers={"X-Filename": quote(name)},
            timeout=130,
        )
        assert answered.status_code == 200, answered.text
        answers.append(answered.content)
    return answers


def test_through_the_queue_the_door_answers_what_it_answers_embedded(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path, tmp_path: Path
) -> None:
    own_workers(concurrency=2)
    queued = Door({"AIRLOCK_BROKER_URL": own_redis.url()}, tmp_path)
    embedded = Door({}, tmp_path)
    try:
        assert _answers(queued, corpus_dir) == _answers(embedded, corpus_dir)
        # A scan's pages are counted in its job's status as the OCR worker reads them.
        accepted = httpx.post(
            f"{queued.url}/v1/extract?wait=0",
            content=scanned_pdf(corpus_dir, 3),
            headers={"X-Filename": "scan.pdf"},
        )
        url = accepted.headers["location"]
        wait_until(
            lambda: httpx.get(url).json()["state"] not in ("queued", "running"), 300, "the scan"
        )
        status = httpx.get(url).json()
        assert status["state"] == "done", status
        assert (status["pages_done"], status["pages_total"]) == (3, 3)
    finally:
        queued.stop()
        embedded.stop()


def test_with_no_worker_a_request_is_answered_503_with_retry_after(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    door = Door({"AIRLOCK_BROKER_URL": own_redis.url()}, tmp_path)
    try:
        answered = httpx.post(f"{door.url}/v1/extract", content=b"nobody reads this", timeout=60)
        assert answered.status_code == 503, answered.text
        assert answered.headers["retry-after"] == "5"
        error = answered.json()["error"]
        assert error["type"] == "NoWorkers"
        assert "no worker is consuming airlock.light" in error["reason"]
    finally:
        door.stop()
    own_redis.stop()
    gone = Door({"AIRLOCK_BROKER_URL": own_redis.url()}, tmp_path)
    try:
        answered = httpx.post(f"{gone.url}/v1/extract", content=b"no Redis", timeout=60)
        assert answered.status_code == 503, answered.text
        assert answered.json()["error"]["type"] == "QueueUnavailable"
    finally:
        gone.stop()


def _accepted(door: Door, content: bytes, name: str) -> str:
    accepted = httpx.post(
        f"{door.url}/v1/extract?wait=0", content=content, headers={"X-Filename": name}
    )
    assert accepted.status_code == 202, accepted.text
    return accepted.headers["location"]


def test_delete_stops_the_job_a_worker_runs_and_drops_the_one_it_holds_queued(
    own_redis: RedisServer, own_workers: WorkerFactory, tmp_path: Path
) -> None:
    """One light process: the slow PDF runs, the second waits in the worker's hands. Both are
    withdrawn: the first's child is killed with most of its 6 CPU-s left, the second is
    discarded unrun, and the worker takes the next job."""
    worker = own_workers(queues=[LIGHT_QUEUE], concurrency=1)
    door = Door({"AIRLOCK_BROKER_URL": own_redis.url()}, tmp_path)
    redis = own_redis.client()
    try:
        running = _accepted(door, slow_text_pdf(), "running.pdf")
        child = busy_child(worker.pool_pids())
        queued = _accepted(door, slow_text_pdf(), "queued.pdf")
        # Published: waiting in the queue, or reserved by the worker beside the running one.
        wait_until(
            lambda: redis.llen(LIGHT_QUEUE) + redis.hlen("unacked") == 2, 60, "the second job"
        )
        assert httpx.delete(queued).json()["state"] == "withdrawn"
        assert httpx.delete(running).json()["state"] == "withdrawn"
        used = cpu_until_gone(child, worker.pool_pids())
        assert used < 3.0, used  # left alone it would have used about 6 CPU-s
        after = httpx.post(f"{door.url}/v1/extract?wait=60", content=b"next", timeout=70)
        assert after.status_code == 200, after.text
        assert after.json()["text"] == "ATTACHMENT [upload]\nnext"
        log = worker.log()
        assert "extraction withdrawn: running.pdf" in log, log[-4000:]
        assert "Discarding revoked task" in log, log[-4000:]
        assert "queued.pdf" not in log, log[-4000:]  # never delivered to the task
        # Nothing is left for nobody: no answer, no state, nothing in the worker's hands.
        wait_until(
            lambda: not redis.keys("celery-task-meta-*") and not redis.hlen("unacked"),
            30,
            "the withdrawn jobs' keys to go",
        )
    finally:
        redis.close()
        door.stop()


def test_delete_of_a_scan_read_in_pages_stops_its_pages(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path, tmp_path: Path
) -> None:
    """A 10-page scan fanned out to the page queue, withdrawn once its first page is read: the
    pages not yet started are never read and the document's fan-out state is deleted."""
    worker = own_workers(concurrency=1)
    door = Door({"AIRLOCK_BROKER_URL": own_redis.url()}, tmp_path)
    redis = own_redis.client()
    pages = 10
    try:
        url = _accepted(door, scanned_pdf(corpus_dir, pages), "scan.pdf")
        wait_until(lambda: httpx.get(url).json()["pages_done"] >= 1, 300, "the first page")
        assert httpx.delete(url).json()["state"] == "withdrawn"
        wait_until(
            lambda: not redis.keys("airlock:fanout:*") and not redis.hlen("unacked"),
            120,
            "the withdrawn scan's pages to be dropped",
        )
        log = worker.log()
        read = log.count("extraction admitted: scan.pdf (pdf, page stage)")
        assert 1 <= read < pages - 2, log[-4000:]
        assert "its caller withdrew the document" in log, log[-4000:]
        assert not redis.keys("celery-task-meta-*")
    finally:
        redis.close()
        door.stop()


def test_a_withdrawable_call_sweeps_no_more_often_than_any_other(
    own_redis: RedisServer, own_workers: WorkerFactory
) -> None:
    """A call that looks for its withdrawal ten times a second still reads the answers it
    missed (an MGET) once a quiet second: 64 door threads waiting would otherwise send Redis
    640 sweeps a second."""
    own_workers(queues=[LIGHT_QUEUE], concurrency=1)
    redis = own_redis.client()
    queue = CeleryQueue(own_redis.url(), own_redis.url(), withdrawn=lambda: False)
    try:
        ref = AttachmentRef("slow.pdf", "pdf", "application/pdf", slow_text_pdf())
        sweeps_before = redis.info("commandstats").get("cmdstat_mget", {}).get("calls", 0)
        started = time.monotonic()
        selection = gather([ref], queue, deadline=120)
        seconds = time.monotonic() - started
        sweeps = redis.info("commandstats")["cmdstat_mget"]["calls"] - sweeps_before
        assert selection.text.endswith("the slow page"), selection
        assert seconds > 2  # long enough to tell a sweep a second from ten
        assert sweeps <= seconds + 2, (sweeps, seconds)  # one a second, and the last
    finally:
        queue.close()
        redis.close()
