"""Per-key bytes per minute: one tenant cannot take the door's whole intake.

A token bucket per key: it holds at most a minute's allowance and refills continuously, so
a burst up to the allowance passes and a steady stream is held to it. A body is charged
before it is read when it declares its length (so a refused upload is never read), and
after otherwise.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    at: float


class ByteQuota:
    def __init__(self, bytes_per_minute: int) -> None:
        self._capacity = float(bytes_per_minute)
        self._rate = bytes_per_minute / 60.0
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def charge(self, owner: str, size: int) -> int | None:
        """Take ``size`` bytes from ``owner``'s allowance: None when they were there, else the
        seconds until they will be (nothing is taken then)."""
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.setdefault(owner, _Bucket(self._capacity, now))
            bucket.tokens = min(self._capacity, bucket.tokens + (now - bucket.at) * self._rate)
            bucket.at = now
            # A body larger than a whole minute's allowance waits for a full bucket and passes
            # alone, rather than never.
            needed = min(float(size), self._capacity)
            if bucket.tokens >= needed:
                bucket.tokens -= size
                return None
            return max(1, math.ceil((needed - bucket.tokens) / self._rate))
