"""Turning a request's attachments into refs: claim checks redeemed, the total size bounded.

Sizes are read (``STRLEN``) before bytes and the bytes fetched are re-hashed, so a request
cannot make the bridge hold more than its budget nor extract a planted value. See
docs/bridge-service.md, Requests.
"""

from __future__ import annotations

from redis import Redis

from bridge.knowledge.attachments import AttachmentRef
from bridge.queue.claim_check import PayloadUnavailable, sha256_hex
from bridge.queue.jobs import payload_key
from bridge.service.schema import ClaimCheck, InvalidRequest, ServiceRequest


def payload_budget(request: ServiceRequest, max_request_bytes: int) -> int:
    """The most payload bytes one request may bring: its limits per attachment, and no more
    than the bridge's per-request ceiling, which is what its memory was sized for."""
    return min(request.limits.max_bytes * len(request.attachments), max_request_bytes)


def resolve_attachments(
    redis: Redis, request: ServiceRequest, max_request_bytes: int
) -> list[AttachmentRef]:
    """The request's refs in input order; raises :class:`PayloadUnavailable` or
    :class:`InvalidRequest` (payloads over the budget)."""
    checks = [item for item in request.attachments if isinstance(item, ClaimCheck)]
    with redis.pipeline(transaction=False) as sizes:
        for check in checks:
            sizes.strlen(payload_key(check.sha256))
        stored_sizes = [int(size) for size in sizes.execute()]
    for check, size in zip(checks, stored_sizes, strict=True):
        if size == 0:
            raise PayloadUnavailable(
                f"no payload is stored under sha256 {check.sha256} (it expired, or was never "
                "stored); store it again and resend the request"
            )
    inline = sum(
        len(item.payload) for item in request.attachments if isinstance(item, AttachmentRef)
    )
    total = inline + sum(stored_sizes)
    budget = payload_budget(request, max_request_bytes)
    if total > budget:
        raise InvalidRequest(
            f"the attachments total {total} bytes; a request may bring at most {budget}",
            request.request_id,
        )
    values = redis.mget([payload_key(check.sha256) for check in checks]) if checks else []
    fetched = {check.sha256: value for check, value in zip(checks, values, strict=True)}
    refs = []
    for item in request.attachments:
        if isinstance(item, AttachmentRef):
            refs.append(item)
            continue
        untrusted_payload = fetched[item.sha256]
        if not isinstance(untrusted_payload, bytes) or sha256_hex(untrusted_payload) != item.sha256:
            raise PayloadUnavailable(
                f"the bytes stored under sha256 {item.sha256} do not hash to it (or expired "
                "meanwhile); they were refused rather than extracted"
            )
        refs.append(AttachmentRef(item.label, item.kind, item.media_type, untrusted_payload))
    return refs
