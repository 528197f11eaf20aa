"""Which jobs may be queued now: a queue some worker consumes, with room under its bound.

A job for a queue nobody consumes, or behind a backlog deeper than callers can wait out, is
answered at once with a typed reason (NoWorkers, QueueFull) instead of being queued for no one.
Liveness keys, bound, overshoot: docs/queue.md (Admission: no workers, and the backlog bound).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from redis import Redis

from bridge.knowledge.failures import NO_WORKERS, QUEUE_FULL, Failure
from bridge.queue.source import NotQueued, QueueFull

_CONSUMERS_KEY_PREFIX = "airlock:consumers:"
_RESERVED_KEY_PREFIX = "airlock:admitted:"
#: The per-queue bound of queued jobs when AIRLOCK_MAX_QUEUED is unset (docs/operations.md).
DEFAULT_MAX_QUEUED = 1000


def consumers_key(queue: str) -> str:
    """The key a worker consuming ``queue`` keeps alive with its heartbeat."""
    return _CONSUMERS_KEY_PREFIX + queue


#: Admits each queue's jobs in one atomic step: per queue (KEYS: its consumers key, its list,
#: its reservations), whether a live worker consumes it and how many of ARGV[3+i] jobs fit under
#: ARGV[1] counting the queued jobs and the room other callers reserved and have not yet filled.
#: The room granted is reserved under ARGV[2] (this call) until ARGV[3] ms from now.
_ADMIT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local bound = tonumber(ARGV[1])
local reply = {}
for i = 0, #KEYS / 3 - 1 do
  local consumers, queue, reserved = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local wanted = tonumber(ARGV[4 + i])
  redis.call('ZREMRANGEBYSCORE', reserved, '-inf', now_ms)
  local taken = redis.call('LLEN', queue)
  for _, member in ipairs(redis.call('ZRANGE', reserved, 0, -1)) do
    taken = taken + tonumber(string.match(member, ':(%d+)$'))
  end
  local granted = math.max(0, math.min(wanted, bound - taken))
  if granted > 0 then
    redis.call('ZADD', reserved, now_ms + tonumber(ARGV[3]), ARGV[2] .. ':' .. granted)
    redis.call('PEXPIRE', reserved, tonumber(ARGV[3]))
  end
  reply[#reply + 1] = redis.call('EXISTS', consumers)
  reply[#reply + 1] = granted
end
return reply
"""
#: How long room reserved by a caller that died before publishing stays reserved.
_RESERVATION_MS = 10_000


def _reservations_key(queue: str) -> str:
    return f"{_RESERVED_KEY_PREFIX}{queue}"


def _refusing_writes(broker: Redis) -> bool:
    """Whether Redis is at its ``maxmemory``: then it refuses writes, workers' announcements
    included, and "no worker" would be the wrong thing to tell a caller."""
    memory = broker.info("memory")
    limit = int(memory.get("maxmemory", 0))
    return limit > 0 and int(memory.get("used_memory", 0)) >= limit


@dataclass(frozen=True)
class Admission:
    """For each job (by the queue it goes to): None when it may be published, else why not;
    and the room it holds in its queues until :meth:`release`."""

    verdicts: list[NotQueued | None]
    #: (reservations key, member) for each queue where room was granted.
    reserved: tuple[tuple[str, str], ...]

    def release(self, broker: Redis) -> None:
        """Give the room back once the jobs are published: they count in their queues now."""
        if not self.reserved:
            return
        with broker.pipeline(transaction=False) as pipe:
            for key, member in self.reserved:
                pipe.zrem(key, member)
            pipe.execute()


def admit(
    broker: Redis, queues: Sequence[str], max_queued: int, require_consumers: bool
) -> Admission:
    """Decide, atomically with every other caller, which jobs (by their queues) are published.

    Raises :class:`QueueFull` when Redis itself is full: nothing can be queued at all.
    Concurrent callers can no longer overshoot the bound together: each reserves the room it
    is granted until it has published (1,964 were queued under a bound of 1,000 before).
    """
    distinct = sorted(set(queues))
    wanted = {queue: queues.count(queue) for queue in distinct}
    token = uuid.uuid4().hex
    keys = [key for q in distinct for key in (consumers_key(q), q, _reservations_key(q))]
    untrusted_reply = broker.eval(
        _ADMIT,
        len(keys),
        *keys,
        max_queued,
        token,
        _RESERVATION_MS,
        *(wanted[q] for q in distinct),
    )
    consumed = {q: bool(untrusted_reply[2 * i]) for i, q in enumerate(distinct)}
    room = {q: int(untrusted_reply[2 * i + 1]) for i, q in enumerate(distinct)}
    reserved = tuple((_reservations_key(q), f"{token}:{room[q]}") for q in distinct if room[q] > 0)
    if require_consumers and not all(consumed.values()) and _refusing_writes(broker):
        raise QueueFull()
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
    return Admission(verdicts, reserved)
