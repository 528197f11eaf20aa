"""The worker's heartbeat file: proof that its main loop still turns, and which node it is.

The main process's event-loop timer rewrites the file every ``AIRLOCK_HEARTBEAT_SECONDS``, so
the file goes stale when that loop is stuck (a wedged broker connection, a deadlock), and a
liveness probe learns it from the file's age alone: no broker round trip, nothing that a short
Redis outage would fail. The file holds the worker's Celery node name, which the readiness
probe pings.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import bootsteps

from worker.config import Settings

#: The file is stale after this many missed beats: one late timer tick is not a stuck loop.
STALE_AFTER_BEATS = 3


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


def step(settings: Settings) -> type[Any]:
    """A worker bootstep that beats from the event loop's timer while the worker runs."""

    class HeartbeatStep(bootsteps.StartStopStep):  # type: ignore[misc]
        # A worker-level step: its timer entry belongs to no broker connection, so the consumer
        # does not cancel it when it reconnects.
        requires = ("celery.worker.components:Timer",)

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            super().__init__(worker, **kwargs)
            self._entry: Any = None

        def start(self, worker: Any) -> None:
            write(settings.heartbeat_file, worker.hostname)
            self._entry = worker.timer.call_repeatedly(
                settings.heartbeat_seconds,
                write,
                (settings.heartbeat_file, worker.hostname),
            )

        def stop(self, worker: Any) -> None:
            if self._entry is not None:
                self._entry.cancel()
                self._entry = None

    return HeartbeatStep
