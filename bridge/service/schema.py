"""The bridge service's wire format, version 1: a request in, one result out, JSON only.

Whoever can ``XADD`` to the request stream can put anything in an entry, so nothing in it is
used before :func:`parse_request` accepted the whole document: strict UTF-8, plain JSON (no
``NaN``, no duplicate keys, whose meaning differs between parsers), exact key sets, exact
types, bounded strings and numbers. It accepts exactly the documents
``docs/schemas/request.schema.json`` accepts (a test holds the two together), and also refuses
what a schema cannot see: bytes that are not strict UTF-8 JSON. (The payloads' total size is
bounded where they are resolved, ``bridge.service.payloads``.) A refusal carries the request id
when one could be recovered, so the client that sent it is answered instead of left waiting.
"""

from __future__ import annotations

import binascii
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Literal

from bridge.knowledge.attachments import DEFAULT_LIMITS, AttachmentRef, ExtractionLimits
from bridge.knowledge.contracts import IngestSelection
from bridge.queue.jobs import MAX_DECLARED_CHARS
from bridge.queue.source import DEFAULT_DEADLINE_SECONDS

SCHEMA_VERSION = 1
#: The one field of a request stream entry, and of a result stream entry.
REQUEST_FIELD = "request"
RESULT_FIELD = "result"

#: Each attachment becomes one task; a bound keeps one request from flooding the queues.
MAX_ATTACHMENTS = 32
#: Above the slowest job a worker runs by default (hard limit 180 s) plus queueing: a longer
#: deadline would only hold a bridge slot after every answer that can come has come.
MAX_DEADLINE_SECONDS = 600.0

# Request ids name a Redis key and are matched by clients: no spaces, braces or separators
# that a key pattern or a log line would read differently.
_REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}\Z")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")

_TOP_KEYS = frozenset(
    {"v", "request_id", "attachments", "limits", "on_rejection", "deadline_seconds"}
)
_REQUIRED_KEYS = frozenset({"v", "request_id", "attachments"})
_DECLARED_KEYS = ("label", "kind", "media_type")
_INLINE_KEYS = frozenset({*_DECLARED_KEYS, "payload_b64"})
_CLAIM_CHECK_KEYS = frozenset({*_DECLARED_KEYS, "sha256"})
_LIMIT_NAMES = tuple(f.name for f in fields(ExtractionLimits))

ErrorType = Literal[
    "InvalidRequest", "PayloadUnavailable", "IngestionRejected", "ExtractionFailed", "InternalError"
]


