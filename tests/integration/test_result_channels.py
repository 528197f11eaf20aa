"""The client keeps its result-channel connections between calls, and never hands one on that
could carry another call's answer or that Redis has closed.

Opening one per call (connect, HELLO, the handshake) and dropping the command connection it
borrowed was a millisecond of a small job's round trip, and one TCP connection per call left
in TIME_WAIT: a busy door opening thousands a second runs out of local ports.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import pytest
from redis import Redis
from redis.connection import AbstractConnection

from bridge.knowledge.attachments import AttachmentRef
from bridge.queue import celery_queue
from bridge.queue.celery_queue import CeleryQueue, _Listener, _Subscriptions
from bridge.queue.source import gather
from bridge.redis_client import redis_client
from tests.integration.conftest import WorkerFactory
from tests.integration.refs import local
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def _ref(n: int) -> AttachmentRef:
    return AttachmentRef(f"note-{n}.txt", "text", "text/plain", f"a short note, {n}".encode())


def _connections(redis: Redis) -> int:
    return int(redis.info("stats")["total_connections_received"])


def test_calls_reuse_their_connections_sequentially_and_concurrently(
    own_redis: RedisServer, own_workers: WorkerFactory
) -> None:
    own_workers(concurrency=2)
    observer = own_redis.client()
    with closing(CeleryQueue(own_redis.url(), own_redis.url())) as client:
        assert gather([_ref(0)], client, deadline=60, use_cache=False) == local([_ref(0)])
        opened = _connections(observer)
        refs = [_ref(n) for n in range(1, 31)]
        for ref in refs:
            assert gather([ref], client, deadline=60, use_cache=False) == local([ref])
        sequential = _connections(observer) - opened
        many = [_ref(n) for n in range(100, 160)]
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(lambda ref: gather([ref], client, deadline=60, use_cache=False), many)
            )
        concurrent = _connections(observer) - opened - sequential
    assert answers == [local([ref]) for ref in many]
    # Before: one new connection per call (30 and 60). Others (the worker's) open a few at
    # their own pace. Four calls at once may each hold one connection of each of the client's
    # four kinds (result channels, result commands, broker commands, publishing), opened once.
    assert sequential <= 3, sequential
    assert concurrent <= 16 + 3, concurrent
    observer.close()


def test_the_first_call_after_a_redis_restart_is_answered(
    own_redis: RedisServer, own_workers: WorkerFactory
) -> None:
    """The connections kept idle died with Redis; the next call must not be failed on one."""
    own_workers(concurrency=1)
    with closing(CeleryQueue(own_redis.url(), own_redis.url())) as client:
        with ThreadPoolExecutor(3) as pool:  # three idle result connections to go stale
            refs = [_ref(n) for n in range(3)]
            list(pool.map(lambda ref: gather([ref], client, deadline=60), refs))
        own_redis.kill()
        own_redis.start()
        assert gather([_ref(9)], client, deadline=60, use_cache=False) == local([_ref(9)])


def test_a_kept_connection_hears_nothing_of_the_call_before(own_redis: RedisServer) -> None:
    """Answers that reached a call's channels after it stopped reading are read off and
    discarded before its connection is kept: the next call hears only its own channels."""
    publisher = own_redis.client()
    subscriptions = _Subscriptions(own_redis.client(), keep=1)
    first = _Listener(subscriptions)
    first.listen(["channel-a"], time.monotonic() + 10)
    for n in range(3):
        assert publisher.publish("channel-a", f"late {n}") == 1
    first.release()
    assert publisher.publish("channel-a", "later") == 0  # nobody listens on it any more
    opened = _connections(publisher)
    second = _Listener(subscriptions)
    second.listen(["channel-b"], time.monotonic() + 10)
    assert _connections(publisher) == opened  # the first call's connection, kept
    assert publisher.publish("channel-b", "its own") == 1
    heard = second.next_message(10)
    assert heard is not None
    assert (heard["channel"], heard["data"]) == (b"channel-b", b"its own")
    assert second.next_message(0.2) is None
    second.release()
    subscriptions.close()
    publisher.close()


def test_releasing_a_connection_redis_closed_never_waits_for_a_reconnect(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis closed the call's result connection and then stalls (a restart, a failover): the
    call already has its answers, and releasing the connection drops it without connecting
    again. Through the PubSub's own commands it reconnected first and held the call for the
    6 s connect timeout."""
    admin = own_redis.client()
    subscriptions = _Subscriptions(redis_client(own_redis.url(), timeout=6), keep=8)
    listener = _Listener(subscriptions)
    listener.listen(["answer"], time.monotonic() + 10)
    admin.client_kill_filter(_type="pubsub")
    connects: list[AbstractConnection] = []
    connect = AbstractConnection.connect

    def counted(connection: AbstractConnection) -> None:
        connects.append(connection)
        connect(connection)  # type: ignore[no-untyped-call]

    assert own_redis.process is not None
    own_redis.process.send_signal(signal.SIGSTOP)
    try:
        monkeypatch.setattr(AbstractConnection, "connect", counted)
        listener.release()
        monkeypatch.undo()
    finally:
        own_redis.process.send_signal(signal.SIGCONT)
    assert connects == []  # the release connected nothing: nothing to wait out
    opened = _connections(admin)
    _Listener(subscriptions).listen(["next"], time.monotonic() + 10)
    assert _connections(admin) == opened + 1  # the closed one was not kept
    admin.close()


def test_a_connection_idle_too_long_is_not_used_again(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection a NAT forgot answers nothing, not even a close: a subscribe sent on it
    would wait out its call's deadline. One idle past the limit is replaced."""
    admin = own_redis.client()
    subscriptions = _Subscriptions(own_redis.client(), keep=8)
    for idle_seconds, opened_again in ((30.0, 0), (0.0, 1)):
        monkeypatch.setattr(celery_queue, "_IDLE_SECONDS", idle_seconds)
        first = _Listener(subscriptions)
        first.listen(["one"], time.monotonic() + 10)
        first.release()
        opened = _connections(admin)
        second = _Listener(subscriptions)
        second.listen(["two"], time.monotonic() + 10)
        second.release()
        assert _connections(admin) - opened == opened_again
    subscriptions.close()
    admin.close()
