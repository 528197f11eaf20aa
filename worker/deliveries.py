"""Counting how often one job was delivered, so a payload that kills its worker cannot loop.

The count lives in Redis (``INCR``), not in the message: a process that dies mid-task cannot
write anything back into the message it was given. See docs/queue.md (Delivery counting).
"""

from __future__ import annotations

from redis import Redis

_KEY_PREFIX = "airlock:deliveries:"
#: One command, not a MULTI: a full Redis refuses a transaction's commands as it queues them
#: and then aborts the EXEC (ExecAbortError, which nothing rides out: a text job was answered
#: "ExecAbortError" at maxmemory under load), where a script's refused write is an
#: OutOfMemoryError, which the worker's Redis retries until memory is freed.
_COUNT = """
local count = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return count
"""


def delivery_key(task_id: str, stage: str, attempt: int) -> str:
    # Per stage and per retry attempt: a hand-off to the OCR queue and a deliberate retry
    # after an infrastructure error are new deliveries, not evidence of a crash.
    return f"{_KEY_PREFIX}{task_id}:{stage}:{attempt}"


def record_delivery(redis: Redis, key: str, ttl_seconds: int) -> int:
    """Count this delivery and return how many there have been, this one included."""
    return int(redis.eval(_COUNT, 1, key, ttl_seconds))


def superseded(redis: Redis, key: str, delivery: int, field: str | None = None) -> bool:
    """Whether the job was delivered again after ``delivery`` (its number from
    :func:`record_delivery`, or from the ``field`` of a hash a fanned-out document counts its
    pages' deliveries in): a worker paused past the visibility timeout finds that another took
    the job over, and must not act on it any more."""
    untrusted_count = redis.get(key) if field is None else redis.hget(key, field)
    return (
        untrusted_count is not None
        and untrusted_count.isdigit()
        and int(untrusted_count) > delivery
    )
