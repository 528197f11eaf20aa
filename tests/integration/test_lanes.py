"""Small jobs keep their latency while long scans fan out over the same workers.

Three ``airlock worker`` processes consume every queue (the default); each keeps one pool
process that heavy jobs (OCR, pages) may not take (worker/lanes.py). Eight callers send small
texts at once, back to back, each through ``gather`` with its own client (the issue's load:
at least three workers and eight concurrent callers). Their p95 latency is measured alone and
then while two 12-page scans are read page by page, in the same run on the same workers: the
ratio is what is asserted, never a time.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest
from redis import Redis

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.knowledge.contracts import IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import PAGES_QUEUE
from bridge.queue.source import gather
from tests.integration.conftest import WorkerFactory
from tests.integration.load import wait_until
from tests.redis_server import RedisServer
from tests.scanned_pdfs import scanned_pdf

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

WORKERS = 3
CALLERS = 8
#: Each caller's calls per phase: 200 latencies a phase, ten above the p95.
CALLS = 25
LIMITS = ExtractionLimits(max_pages=30)


def _latencies(url: str, tag: str, caller: int) -> list[float]:
    """One caller's ``CALLS`` small texts, one after another, each timed."""
    latencies = []
    with closing(CeleryQueue(url, url)) as client:
        for n in range(CALLS):
            text = f"note {tag} {caller} {n}".encode()
            ref = AttachmentRef(f"{tag}{caller}-{n}.txt", "text", "text/plain", text)
            started = time.monotonic()
            selection = gather([ref], client, deadline=60, use_cache=False)
            latencies.append(time.monotonic() - started)
            assert not selection.dropped, selection.dropped
    return latencies


def _p95(url: str, tag: str) -> float:
    """The p95 of every call of ``CALLERS`` callers calling at once."""
    with ThreadPoolExecutor(CALLERS) as callers:
        runs = callers.map(lambda caller: _latencies(url, tag, caller), range(CALLERS))
        latencies = [latency for run in runs for latency in run]
    return statistics.quantiles(latencies, n=20)[18]


def test_small_jobs_keep_their_latency_while_two_scans_fan_out(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    env = {"AIRLOCK_CONCURRENCY": "1", "AIRLOCK_FAN_OUT_PAGES": "2"}
    for _ in range(WORKERS):
        own_workers(via_cli=True, concurrency=None, env=env)
    scan = scanned_pdf(corpus_dir, 12)
    redis: Redis = own_redis.client()
    url = own_redis.url()

    def read(label: str) -> IngestSelection:
        with closing(CeleryQueue(url, url)) as scans_client:
            ref = AttachmentRef(label, "pdf", "application/pdf", scan)
            return gather([ref], scans_client, limits=LIMITS, deadline=300, use_cache=False)

    with ThreadPoolExecutor(2) as pool:
        alone = _p95(url, "alone")
        scans = [pool.submit(read, f"scan{i}.pdf") for i in range(2)]
        wait_until(lambda: redis.llen(PAGES_QUEUE) > 4, 120, "pages waiting for the workers")
        beside = _p95(url, "beside")
        assert redis.llen(PAGES_QUEUE) > 0, "the scans were read before the small jobs ended"
        assert not any(future.done() for future in scans)
        for future in scans:
            assert not future.result().dropped
    print(
        f"{CALLERS} callers, {WORKERS} workers: small-text p95 alone {alone * 1000:.1f} ms, "
        f"beside two scans {beside * 1000:.1f} ms ({beside / alone:.2f}x)"
    )
    assert beside <= 3 * alone, (alone, beside)
    redis.close()
