"""Whether a running job's caller withdrew it: the mark the caller's ``CeleryQueue`` leaves.

A revoke reaches a worker's main process, which drops a job it has not started; the pool
process already running one never hears it, so its sandbox child would read on for nobody,
holding a core for minutes on a scan. The caller therefore also sets a mark per job
(:func:`bridge.queue.jobs.withdrawal_key`), and the sandbox's wait asks for it. A look is one
Redis command, so a job looks at most once a :data:`LOOK_SECONDS`, and not before it has run
that long: a short job, the many a chat platform sends, never spends a command on it.
"""

from __future__ import annotations

import logging
import time

from redis import Redis, RedisError

from bridge.queue.jobs import withdrawal_key

#: How often a running job looks for its mark: the longest a withdrawn child runs on.
LOOK_SECONDS = 1.0

_log = logging.getLogger(__name__)


class WithdrawalMark:
    """A job's withdrawal as the sandbox asks for it (``is_set``), read from Redis at most once
    a :data:`LOOK_SECONDS`; once seen, it stays seen.

    ``redis`` must answer fast or fail: the sandbox asks from the loop that also kills a child
    at its deadline, so a look that rode out a Redis outage would hold that loop up. A look that
    fails counts as not withdrawn: the job runs on as if nobody had asked.
    """

    def __init__(self, redis: Redis, task_id: str, *, look_now: bool = False) -> None:
        self._redis = redis
        self._key = withdrawal_key(task_id)
        self._started = time.monotonic()
        self._next_look = self._started + (0.0 if look_now else LOOK_SECONDS)
        self._seen = False

    def is_set(self) -> bool:
        if self._seen or time.monotonic() < self._next_look:
            return self._seen
        return self._look()

    def is_set_now(self) -> bool:
        """``is_set``, looking now for a job that has run a look's time: its last word before
        it stores an answer, which a caller who withdrew it since the last look would never
        read (a withdrawn scan's text was once stored for an hour that way)."""
        if self._seen or time.monotonic() < self._started + LOOK_SECONDS:
            return self._seen
        return self._look()

    def _look(self) -> bool:
        self._next_look = time.monotonic() + LOOK_SECONDS
        try:
            self._seen = bool(self._redis.exists(self._key))
        except RedisError as exc:
            _log.debug("could not look for the withdrawal of %s: %s", self._key, exc)
        return self._seen
