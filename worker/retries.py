"""Which failures a task retries, and how a job delivered too often is answered.

Shared by the document task and the page task (worker.fanout): a page is retried exactly as a
document is. See docs/queue.md (Retries, Delivery counting).
"""

from __future__ import annotations

from celery.exceptions import SoftTimeLimitExceeded
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge.knowledge.failures import WORKER_LOST, Failure
from sandbox.errors import SandboxUnavailable


class SandboxChildLost(Exception):
    """The sandbox child was killed from outside the sandbox (OOM killer, operator): retried."""


class TimeLimitReached(Exception):
    """Celery's soft time limit fired while the job was being extracted.

    The sandbox's wall clock ends a parser well before that limit, so the time went to the
    host (a fork server starting on a loaded machine, Redis riding out an outage), not to the
    document: answering it as the document's failure lost a text job in a chaos run. It is
    retried as a child killed from outside is, within ``max_deliveries``.
    """

    transient = True


#: Failures of the machinery, not verdicts on the document: another try may succeed. A soft
#: time limit reached outside the extraction (the delivery count, the payload's fetch) is the
#: host's time too.
INFRASTRUCTURE_ERRORS = (
    RedisConnectionError,
    RedisTimeoutError,
    SandboxUnavailable,
    SandboxChildLost,
    SoftTimeLimitExceeded,
)


def over_delivered(deliveries: int) -> Failure:
    return Failure(
        WORKER_LOST,
        f"the worker failed {deliveries - 1} times on this job (it was delivered "
        f"{deliveries} times and its worker process died or was lost before answering each "
        "earlier time); it is answered as a failure instead of being delivered again",
    )


def raise_if_retried(failure: Failure, retries: int, max_deliveries: int) -> None:
    """Raise the retried exception for a failure of the host rather than of the document.

    An unavailable sandbox is retried with backoff; a child killed from outside is retried
    too, but only ``max_deliveries`` times in all: a parser that kills itself the same way
    must not buy itself endless runs.
    """
    if failure.code == SandboxUnavailable.reported_as:
        raise SandboxUnavailable(failure.reason)
    if failure.transient and retries + 1 < max_deliveries:
        raise SandboxChildLost(failure.reason)
