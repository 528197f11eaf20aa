"""The worker's consumer: Celery's, with a light lane (worker/lanes.py), keeping the jobs it
runs and its messages to and from the pool (worker/event_loop.py) through a lost broker
connection.

Configured as ``worker_consumer`` (worker/application.py), so ``celery -A worker worker``
runs it too. See docs/queue.md (Redis going away).
"""

from __future__ import annotations

import logging
from collections import Counter
from enum import StrEnum
from typing import Any

from celery.worker import state
from celery.worker.consumer import Consumer as CeleryConsumer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker import event_loop, lanes

_log = logging.getLogger(__name__)
#: What keeps a message from being settled now but not later. OutOfMemoryError: at maxmemory
#: Redis refuses every command queued in a MULTI, the HDEL and ZREM of an acknowledgement
#: included; raised, it was lost, and the job ran again at the visibility timeout.
_UNSETTLED_ERRORS = (RedisConnectionError, RedisTimeoutError, OutOfMemoryError, OSError)
#: How often what a lost connection left undone is tried again on the current one.
_SETTLE_EVERY_SECONDS = 1.0
#: How often the messages this worker holds are noted for its announcer (worker/heartbeat.py),
#: which says so every second.
_NOTE_HELD_EVERY_SECONDS = 1.0


