"""Redis dies, restarts or fills while three workers serve a dozen callers: nothing is lost.

The faults are the real ones: ``kill -9`` of ``redis-server`` and a restart from its AOF
(``appendfsync everysec``, as the deployments ship), and ``maxmemory`` reached mid-document.
The load is what broke the previous version: three ``airlock worker`` processes of two pool
processes each, as docs/operations.md starts them, callers sending small texts back to back
through ``gather`` and scanned PDFs that fan out page by page. Every call is tallied against
the embedded path (tests/integration/load.py) and every job's runs are counted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from redis import Redis

from bridge.knowledge.attachments import ExtractionLimits
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import QUEUES
from bridge.queue.reconcile import UNACKED_KEY
from bridge.queue.source import gather
from tests.integration.conftest import WorkerFactory, WorkerProcess
from tests.integration.load import (
    Callers,
    duplicated,
    mixed_callers,
    restore_seconds,
    tally,
    wait_until,
    whereabouts,
)
from tests.integration.refs import counted_ref, local, runs
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

WORKERS = 3
TEXT_CALLERS = 10
SCAN_CALLERS = 2
KILLS = 4
FILLS = 2
#: How long Redis stays at maxmemory each time, from its first refusal.
FULL_SECONDS = 4.0
#: Room above what Redis holds when it is capped: the next few jobs fill it.
HEADROOM_BYTES = 32 * 1024
#: How long after its deadline a call may return on a loaded machine (its last sweep).
LATE_SECONDS = 5.0
#: A 3-page scan (one page with a text layer) fans out into two page tasks.
FAN_OUT = {"AIRLOCK_FAN_OUT_PAGES": "2"}
SCAN_LIMITS = ExtractionLimits(max_pages=10)
_FANOUT_KEYS = "airlock:fanout:*"


def _workers(factory: WorkerFactory) -> list[WorkerProcess]:
    return [factory(concurrency=2, via_cli=True, env=FAN_OUT) for _ in range(WORKERS)]


def _serving_all(workers: list[WorkerProcess], factory: WorkerFactory, url: str) -> None:
    """Every worker is alive and each of them runs jobs: a batch long enough to reach all."""
    tags = [f"after{i}" for i in range(6 * WORKERS)]
    refs = [counted_ref(tag, 0.5) for tag in tags]
    with closing(CeleryQueue(url, url)) as client:
        assert gather(refs, client, deadline=90, use_cache=False) == local(refs)
    for worker in workers:
        assert worker.process.poll() is None, worker.log()[-3000:]
        pids = set(worker.pool_pids())
        ran = {
            int(pid)
            for tag in tags
            if (factory.marker_dir / tag).exists()
            for pid in (factory.marker_dir / tag).read_text().split()
        }
        assert pids & ran, f"{worker.nodename} took no job after the faults"
        assert "Unrecoverable error" not in worker.log(), worker.log()[-3000:]


def _answering(callers: Callers, since: float) -> Callable[[], bool]:
    return lambda: callers.answered_since(since) >= 20


def _callers(url: str, corpus_dir: Path) -> tuple[Callers, Callers]:
    """Ten callers sending small counted texts and two sending 3-page scans that fan out."""
    return mixed_callers(url, corpus_dir, TEXT_CALLERS, SCAN_CALLERS, SCAN_LIMITS)


def _in_flight(redis: Redis) -> Callable[[], bool]:
    """Jobs running (held unacknowledged) and a document's pages being read."""
    return lambda: redis.hlen(UNACKED_KEY) >= 3 and any(redis.scan_iter(match=_FANOUT_KEYS))


def _nothing_left(redis: Redis, workers: list[WorkerProcess]) -> None:
    """Once all work is done, no fan-out state and no job held unacknowledged remain."""
    wait_until(lambda: not any(redis.scan_iter(match=_FANOUT_KEYS)), 60, "no fan-out key left")
    try:
        wait_until(
            lambda: redis.hlen(UNACKED_KEY) == 0,
            restore_seconds(FAN_OUT),
            "every job acknowledged (one whose ack Redis lost: once restored and answered)",
        )
    except AssertionError:
        # What kombu's restore would need to see it: its index entry (the delivery time it is
        # restored after) and whether the restore lock is held; and where else the job is.
        held = []
        for tag, raw in redis.hgetall(UNACKED_KEY).items():
            headers = json.loads(raw)[0]["headers"]
            since = redis.zscore(f"{UNACKED_KEY}_index", tag)
            queued = {queue: redis.llen(queue) for queue in QUEUES}
            held.append((headers["task"], headers["id"], tag, since, time.time(), queued))
        lock = redis.get(f"{UNACKED_KEY}_mutex")
        # And what each worker said of the held jobs and of restoring (the worker that took
        # one, whether it ran and acknowledged it, whether a restore saw it).
        said = [
            f"worker {worker.process.pid}: {line[:400]}"
            for worker in workers
            for line in worker.log().splitlines()
            if "estor" in line or any(job_id in line for _, job_id, *_ in held)
        ]
        raise AssertionError(
            f"left unacknowledged: {held}; restore lock {lock!r}; the workers' lines:\n"
            + "\n".join(said[-60:])
        ) from None


