"""How often a job's progress reaches its caller: at most once a second, and only forward.

See docs/sandbox.md, "Shape" (Progress) and "Notes by module".
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sandbox.protocol import Progress

# The least time between two updates of one job.
INTERVAL_SECONDS = 1.0


class ProgressGate:
    """Passes a job's progress to ``on_progress`` at most once per ``interval`` seconds, each
    update with a larger ``done`` than the last; ``flush`` delivers the latest one held back.

    The first update goes through at once, so a caller learns early that the job is moving.
    """

    def __init__(
        self,
        on_progress: Callable[[int, int], None],
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_progress = on_progress
        self._interval = interval
        self._clock = clock
        self._latest = Progress(0, 0)
        self._delivered = 0
        self._next_delivery = -float("inf")

    def offer(self, progress: Progress) -> None:
        """Note ``progress``, and deliver it if it moves forward and the interval has passed."""
        if progress.done <= self._latest.done:
            return  # a repeat or a step back: nothing new to tell
        self._latest = progress
        now = self._clock()
        if now >= self._next_delivery:
            self._next_delivery = now + self._interval
            self._deliver()

    def flush(self) -> None:
        """Deliver the latest progress if it was held back (the job has answered)."""
        if self._latest.done > self._delivered:
            self._deliver()

    def _deliver(self) -> None:
        self._delivered = self._latest.done
        self._on_progress(self._latest.done, self._latest.total)