class Consumer(CeleryConsumer):  # type: ignore[misc]
    def __init__(self, on_task_request: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(on_task_request, *args, **kwargs)
        consumed = list(self.app.amqp.queues.consume_from)
        processes = getattr(self.controller, "concurrency", None) or 0
        limit = lanes.heavy_limit(consumed, processes)
        self.lanes: lanes.Lanes | None = None
        #: What a lost connection left undone, by delivery tag: done once there is one again.
        self.unsettled: dict[str, _Settle] = {}
        #: The delivery tags of the messages this worker holds, which its announcer thread
        #: tells the callers (worker/heartbeat.py) so that they put back only what nobody
        #: holds. Noted in the event loop that changes Celery's sets of requests: a message
        #: as it is received, the ones that ended each second.
        self.held: frozenset[str] = frozenset()
        if self.timer is not None:
            self.timer.call_repeatedly(_SETTLE_EVERY_SECONDS, self._settle_if_connected)
            self.timer.call_repeatedly(_NOTE_HELD_EVERY_SECONDS, self._note_held)
        if self.hub is not None:
            event_loop.keep_messages_in_flight(self.hub)
        if limit is not None and self.timer is not None:
            self.lanes = lanes.Lanes(self, on_task_request, limit, consumed)
            self.on_task_request = self.lanes.request
            # One more message than processes: the heavy job held for the next free slot.
            self.initial_prefetch_count += self.prefetch_multiplier
            self.timer.call_repeatedly(lanes.TICK_SECONDS, self.lanes.tick)

    @property
    def max_prefetch_count(self) -> int:
        held = self.prefetch_multiplier if self.lanes is not None else 0
        return int(super().max_prefetch_count) + held

    def on_connection_error_after_connected(self, exc: BaseException) -> None:
        """Close the lost connection without handing back the jobs it delivered, and settle
        those jobs on the connection that replaces it.

        kombu's channel close puts every message it delivered and did not see acknowledged back
        on its queue. After a connection loss that is wrong twice over: the jobs are still
        running in the pool, so handing them back runs them twice, and with Redis gone the
        restore cannot work. Under load it did worse: it ran after the transport had dropped
        its connection details and raised AttributeError, which Celery's cleanup does not
        catch, and 2 of 3 workers exited at a Redis restart. The messages stay in Redis's
        unacked hash, where kombu settles a message by its delivery tag, which any connection
        may do: each job in hand is acknowledged (or requeued) through the current connection
        when it is done, or within a second of there being one again (``_SettlingChannel``).
        """
        connection = self.connection
        if connection is not None:
            for channel in _channels(connection):
                channel.do_restore = False
        super().on_connection_error_after_connected(exc)
        # Celery drops the jobs it holds that no pool process has begun (prefetched, held for
        # a lane, waiting for a retry's countdown): a broker redelivers those when their
        # channel closes, kombu's Redis transport would have restored them at the close. They
        # go back on their queues once Redis is back; five jobs held this way waited in the
        # unacked hash past their callers' deadlines. Looked up only after Celery closed the
        # lost channel: the close reads the reply of a BRPOP still in flight and delivers that
        # job too, which, missed, waited in the unacked hash until its caller's deadline.
        waiting = {*state.reserved_requests, *state.scheduled_requests} - {*state.active_requests}
        for request in waiting:
            message = getattr(request, "message", None)
            if message is not None:
                self.unsettled[message.delivery_tag] = _Settle.RESTORE
        if self.lanes is not None:
            self.lanes.connection_lost()

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Any:
        """Celery's handler of a received message, each message settling through
        :class:`_SettlingChannel`."""
        handle = super().create_task_handler(*args, **kwargs)

        def on_task_received(message: Any) -> Any:
            message.channel = _SettlingChannel(self, message.channel)
            # Held from now on, though the event loop (which notes the rest each second) may
            # then be busy for seconds: a caller must not take this job back meanwhile.
            self.held = self.held | {message.delivery_tag}
            return handle(message)

        return on_task_received

    def _note_held(self) -> None:
        requests = {*state.reserved_requests, *state.active_requests, *state.scheduled_requests}
        messages = (getattr(request, "message", None) for request in requests)
        tags = {message.delivery_tag for message in messages if message is not None}
        # A job the lost connection left unsettled is still this worker's to settle.
        self.held = frozenset({*tags, *self.unsettled})

    def _settle_if_connected(self) -> None:
        try:
            self.settle()
        except (*_UNSETTLED_ERRORS, AttributeError) as exc:
            _log.debug("could not settle yet: %s", exc)  # the next tick tries again

    def settle(self) -> None:
        """Carry out, on the current connection, what the lost one could not: put back the
        jobs it dropped, acknowledge or requeue the ones that ended meanwhile."""
        connection = self.connection
        if not self.unsettled or connection is None:
            return
        qos = connection.default_channel.qos
        counts = Counter(self.unsettled.values())
        for tag, action in sorted(self.unsettled.items()):
            if action is _Settle.ACK:
                qos.ack(tag)
            else:
                # Back to the end workers take from next (a job in hand all along), or to the
                # far end (a job whose process died, as Celery requeues it); gone: nothing.
                qos.restore_by_tag(tag, leftmost=action is _Settle.REQUEUE)
            del self.unsettled[tag]
        _log.warning(
            "settled the jobs of a lost broker connection: %s",
            ", ".join(f"{count} {action.value}" for action, count in sorted(counts.items())),
        )


class _Settle(StrEnum):
    RESTORE = "put back"
    ACK = "acknowledged"
    REQUEUE = "requeued"


class _SettlingChannel:
    """The channel a message came on, as the message sees it: it is acknowledged or rejected
    through that channel while its connection is the consumer's, through the consumer's
    current connection once that was lost, and, while there is none (or Redis fails the
    command), as soon as there is one again. An acknowledgement that failed when Redis died
    was lost before, and its job ran again after the visibility timeout."""

    def __init__(self, consumer: Consumer, channel: Any) -> None:
        self._consumer = consumer
        self._channel = channel

    def __getattr__(self, name: str) -> Any:
        return getattr(self._channel, name)

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        self._settle(delivery_tag, _Settle.ACK)

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self._settle(delivery_tag, _Settle.REQUEUE if requeue else _Settle.ACK)

    def _settle(self, delivery_tag: str, action: _Settle) -> None:
        try:
            channel = self._live()
            if action is _Settle.ACK:
                channel.basic_ack(delivery_tag)
            else:
                channel.basic_reject(delivery_tag, requeue=True)
        except (*_UNSETTLED_ERRORS, AttributeError):
            # AttributeError: kombu's channel of a connection it has torn down.
            self._consumer.unsettled[delivery_tag] = action

    def _live(self) -> Any:
        current = self._consumer.connection
        transport = getattr(self._channel, "connection", None)
        if current is not None and getattr(transport, "client", None) is current:
            return self._channel
        if current is None:
            raise RedisConnectionError("the broker connection is not back yet")
        return current.default_channel


def _channels(connection: Any) -> list[Any]:
    """Every channel of a kombu connection's transport that has one open."""
    transport = getattr(connection, "_transport", None)
    if transport is None:
        return []
    return [*getattr(transport, "channels", ()), *getattr(transport, "_avail_channels", ())]
