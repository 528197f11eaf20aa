"""Workers die mid-job; requests still complete, once, with the right text.

The slow and the crashing payloads are text files whose first line is a directive for the test
hooks (``tests.integration.worker_hooks``): the hook sleeps or kills its pool process, then the
real sandbox extracts the text, so the local path (no hooks) is the reference.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bridge.attachments import AttachmentRef, AttachmentSource
from bridge.celery_queue import CeleryQueue
from bridge.contracts import ContextRequest, IngestSelection
from bridge.queue import gather
from sandbox.extractor import SandboxExtractor
from tests.integration.conftest import WorkerFactory, wait_for_marker

pytestmark = pytest.mark.integration

# Short limits for the whole-worker test, so the visibility timeout can be waited out: every
# job here takes ~2 s, under the 4 s soft limit; a lost job is visible again after 6 s.
_FAST_RECOVERY = {
    "AIRLOCK_SANDBOX_WALL_SECONDS": "3",
    "AIRLOCK_TASK_SOFT_TIME_LIMIT": "4",
    "AIRLOCK_TASK_TIME_LIMIT": "5",
    "AIRLOCK_VISIBILITY_TIMEOUT": "6",
    "AIRLOCK_RESTORE_INTERVAL": "1",
}


def local(refs: list[AttachmentRef]) -> IngestSelection:
    return AttachmentSource(refs, SandboxExtractor()).select(ContextRequest("x"))


def slow_ref(tag: str) -> AttachmentRef:
    payload = f"airlock-test: sleep 2 {tag}\nthe text that must arrive exactly once\n".encode()
    return AttachmentRef(f"{tag}.txt", "text", "text/plain", payload)


def test_killed_pool_process_is_redelivered_at_once(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    worker = start_worker()  # default visibility timeout (minutes): recovery must not wait on it
    ref = slow_ref("poolkill")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], client, deadline=60, use_cache=False)
        [first_pid] = wait_for_marker(marker_dir / "poolkill")
        assert first_pid in worker.pool_pids()
        killed_at = time.monotonic()
        os.kill(first_pid, signal.SIGKILL)
        selection = pending.result()
    assert time.monotonic() - killed_at < 20
    assert selection == local([ref])
    pids = wait_for_marker(marker_dir / "poolkill", lines=2)
    assert len(pids) == 2 and pids[1] != first_pid


def test_job_of_a_lost_worker_is_recovered_by_another(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    doomed = start_worker(env=_FAST_RECOVERY)
    ref = slow_ref("wholekill")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], client, deadline=90, use_cache=False)
        [first] = wait_for_marker(marker_dir / "wholekill")
        assert first in doomed.pool_pids()
        doomed.kill_everything()
        rescuer = start_worker(env=_FAST_RECOVERY)
        selection = pending.result()
    assert selection == local([ref])
    pids = wait_for_marker(marker_dir / "wholekill", lines=2)
    assert len(pids) == 2 and pids[0] == first and pids[1] in rescuer.pool_pids()


def test_payload_that_kills_every_worker_fails_after_n_deliveries(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    start_worker()
    killer = AttachmentRef("killer.txt", "text", "text/plain", b"airlock-test: crash killer\nx")
    fine = AttachmentRef("fine.txt", "text", "text/plain", b"unaffected")
    selection = gather([killer, fine], client, deadline=90, use_cache=False)
    assert selection.text == "ATTACHMENT [fine.txt]\nunaffected"
    [(label, reason)] = selection.dropped
    assert label == "killer.txt"
    assert "WorkerLost: the worker failed 3 times on this job" in reason
    assert len(wait_for_marker(marker_dir / "killer", lines=3)) == 3
