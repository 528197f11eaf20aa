"""The primary dies under load and Sentinel promotes its replica: what the failover costs.

A real Sentinel deployment on loopback (tests/redis_sentinel.py: a primary, a replica, three
``redis-sentinel`` processes), three ``airlock worker`` processes and ten callers calling
``gather``, all given its Sentinel URL only and logged in as the shipped users
(deploy/redis/users.conf, sentinel-users.conf), as docs/operations.md runs them. The primary
is killed with SIGKILL while jobs and fan-out pages are in flight; replication is
asynchronous, so the replica may lack the last writes the primary acknowledged (a queued job,
an unacked entry, a stored answer). Every call is tallied against the embedded path
(tests/integration/load.py), every job's runs are counted, and the jobs the callers had to
publish again are counted from their own log. The old primary is then started again, rejoins
as a replica, and the failover is repeated the other way round.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from redis import Redis

from bridge.knowledge.attachments import ExtractionLimits
from bridge.queue.reconcile import UNACKED_KEY
from bridge.queue.source import QueueUnavailable
from bridge.redis_client import redis_client
from tests.deploy.conftest import COMPOSE, load_yaml, run_redis_start
from tests.helpers import selection_as_json
from tests.integration.conftest import WorkerFactory, WorkerProcess, worker_env
from tests.integration.load import (
    Call,
    Callers,
    duplicated,
    mixed_callers,
    tally,
    wait_until,
    whereabouts,
)
from tests.integration.processes import BridgeProcess, request, send, wait_for_answers
from tests.integration.refs import counted_ref, local, runs
from tests.integration.test_redis_faults_under_load import _nothing_left, _serving_all
from tests.redis_sentinel import SentinelDeployment

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

WORKERS = 3
TEXT_CALLERS = 8
SCAN_CALLERS = 2
FAILOVERS = 2
#: Sentinel's defaults (30 s down, 3 min failover timeout) would make one failover take half
#: a minute; a loaded machine still answers a PING well within 2 s.
DOWN_AFTER_MS = 2000
FAILOVER_TIMEOUT_MS = 10_000
#: A 3-page scan (one page with a text layer) fans out into two page tasks.
FAN_OUT = {"AIRLOCK_FAN_OUT_PAGES": "2"}
SCAN_LIMITS = ExtractionLimits(max_pages=10)
_FANOUT_KEYS = "airlock:fanout:*"
WORKER_PASSWORD = "a7" * 16
WORKER = ("worker", WORKER_PASSWORD)


@dataclass
class Republished:
    """The jobs callers published again because the broker had lost them (their warning)."""

    jobs: int = 0
    times: list[float] = field(default_factory=list)


class _RepublishedCounter(logging.Handler):
    def __init__(self, counted: Republished) -> None:
        super().__init__(logging.WARNING)
        self.counted = counted

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "publishing %d jobs again: the broker lost them":
            assert isinstance(record.args, tuple)
            self.counted.jobs += int(str(record.args[0]))
            self.counted.times.append(time.monotonic())


@pytest.fixture
def republished() -> Iterator[Republished]:
    counted = Republished()
    handler = _RepublishedCounter(counted)
    logger = logging.getLogger("bridge.queue.celery_queue")
    logger.addHandler(handler)
    yield counted
    logger.removeHandler(handler)


def _shipped_logins(directory: Path) -> tuple[Path, list[str]]:
    """The users every node and every Sentinel of the compose sentinel profile has, with their
    passwords, as its start scripts write them (run with the servers recorded): the nodes'
    config file (users.conf's users, and the replica's login to the primary), and the
    Sentinels' users and logins to the nodes and to each other. The topology itself (ports,
    who is whose replica) is the harness's, on loopback."""
    ((compose,),) = load_yaml(COMPOSE).values()
    env = {
        "REDIS_PASSWORD": WORKER_PASSWORD,
        "REDIS_CLIENTS": "",
        "REDIS_REPLICA_PASSWORD": "b5" * 16,
        "REDIS_SENTINEL_PASSWORD": "c6" * 16,
        "REDIS_NODE": "redis-1",
        "REDIS_PRIMARY": "redis-1",
        "REDIS_SENTINELS": "",
        "SENTINEL_NAME": "sentinel-1",
    }
    scripts = {name: compose["services"][name]["command"][-1].replace("$$", "$") for name in
               ("redis-1", "sentinel-1")}  # fmt: skip
    for part in ("node", "sentinel"):
        (directory / part).mkdir(parents=True)
    node = run_redis_start(scripts["redis-1"], directory / "node", env)
    sentinel = run_redis_start(scripts["sentinel-1"], directory / "sentinel", env, "sentinel.conf")
    users = directory / "users.conf"
    users.write_text(node.auth_conf)
    logins = ("user ", "sentinel auth-", "sentinel sentinel-")
    return users, [line for line in sentinel.auth_conf.splitlines() if line.startswith(logins)]


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[SentinelDeployment]:
    """Every party logs in as the shipped users: the workers and callers as `worker` (to the
    master and to the Sentinels), a replica as `replica`, the Sentinels as `sentinel`."""
    users, sentinel_lines = _shipped_logins(tmp_path / "start")
    nodes = SentinelDeployment(
        tmp_path / "redis",
        down_after_ms=DOWN_AFTER_MS,
        failover_timeout_ms=FAILOVER_TIMEOUT_MS,
        node_args=["--include", str(users)],
        node_login=WORKER,
        sentinel_lines=sentinel_lines,
        sentinel_login=WORKER,
    )
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def workers(deployment: SentinelDeployment, tmp_path: Path) -> Iterator[WorkerFactory]:
    markers = tmp_path / "markers"
    markers.mkdir()
    factory = WorkerFactory(deployment.url(WORKER), markers, tmp_path)
    yield factory
    factory.stop_all()


