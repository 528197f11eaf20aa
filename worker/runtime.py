"""What one worker process's tasks share: its settings, its Redis, the caller's deadline.

See docs/queue.md (Flow).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from redis import Redis

from bridge.redis_client import redis_client
from worker.config import Settings
from worker.withdrawals import WithdrawalMark

_REDIS_TIMEOUT_SECONDS = 10
#: A withdrawal look is asked from the loop that kills a child at its deadline: it must not wait.
_LOOK_TIMEOUT_SECONDS = 0.5


class Runtime:
    """What one worker process needs for its jobs, created after the pool forked it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @cached_property
    def redis(self) -> Redis:
        # A job under way rides out Redis restarting or filling up: failing it then would
        # lose work already done. Timeouts turn a hung Redis into a retried error instead of a
        # task that hangs until Celery's time limit kills it with a less useful reason.
        return redis_client(
            self.settings.result_backend, timeout=_REDIS_TIMEOUT_SECONDS, ride_out=True
        )

    def withdrawal(self, task_id: str, *, look_now: bool = False) -> WithdrawalMark:
        """Whether the caller withdrew the job ``task_id`` (a document's task id)."""
        return WithdrawalMark(self._looks, task_id, look_now=look_now)

    @cached_property
    def _looks(self) -> Redis:
        return redis_client(self.settings.result_backend, timeout=_LOOK_TIMEOUT_SECONDS)

    @property
    def delivery_ttl(self) -> int:
        # Long enough to see every redelivery, including ones that wait out a visibility
        # timeout after a whole worker was lost.
        return int(self.settings.visibility_timeout * (self.settings.max_deliveries + 1))


def deadline_of(task: Any) -> float | None:
    """The caller's deadline for the running task, as a :func:`time.monotonic` value.

    The message's expiry is the caller's deadline (the bridge sets it so): past it nobody reads
    the answer, so the sandbox child reading for it is killed then instead of running on.
    """
    expires = task.request.expires
    if expires is None:
        return None
    if isinstance(expires, str):
        expires = datetime.fromisoformat(expires)
    if not isinstance(expires, datetime):
        return None
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return time.monotonic() + (expires - datetime.now(UTC)).total_seconds()
