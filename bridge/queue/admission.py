"""Which jobs may be queued now: a queue some worker consumes, with room under its bound.

A job for a queue nobody consumes, or behind a backlog deeper than callers can wait out, is
answered at once with a typed reason (NoWorkers, QueueFull) instead of being queued for no one.
Liveness keys, bound, overshoot: docs/queue.md (Admission: no workers, and the backlog bound).
"""

from __future__ import annotations

from collections.abc import Sequence

from redis import Redis

from bridge.knowledge.failures import NO_WORKERS, QUEUE_FULL, Failure
from bridge.queue.source import NotQueued, QueueFull

_CONSUMERS_KEY_PREFIX = "airlock:consumers:"
#: The per-queue bound of queued jobs when AIRLOCK_MAX_QUEUED is unset (docs/operations.md).
DEFAULT_MAX_QUEUED = 1000


def consumers_key(queue: str) -> str:
    """The key a worker consuming ``queue`` keeps alive with its heartbeat."""
    return _CONSUMERS_KEY_PREFIX + queue


def _refusing_writes(broker: Redis) -> bool:
    """Whether Redis is at its ``maxmemory``: then it refuses writes, workers' announcements
    included, and "no worker" would be the wrong thing to tell a caller."""
    memory = broker.info("memory")
    limit = int(memory.get("maxmemory", 0))
    return limit > 0 and int(memory.get("used_memory", 0)) >= limit


def admit(
    broker: Redis, queues: Sequence[str], max_queued: int, require_consumers: bool
) -> list[NotQueued | None]:
    """For each job (by the queue it goes to): None when it may be published, else why not.

    Raises :class:`QueueFull` when Redis itself is full: nothing can be queued at all.
    """
    distinct = sorted(set(queues))
    with broker.pipeline(transaction=False) as pipe:
        for queue in distinct:
            pipe.exists(consumers_key(queue))
            pipe.llen(queue)
        replies = pipe.execute()
    consumed = {q: bool(replies[2 * i]) for i, q in enumerate(distinct)}
    depth = {q: int(replies[2 * i + 1]) for i, q in enumerate(distinct)}
    if require_consumers and not all(consumed.values()) and _refusing_writes(broker):
        raise QueueFull()
    room = {queue: max_queued - depth[queue] for queue in distinct}
    verdicts: list[NotQueued | None] = []
    for queue in queues:
        if require_consumers and not consumed[queue]:
            verdicts.append(NotQueued(Failure(NO_WORKERS, f"no worker is consuming {queue}")))
        elif room[queue] <= 0:
            verdicts.append(
                NotQueued(
                    Failure(
                        QUEUE_FULL,
                        f"{queue} is at its bound of {max_queued} queued jobs "
                        "(AIRLOCK_MAX_QUEUED); the job was not queued",
                    )
                )
            )
        else:
            room[queue] -= 1
            verdicts.append(None)
    return verdicts
