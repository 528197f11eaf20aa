"""Which jobs may be queued now: a queue that some worker consumes, with room under its bound.

Two conditions made callers wait out their whole deadline for nothing: no worker consuming a
job's queue, and a backlog deeper than the workers can drain before the callers give up
(20,000 jobs at once left 14,616 callers with DeadlineExceeded and a worker spending a minute
discarding what had expired). Both are visible before publishing, so such a job is answered
at once, with a typed reason, instead of being queued for no one.

Workers announce themselves: each one's heartbeat rewrites ``airlock:consumers:<queue>`` for
every queue it consumes, with a time to live of a few beats, so the key exists exactly while
some live worker consumes that queue. The bound is checked with ``LLEN`` before publishing:
callers publishing at the same moment can overshoot it by at most their own batches, which is
what a bound against runaway backlogs needs, not an exact count.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis import Redis

from bridge.knowledge.failures import Failure
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
            verdicts.append(NotQueued(Failure("NoWorkers", f"no worker is consuming {queue}")))
        elif room[queue] <= 0:
            verdicts.append(
                NotQueued(
                    Failure(
                        "QueueFull",
                        f"{queue} is at its bound of {max_queued} queued jobs "
                        "(AIRLOCK_MAX_QUEUED); the job was not queued",
                    )
                )
            )
        else:
            room[queue] -= 1
            verdicts.append(None)
    return verdicts
