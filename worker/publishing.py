"""How a worker publishes a task of its own (an OCR hand-off, a document's pages).

Through the app's producer pool with the app's retry policy, which rides out Redis restarting
(worker/application.py), and :func:`bridge.queue.publishing.send`'s mending of kombu's
reconnection. A Redis at ``maxmemory`` is waited out here, as the answer's store waits it out:
kombu's retry policy gives up on a refusal that outlasts one reconnection, and the declaration
before each publish (a pipelined ``LLEN``) is refused while Redis is full, so two fanned-out
scans were answered ``WorkerError`` when Redis filled for 4 s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from kombu.exceptions import OperationalError
from redis.exceptions import OutOfMemoryError

from bridge.queue.publishing import Message, send
from bridge.redis_client import RIDE_OUT_SECONDS

__all__ = ["Message", "publish"]

#: How long a publish refused by a full Redis waits before it is tried again.
_FULL_PAUSE_SECONDS = 1.0

_log = logging.getLogger(__name__)


def publish(app: Any, messages: Iterable[Message]) -> None:
    """Publish ``messages`` in order through one producer; a message is sent at least once.

    A Redis that stays full for :data:`RIDE_OUT_SECONDS` raises kombu's error as before.
    """
    pending = list(messages)
    give_up = time.monotonic() + RIDE_OUT_SECONDS
    while True:
        try:
            send(app, pending)
            return
        except OperationalError as exc:
            if not isinstance(exc.__cause__, OutOfMemoryError) or time.monotonic() > give_up:
                raise
            _log.warning("Redis is full: publishing %d tasks again shortly", len(pending))
            time.sleep(_FULL_PAUSE_SECONDS)
