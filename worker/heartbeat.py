"""The worker's heartbeat file: proof that its main loop still turns, and which node it is.

The same beat announces the worker on the broker, so a caller learns within seconds that no
worker consumes a queue. See docs/operations.md (Health) and docs/queue.md (Admission: no
workers, and the backlog bound).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import bootsteps
from redis import Redis, RedisError

from bridge.queue.admission import consumers_key
from worker.config import Settings

#: The file is stale after this many missed beats: one late timer tick is not a stuck loop.
STALE_AFTER_BEATS = 3
#: A beat runs on the worker's event loop: an unreachable Redis may hold it this long at most.
_ANNOUNCE_TIMEOUT_SECONDS = 1.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Heartbeat:
    node: str
    age_seconds: float


def write(path: Path, node: str) -> None:
    """Replace the file in one step, so a probe never reads half a node name."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(node + "\n")
    os.replace(partial, path)


def read(path: Path) -> Heartbeat | None:
    """The last beat, or ``None`` when no worker has written one here."""
    try:
        modified = path.stat().st_mtime
        node = path.read_text().strip()
    except FileNotFoundError:
        return None
    return Heartbeat(node, max(0.0, time.time() - modified))


def announce(redis: Redis, node: str, queues: Sequence[str], ttl_seconds: int) -> None:
    """Say on the broker that ``node`` consumes ``queues``, for ``ttl_seconds``."""
    try:
        with redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.set(consumers_key(queue), node, ex=ttl_seconds)
            pipe.execute()
    except RedisError as exc:
        # Redis being away costs this beat's announcement, never the beat: the file is what
        # the liveness probe reads.
        _log.debug("could not announce the consumed queues: %s", exc)


def beat(
    path: Path, node: str, redis: Redis | None, queues: Sequence[str], ttl_seconds: int
) -> None:
    write(path, node)
    if redis is not None:
        announce(redis, node, queues, ttl_seconds)


def step(settings: Settings) -> type[Any]:
    """A worker bootstep that beats from the event loop's timer while the worker runs."""

    class HeartbeatStep(bootsteps.StartStopStep):  # type: ignore[misc]
        # A worker-level step: its timer entry belongs to no broker connection, so the consumer
        # does not cancel it when it reconnects.
        requires = ("celery.worker.components:Timer",)

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            super().__init__(worker, **kwargs)
            self._entry: Any = None
            self._redis: Redis | None = None

        def start(self, worker: Any) -> None:
            if settings.broker_url.startswith(("redis://", "rediss://", "unix://")):
                self._redis = Redis.from_url(
                    settings.broker_url,
                    socket_connect_timeout=_ANNOUNCE_TIMEOUT_SECONDS,
                    socket_timeout=_ANNOUNCE_TIMEOUT_SECONDS,
                )
            # -Q on the command line decides what this worker consumes, not the settings.
            queues = sorted(worker.app.amqp.queues.consume_from or settings.queues)
            arguments = (
                settings.heartbeat_file,
                worker.hostname,
                self._redis,
                queues,
                int(STALE_AFTER_BEATS * settings.heartbeat_seconds),
            )
            beat(*arguments)
            self._entry = worker.timer.call_repeatedly(settings.heartbeat_seconds, beat, arguments)

        def stop(self, worker: Any) -> None:
            if self._entry is not None:
                self._entry.cancel()
                self._entry = None
            if self._redis is not None:
                self._redis.close()
                self._redis = None

    return HeartbeatStep
