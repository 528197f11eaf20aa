"""What ``airlock bridge`` is configured with; read from the environment by worker.config only.

The defaults are the documented ones (docs/configuration.md). The values that must hold
together (a result that outlives the longest deadline, a lease long enough to renew) are
checked where the environment is read, so a refusal can name the variable.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from bridge.knowledge.attachments import DEFAULT_LIMITS, ExtractionLimits

_MIB = 1024 * 1024


def default_consumer() -> str:
    """``hostname-pid``: unique per process, so two bridges never share one pending list.

    Two processes under one consumer name would each read the other's pending entries as
    their own on start, and run them twice.
    """
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class ServiceConfig:
    """The streams, the consumer group and the bounds of one bridge process."""

    request_stream: str = "airlock:requests"
    result_stream: str = "airlock:results"
    group: str = "airlock-bridge"
    consumer: str = field(default_factory=default_consumer)
    #: How long a result stays under ``airlock:selection:<request_id>``; also the window in
    #: which a request id is answered only once.
    result_ttl: int = 3600
    #: Approximate cap of the result stream (``XADD MAXLEN ~``) and of the dead-letter stream.
    stream_maxlen: int = 10_000
    #: A pending request whose lease was not renewed for this long belongs to a dead bridge
    #: and is claimed by another one.
    claim_idle_seconds: float = 60.0
    concurrency: int = 4
    #: Entries larger than this are refused before they are parsed.
    max_request_bytes: int = 12 * _MIB
    #: Requests of one client tenant that all bridges together hold at once (taken in, not yet
    #: answered): what one flooding client can take of the bridges' work.
    client_quota: int = 2
    #: The limits a request gets, and the most it may ask for (AIRLOCK_MAX_PAGES, ...).
    limits: ExtractionLimits = DEFAULT_LIMITS

    @property
    def dead_letter_stream(self) -> str:
        return f"{self.request_stream}:dead"

    @property
    def renew_every_seconds(self) -> float:
        """Leases are renewed three times per idle period, so one late renewal loses nothing."""
        return self.claim_idle_seconds / 3