@pytest.fixture
def redis(deployment: SentinelDeployment) -> Iterator[Redis]:
    """The test's own look at whichever node is master, through the Sentinels."""
    client = redis_client(deployment.url(WORKER), timeout=5, ride_out=True)
    yield client
    client.close()


def _started_and_answered(callers: Callers, moment: float, count: int) -> Callable[[], bool]:
    """Whether ``count`` calls made after ``moment`` have been answered."""
    return lambda: len(_answered_calls(callers, moment)) >= count


def _answered_calls(callers: Callers, moment: float) -> list[Call]:
    return [
        call
        for call in list(callers.calls)
        if call.selection is not None and call.ended - call.seconds >= moment
    ]


def _in_flight(redis: Redis) -> bool:
    return redis.hlen(UNACKED_KEY) >= 3 and any(redis.scan_iter(match=_FANOUT_KEYS))


def test_a_command_retried_through_a_failover_reaches_the_promoted_replica(
    deployment: SentinelDeployment,
) -> None:
    """A riding-out command under way when the primary stops answering (SIGSTOP, then kill -9)
    is retried until the Sentinels name the promoted replica, and lands there, never on the old
    primary once it is back (it comes back as a standalone master holding its old data, until
    the Sentinels demote it). redis-py reconnected such a retry to the address it last had
    (redis-py#3874): the write landed on the returned old primary, to be wiped when it was
    demoted."""
    # Its commands time out well before a Sentinel counts the primary down (DOWN_AFTER_MS).
    client = redis_client(deployment.url(WORKER), timeout=0.5, ride_out=True)
    try:
        client.set("airlock:test", "before")
        old = deployment.master()
        assert old.process is not None
        old.process.send_signal(signal.SIGSTOP)  # the command below times out on it
        written = threading.Event()
        writer = threading.Thread(
            target=lambda: written.set() if client.set("airlock:test", "after") else None
        )
        writer.start()
        # Seen down by a Sentinel only long after the command's first try timed out.
        wait_until(lambda: deployment.sentinels[0].master_state()["is_sdown"], 30, "down")
        old.kill()
        new = deployment.wait_for_promotion(old, timeout=60)
        old.start()  # as a supervisor would; the Sentinels demote it some seconds later
        writer.join(60)
        assert written.is_set()
        with closing(new.client()) as promoted, closing(old.client()) as returned:
            assert promoted.get("airlock:test") == b"after"
            assert returned.info("replication")["role"] == "slave" or (
                returned.get("airlock:test") == b"before"
            )
    finally:
        client.close()


