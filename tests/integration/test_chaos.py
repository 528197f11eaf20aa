"""Workers die mid-job; requests still complete, once, with the right text.

The slow and the crashing payloads are text files whose first line is a directive for the test
hooks (``tests.integration.worker_hooks``): the hook sleeps or kills its pool process, then the
real sandbox extracts the text, so the local path (no hooks) is the reference.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from functools import partial
from pathlib import Path

import pytest
from redis import Redis

from bridge.knowledge.attachments import AttachmentRef
from bridge.knowledge.contracts import IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import gather
from tests.integration.conftest import (
    FAST_RECOVERY,
    WorkerFactory,
    WorkerProcess,
    wait_for_marker,
)
from tests.integration.load import wait_until
from tests.integration.refs import counted_ref, local, runs, slow_ref

pytestmark = [pytest.mark.integration, pytest.mark.redis]


@pytest.mark.slow
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


def _lost_mid_job(
    start_worker: WorkerFactory,
    client: CeleryQueue,
    marker_dir: Path,
    tag: str,
    deadline: float,
    env: dict[str, str] | None = None,
) -> tuple[float, int, WorkerProcess]:
    """A slow job's whole worker killed mid-job (its machine gone) and another started; the
    caller is answered as the embedded path answers. The seconds from the kill to the answer,
    the first run's pool process and the worker started after the kill."""
    doomed = start_worker(env=env)
    ref = slow_ref(tag)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], client, deadline=deadline, use_cache=False)
        [first] = wait_for_marker(marker_dir / tag)
        assert first in doomed.pool_pids()
        doomed.kill_everything()
        killed_at = time.monotonic()
        rescuer = start_worker(env=env)
        selection = pending.result()
    assert selection == local([ref])
    return time.monotonic() - killed_at, first, rescuer


