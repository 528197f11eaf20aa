"""Whether a document's pages may be published now: the bounds one request's fan-out keeps.

Whether a split pays is the document's to say (sandbox/pages.py), so the file says it: a child
running attacker code can make every page of its document look worth a task. What one request
can make of that is bounded here, by the workers alone: a request's documents have at most
their page ceiling (``max_pages``, what one of its documents could hold) of page tasks in
flight at once, and page tasks wait in ``airlock.pages`` under ``AIRLOCK_MAX_QUEUED`` like any
job. A document over either bound is read by one OCR job instead: always right, only slower.
Before, a request of 32 such documents of 20 pages could publish 640 page tasks, past the
queue's bound. See docs/queue.md, "Fan-out OCR".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from redis import Redis

from bridge.queue.admission import Admission, admit
from bridge.queue.jobs import PAGES_QUEUE
from bridge.queue.source import QueueFull

_REQUEST_KEY_PREFIX = "airlock:fanout:request:"
#: Root ids are task ids (a call's first job's), UUIDs; anything else in the header is not one.
_REQUEST_ID = re.compile(r"^[0-9A-Za-z_.-]{1,200}$")

#: Takes room for a document's pages (ARGV[1], ARGV[2] of them) in its request's pages in
#: flight (KEYS[1], pages by document) under the bound ARGV[3]: 1 when granted, 0 when not,
#: :data:`_HELD` when the document holds room already (its light task run again publishes its
#: unread pages again).
_TAKE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 2 end
local taken = 0
for _, pages in ipairs(redis.call('HVALS', KEYS[1])) do taken = taken + tonumber(pages) end
if taken + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""
_HELD = 2


def request_key(untrusted_request_id: object, document_id: str) -> str:
    """Where the pages in flight of a document's request are counted.

    The request is the Celery root id the bridge gives every job of one call, which the light
    task's page tasks inherit; a job published without one (a bridge of an earlier release)
    is a request of its own.
    """
    if isinstance(untrusted_request_id, str) and _REQUEST_ID.match(untrusted_request_id):
        return _REQUEST_KEY_PREFIX + untrusted_request_id
    return _REQUEST_KEY_PREFIX + document_id


@dataclass(frozen=True)
class Refused:
    """Why a document's pages are not published: its request's share, or the pages queue."""

    reason: str


@dataclass(frozen=True)
class Reserved:
    """Room for a document's pages: in its request until the document is answered (its
    fan-out state's cleanup gives it back), and in the pages queue until they are published
    (None: they were admitted there when first published)."""

    queue: Admission | None

    def published(self, redis: Redis) -> None:
        """The pages are in the queue now, where they count themselves."""
        if self.queue is not None:
            self.queue.release(redis)


@dataclass(frozen=True)
class Bounds:
    """The bounds one document's fan-out is checked against."""

    #: Page tasks one request may have in flight: its documents' page ceiling.
    per_request: int
    #: ``AIRLOCK_MAX_QUEUED``, for the pages queue as for every queue.
    max_queued: int
    #: How long a request's count outlives a document that never gave its room back.
    ttl_seconds: int


def reserve(
    redis: Redis, request: str, document_id: str, pages: int, bounds: Bounds
) -> Reserved | Refused:
    """Room for ``pages`` page tasks of ``document_id`` in ``request`` (:func:`request_key`)."""
    granted = redis.eval(
        _TAKE, 1, request, document_id, pages, bounds.per_request, bounds.ttl_seconds
    )
    if granted == _HELD:
        # Published again: its pages were admitted then and some may be running; refused now,
        # one OCR job would read the document beside them, and its room be given back early.
        return Reserved(None)
    if not granted:
        return Refused(
            f"its request has page tasks in flight up to its bound of {bounds.per_request} "
            "(its page ceiling)"
        )
    try:
        admission = admit(redis, [PAGES_QUEUE] * pages, bounds.max_queued, require_consumers=True)
    except QueueFull as exc:
        give_back(redis, request, document_id)
        return Refused(str(exc))
    refusals = [verdict.failure.reason for verdict in admission.verdicts if verdict is not None]
    if refusals:
        admission.release(redis)
        give_back(redis, request, document_id)
        return Refused(refusals[0])
    return Reserved(admission)


def give_back(redis: Redis, request: str, document_id: str) -> None:
    """The document's room in its request, once it holds no page task any more."""
    redis.hdel(request, document_id)
