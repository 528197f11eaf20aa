"""The bridge service's wire format, version 1: a request in, one result out, JSON only.

The types below are the format: :func:`parse_request` decodes with them (bridge.wire) and
:func:`schemas` generates docs/schemas/ from them. See docs/bridge-service.md, Requests.
"""

from __future__ import annotations

import binascii
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from bridge.knowledge.attachments import DEFAULT_LIMITS, AttachmentRef, ExtractionLimits
from bridge.knowledge.contracts import IngestSelection
from bridge.knowledge.pages import selection_pages
from bridge.queue.source import DEFAULT_DEADLINE_SECONDS
from bridge.wire import (
    MAX_DECLARED_CHARS,
    OCR_LANGUAGE_RULE,
    Declared,
    OcrLanguage,
    Sha256Hex,
    WireError,
    decode,
    json_schema,
    limits_struct,
    parse_json,
)

SCHEMA_VERSION: Literal[1] = 1
#: The one field of a request stream entry, and of a result stream entry.
REQUEST_FIELD = "request"
RESULT_FIELD = "result"

#: Each attachment becomes one task; a bound keeps one request from flooding the queues.
MAX_ATTACHMENTS = 32
#: The most JSON structure (``[``, ``{``, ``,``, ``:`` bytes) a request may hold. A valid one
#: has at most ~99,000 even with every declared string made of commas (32 attachments, three
#: strings of 1,024 characters each, a few dozen marks around them); 12 MiB of ``[],`` or
#: ``"k":0,`` is millions of values, which took the parser's process from 53 to 405 MiB, past
#: the bridge's 256 MiB limit, before any rule could refuse them.
MAX_STRUCTURE = 1 << 17
#: Above the slowest job a worker runs by default (hard limit 180 s) plus queueing: a longer
#: deadline would only hold a bridge slot after every answer that can come has come.
MAX_DEADLINE_SECONDS = 600.0

# Request ids name a Redis key and are matched by clients: no spaces, braces or separators
# that a key pattern or a log line would read differently.
_REQUEST_ID_PATTERN = "^[A-Za-z0-9_.:-]{1,128}$"
RequestId = Annotated[str, Meta(pattern=_REQUEST_ID_PATTERN)]
_BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

# In the order msgspec lists an enum's values in the schema.
ErrorType = Literal[
    "ExtractionFailed", "IngestionRejected", "InternalError", "InvalidRequest", "PayloadUnavailable"
]


class Attachment(msgspec.Struct, forbid_unknown_fields=True):
    """A file in the request (payload_b64) or stored at airlock:payload:<sha256> (sha256)."""

    label: Declared
    kind: Annotated[
        Declared,
        Meta(
            description=(
                "pdf, docx, odt, rtf, epub, html, email, spreadsheet, presentation, image or "
                "text; any other kind is dropped with a reason."
            )
        ),
    ]
    media_type: Declared
    # The pattern is shown, not matched: strict base64 decoding is the check, and a regular
    # expression over megabytes of base64 would only repeat it slowly.
    payload_b64: (
        Annotated[
            str,
            Meta(
                description="The file's bytes, standard base64 (RFC 4648 section 4) with "
                "padding, no line breaks.",
                extra_json_schema={"pattern": _BASE64_PATTERN},
            ),
        ]
        | UnsetType
    ) = UNSET
    sha256: Sha256Hex | UnsetType = UNSET


_Limits = limits_struct("limits", partial=True)
_ONE_OF_PAYLOAD = {"oneOf": [{"required": ["payload_b64"]}, {"required": ["sha256"]}]}
_ONE_OF_ANSWER = {"oneOf": [{"required": ["selection"]}, {"required": ["error"]}]}