class InvalidRequest(ValueError):
    """A request this version does not accept; ``request_id`` when one could be recovered."""

    def __init__(self, reason: str, request_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.request_id = request_id


@dataclass(frozen=True)
class ClaimCheck:
    """An attachment whose bytes the client stored under ``airlock:payload:<sha256>``."""

    label: str
    kind: str
    media_type: str
    sha256: str


@dataclass(frozen=True)
class ServiceRequest:
    """A validated request: every field typed and bounded, the limits rebuilt and checked."""

    request_id: str
    attachments: tuple[AttachmentRef | ClaimCheck, ...] = field(repr=False)
    limits: ExtractionLimits = DEFAULT_LIMITS
    on_rejection: Literal["omit", "raise"] = "omit"
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS


def request_bytes(untrusted_fields: Mapping[bytes, bytes], max_bytes: int) -> bytes:
    """The entry's ``request`` field, refused by shape and size before anything parses it."""
    if set(untrusted_fields) != {REQUEST_FIELD.encode()}:
        raise InvalidRequest(f"a request entry must have exactly one field, {REQUEST_FIELD!r}")
    untrusted_raw = untrusted_fields[REQUEST_FIELD.encode()]
    if len(untrusted_raw) > max_bytes:
        raise InvalidRequest(
            f"the request is {len(untrusted_raw)} bytes; at most {max_bytes} are accepted "
            "(AIRLOCK_BRIDGE_MAX_REQUEST_MB). Store large files with the claim check and "
            "send their sha256 instead"
        )
    return untrusted_raw


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise InvalidRequest("the request repeats a key in one object")
    return dict(pairs)


def _no_constants(name: str) -> object:
    raise InvalidRequest(f"{name} is not a JSON number")


def _document(untrusted_raw: bytes) -> object:
    try:
        text = untrusted_raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("the request is not UTF-8") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except InvalidRequest:
        raise
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser's stack
        raise InvalidRequest("the request is not a JSON document") from None


def _integer(untrusted: object) -> int | None:
    """An integer as JSON Schema defines one: a number without a fractional part, not a boolean."""
    if type(untrusted) is int:
        return untrusted
    if type(untrusted) is float and untrusted.is_integer():
        return int(untrusted)
    return None


def _number(untrusted: object) -> float | None:
    if isinstance(untrusted, bool) or not isinstance(untrusted, int | float):
        return None
    try:
        value = float(untrusted)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return value if math.isfinite(value) else None


def _string(untrusted: object, where: str) -> str:
    if type(untrusted) is not str or len(untrusted) > MAX_DECLARED_CHARS:
        raise InvalidRequest(f"{where} must be a string of at most {MAX_DECLARED_CHARS} characters")
    return untrusted


def _attachment(untrusted: object, index: int) -> AttachmentRef | ClaimCheck:
    where = f"attachments[{index}]"
    if type(untrusted) is not dict or set(untrusted) not in (_INLINE_KEYS, _CLAIM_CHECK_KEYS):
        raise InvalidRequest(
            f"{where} must be an object with exactly the keys {sorted(_INLINE_KEYS)} or "
            f"{sorted(_CLAIM_CHECK_KEYS)}"
        )
    label, kind, media_type = (_string(untrusted[k], f"{where}.{k}") for k in _DECLARED_KEYS)
    if "sha256" in untrusted:
        untrusted_sha256 = untrusted["sha256"]
        if type(untrusted_sha256) is not str or not _SHA256_HEX.match(untrusted_sha256):
            raise InvalidRequest(f"{where}.sha256 must be 64 lowercase hex digits")
        return ClaimCheck(label, kind, media_type, untrusted_sha256)
    untrusted_b64 = untrusted["payload_b64"]
    try:
        if type(untrusted_b64) is not str:
            raise TypeError
        payload = binascii.a2b_base64(untrusted_b64.encode("ascii"), strict_mode=True)
    except (TypeError, UnicodeEncodeError, binascii.Error):
        raise InvalidRequest(
            f"{where}.payload_b64 must be standard base64 with padding and nothing else"
        ) from None
    return AttachmentRef(label, kind, media_type, payload)


def _limits(untrusted: object, ceilings: ExtractionLimits) -> ExtractionLimits:
    """The request's limits: a subset of the fields, each at most the service's ceiling.

    A request may tighten a ceiling, never loosen it: the service's ceilings (the defaults, or
    the deployment's AIRLOCK_MAX_* variables) are what the bridge's memory and the workers'
    time limits were sized for.
    """
    if type(untrusted) is not dict or not set(untrusted) <= set(_LIMIT_NAMES):
        raise InvalidRequest(f"limits must be an object with some of the keys {list(_LIMIT_NAMES)}")
    chosen: dict[str, int | float] = {}
    for name, untrusted_value in untrusted.items():
        ceiling = getattr(ceilings, name)
        is_ratio = isinstance(ceiling, float)
        value = _number(untrusted_value) if is_ratio else _integer(untrusted_value)
        if value is None or not 0 < value <= ceiling:
            kind = "a number" if is_ratio else "an integer"
            raise InvalidRequest(f"limits.{name} must be {kind} above 0 and at most {ceiling:g}")
        chosen[name] = value
    return replace(ceilings, **chosen)  # type: ignore[arg-type]


def _request_id(untrusted_doc: dict[str, object]) -> str:
    untrusted_id = untrusted_doc.get("request_id")
    if type(untrusted_id) is not str or not _REQUEST_ID.match(untrusted_id):
        raise InvalidRequest("request_id must be 1 to 128 characters of [A-Za-z0-9_.:-]")
    return untrusted_id


def _validated(
    untrusted_doc: dict[str, object], request_id: str, ceilings: ExtractionLimits
) -> ServiceRequest:
    if _integer(untrusted_doc.get("v")) != SCHEMA_VERSION:
        raise InvalidRequest(f"v must be {SCHEMA_VERSION}: this bridge speaks version 1 only")
    keys = set(untrusted_doc)
    if not _REQUIRED_KEYS <= keys <= _TOP_KEYS:
        raise InvalidRequest(
            f"a request must have the keys {sorted(_REQUIRED_KEYS)} and may have "
            f"{sorted(_TOP_KEYS - _REQUIRED_KEYS)}; nothing else"
        )
    untrusted_attachments = untrusted_doc["attachments"]
    if type(untrusted_attachments) is not list or not (
        1 <= len(untrusted_attachments) <= MAX_ATTACHMENTS
    ):
        raise InvalidRequest(f"attachments must be a list of 1 to {MAX_ATTACHMENTS} attachments")
    attachments = tuple(_attachment(item, i) for i, item in enumerate(untrusted_attachments))
    limits = _limits(untrusted_doc["limits"], ceilings) if "limits" in keys else ceilings
    untrusted_mode = untrusted_doc.get("on_rejection", "omit")
    if untrusted_mode not in ("omit", "raise"):
        raise InvalidRequest("on_rejection must be 'omit' or 'raise'")
    on_rejection: Literal["omit", "raise"] = "raise" if untrusted_mode == "raise" else "omit"
    deadline = _number(untrusted_doc.get("deadline_seconds", DEFAULT_DEADLINE_SECONDS))
    if deadline is None or not 0 < deadline <= MAX_DEADLINE_SECONDS:
        raise InvalidRequest(
            f"deadline_seconds must be a number above 0 and at most {MAX_DEADLINE_SECONDS:g}"
        )
    return ServiceRequest(request_id, attachments, limits, on_rejection, deadline)


def parse_request(
    untrusted_raw: bytes, ceilings: ExtractionLimits = DEFAULT_LIMITS
) -> ServiceRequest:
    """Validate a request document, or raise :class:`InvalidRequest` saying what is wrong.

    ``ceilings`` are the service's limits: a request without limits gets them, and one with
    limits may only tighten them.
    """
    untrusted_doc = _document(untrusted_raw)
    if type(untrusted_doc) is not dict:
        raise InvalidRequest("a request must be a JSON object")
    request_id = _request_id(untrusted_doc)
    try:
        return _validated(untrusted_doc, request_id, ceilings)
    except InvalidRequest as exc:
        raise InvalidRequest(exc.reason, request_id) from None


def _encoded(document: dict[str, object]) -> str:
    # ASCII only: a result is valid UTF-8 for every client even when a parser produced a lone
    # surrogate, which has no UTF-8 encoding and would otherwise fail the publish.
    return json.dumps(document, ensure_ascii=True, separators=(",", ":"))


def selection_result(request_id: str, selection: IngestSelection) -> str:
    return _encoded(
        {
            "v": SCHEMA_VERSION,
            "request_id": request_id,
            "selection": {
                "text": selection.text,
                "revision": selection.revision,
                "dropped": [[label, reason] for label, reason in selection.dropped],
            },
        }
    )


def error_result(request_id: str, error_type: ErrorType, reason: str) -> str:
    return _encoded(
        {
            "v": SCHEMA_VERSION,
            "request_id": request_id,
            "error": {"type": error_type, "reason": reason},
        }
    )