def test_the_bridge_service_follows_a_failover(
    deployment: SentinelDeployment, workers: WorkerFactory, redis: Redis, tmp_path: Path
) -> None:
    """``airlock bridge`` given the Sentinel URL for the workers' Redis and for its clients'
    (the connections it holds from its start) answers a request before the primary is killed
    and one sent after the replica is promoted, and is still running."""
    workers(concurrency=1)
    overrides = {"AIRLOCK_BRIDGE_CONSUMER": "b1", "AIRLOCK_LOG_FORMAT": "plain"}
    env = worker_env(deployment.url(WORKER), workers.marker_dir, overrides)
    bridge = BridgeProcess("b1", env, tmp_path / "bridge.log")
    try:
        bridge.wait_ready()
        ref = counted_ref("via-bridge")
        expected = selection_as_json(local([ref]))
        send(redis, request("before", ref))
        assert wait_for_answers(redis, 1)["before"]["selection"] == expected
        # This test is about following the failover, not about what it loses: the replica
        # has everything written so far.
        assert redis.wait(1, 10_000) == 1
        old = deployment.master()
        old.kill()
        deployment.wait_for_promotion(old, timeout=60)
        send(redis, request("after", ref))
        assert wait_for_answers(redis, 2)["after"]["selection"] == expected
        assert bridge.process.poll() is None, bridge.log()[-3000:]
    finally:
        bridge.stop()


def test_killing_the_primary_under_load_fails_over_and_loses_no_call(
    deployment: SentinelDeployment,
    workers: WorkerFactory,
    redis: Redis,
    republished: Republished,
    corpus_dir: Path,
) -> None:
    """Two kill -9s of the primary, each while jobs and fan-out pages run: the Sentinels
    promote the replica; every call is answered as the embedded path answers it (a call made
    while no master was named is refused at once with QueueUnavailable, which queued nothing);
    what the dead primary had not yet replicated is published again by the callers; every
    worker is alive and taking jobs afterwards, and no fan-out state or unacked job is left."""
    url = deployment.url(WORKER)
    started: list[WorkerProcess] = [
        workers(concurrency=2, via_cli=True, env=FAN_OUT) for _ in range(WORKERS)
    ]
    texts, scans = mixed_callers(url, corpus_dir, TEXT_CALLERS, SCAN_CALLERS, SCAN_LIMITS)
    kills: list[tuple[float, float]] = []  # when each primary was killed, and replaced
    with texts.running(), scans.running():
        for _ in range(FAILOVERS):
            wait_until(lambda: _in_flight(redis), 90, "jobs and fan-out pages in flight")
            old = deployment.master()
            old.kill()
            killed = time.monotonic()
            deployment.wait_for_promotion(old, timeout=90)
            kills.append((killed, time.monotonic()))
            wait_until(_started_and_answered(texts, killed, 20), 90, "calls made after it")
            # The old primary comes back with its stale AOF; the Sentinels make it a replica of
            # the new master, which the next kill then promotes.
            old.start()
            deployment.wait_for_replica(old, timeout=90)
    text_tally = tally(texts.calls)
    scan_tally = tally(scans.calls, SCAN_LIMITS)
    lost = [call.ref.label for call in text_tally.lost + scan_tally.lost]
    ran = {label: runs(workers.marker_dir, label[:-4]) for label in lost}
    where = whereabouts(redis, lost)
    for result in (text_tally, scan_tally):
        assert not (result.lost or result.wrong or result.raised), (
            f"{result.summary()}; runs {ran}; held in {where}"
        )
    assert text_tally.answered >= 20 * FAILOVERS and scan_tally.answered >= SCAN_CALLERS
    unanswered = [call for call in texts.calls + scans.calls if call.selection is None]
    assert all(isinstance(call.error, QueueUnavailable) for call in unanswered), unanswered[:3]
    twice = duplicated(workers.marker_dir, [call.ref.label[:-4] for call in texts.calls])
    assert all(count <= 3 for count in twice.values()), twice
    _serving_all(started, workers, url)
    _nothing_left(redis, started)
    calls = len(texts.calls) + len(scans.calls)
    promoted = [f"{replaced - killed:.1f}" for killed, replaced in kills]
    # How long a caller could not be served: from the kill to the first answer of a call made
    # after it.
    outage = [
        f"{min(call.ended for call in _answered_calls(texts, killed)) - killed:.1f}"
        for killed, _ in kills
    ]
    print(
        f"{FAILOVERS} failovers: replica promoted {promoted} s after the kill, first call made "
        f"after the kill answered after {outage} s; {calls} calls; texts: {text_tally.summary()}; "
        f"scans: {scan_tally.summary()}; jobs published again: {republished.jobs}; ran more "
        f"than once: {len(twice)} {twice}"
    )
