"""Counting how often one job was delivered, so a payload that kills its worker cannot loop.

``acks_late`` with ``task_reject_on_worker_lost`` puts a job back on its queue when the worker
process running it dies. That is what keeps a ``kill -9`` from losing a request, and also what
would make a payload that crashes every worker it reaches circulate forever, taking a worker
down each time. The count lives in Redis (``INCR``), not in the message, because a process
that dies mid-task cannot write anything back into the message it was given.
"""

from __future__ import annotations

from redis import Redis

_KEY_PREFIX = "airlock:deliveries:"

#: The failure type of a job answered instead of run because it was delivered too often.
WORKER_LOST = "WorkerLost"


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
