"""How tasks are published through a Celery app's producer, kombu's reconnection mended.

A connection lost while kombu declares the queue before publishing is re-established for the
declaration only, and the publish then goes to the channel of the connection it replaced,
which raises AttributeError: it failed a document when Redis was killed mid fan-out, and
reached callers as an untyped error when Redis filled up under load. The pooled producer is
given a new channel when it is acquired again, so what was not sent goes once more on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

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


def send(app: Any, pending: list[Message]) -> None:
    """Publish ``pending`` in order through one producer, removing each message once it is
    sent: what is left when this raises was not sent. A message is sent at least once."""
    try:
        _send(app, pending)
    except AttributeError:
        _log.warning("publishing again on a fresh producer after kombu's reconnection")
        _send(app, pending)


def _send(app: Any, pending: list[Message]) -> None:
    with app.producer_or_acquire() as producer:
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
