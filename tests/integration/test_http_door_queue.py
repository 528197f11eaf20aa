"""``airlock serve`` with a broker: the same files give the same selection through the queue as
in the door's own sandbox and as ``airlock extract --json``, byte for byte; with no worker
consuming, a request is answered 503 with Retry-After, never left to hang."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.door.serving import Door
from tests.integration.conftest import WorkerFactory
from tests.integration.load import wait_until
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