def test_redis_kill_9_and_aof_restart_under_load_loses_nothing(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    """Four kill -9s of Redis, each while jobs and fan-out pages run, each restarted from the
    AOF after 3 s: every call is answered as the embedded path answers it (a call started while
    Redis was down is refused at once with QueueUnavailable, which queued nothing), every
    worker is alive and taking jobs afterwards, and no fan-out state is left."""
    workers = _workers(own_workers)
    redis = own_redis.client()
    texts, scans = _callers(own_redis.url(), corpus_dir)
    with texts.running(), scans.running():
        for _ in range(KILLS):
            wait_until(_in_flight(redis), 90, "jobs and fan-out pages in flight")
            own_redis.kill()
            time.sleep(3)  # the outage itself: Redis is down for 3 s
            own_redis.start()
            wait_until(_answering(texts, time.monotonic()), 90, "answers after the restart")
    text_tally = tally(texts.calls)
    scan_tally = tally(scans.calls, SCAN_LIMITS)
    lost = [call.ref.label for call in text_tally.lost + scan_tally.lost]
    ran = {label: runs(own_workers.marker_dir, label[:-4]) for label in lost}
    where = whereabouts(redis, lost)
    for result in (text_tally, scan_tally):
        assert not (result.lost or result.wrong or result.raised or result.untyped), (
            f"{result.summary()}; runs {ran}; held in {where}"
        )
    assert text_tally.answered >= 20 * KILLS and scan_tally.answered >= SCAN_CALLERS
    twice = duplicated(own_workers.marker_dir, [call.ref.label[:-4] for call in texts.calls])
    assert all(count <= 3 for count in twice.values()), twice
    _serving_all(workers, own_workers, own_redis.url())
    _nothing_left(redis, workers)
    print(f"texts: {text_tally.summary()}; scans: {scan_tally.summary()}; ran twice: {twice}")
    redis.close()


def _refused_writes(redis: Redis) -> int:
    """How many commands Redis refused for want of memory so far (``INFO errorstats``)."""
    return int(redis.info("errorstats").get("errorstat_OOM", {}).get("count", 0))


def _state(redis: Redis, texts: Callers) -> str:
    """What Redis holds and how the callers fare, for a fault that did not take."""
    memory = redis.info("memory")
    queued = {queue: redis.llen(queue) for queue in QUEUES}
    recent = texts.answered_since(time.monotonic() - 10)
    return (
        f"used {memory['used_memory']} of {memory['maxmemory']} bytes, queued {queued}, "
        f"unacked {redis.hlen(UNACKED_KEY)}, texts answered in the last 10 s {recent}"
    )


def _fill(redis: Redis, texts: Callers) -> None:
    """Hold Redis at ``maxmemory`` for ``FULL_SECONDS`` from its first refused write.

    It is capped just above what it holds, and capped again, lower, whenever what it holds
    shrinks: answers are read and deleted all the time, and a cap set once, above a peak, was
    not reached in 30 s, or was left behind a second after the first refusal.
    """
    refused = _refused_writes(redis)
    give_up = time.monotonic() + 30
    full_since: float | None = None
    cap = 0
    while full_since is None or time.monotonic() < full_since + FULL_SECONDS:
        lower = int(redis.info("memory")["used_memory"]) + HEADROOM_BYTES
        if not cap or lower < cap:
            cap = lower
            redis.config_set("maxmemory", cap)
        if full_since is None and _refused_writes(redis) > refused:
            full_since = time.monotonic()
        assert full_since or time.monotonic() < give_up, (
            f"Redis refused no write: {_state(redis, texts)}"
        )
        time.sleep(0.05)  # how often what Redis holds is read
    redis.config_set("maxmemory", 0)


def test_redis_at_maxmemory_mid_fan_out_under_load_answers_or_fails_typed_and_wedges_nothing(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    """Twice, while jobs and fan-out pages run, Redis is capped just above what it holds
    (``noeviction``, as deployed) and kept full for 4 s from its first refusal, then freed.
    Every call ends by its deadline: answered as the embedded path answers it, or refused at
    once with a typed ``QueueFull`` when made while Redis was full (nothing else: a job under
    way rides the fault out); every worker is alive and taking jobs afterwards, and no fan-out
    state or unacknowledged job is left."""
    workers = _workers(own_workers)
    redis = own_redis.client()
    redis.config_set("maxmemory-policy", "noeviction")
    texts, scans = _callers(own_redis.url(), corpus_dir)
    refused_before = _refused_writes(redis)
    with texts.running(), scans.running():
        for _ in range(FILLS):
            wait_until(_in_flight(redis), 90, "jobs and fan-out pages in flight")
            _fill(redis, texts)
            wait_until(_answering(texts, time.monotonic()), 90, "answers after memory was freed")
    text_tally = tally(texts.calls)
    scan_tally = tally(scans.calls, SCAN_LIMITS)
    late = [
        f"{call.ref.label}: {call.seconds:.1f} s"
        for callers in (texts, scans)
        for call in callers.calls
        if call.seconds > callers.deadline + LATE_SECONDS
    ]
    summary = (
        f"texts: {text_tally.summary()}; scans: {scan_tally.summary()}; "
        f"writes refused {_refused_writes(redis) - refused_before}; late {late}"
    )
    print(summary)
    for result in (text_tally, scan_tally):
        assert not (result.lost or result.wrong or result.raised or result.untyped), summary
    assert not late, summary
    assert text_tally.full > 0, f"no call was told Redis was full: {summary}"
    _serving_all(workers, own_workers, own_redis.url())
    _nothing_left(redis, workers)
    redis.close()
