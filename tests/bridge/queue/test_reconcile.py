"""The lost-job finder against a real Redis: which published ids no queue holds any more."""

from __future__ import annotations

import json
import uuid

import pytest
from redis import Redis

from bridge.queue.jobs import page_task_id
from bridge.queue.reconcile import Reconciler

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def _message(task_id: str) -> str:
    """A message as kombu's Redis transport stores it: the id is its correlation id."""
    return json.dumps({"body": "e30=", "properties": {"correlation_id": task_id}})


def test_a_document_is_held_while_any_of_its_pages_is_and_lost_once_none_is(
    redis: Redis,
) -> None:
    queue = f"test-reconcile-{uuid.uuid4().hex}"
    spread, lost, prefixed = (uuid.uuid4().hex for _ in range(3))
    # A page of `spread` is queued; nothing holds `lost`; a stranger whose id merely starts with
    # `prefixed` (no page separator) must not hold it.
    redis.rpush(queue, _message(page_task_id(spread, 7)), _message(prefixed + "0"))
    reconciler = Reconciler(redis, [queue], interval=0.0)
    try:
        assert reconciler.lost([spread, lost, prefixed]) == []  # one look is never enough
        assert reconciler.lost([spread, lost, prefixed]) == sorted([lost, prefixed])
        redis.delete(queue)
        reconciler.lost([spread])
        assert reconciler.lost([spread]) == [spread]
    finally:
        redis.delete(queue)
