"""The event loop's hub keeps a message to or from a pool process through its reset at a lost
broker connection; read with Celery's own pool reader, on a real kombu hub and a real pipe."""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest
from celery.concurrency.asynpool import ResultHandler
from kombu.asynchronous import Hub

from worker.event_loop import keep_messages_in_flight

RESULT = {"status": "SUCCESS", "text": "x" * 40_000}


def _hub(keeping: bool) -> Any:
    hub: Any = Hub()  # type: ignore[no-untyped-call]
    if keeping:
        keep_messages_in_flight(hub)
    return hub


class _Pool:
    """What Celery's reader asks of its pool: a fresh reader for the next message."""

    def __init__(self, hub: Any, received: list[object]) -> None:
        self.hub = hub
        self.received = received

    def handle_event(self, fd: int) -> None:
        reading = self.reader(fd)
        try:
            next(reading)
        except StopIteration:
            return
        self.hub.add_reader(fd, reading)

    def reader(self, fd: int) -> Generator[None, None, None]:
        reading: Generator[None, None, None] = ResultHandler._recv_message(
            self, self.hub.add_reader, fd, self.received.append
        )
        return reading


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def _framed(message: object) -> bytes:
    body = pickle.dumps(message)
    return struct.pack(">i", len(body)) + body


def _half_read_then_reset(hub: Any, pool: _Pool, fd: int, write_end: int) -> bytes:
    """Half a result arrives and is read, the hub resets, and the pool registers its reader
    again (as asynloop does on reconnecting); returns the rest of the result."""
    framed = _framed(RESULT)
    os.write(write_end, framed[: len(framed) // 2])
    pool.handle_event(fd)
    hub.reset()
    hub.add_reader(fd, pool.handle_event, fd)
    return framed[len(framed) // 2 :]


def _drain(hub: Any, fd: int) -> None:
    """Call the registered reader as the loop would while the pipe has data (at most 100
    times: a reader that lost its place waits for bytes that never come)."""
    for _ in range(100):
        callback, arguments = hub.readers[fd]
        with contextlib.suppress(StopIteration):
            next(callback) if hasattr(callback, "__next__") else callback(*arguments)


def test_a_result_half_read_when_the_hub_resets_is_read_to_its_end(
    pipe: tuple[int, int],
) -> None:
    fd, write_end = pipe
    hub = _hub(keeping=True)
    received: list[object] = []
    pool = _Pool(hub, received)
    rest = _half_read_then_reset(hub, pool, fd, write_end)
    os.write(write_end, rest)
    _drain(hub, fd)
    assert received == [RESULT]
    os.write(write_end, _framed("next"))  # the pool's own reader is back for the next one
    _drain(hub, fd)
    assert received == [RESULT, "next"]


def test_without_it_the_reset_reads_a_result_from_its_middle(pipe: tuple[int, int]) -> None:
    """Celery's behaviour this guards against: the worker's unrecoverable error."""
    fd, write_end = pipe
    hub = _hub(keeping=False)
    received: list[object] = []
    pool = _Pool(hub, received)
    rest = _half_read_then_reset(hub, pool, fd, write_end)
    os.write(write_end, rest)
    with contextlib.suppress(pickle.UnpicklingError, ValueError, OSError, MemoryError):
        _drain(hub, fd)  # it reads a length from the result's middle, then fails or waits
    assert received == []


def test_a_write_under_way_goes_on_after_the_reset(pipe: tuple[int, int]) -> None:
    _, write_end = pipe
    hub = _hub(keeping=True)
    writing = (chunk for chunk in [b"half a job"])
    hub.add_writer(write_end, writing)
    hub.reset()
    assert hub.readers == {}
    assert hub.writers[write_end][0] is writing


def test_a_read_is_given_back_only_by_the_reconnection_s_registrations(
    pipe: tuple[int, int],
) -> None:
    """Once the loop has run a tick, a descriptor registered again (a new pool process given
    the same number) gets the handler it is given, not an old half read."""
    fd, write_end = pipe
    hub = _hub(keeping=True)
    received: list[object] = []
    pool = _Pool(hub, received)
    framed = _framed(RESULT)
    os.write(write_end, framed[:100])
    pool.handle_event(fd)
    hub.reset()
    ready: list[Callable[[], Any]] = list(hub._pop_ready())
    for callback in ready:
        callback()
    hub.add_reader(fd, pool.handle_event, fd)
    assert hub.readers[fd][0] == pool.handle_event


def test_a_read_that_ended_is_not_given_back(pipe: tuple[int, int]) -> None:
    """A reader that ended on a closed pipe is left to the pool's own handling."""
    fd, _ = pipe
    hub = _hub(keeping=True)
    pool = _Pool(hub, [])
    ended = pool.reader(fd)
    ended.close()
    hub.add_reader(fd, ended)
    hub.reset()
    hub.add_reader(fd, pool.handle_event, fd)
    assert hub.readers[fd][0] == pool.handle_event
