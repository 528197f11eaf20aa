"""Counting how often one job was delivered, so a payload that kills its worker cannot loop.

The count lives in Redis (``INCR``), not in the message: a process that dies mid-task cannot
write anything back into the message it was given. See docs/queue.md (Delivery counting).
"""

from __future__ import annotations

from redis import Redis

_KEY_PREFIX = "airlock:deliveries:"


def delivery_key(task_id: str, stage: str, attempt: int) -> str:
    # Per stage and per retry attempt: a hand-off to the OCR queue and a deliberate retry
    # after an infrastructure error are new deliveries, not evidence of a crash.
    return f"{_KEY_PREFIX}{task_id}:{stage}:{attempt}"


def record_delivery(redis: Redis, key: str, ttl_seconds: int) -> int:
    """Count this delivery and return how many there have been, this one included."""
    with redis.pipeline(transaction=True) as pipe:
        pipe.incr(key)
        pipe.expire(key, ttl_seconds)
        count, _ = pipe.execute()
    return int(count)
