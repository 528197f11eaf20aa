"""The bridge's connections to its clients' Redis, all opened before it serves anyone.

Redis has no per-user connection limit: a client that opens connections until ``maxclients``
refuses new ones (9,999 did it) would also refuse the bridge a connection it opened later, and
every request would wait for it. So the bridge opens every connection it will use at start,
in a pool that never opens another while one of them is alive, and holds them (Redis closes no
idle connection: ``timeout 0``). Behind Sentinel, a failover ends them all: they are opened again
to the promoted replica as they are next used. See docs/bridge-service.md, Trust.
"""

from __future__ import annotations

from redis import Redis, RedisError
from redis.connection import Connection

from bridge.queue.source import QueueUnavailable
from bridge.redis_client import redis_client

#: Beyond one per concurrent request: the reading loop, and one spare for a pipeline.
_LOOP_CONNECTIONS = 2


def held_connections(url: str, concurrency: int, timeout_seconds: float) -> Redis:
    """A client of ``url`` whose ``concurrency`` + 2 connections are open on return; a thread
    that finds them all busy waits up to ``timeout_seconds`` for one rather than opening more.
    Raises :class:`QueueUnavailable` when they cannot all be opened."""
    count = concurrency + _LOOP_CONNECTIONS
    redis = redis_client(url, timeout=timeout_seconds, held=count)
    pool = redis.connection_pool
    opened: list[Connection] = []
    try:
        for _ in range(count):
            opened.append(pool.get_connection())
    except (RedisError, OSError) as exc:
        redis.close()
        raise QueueUnavailable(f"the clients' Redis is unreachable ({exc})") from exc
    finally:
        for connection in opened:
            pool.release(connection)
    return redis
