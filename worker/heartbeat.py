"""The worker's heartbeat file: proof that its main loop still turns, and which node it is.

The same beat announces the worker on the broker, so a caller learns within seconds that no
worker consumes a queue. See docs/operations.md (Health) and docs/queue.md (Admission: no
workers, and the backlog bound).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import bootsteps, signals
from redis import Redis, RedisError

from bridge.queue.admission import consumers_key
from bridge.queue.reconcile import HELD_SECONDS, held_key
from bridge.redis_client import names_redis, redis_client
from worker.config import Settings

#: The file is stale after this many missed beats: one late timer tick is not a stuck loop.
STALE_AFTER_BEATS = 3
#: An unreachable Redis holds one announcement this long at most.
_ANNOUNCE_TIMEOUT_SECONDS = 1.0
_ANNOUNCE_EVERY_SECONDS = 1.0

_log = logging.getLogger(__name__)

#: Held by an announcement, and by a fork of the worker's main process (its pool processes).
#: A pool process forked while the announcer was half-way through a Redis connect inherited
#: the lock of a module the announcer was importing (the idna codec, from getaddrinfo) with
#: no thread left to release it: the pool process hung on its first Redis command, and every
#: job sent to it waited out its deadline. Forks wait for an announcement in flight (at most
#: its timeout) instead.
_NO_FORK_MID_ANNOUNCEMENT = threading.Lock()
os.register_at_fork(
    before=_NO_FORK_MID_ANNOUNCEMENT.acquire,
    after_in_parent=_NO_FORK_MID_ANNOUNCEMENT.release,
    after_in_child=_NO_FORK_MID_ANNOUNCEMENT.release,
)


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


def announce(
    redis: Redis,
    node: str,
    queues: Sequence[str],
    ttl_seconds: int,
    held: Collection[str] = (),
) -> None:
    """Say on the broker that ``node`` consumes ``queues``, for ``ttl_seconds``, and that it
    holds the messages of the delivery tags ``held``, for :data:`HELD_SECONDS`."""
    try:
        with redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.set(consumers_key(queue), node, ex=ttl_seconds)
            for tag in held:
                pipe.set(held_key(tag), node, ex=HELD_SECONDS)
            pipe.execute()
    except RedisError as exc:
        # Redis being away costs this beat's announcement, never the beat: the file is what
        # the liveness probe reads.
        _log.debug("could not announce the consumed queues: %s", exc)


class _Announcer(threading.Thread):
    """Announces the worker's queues and the messages it holds every second, from a thread of
    its own.

    Not from the event loop, which a busy worker holds for seconds: announcements made there
    lapsed while two workers were alive and busy, and callers were told 3,000 times that no
    worker consumed their queue. A second apart, so that announcements a restarted Redis lost
    are back within a second; they live for three heartbeats, so a worker that died is taken
    for alive that long at most. What a worker holds lapses after :data:`HELD_SECONDS`, so a
    caller puts back the messages of a worker gone with its machine within seconds, not after
    the visibility timeout.
    """

    def __init__(
        self,
        redis: Redis,
        node: str,
        queues: Sequence[str],
        ttl_seconds: int,
        held: Callable[[], Collection[str]],
    ) -> None:
        super().__init__(name="airlock-announcer", daemon=True)
        self._redis = redis
        self._arguments: tuple[str, Sequence[str], int] = (node, queues, ttl_seconds)
        self._held = held
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.is_set():
            with _NO_FORK_MID_ANNOUNCEMENT:
                announce(self._redis, *self._arguments, self._held())
            self._stopped.wait(_ANNOUNCE_EVERY_SECONDS)

    def retire(self) -> None:
        """Stop announcing the queues (callers stop sending here) but not what is held."""
        node, _, ttl_seconds = self._arguments
        self._arguments = (node, (), ttl_seconds)

    def stop(self) -> None:
        self._stopped.set()
        self.join(2 * _ANNOUNCE_TIMEOUT_SECONDS + _ANNOUNCE_EVERY_SECONDS)
        self._redis.close()


def step(settings: Settings) -> type[Any]:
    """A worker bootstep that beats the file from the event loop's timer (proof the loop turns)
    and announces the consumed queues from a thread while the worker runs."""

    class HeartbeatStep(bootsteps.StartStopStep):  # type: ignore[misc]
        # A worker-level step: its timer entry belongs to no broker connection, so the consumer
        # does not cancel it when it reconnects.
        requires = ("celery.worker.components:Timer",)

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            super().__init__(worker, **kwargs)
            self._entry: Any = None
            self._announcer: _Announcer | None = None

        def start(self, worker: Any) -> None:
            arguments = (settings.heartbeat_file, worker.hostname)
            write(*arguments)
            self._entry = worker.timer.call_repeatedly(settings.heartbeat_seconds, write, arguments)
            if names_redis(settings.broker_url):
                # -Q on the command line decides what this worker consumes, not the settings.
                queues = sorted(worker.app.amqp.queues.consume_from or settings.queues)
                redis = redis_client(settings.broker_url, timeout=_ANNOUNCE_TIMEOUT_SECONDS)
                ttl = int(STALE_AFTER_BEATS * settings.heartbeat_seconds)
                self._announcer = _Announcer(
                    redis, worker.hostname, queues, ttl, lambda: _held_by(worker)
                )
                self._announcer.start()
                signals.worker_shutdown.connect(self._end_announcing, sender=worker, weak=False)

        def stop(self, worker: Any) -> None:
            if self._entry is not None:
                self._entry.cancel()
                self._entry = None
            if self._announcer is not None:
                # The jobs still running are held until the worker has shut down: Celery may
                # stop this step before the pool has drained, and callers would put back, while
                # they ran, jobs no word held any more.
                self._announcer.retire()

        def _end_announcing(self, **_: Any) -> None:
            announcer, self._announcer = self._announcer, None
            if announcer is not None:
                announcer.stop()

    return HeartbeatStep


def _held_by(worker: Any) -> frozenset[str]:
    """What the worker's consumer (worker/consumer.py) last noted it holds; nothing before the
    consumer has started."""
    held: frozenset[str] = getattr(getattr(worker, "consumer", None), "held", frozenset())
    return held