class Request(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    v: Annotated[Literal[1], Meta(description="The schema version.")]
    request_id: Annotated[
        RequestId,
        Meta(
            description="Chosen by the client; names the result and its key "
            "airlock:tenant:<tenant>:selection:<request_id>. Answered once per tenant within "
            "AIRLOCK_RESULT_TTL."
        ),
    ]
    attachments: Annotated[
        list[Annotated[Attachment, Meta(extra_json_schema=_ONE_OF_PAYLOAD)]],
        Meta(
            min_length=1,
            max_length=MAX_ATTACHMENTS,
            description="The files, extracted and folded in this order.",
        ),
    ]
    limits: (
        Annotated[
            _Limits,  # type: ignore[valid-type]
            Meta(
                description="Ceilings for this request; each may only be lowered from the "
                "service's ceiling, which is the default shown here as its maximum."
            ),
        ]
        | UnsetType
    ) = UNSET
    on_rejection: Annotated[
        Literal["omit", "raise"],
        Meta(
            description="omit: a refused file is listed in dropped with its reason; raise: "
            "the first refusal is the answer, as an error."
        ),
    ] = "omit"
    deadline_seconds: Annotated[
        float,
        Meta(
            gt=0,
            le=MAX_DEADLINE_SECONDS,
            description="How long the workers may take, counted from when a bridge takes the "
            "request up. Files without an answer by then are dropped with a reason.",
        ),
    ] = DEFAULT_DEADLINE_SECONDS
    pages: Annotated[
        bool,
        Meta(
            description="true: the result's selection also carries its page map (pages). Off "
            "by default, so a client that validates results as version 1 first published "
            "them sees no field it does not know."
        ),
    ] = False
    ocr_language: OcrLanguage | UnsetType = UNSET


class PageSpan(msgspec.Struct, forbid_unknown_fields=True):
    """One page of an attachment's block: its text is text[start:end] of the selection."""

    number: Annotated[int, Meta(ge=1, description="The page's index in its document, from 1.")]
    printed: Annotated[
        str | None, Meta(description="The label the document prints on it, when another.")
    ]
    start: Annotated[int, Meta(ge=0)]
    end: Annotated[int, Meta(ge=0)]


class AttachmentPages(msgspec.Struct, forbid_unknown_fields=True):
    label: str
    pages: list[PageSpan]


class Selection(msgspec.Struct, forbid_unknown_fields=True):
    """The IngestSelection, as AttachmentSource.select builds it for the same files."""

    text: Annotated[str, Meta(description="ATTACHMENT [label] blocks, untrusted.")]
    revision: Annotated[
        str, Meta(description="label:byte_size of each admitted file, joined by |.")
    ]
    dropped: Annotated[
        list[tuple[str, str]],
        Meta(description="[label, reason] for every file left out, in input order."),
    ]
    pages: (
        Annotated[
            list[AttachmentPages],
            Meta(
                description="Only when the request asked for it: each attachment block of text, "
                "in order, with where each of its pages lies in text (none for a document "
                "without pages)."
            ),
        ]
        | UnsetType
    ) = UNSET


class ResultError(msgspec.Struct, forbid_unknown_fields=True):
    """Why the request as a whole was not answered with a selection."""

    type: ErrorType
    reason: str


class Result(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    v: Literal[1]
    request_id: RequestId
    selection: Selection | UnsetType = UNSET
    error: ResultError | UnsetType = UNSET


def schemas() -> dict[str, str]:
    """The JSON Schemas of docs/schemas/, by file name, generated from the types above."""
    generated = {
        "request.schema.json": json_schema(
            Request,
            title="airlock bridge request, version 1",
            description="The JSON document a client sets into one of its inbox slots, "
            "airlock:tenant:<tenant>:in:0 to 7 (docs/bridge-service.md). Beyond this schema, "
            "the bridge also holds it to at most 131072 JSON structure characters ([{,:), "
            "requires payload_b64 to decode as strict base64, and the attachments' payloads to "
            "total at most limits.max_bytes per attachment and AIRLOCK_BRIDGE_MAX_REQUEST_MB; "
            "it refuses duplicate keys and the non-JSON constants NaN and Infinity.",
        ),
        "result.schema.json": json_schema(
            Annotated[
                Result,
                Meta(extra_json_schema=_ONE_OF_ANSWER),
            ],
            title="airlock bridge result, version 1",
            description="The JSON document in the `result` field of an entry of the tenant's "
            "result stream airlock:tenant:<tenant>:results, and the value of "
            "airlock:tenant:<tenant>:selection:<request_id> (docs/bridge-service.md). Exactly "
            "one of selection and error.",
        ),
    }
    return {name: json.dumps(schema, indent=2) + "\n" for name, schema in generated.items()}


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
    #: Whether the result carries the selection's page map.
    pages: bool = False
    #: The tesseract languages to read its scans with; None for the workers' own.
    ocr_language: str | None = None


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


_FIELDS = msgspec.structs.fields(Request)
_ATTACHMENT_KEYS = [f.name for f in msgspec.structs.fields(Attachment)]
_INLINE_KEYS = sorted(set(_ATTACHMENT_KEYS) - {"sha256"})
_CLAIM_CHECK_KEYS = sorted(set(_ATTACHMENT_KEYS) - {"payload_b64"})
_DECLARED_RULE = f"{{where}} must be a string of at most {MAX_DECLARED_CHARS} characters"
#: What a refused field must be, by the field the decoder stopped at (``[]``: any index).
_RULES = {
    "": f"a request must have the keys {sorted(f.name for f in _FIELDS if f.required)} and may "
    f"have {sorted(f.name for f in _FIELDS if not f.required)}; nothing else",
    "v": f"v must be {SCHEMA_VERSION}: this bridge speaks version 1 only",
    "attachments": f"attachments must be a list of 1 to {MAX_ATTACHMENTS} attachments",
    "attachments[]": f"{{where}} must be an object with exactly the keys {_INLINE_KEYS} or "
    f"{_CLAIM_CHECK_KEYS}",
    "attachments[].label": _DECLARED_RULE,
    "attachments[].kind": _DECLARED_RULE,
    "attachments[].media_type": _DECLARED_RULE,
    "attachments[].payload_b64": "{where} must be standard base64 with padding and nothing else",
    "attachments[].sha256": "{where} must be 64 lowercase hex digits",
    "limits": "limits must be an object with some of the keys "
    f"{[f.name for f in msgspec.structs.fields(_Limits)]}",
    "on_rejection": "on_rejection must be 'omit' or 'raise'",
    "deadline_seconds": "deadline_seconds must be a number above 0 and at most "
    f"{MAX_DEADLINE_SECONDS:g}",
    "ocr_language": f"ocr_language must be {OCR_LANGUAGE_RULE}",
}


def _limit_rule(name: str, ceilings: ExtractionLimits, where: str = "limits.") -> str:
    ceiling = getattr(ceilings, name)
    if isinstance(ceiling, float):
        return f"{where}{name} must be a number above 0 and at most {ceiling:g}"
    return f"{where}{name} must be an integer above 0 and at most {ceiling}"


def _refusal(error: WireError, ceilings: ExtractionLimits) -> str:
    if error.field.startswith("limits."):
        return _limit_rule(error.field.removeprefix("limits."), ceilings)
    rule = _RULES.get(error.field)
    return rule.format(where=error.path) if rule else f"{error.path}: {error.detail}"


def _attachment(attachment: Attachment, index: int) -> AttachmentRef | ClaimCheck:
    where = f"attachments[{index}]"
    untrusted_b64, sha256 = attachment.payload_b64, attachment.sha256
    if isinstance(sha256, str) and untrusted_b64 is UNSET:
        return ClaimCheck(attachment.label, attachment.kind, attachment.media_type, sha256)
    if not isinstance(untrusted_b64, str) or sha256 is not UNSET:
        raise InvalidRequest(_RULES["attachments[]"].format(where=where))
    try:
        payload = binascii.a2b_base64(untrusted_b64.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        raise InvalidRequest(
            _RULES["attachments[].payload_b64"].format(where=f"{where}.payload_b64")
        ) from None
    return AttachmentRef(attachment.label, attachment.kind, attachment.media_type, payload)


def _limits(asked: Any, ceilings: ExtractionLimits, where: str = "limits.") -> ExtractionLimits:
    """The request's limits, each at most the service's ceiling.

    A request may tighten a ceiling, never loosen it: the service's ceilings (the defaults, or
    the deployment's AIRLOCK_MAX_* variables) are what the bridge's memory and the workers'
    time limits were sized for.
    """
    chosen = {
        name: value for name, value in msgspec.structs.asdict(asked).items() if value is not UNSET
    }
    for name, value in chosen.items():
        if value > getattr(ceilings, name):
            raise InvalidRequest(_limit_rule(name, ceilings, where))
    return replace(ceilings, **chosen)


def query_limits(
    untrusted_params: Mapping[str, str], ceilings: ExtractionLimits
) -> ExtractionLimits:
    """Limits an HTTP query asks for by name (``max_pages=5``), each at most the service's
    ceiling as in a stream request; :class:`InvalidRequest` naming the rule otherwise."""
    try:
        asked = decode(dict(untrusted_params), _Limits, from_text=True)
    except WireError as exc:
        raise InvalidRequest(
            _limit_rule(exc.field, ceilings, where="") if exc.field else _RULES["limits"]
        ) from None
    return _limits(asked, ceilings, where="")


def _request_id(untrusted_doc: dict[str, object]) -> str:
    untrusted_id = untrusted_doc.get("request_id")
    # fullmatch, not the decoder's search: ``$`` alone would also match before a final newline.
    if type(untrusted_id) is not str or not re.fullmatch(_REQUEST_ID_PATTERN, untrusted_id):
        raise InvalidRequest("request_id must be 1 to 128 characters of [A-Za-z0-9_.:-]")
    return untrusted_id


def _validated(untrusted_doc: dict[str, object], ceilings: ExtractionLimits) -> ServiceRequest:
    try:
        request = decode(untrusted_doc, Request)
    except WireError as exc:
        raise InvalidRequest(_refusal(exc, ceilings)) from None
    attachments = tuple(_attachment(item, i) for i, item in enumerate(request.attachments))
    limits = ceilings if request.limits is UNSET else _limits(request.limits, ceilings)
    return ServiceRequest(
        request.request_id,
        attachments,
        limits,
        request.on_rejection,
        request.deadline_seconds,
        request.pages,
        None if request.ocr_language is UNSET else request.ocr_language,
    )


def parse_request(
    untrusted_raw: bytes, ceilings: ExtractionLimits = DEFAULT_LIMITS
) -> ServiceRequest:
    """Validate a request document, or raise :class:`InvalidRequest` saying what is wrong.

    ``ceilings`` are the service's limits: a request without limits gets them, and one with
    limits may only tighten them. A refusal carries the request id when one could be read, so
    the client that sent it is answered instead of left waiting.
    """
    structure = sum(untrusted_raw.count(mark) for mark in (b"[", b"{", b",", b":"))
    if structure > MAX_STRUCTURE:
        raise InvalidRequest(
            f"the request holds {structure} JSON values or more; a request has at most "
            f"{MAX_STRUCTURE}, so it was not parsed"
        )
    try:
        untrusted_doc = parse_json(untrusted_raw, schema_integers=True)
    except WireError as exc:
        raise InvalidRequest(f"the request {exc.detail}") from None
    if type(untrusted_doc) is not dict:
        raise InvalidRequest("a request must be a JSON object")
    request_id = _request_id(untrusted_doc)
    try:
        return _validated(untrusted_doc, ceilings)
    except InvalidRequest as exc:
        raise InvalidRequest(exc.reason, request_id) from None


def _encoded(result: Result) -> str:
    # ASCII only: a result is valid UTF-8 for every client even when a parser produced a lone
    # surrogate, which has no UTF-8 encoding and would otherwise fail the publish.
    return json.dumps(msgspec.to_builtins(result), ensure_ascii=True, separators=(",", ":"))


def selection_result(request_id: str, selection: IngestSelection, *, pages: bool) -> str:
    """The result of an answered request; with ``pages``, the selection's page map too."""
    dropped = [(label, reason) for label, reason in selection.dropped]
    page_map: list[AttachmentPages] | UnsetType = UNSET
    if pages:
        page_map = [
            AttachmentPages(
                block.label,
                [PageSpan(span.number, span.printed, span.start, span.end) for span in block.pages],
            )
            for block in selection_pages(selection.text)
        ]
    return _encoded(
        Result(
            v=SCHEMA_VERSION,
            request_id=request_id,
            selection=Selection(selection.text, selection.revision, dropped, page_map),
        )
    )


def error_result(request_id: str, error_type: ErrorType, reason: str) -> str:
    return _encoded(
        Result(v=SCHEMA_VERSION, request_id=request_id, error=ResultError(error_type, reason))
    )


def main() -> None:
    """``python -m bridge.service.schema [DIR]``: write the schemas (default docs/schemas)."""
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")
    for name, text in schemas().items():
        (directory / name).write_text(text)


if __name__ == "__main__":
    main()
