"""Publishing through kombu's pooled producer against a real Redis, while the queue's
declaration before each publish loses its connection (as it does while Redis restarts)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from kombu.entity import Queue
from kombu.transport import redis as kombu_redis
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from bridge.queue.publishing import Message, send
from tests.redis_server import SUITE_REDIS_URL

pytestmark = [pytest.mark.integration, pytest.mark.redis]

_TASK = "airlock.test.publish"


@pytest.fixture
def queue() -> str:
    return f"test-publishing-{uuid.uuid4().hex}"


@pytest.fixture
def app(queue: str) -> Iterator[Any]:
    celery = Celery("test-publishing", broker=SUITE_REDIS_URL, set_as_current=False)
    # auto_delete: kombu declares the queue before every publish, not once per connection,
    # so every send below meets the declaration's lost connection.
    celery.conf.task_queues = [Queue(queue, auto_delete=True)]  # type: ignore[no-untyped-call]
    celery.conf.task_routes = {_TASK: {"queue": queue}}
    celery.conf.task_publish_retry_policy = {"max_retries": 5, "interval_start": 0}
    yield celery
    celery.close()


def _declarations_lose_their_connection(
    monkeypatch: pytest.MonkeyPatch, queue: str, failing: set[int]
) -> list[int]:
    """The declarations of ``queue`` numbered in ``failing`` (from 1) lose their connection
    before Redis answers; kombu reconnects, declares again and publishes on the channel the
    reconnection closed. Returns the running count of declarations."""
    declared = [0]
    bind: Any = kombu_redis.Channel._queue_bind

    def losing_bind(channel: Any, exchange: str, routing_key: str, pattern: str, name: str) -> Any:
        if name == queue:
            declared[0] += 1
            if declared[0] in failing:
                raise RedisConnectionError("Connection closed by server.")
        return bind(channel, exchange, routing_key, pattern, name)

    monkeypatch.setattr(kombu_redis.Channel, "_queue_bind", losing_bind)
    return declared


def test_every_task_is_sent_once_though_the_declaration_is_cut_on_two_tries_running(
    app: Any, queue: str, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first and the second try each lose their declaration once: one try more than
    # publishing again once rode out (a caller was answered AttributeError in CI).
    declared = _declarations_lose_their_connection(monkeypatch, queue, {1, 3})
    ids = [uuid.uuid4().hex for _ in range(5)]
    pending = [Message(_TASK, index, task_id, None) for index, task_id in enumerate(ids)]

    send(app, pending)

    assert declared[0] >= 4, "the fault was not met: the test no longer tests the mending"
    assert pending == [], "a message was left unsent"
    queued = redis.lrange(queue, 0, -1)
    redis.delete(queue)
    sent = [task_id for task_id in ids if any(task_id.encode() in body for body in queued)]
    assert sent == ids, f"{len(queued)} messages queued for {len(ids)} tasks"


def test_past_the_callers_deadline_the_error_is_raised_and_the_unsent_are_still_pending(
    app: Any, queue: str, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mending is bounded by the caller's deadline (and by Redis's ride-out time): past it
    the error comes out, and what was not sent is still pending for the caller to answer."""
    _declarations_lose_their_connection(monkeypatch, queue, {1})
    pending = [Message(_TASK, 0, uuid.uuid4().hex, None)]

    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'client'"):
        send(app, pending, give_up_at=time.monotonic())

    assert len(pending) == 1
    assert redis.llen(queue) == 0


def test_an_attribute_error_of_a_live_channel_is_a_bug_raised_at_once(
    app: Any, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only kombu's closed channel is ridden out: any other AttributeError is not retried for
    a minute behind warnings, but raised as it is, the message still pending."""
    calls = []

    def broken_put(channel: Any, *_: object, **__: object) -> None:
        calls.append(channel)
        raise AttributeError("a bug in the transport")

    monkeypatch.setattr(kombu_redis.Channel, "_put", broken_put)
    pending = [Message(_TASK, 0, uuid.uuid4().hex, None)]

    with pytest.raises(AttributeError, match="a bug in the transport"):
        send(app, pending)

    assert len(calls) == 1 and len(pending) == 1
