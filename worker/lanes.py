"""A light lane in every worker that also takes heavy work: small jobs never wait behind pages.

A worker consuming the light queue and a heavy one (OCR, pages) with N pool processes runs
at most N - 1 heavy jobs at once, so one process is always free for the light queue: two long
scans fanning out on the default workers once cut small jobs from 36/s to 4/s and left nearly
all of a backlog past its deadline. A heavy job beyond the limit is held in the main process
(at most one: consuming the heavy queues pauses while one is held, and resumes when it is
sent on), so the next page starts the moment a heavy job ends; the prefetch count has one
more slot than processes, for it. See docs/queue.md (Lanes).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection
from typing import Any

from celery.worker import state

from bridge.queue.jobs import HEAVY_QUEUES, LIGHT_QUEUE

#: How often the main loop looks whether a heavy job ended (a page takes a second or more).
TICK_SECONDS = 0.05

_log = logging.getLogger(__name__)


def heavy_limit(consumed: Collection[str], processes: int) -> int | None:
    """How many heavy jobs a worker consuming ``consumed`` with ``processes`` may run at once;
    None when it needs no lane (it consumes one kind only, or has one process)."""
    if LIGHT_QUEUE not in consumed or not HEAVY_QUEUES & set(consumed) or processes < 2:
        return None
    return processes - 1


def _shutting_down() -> bool:
    # Celery's own test (worker.state.maybe_shutdown): a warm shutdown's code is 0, so only
    # None and False mean "keep running".
    return any(
        flag is not None and flag is not False
        for flag in (state.should_stop, state.should_terminate)
    )


def _is_heavy(request: Any) -> bool:
    return (request.delivery_info or {}).get("routing_key") in HEAVY_QUEUES


class Lanes:
    """Stands between the consumer and its pool: light jobs pass, heavy ones up to a limit."""

    def __init__(
        self, consumer: Any, dispatch: Callable[[Any], None], limit: int, queues: Collection[str]
    ) -> None:
        self._consumer = consumer
        self._dispatch = dispatch
        self._limit = limit
        self._queues = sorted(HEAVY_QUEUES & set(queues))
        self._running: set[Any] = set()
        self._held: deque[Any] = deque()
        #: The task consumer the heavy queues were cancelled on; None while they are consumed.
        #: A reconnection makes a new task consumer, which consumes every queue again.
        self._paused_on: Any = None

    def request(self, request: Any) -> None:
        """The consumer's ``on_task_request``: run ``request`` now, or hold it."""
        if not _is_heavy(request):
            self._dispatch(request)
            return
        self._forget_ended()
        if self._held or len(self._running) >= self._limit:
            self._held.append(request)
            self._pause()
            return
        self._start(request)

    def tick(self) -> None:
        """Send held heavy jobs on as heavy jobs end; consume the heavy queues again once none
        is held."""
        if _shutting_down():
            # A warm shutdown waits for the jobs that run; a held job sent on now would start
            # in a pool that is closing. Held, it stays unacknowledged and goes back to its
            # queue when the worker's connection closes, for the next worker.
            return
        self._forget_ended()
        while self._held and len(self._running) < self._limit:
            self._start(self._held.popleft())
        if not self._held:
            self._resume()

    def connection_lost(self) -> None:
        """Celery drops the jobs no pool process has begun, the held ones included (the
        consumer puts them back on their queues); a new connection consumes every queue."""
        self._held.clear()
        self._running = {r for r in self._running if r in state.active_requests}
        self._paused_on = None

    def _start(self, request: Any) -> None:
        self._running.add(request)
        self._dispatch(request)

    def _forget_ended(self) -> None:
        # A request leaves the reserved set when it is done, however it ended.
        self._running = {r for r in self._running if r in state.reserved_requests}

    def _pause(self) -> None:
        task_consumer = self._consumer.task_consumer
        if task_consumer is None or self._paused_on is task_consumer:
            return
        for queue in self._queues:
            task_consumer.cancel_by_queue(queue)
        self._paused_on = task_consumer
        _log.debug("holding a heavy job: stopped taking from %s", ", ".join(self._queues))

    def _resume(self) -> None:
        task_consumer = self._consumer.task_consumer
        paused_on, self._paused_on = self._paused_on, None
        if paused_on is None or paused_on is not task_consumer:
            return
        declared = self._consumer.app.amqp.queues
        for queue in self._queues:
            if not task_consumer.consuming_from(queue):
                task_consumer.add_queue(declared[queue])
        task_consumer.consume()
        _log.debug("taking from %s again", ", ".join(self._queues))
