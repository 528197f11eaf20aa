"""The worker's event loop keeps a message to or from a pool process that it is half-way
through across a lost broker connection.

Celery 5.7 resets the event loop's hub when the loop ends on a connection error
(``celery/worker/loops.py``), which drops every reader and writer, among them the generators
in the middle of a message to or from a pool process. A result half read was then read again
from its middle by a fresh reader, and ``UnpicklingError: invalid load key`` stopped the
worker as an unrecoverable error: seen at a Redis kill -9 under load
(tests/integration/test_redis_faults_under_load.py). A job half written to a pool process
would leave that process marked busy for good. See docs/queue.md (Redis going away).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import GeneratorType
from typing import Any

from kombu.utils.eventio import READ, WRITE


def keep_messages_in_flight(hub: Any) -> None:
    """Make ``hub.reset`` keep the pool's half-done messages: a write goes on where it was, and
    a read is given back to the pool's first reader registered on its descriptor afterwards
    (the pool registers its readers again once the connection is back)."""
    reset: Callable[[], None] = hub.reset
    add: Callable[..., None] = hub.add
    half_read: dict[int, GeneratorType[Any, Any, Any]] = {}

    def resetting() -> None:
        half_read.clear()
        half_read.update(_generators(hub.readers))
        half_written = _generators(hub.writers)
        try:
            reset()
        finally:
            for descriptor, writing in half_written.items():
                add(descriptor, writing, WRITE)
            # Only the registrations of the reconnection may take a read back: a descriptor
            # reused later by a new pool process starts at a message's beginning.
            hub.call_soon(half_read.clear)

    def adding(
        fd: Any, callback: Any, flags: int, args: tuple[Any, ...] = (), consolidate: bool = False
    ) -> None:
        reading = half_read.pop(_descriptor(fd), None) if flags & READ else None
        if reading is not None:
            add(fd, reading, flags)
        else:
            add(fd, callback, flags, args, consolidate)

    hub.reset = resetting
    hub.add = adding


def _generators(handlers: dict[int, Any]) -> dict[int, GeneratorType[Any, Any, Any]]:
    """The handlers that are a message under way: a generator not run to its end (one that
    ended on a closed pipe is left to the pool's own handling; a consolidated descriptor has
    None)."""
    return {
        descriptor: handler[0]
        for descriptor, handler in handlers.items()
        if handler is not None
        and isinstance(handler[0], GeneratorType)
        and inspect.getgeneratorstate(handler[0]) != inspect.GEN_CLOSED
    }


def _descriptor(fd: Any) -> int:
    return fd if isinstance(fd, int) else int(fd.fileno())
