"""How tasks are published through a Celery app's producer, kombu's reconnection mended.

A connection lost while kombu declares the queue before publishing is re-established for the
declaration only, and the publish then goes to the channel of the connection it replaced,
which raises AttributeError: it failed a document when Redis was killed mid fan-out, and
reached callers as an untyped error when Redis filled up under load. What was not sent goes
again on a fresh channel, for as long as Redis may take to come back: one more try was not
enough while Redis restarted under load (the second declaration met the restart too, and a
caller was answered AttributeError).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from bridge.redis_client import RIDE_OUT_SECONDS

#: The pause before publishing again on a fresh channel: its connection reconnects on the next
#: acquire, and a Redis still restarting is not asked again at once.
_AGAIN_PAUSE_SECONDS = 0.1

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    """One task to publish: its name, its one argument, its id and its expiry (Celery's), and
    its Celery root id (None: Celery's own, the running task's or the task's)."""

    name: str
    argument: object
    task_id: str
    expires: Any
    root_id: str | None = None


def send(app: Any, pending: list[Message], give_up_at: float | None = None) -> None:
    """Publish ``pending`` in order, removing each message once it is sent: what is left when
    this raises was not sent. A message is sent at least once.

    A publish that meets a channel kombu closed under it is tried again on a fresh one until
    :data:`RIDE_OUT_SECONDS` have passed, or ``give_up_at`` (a :func:`time.monotonic` value:
    the caller's deadline) if sooner; any other AttributeError is a bug and raised at once.
    """
    give_up = time.monotonic() + RIDE_OUT_SECONDS
    if give_up_at is not None:
        give_up = min(give_up, give_up_at)
    while True:
        try:
            _send(app, pending)
            return
        except _ClosedChannel as closed:
            if time.monotonic() > give_up:
                raise closed.error from None
            _log.warning("publishing %d tasks again on a fresh channel", len(pending))
            time.sleep(_AGAIN_PAUSE_SECONDS)


class _ClosedChannel(Exception):
    """A publish met a channel kombu had closed (its AttributeError is ``error``)."""

    def __init__(self, error: AttributeError) -> None:
        super().__init__(str(error))
        self.error = error


def _send(app: Any, pending: list[Message]) -> None:
    with app.producer_or_acquire() as producer:
        try:
            while pending:
                message = pending[0]
                app.send_task(
                    message.name,
                    args=(message.argument,),
                    task_id=message.task_id,
                    root_id=message.root_id,
                    expires=message.expires,
                    producer=producer,
                )
                pending.pop(0)
        except AttributeError as exc:
            channel = getattr(producer, "_channel", None)
            if getattr(channel, "connection", True) is not None:
                raise  # not kombu's closed channel: a bug, not a reconnection to ride out
            # The pooled connection may still hold the dead channel as its default: dropped
            # here, the next producer handed this connection reconnects it first.
            connection = producer.connection
            if connection is not None:
                connection.collect()
            raise _ClosedChannel(exc) from exc
