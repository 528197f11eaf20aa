"""Jobs nobody will run are answered at once: no worker on their queue, or a full queue.

Each test has its own ``redis-server``, so no worker announcement or backlog of another test
is in it.
"""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest

from bridge.knowledge.attachments import AttachmentRef
from bridge.knowledge.contracts import IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import LIGHT_QUEUE, OCR_QUEUE
from bridge.queue.reconcile import UNACKED_KEY
from bridge.queue.source import gather
from tests.integration.conftest import AIRLOCK, WorkerFactory, wait_until_empty, worker_env
from tests.integration.load import wait_until
from tests.integration.refs import counted_ref, local, runs
from tests.redis_server import RedisServer
from worker.selections import QUEUED_DEADLINE_SECONDS

pytestmark = [pytest.mark.integration, pytest.mark.redis]

DEADLINE = 60.0


def test_a_job_for_a_queue_no_worker_consumes_is_answered_no_workers_at_once(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    own_workers(queues=[OCR_QUEUE])
    scan = (corpus_dir / "tesseract_phototest.tif").read_bytes()
    image = AttachmentRef("scan.tif", "image", "image/tiff", scan)
    text = AttachmentRef("note.txt", "text", "text/plain", b"nobody reads the light queue")
    with closing(CeleryQueue(own_redis.url(), own_redis.url())) as client:
        started = time.monotonic()
        selection = gather([text, image], client, deadline=DEADLINE, use_cache=False)
        elapsed = time.monotonic() - started
    assert selection.text == local([image]).text  # the OCR worker answered the image
    [(label, reason)] = selection.dropped
    assert label == "note.txt"
    assert reason.endswith("NoWorkers: no worker is consuming airlock.light")
    assert elapsed < DEADLINE / 4  # the OCR job's time, not the deadline
    assert own_redis.client().llen(LIGHT_QUEUE) == 0  # never queued


@pytest.mark.slow
def test_past_the_bound_jobs_are_answered_queue_full_and_expired_jobs_leave_nothing(
    own_redis: RedisServer, own_workers: WorkerFactory
) -> None:
    """AIRLOCK_MAX_QUEUED=5 and no worker yet: of eight jobs five are queued (and expire with
    their caller's deadline), three are answered QueueFull; a later caller is answered at once.
    A worker arriving afterwards discards the five expired jobs without running them and
    leaves no result key, delivery count or payload run behind."""
    redis = own_redis.client()
    with closing(
        CeleryQueue(own_redis.url(), own_redis.url(), max_queued=5, require_consumers=False)
    ) as client:
        first = [counted_ref(f"burst{i}") for i in range(8)]
        selection = gather(first, client, deadline=2, use_cache=False)
        reasons = dict(selection.dropped)
        assert [label for label in reasons if "DeadlineExceeded" in reasons[label]] == [
            f"burst{i}.txt" for i in range(5)
        ]
        full = [label for label in reasons if "QueueFull" in reasons[label]]
        assert full == [f"burst{i}.txt" for i in range(5, 8)]
        assert reasons["burst7.txt"].endswith(
            "QueueFull: airlock.light is at its bound of 5 queued jobs (AIRLOCK_MAX_QUEUED); "
            "the job was not queued"
        )
        started = time.monotonic()
        later = gather([counted_ref("later")], client, deadline=DEADLINE, use_cache=False)
        assert "QueueFull" in later.dropped[0][1]
        assert time.monotonic() - started < DEADLINE / 4
    assert redis.llen(LIGHT_QUEUE) == 5
    worker = own_workers()
    wait_until_empty(redis, [LIGHT_QUEUE], [UNACKED_KEY])

    def nothing_kept() -> bool:
        # The worker's last revocation is handled after the queue emptied: waited for, not
        # slept past (a fixed second failed on a loaded machine).
        return not any(redis.scan_iter(match="celery-task-meta-*")) and not any(
            redis.scan_iter(match="airlock:deliveries:*")
        )

    wait_until(nothing_kept, 30, "no result and no delivery count kept for revoked jobs")
    assert all(runs(own_workers.marker_dir, f"burst{i}") == 0 for i in range(8))
    log = worker.log()  # revoked by their caller's withdrawal, or expired: either way unrun
    assert log.count("Discarding revoked task") + log.count("expired") >= 5
    redis.close()


def test_queue_mode_extract_with_no_worker_says_so_at_once(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """``airlock extract`` against a broker no worker consumes: not its 300 s deadline in
    silence, but the reason, at once."""
    note = tmp_path / "note.txt"
    note.write_text("is anybody there?\n")
    env = worker_env(own_redis.url(), tmp_path, {})
    started = time.monotonic()
    run = subprocess.run(
        [str(AIRLOCK), "extract", str(note)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip().endswith("NoWorkers: no worker is consuming airlock.light")
    assert elapsed < QUEUED_DEADLINE_SECONDS / 10


def test_concurrent_callers_cannot_overshoot_the_bound_together(own_redis: RedisServer) -> None:
    """Eight callers at once, 20 jobs each, a bound of 50 and no worker: exactly 50 are queued
    (they expire with their callers' deadline) and 110 are answered QueueFull. Each caller
    reserves the room it is granted until it has published; before, callers admitted at the
    same moment each saw the room free and together queued past the bound (1,964 of 1,000)."""
    redis = own_redis.client()
    url = own_redis.url()
    barrier = threading.Barrier(8)

    def call(caller: int) -> IngestSelection:
        refs = [counted_ref(f"c{caller}-{i}") for i in range(20)]
        with closing(CeleryQueue(url, url, max_queued=50, require_consumers=False)) as client:
            barrier.wait()
            return gather(refs, client, deadline=3, use_cache=False)

    with ThreadPoolExecutor(8) as pool:
        selections = list(pool.map(call, range(8)))
    reasons = [reason for selection in selections for _, reason in selection.dropped]
    assert len(reasons) == 160
    assert sum("QueueFull" in reason for reason in reasons) == 110
    assert sum("DeadlineExceeded" in reason for reason in reasons) == 50
    assert redis.llen(LIGHT_QUEUE) == 50
    redis.close()
