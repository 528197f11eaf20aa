"""Payload transport: the bytes wait in Redis under their SHA-256; messages carry a claim check.

The worker re-hashes what it fetched, so a message that names another payload's key, or a
value planted under a key, yields a refusal, never another document's text.
See docs/queue.md (Flow, The trust boundaries).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Protocol

from redis import Redis

from bridge.queue.jobs import payload_key


class ClaimCheck(Protocol):
    """What a message says of the payload it stands for (a document's job, a page's)."""

    @property
    def sha256(self) -> str: ...

    @property
    def size(self) -> int: ...


class PayloadUnavailable(Exception):
    """The claim check cannot be redeemed: the payload expired, or the bytes are not the ones named.

    Raised on the worker side; the task answers it as an extraction failure with this reason.
    """


def sha256_hex(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


#: A payload up to this size is simply written again, in the one round trip that refreshes the
#: others: resending a few kilobytes costs less than a second round trip for every small job.
SENT_AT_ONCE_BYTES = 64 * 1024


def store_payloads(redis: Redis, payloads: Mapping[str, bytes], ttl_seconds: int) -> None:
    """Store each payload under its hash for ``ttl_seconds``, refreshing keys already there.

    A larger payload is refreshed first and sent only if it was missing, so a document already
    stored is not uploaded again. Writing the same hash twice writes the same bytes (the worker
    re-hashes what it fetches), so neither a race nor a rewrite can change a job's document.
    """
    if not payloads:
        return
    small = [digest for digest, payload in payloads.items() if len(payload) <= SENT_AT_ONCE_BYTES]
    large = [digest for digest, payload in payloads.items() if len(payload) > SENT_AT_ONCE_BYTES]
    with redis.pipeline(transaction=False) as refresh:
        for digest in small:
            refresh.set(payload_key(digest), payloads[digest], ex=ttl_seconds)
        for digest in large:
            refresh.expire(payload_key(digest), ttl_seconds)
        present = refresh.execute()[len(small) :]
    missing = [digest for digest, was_there in zip(large, present, strict=True) if not was_there]
    if not missing:
        return
    with redis.pipeline(transaction=False) as upload:
        for digest in missing:
            upload.set(payload_key(digest), payloads[digest], nx=True, ex=ttl_seconds)
        upload.execute()


def fetch_payload(redis: Redis, job: ClaimCheck) -> bytes:
    """The verified bytes a claim check names, or :class:`PayloadUnavailable` with the reason."""
    untrusted_payload = redis.get(payload_key(job.sha256))
    if untrusted_payload is None:
        raise PayloadUnavailable(
            "the payload is no longer in the store (its time to live ran out before a worker "
            "reached the job); submit the file again"
        )
    if not isinstance(untrusted_payload, bytes):
        raise PayloadUnavailable("the payload store answered with something other than bytes")
    if len(untrusted_payload) != job.size or sha256_hex(untrusted_payload) != job.sha256:
        raise PayloadUnavailable(
            "the stored bytes do not match the size and SHA-256 the job names; they were "
            "refused rather than extracted in place of the submitted file"
        )
    return untrusted_payload
