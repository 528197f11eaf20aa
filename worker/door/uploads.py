"""Request bodies into attachment refs, refused at the byte ceiling before the rest is read.

A body is counted as it arrives: a declared ``Content-Length`` over the ceiling is refused
before a byte is read, and a body without one (chunked) is refused at the first chunk that
passes it, so a 2 GB upload never costs more than the ceiling. Multipart files are spooled to
disk past 1 MiB by the form parser, and each is held to the per-file ceiling as well.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import Message

from bridge.knowledge.attachments import (
    EXTRACTABLE_KINDS,
    AttachmentRef,
    ExtractionLimits,
    over_byte_ceiling,
)
from bridge.service.schema import MAX_ATTACHMENTS
from bridge.wire import MAX_DECLARED_CHARS
from worker.door.jobs import HttpFailure
from worker.selections import upload_ref

#: A form's bytes beyond its files' (boundaries, part headers, a few small fields).
_FORM_OVERHEAD_BYTES = 64 * 1024
#: The label of a body that names no file.
UNNAMED = "upload"
_FILENAME_PARAMETER = re.compile(r"""filename\*?=(?:UTF-8''|"?)([^";]+)"?""", re.IGNORECASE)


class Refused(Exception):
    """A request the door answers with an error status instead of a job."""

    def __init__(self, failure: HttpFailure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


@dataclass(frozen=True)
class Upload:
    """One file of a request: its label and bytes."""

    label: str
    data: bytes
    #: The media type it was sent as (a raw body's Content-Type, a form part's): what tells a
    #: body without a file name, as Tika's clients send one, apart from another.
    media_type: str = ""

    def ref(self, declared_kind: str | None) -> AttachmentRef:
        return upload_ref(self.label, self.data, declared_kind, self.media_type)


def _file_too_large(label: str, size: int, limits: ExtractionLimits, *, at_least: bool) -> Refused:
    # The same words as the CLI's and the guard's refusal, and what would admit the file.
    reason = str(over_byte_ceiling(label, size, limits, at_least=at_least)).rstrip(".")
    return Refused(HttpFailure(413, "PayloadTooLarge", f"{reason}; the rest was not read."))


def _form_too_large(size: int, ceiling: int, *, at_least: bool) -> Refused:
    more = " or more" if at_least else ""
    return Refused(
        HttpFailure(
            413,
            "PayloadTooLarge",
            f"the form is {size} bytes{more}, over the {ceiling} bytes its files may hold "
            f"together ({MAX_ATTACHMENTS} files of max_bytes); the rest was not read",
        )
    )


#: Charges a body's bytes to its key's allowance (raising :class:`Refused` when spent).
Admit = Callable[[int], None]
#: Holds a body's bytes in the door's memory bound as they arrive (raising :class:`Refused`
#: when it is full): bodies still arriving are held too, or slow clients could pin far more
#: than the bound (20 trickling 8 MiB bodies pinned 150 MiB against a 2 MiB bound).
Reserve = Callable[[int], None]


#: Refuses a body of ``size`` bytes (``at_least``: or more) over its ceiling.
Refuse = Callable[[int, bool], Refused]


def _counted(  # noqa: PLR0917 - each is a separate rule of the body
    request: Request,
    ceiling: int,
    refuse: Refuse,
    admit: Admit,
    reserve: Reserve,
    idle_seconds: float,
) -> tuple[Request, bool]:
    """``request`` with a body that stops at ``ceiling`` bytes and at ``idle_seconds`` without
    a byte, held with ``reserve`` as it arrives, and whether its declared length was already
    charged with ``admit`` and held (then before any byte was read)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        if int(declared) > ceiling:
            raise refuse(int(declared), False)
        admit(int(declared))
        reserve(int(declared))
    received = 0

    async def receive() -> Message:
        nonlocal received
        try:
            message = await asyncio.wait_for(request.receive(), idle_seconds)
        except TimeoutError:
            # A client that declares a body and stops sending would hold its connection and
            # this handler for good: a slowloris.
            raise Refused(
                HttpFailure(
                    408,
                    "RequestTimeout",
                    f"no byte of the body arrived for {idle_seconds:g} s "
                    "(AIRLOCK_HTTP_BODY_IDLE_SECONDS)",
                )
            ) from None
        if message["type"] == "http.request":
            chunk = len(message.get("body", b""))
            received += chunk
            if received > ceiling:
                raise refuse(received, True)
            if not declared.isdigit():
                reserve(chunk)
        return message

    return Request(request.scope, receive), declared.isdigit()


def _file_name(given: str | None) -> str:
    """A file's own name from what a client sent (a path's last part), or :data:`UNNAMED`."""
    name = given.replace("\\", "/").rsplit("/", 1)[-1] if given else ""
    return name[:MAX_DECLARED_CHARS] or UNNAMED


def label_of(headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """The file name a raw body is given: ``X-Filename`` (URL-quoted, as Open WebUI sends it),
    a ``Content-Disposition`` filename (Tika's clients), or the ``filename`` query parameter."""
    named = headers.get("x-filename") or query.get("filename")
    if not named:
        disposition = _FILENAME_PARAMETER.search(headers.get("content-disposition", ""))
        named = disposition.group(1) if disposition else None
    return _file_name(unquote(named) if named else None)


async def raw_upload(
    request: Request, limits: ExtractionLimits, admit: Admit, reserve: Reserve, idle_seconds: float
) -> Upload:
    """The body as one file."""
    label = label_of(request.headers, request.query_params)

    def refuse(size: int, at_least: bool) -> Refused:
        return _file_too_large(label, size, limits, at_least=at_least)

    counted, charged = _counted(request, limits.max_bytes, refuse, admit, reserve, idle_seconds)
    data = await counted.body()
    if not charged:
        admit(len(data))
    return Upload(label, data, request.headers.get("content-type", ""))


async def form_uploads(
    request: Request, limits: ExtractionLimits, admit: Admit, reserve: Reserve, idle_seconds: float
) -> list[Upload]:
    """Each file part of a ``multipart/form-data`` body, in order (any field name)."""
    ceiling = limits.max_bytes * MAX_ATTACHMENTS + _FORM_OVERHEAD_BYTES

    def refuse(size: int, at_least: bool) -> Refused:
        return _form_too_large(size, ceiling, at_least=at_least)

    counted, charged = _counted(request, ceiling, refuse, admit, reserve, idle_seconds)
    try:
        form = await counted.form(max_files=MAX_ATTACHMENTS, max_fields=MAX_ATTACHMENTS)
    except HTTPException as exc:  # the form parser's refusal of a malformed body
        raise Refused(
            HttpFailure(422, "InvalidRequest", f"the body is not a valid form: {exc.detail}")
        ) from None
    uploads = []
    try:
        for _, value in form.multi_items():
            if not isinstance(value, UploadFile):
                continue
            label = _file_name(value.filename)
            size = value.size or 0
            if size > limits.max_bytes:
                raise _file_too_large(label, size, limits, at_least=False)
            uploads.append(Upload(label, await value.read(), value.content_type or ""))
    finally:
        await form.close()
    if not uploads:
        raise Refused(
            HttpFailure(422, "InvalidRequest", "the form holds no file part (multipart/form-data)")
        )
    if not charged:
        admit(sum(len(upload.data) for upload in uploads))
    return uploads


def unsupported(refs: Sequence[AttachmentRef]) -> Refused | None:
    """A 415 for a request whose every file is of a kind airlock does not read."""
    kinds = {ref.kind for ref in refs}
    if kinds & EXTRACTABLE_KINDS:
        return None
    return Refused(
        HttpFailure(
            415,
            "UnsupportedFormat",
            "no file of this request is of a kind airlock reads (seen: "
            f"{', '.join(sorted(kinds))}); it reads {', '.join(sorted(EXTRACTABLE_KINDS))}",
        )
    )