@pytest.mark.slow
def test_job_of_a_lost_worker_is_recovered_by_another(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    _, first, rescuer = _lost_mid_job(
        start_worker, client, marker_dir, "wholekill", 90, FAST_RECOVERY
    )
    pids = wait_for_marker(marker_dir / "wholekill", lines=2)
    assert len(pids) == 2 and pids[0] == first and pids[1] in rescuer.pool_pids()


@pytest.mark.slow
def test_job_of_a_lost_worker_is_put_back_long_before_the_visibility_timeout(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    """The whole worker running a job is killed (its machine gone) and the visibility timeout
    is the default (minutes): the job's unacked entry is held by no live worker, so the caller
    puts it back on its queue and another worker answers it within the caller's 60 s. Before,
    it waited out the deadline."""
    seconds, _, rescuer = _lost_mid_job(start_worker, client, marker_dir, "orphaned", 60)
    print(f"answered {seconds:.1f} s after the kill")  # docs/queue.md
    pids = wait_for_marker(marker_dir / "orphaned", lines=2)
    assert len(pids) == 2 and pids[1] in rescuer.pool_pids()


@pytest.mark.slow
def test_a_job_a_live_worker_holds_is_never_put_back(
    start_worker: WorkerFactory,
    client: CeleryQueue,
    marker_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Jobs running for 12 s (two looks past the orphan time, several times over) on live
    workers, with an idle worker beside them that would take a job put back: each runs once and
    the caller puts nothing back."""
    caplog.set_level(logging.WARNING, logger="bridge.queue.celery_queue")
    for _ in range(3):
        start_worker()
    refs = [counted_ref(f"long{n}", 12) for n in range(2)]
    assert gather(refs, client, deadline=60, use_cache=False) == local(refs)
    assert [runs(marker_dir, f"long{n}") for n in range(2)] == [1, 1]
    assert not [record for record in caplog.records if "back on their queues" in record.message]


#: Hash seeds under which Celery orders the worker's steps each way: the heartbeat's stop
#: before the pool's drain, and after it (Celery sorts steps through sets of names).
_STEP_ORDERS = ["0", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("hash_seed", _STEP_ORDERS)
def test_a_job_a_stopping_worker_still_runs_is_not_put_back(
    start_worker: WorkerFactory,
    client: CeleryQueue,
    marker_dir: Path,
    caplog: pytest.LogCaptureFixture,
    hash_seed: str,
) -> None:
    """A worker told to stop (SIGTERM, a rolling update) finishes the job it runs, 14 s, while
    an idle worker waits beside it: the stopping worker says it holds the job until it has
    shut down, so the job runs once and the caller puts nothing back."""
    caplog.set_level(logging.WARNING, logger="bridge.queue.celery_queue")
    stopping = start_worker(env={"PYTHONHASHSEED": hash_seed})
    ref = counted_ref("draining", 14)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], client, deadline=60, use_cache=False)
        [first] = wait_for_marker(marker_dir / "draining")
        assert first in stopping.pool_pids()
        start_worker()
        os.kill(stopping.process.pid, signal.SIGTERM)
        selection = pending.result()
    assert selection == local([ref])
    assert runs(marker_dir, "draining") == 1
    assert not [record for record in caplog.records if "back on their queues" in record.message]


#: A rolling restart under load: each of the workers in turn is replaced and told to stop
#: (SIGTERM) while callers keep sending jobs that run long enough to be caught mid-run.
_ROLLING_WORKERS = 3
_ROLLING_ROUNDS = 2
_ROLLING_CALLERS = 6
_ROLLING_BATCH = 8
_ROLLING_JOB_SECONDS = 0.4


@pytest.mark.slow
def test_a_rolling_restart_under_load_runs_every_job_once_and_loses_none(
    start_worker: WorkerFactory,
    client: CeleryQueue,
    marker_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Several workers, many callers, and every worker replaced twice the way a rolling update
    does it (the new one started, the old one sent SIGTERM and waited for): a stopping worker
    finishes what it runs and hands back what it only reserved, so every job is answered,
    right, and run exactly once; no caller puts a job back or publishes one again."""
    caplog.set_level(logging.WARNING, logger="bridge.queue.celery_queue")
    workers = [start_worker(concurrency=2) for _ in range(_ROLLING_WORKERS)]
    stopped: list[int] = []  # each stopped worker's exit status
    restarting = threading.Event()
    restarting.set()
    lock = threading.Lock()
    batches: list[tuple[list[AttachmentRef], IngestSelection]] = []

    def has_run_a_job(worker: WorkerProcess) -> bool:
        pids = {str(pid) for pid in worker.pool_pids()}
        return any(
            pid in pids for marker in marker_dir.iterdir() for pid in marker.read_text().split()
        )

    def restarter() -> None:
        try:
            for step in range(_ROLLING_ROUNDS * _ROLLING_WORKERS):
                index = step % _ROLLING_WORKERS
                old = workers[index]
                wait_until(partial(has_run_a_job, old), 60, "the worker to stop to have run")
                workers[index] = start_worker(concurrency=2)
                os.kill(old.process.pid, signal.SIGTERM)
                stopped.append(old.process.wait(60))
        finally:
            restarting.clear()

    def caller(number: int) -> None:
        batch = 0
        while restarting.is_set():
            tags = [f"rolling{number}-{batch}-{i}" for i in range(_ROLLING_BATCH)]
            refs = [counted_ref(tag, _ROLLING_JOB_SECONDS) for tag in tags]
            selection = gather(refs, client, deadline=90, use_cache=False)
            with lock:
                batches.append((refs, selection))
            batch += 1

    with ThreadPoolExecutor(1 + _ROLLING_CALLERS) as pool:
        running = [
            pool.submit(restarter),
            *(pool.submit(caller, n) for n in range(_ROLLING_CALLERS)),
        ]
        for future in running:
            future.result()
    refs = [ref for batch, _ in batches for ref in batch]
    lost = [f"{label}: {reason}" for _, selection in batches for label, reason in selection.dropped]
    wrong = [i for i, (batch, got) in enumerate(batches) if got != local(batch)]
    run_counts = {ref.label: runs(marker_dir, ref.label[:-4]) for ref in refs}
    not_once = {label: count for label, count in run_counts.items() if count != 1}
    rescued = [r.getMessage() for r in caplog.records if r.name == "bridge.queue.celery_queue"]
    print(
        f"rolling restart: {len(stopped)} workers stopped, {len(refs)} jobs, {len(lost)} lost, "
        f"{len(wrong)} wrong batches, {len(not_once)} not run exactly once"
    )
    assert len(stopped) == _ROLLING_ROUNDS * _ROLLING_WORKERS
    assert stopped == [0] * len(stopped)
    assert (lost, wrong, not_once, rescued) == ([], [], {}, [])


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_job_the_host_held_past_its_soft_time_limit_is_run_again(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    """The sandbox's wall clock (3 s) ends a parser before the task's soft time limit (4 s), so
    a job that reaches that limit lost its time to the host: in a chaos run, a text job on a
    freshly restarted worker was answered "SoftTimeLimitExceeded" as its document's failure.
    Held once past the limit, the job is run again and answered right."""
    start_worker(env=FAST_RECOVERY)
    payload = b"airlock-test: stall 30 stalled\ntext of the stalled job\n"
    ref = AttachmentRef("stalled.txt", "text", "text/plain", payload)
    selection = gather([ref], client, deadline=60, use_cache=False)
    assert selection == local([ref])
    assert selection.dropped == ()
    assert runs(marker_dir, "stalled") == 2


@pytest.mark.slow
def test_a_job_held_past_its_soft_time_limit_every_time_is_answered_after_n_deliveries(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    """A host slow on every try does not buy a job endless runs: after ``max_deliveries`` (3)
    it is answered as a failure naming the time limit."""
    start_worker(env=FAST_RECOVERY)
    ref = AttachmentRef("held.txt", "text", "text/plain", b"airlock-test: sleep 30 held\nx\n")
    selection = gather([ref], client, deadline=60, use_cache=False)
    [(label, reason)] = selection.dropped
    assert label == "held.txt"
    assert "TimeLimitReached: the task's soft time limit passed" in reason
    assert runs(marker_dir, "held") == 3


@pytest.mark.slow
def test_a_job_popped_by_a_worker_that_died_before_recording_it_is_sent_again(
    start_worker: WorkerFactory, redis_url: str, redis: Redis, marker_dir: Path
) -> None:
    """The BRPOP-before-unacked window (celery#7950): a main process killed right after Redis
    handed it a message takes the message along, and it is in no queue and no unacked entry.
    Here a stand-in consumer pops the message and drops it, as the dead process would; the
    caller publishes it again under the same id and it runs exactly once."""
    ref = counted_ref("popped")
    client = CeleryQueue(redis_url, redis_url, require_consumers=False)  # its worker comes later
    with closing(client), ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], client, deadline=60, use_cache=False)
        popped = redis.brpop(["airlock.light"], timeout=30)
        assert popped is not None  # the message, now nowhere a sweep could restore it from
        start_worker()
        selection = pending.result()
    assert selection == local([ref])
    assert runs(marker_dir, "popped") == 1
    task_id = json.loads(popped[1])["headers"]["id"]
    assert redis.get(f"airlock:deliveries:{task_id}:light:0") == b"1"


#: Chaos run: jobs keep coming from several callers until both counts are reached.
CHAOS_KILLS = 20
CHAOS_JOBS = 500
_CHAOS_BATCH = 25
_CHAOS_CALLERS = 3
_CHAOS_WORKERS = 2


@pytest.mark.slow
def test_kill_9_of_worker_main_processes_loses_no_job(
    start_worker: WorkerFactory,
    client: CeleryQueue,
    marker_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Worker main processes are killed with SIGKILL while jobs flow; every job is answered,
    right, and run at most AIRLOCK_MAX_DELIVERIES (3) times."""
    caplog.set_level(logging.WARNING, logger="bridge.queue.celery_queue")
    workers = [start_worker(concurrency=2, env=FAST_RECOVERY) for _ in range(_CHAOS_WORKERS)]
    kills = 0
    lock = threading.Lock()
    batches: list[tuple[list[AttachmentRef], IngestSelection]] = []

    def killer() -> None:
        nonlocal kills
        chance = random.Random(7)
        while kills < CHAOS_KILLS:
            time.sleep(chance.uniform(0.8, 1.8))
            victim = workers[kills % _CHAOS_WORKERS]
            os.kill(victim.process.pid, signal.SIGKILL)  # the main process only
            victim.process.wait(15)
            workers[kills % _CHAOS_WORKERS] = start_worker(concurrency=2, env=FAST_RECOVERY)
            kills += 1

    def caller(number: int) -> None:
        while True:
            with lock:
                done = sum(len(refs) for refs, _ in batches)
                if kills >= CHAOS_KILLS and done >= CHAOS_JOBS:
                    return
                first = done + number * 100_000
            refs = [counted_ref(f"chaos{first + i}") for i in range(_CHAOS_BATCH)]
            selection = gather(refs, client, deadline=90, use_cache=False)
            with lock:
                batches.append((refs, selection))

    with ThreadPoolExecutor(1 + _CHAOS_CALLERS) as pool:
        running = [pool.submit(killer), *(pool.submit(caller, n) for n in range(_CHAOS_CALLERS))]
        for future in running:
            future.result()
    refs = [ref for batch, _ in batches for ref in batch]
    wrong = [i for i, (batch, got) in enumerate(batches) if got != local(batch)]
    lost = [f"{label}: {reason}" for _, selection in batches for label, reason in selection.dropped]
    over_run = [ref.label for ref in refs if runs(marker_dir, ref.label[:-4]) > 3]
    republished = sum(
        int(record.args[0])  # type: ignore[index, arg-type, misc]
        for record in caplog.records
        if record.name == "bridge.queue.celery_queue" and "again" in record.msg
    )
    print(
        f"chaos: {kills} kills, {len(refs)} jobs, {len(lost)} lost, {len(wrong)} wrong "
        f"batches, {len(over_run)} run more than 3 times, {republished} published again"
    )
    assert kills >= CHAOS_KILLS and len(refs) >= CHAOS_JOBS
    assert (lost, wrong, over_run) == ([], [], [])
