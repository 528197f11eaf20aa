"""E-mail messages (RFC 822 / MIME, ``.eml``; Outlook's ``.msg`` is handed to
sandbox/extractors/outlook.py): the header lines a reader sees, the body, and what the message
carries, read by the one message reader (sandbox/extractors/messages.py).

The message is parsed by the standard library (``email`` with ``policy.default``), which
decodes encoded words, quoted-printable and base64. The body is text/plain preferred over
text/html, as a mail client shows the plain alternative; an attached ``message/rfc822`` is read
as part of the message; the files it carries are handed back by its unpacking
(``email-unpack``) to be read each as an attachment of its own (sandbox/enclosures.py). See
docs/sandbox.md, "Parsers" and "Attachments".
"""

from __future__ import annotations

import email
import email.header
import email.policy
import re
from collections.abc import Sequence
from email.message import EmailMessage, Message

from sandbox import codes, enclosures
from sandbox.document import Document
from sandbox.extractors import messages, outlook
from sandbox.extractors.messages import Attached, Body
from sandbox.extractors.registry import Refusal, extractor
from sandbox.extractors.text import TextBudget, decode_text
from sandbox.limits import ParseLimits
from sandbox.sniff import OLE2

#: Parts of one message walked, at most: a boundary bomb is refused by count, not by memory.
MAX_PARTS = 10_000
#: A header longer than this, as written, is cut before it is parsed.
_MAX_RAW_HEADER_CHARS = 8_000
#: How the parser keeps a header's raw 8-bit byte: a lone surrogate (surrogateescape).
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


@extractor("email")
def extract_email(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    return messages.read(_parsed(payload), TextBudget(limits))


@extractor(enclosures.UNPACK_KINDS["email"])
def unpack_email(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    packing = enclosures.Packing(limits.max_members, limits.max_unpacked_bytes)
    messages.unpack(_parsed(payload), packing)
    return packing.answer()


def _parsed(payload: bytes) -> messages.Message:
    """The message, whichever of the two formats it is in: an OLE2 file is Outlook's."""
    if payload.startswith(OLE2):
        return outlook.parsed(payload)
    try:
        parsed = email.message_from_bytes(payload, policy=email.policy.default)
    except RecursionError as exc:
        raise Refusal(codes.CEILING, "the message nests its parts too deep to parse") from exc
    _bound_parts(parsed)
    if not isinstance(parsed, EmailMessage):  # policy.default builds EmailMessage parts
        raise Refusal(codes.PARSER, "the e-mail parser built no message")
    return _Rfc822(parsed)


class _Rfc822:
    """An RFC 822 message as the message reader takes it."""

    def __init__(self, parsed: EmailMessage) -> None:
        self._message = parsed
        self._body = _body(parsed)

    def header(self, name: str) -> str:
        return _header(self._message, name)

    def body(self) -> Body | None:
        if self._body is None:
            return None
        return Body(_content(self._body), self._body.get_content_subtype() == "html")

    def attached(self) -> Sequence[Attached]:
        return [_attached(part) for part in _attachments(self._message, self._body)]


def _attached(part: EmailMessage) -> Attached:
    inner = _attached_message(part)
    raw = part.get_payload(decode=True) if inner is None else None
    data = raw if isinstance(raw, bytes) else b""
    return Attached(
        messages.shown_name(part.get_filename()),
        part.get_content_type(),
        len(data),
        lambda: data,
        None if inner is None else _Rfc822(inner),
    )


def _bound_parts(message: Message) -> None:
    """Refuse a message of more than :data:`MAX_PARTS` parts, counted without recursion."""
    count, pending = 0, [message]
    while pending:
        part = pending.pop()
        count += 1
        if count > MAX_PARTS:
            raise Refusal(codes.CEILING, f"the message has more than {MAX_PARTS} MIME parts")
        inner = part.get_payload()
        if isinstance(inner, list):
            pending += [child for child in inner if isinstance(child, Message)]


def _attached_message(part: EmailMessage) -> EmailMessage | None:
    """The message a ``message/rfc822`` part holds, read as part of the message around it."""
    if part.get_content_type() != "message/rfc822":
        return None
    inner = part.get_payload()
    if isinstance(inner, list) and inner and isinstance(inner[0], EmailMessage):
        return inner[0]
    return None


def _body(message: EmailMessage) -> EmailMessage | None:
    """The part a mail client shows as the message: plain text preferred, else HTML."""
    try:
        found = message.get_body(preferencelist=("plain", "html"))
    except RecursionError as exc:
        raise Refusal(codes.CEILING, "the message nests its parts too deep to read") from exc
    return found if isinstance(found, EmailMessage) else None


def _attachments(message: EmailMessage, body: EmailMessage | None) -> list[EmailMessage]:
    """Every leaf part but the body, in the message's order, an attached message as one
    part; the other renderings of the body (the alternatives beside it) are not attachments,
    but the pictures of a related HTML body are."""
    parents: dict[int, EmailMessage] = {}
    leaves: list[EmailMessage] = []
    pending: list[EmailMessage] = [message]
    while pending:
        part = pending.pop()
        inner = part.get_payload()
        if part.get_content_maintype() == "multipart" and isinstance(inner, list):
            children = [child for child in inner if isinstance(child, EmailMessage)]
            parents.update((id(child), part) for child in children)
            pending += reversed(children)
        elif part is not body and part is not message:
            leaves.append(part)
    alternatives = set()
    ancestor = parents.get(id(body))
    while ancestor is not None:
        if ancestor.get_content_subtype() == "alternative":
            alternatives.add(id(ancestor))
        ancestor = parents.get(id(ancestor))
    return [part for part in leaves if not _beside_body(part, parents, alternatives)]


def _beside_body(
    part: EmailMessage, parents: dict[int, EmailMessage], alternatives: set[int]
) -> bool:
    """Whether ``part`` lies under a multipart/alternative that holds the body."""
    ancestor = parents.get(id(part))
    while ancestor is not None:
        if id(ancestor) in alternatives:
            return True
        ancestor = parents.get(id(ancestor))
    return False


def _header(message: Message, name: str) -> str:
    """A header's decoded value on one line, "" when absent. Raw 8-bit bytes (which the
    parser keeps as escapes and would show as U+FFFD) are decoded as plain text is; a value
    the parser cannot structure (a malformed address list) is shown as it was written."""
    raw = next((value for key, value in message.raw_items() if key.lower() == name.lower()), None)
    if raw is None:
        return ""
    if len(raw) > _MAX_RAW_HEADER_CHARS:
        # The standard library parses a header's encoded words and addresses in quadratic
        # time (420 KB of encoded words took 12 s and 6 GB): a header this long is shown cut,
        # decoded by its words alone.
        return _cut_header(raw)
    if _ESCAPED_BYTE.search(raw):
        text = _raw_bytes(raw.encode("ascii", "surrogateescape"), message)
    else:
        try:
            text = str(message.get(name))
        except Exception:  # noqa: BLE001 - a malformed header is shown raw, not a failed message
            text = raw
    return " ".join(text.split())[: messages.MAX_HEADER_CHARS]


def _cut_header(raw: str) -> str:
    """A header too long to parse, cut to its first characters and its encoded words
    decoded where they are whole."""
    head = raw[:_MAX_RAW_HEADER_CHARS].encode("ascii", "surrogateescape").decode("ascii", "replace")
    try:
        text = str(email.header.make_header(email.header.decode_header(head)))
    except (ValueError, LookupError, UnicodeError):
        text = head
    return " ".join(text.split())[: messages.MAX_HEADER_CHARS] + " [cut]"


def _raw_bytes(value: bytes, message: Message) -> str:
    """A header written in raw 8-bit bytes, which no header names the charset of: UTF-8, else
    the charset the message's text is in (the sender's), else Windows-1252. A detector
    guesses badly on a dozen characters ("Jürgen" came out as cp850's "J³rgen")."""
    charsets = ["utf-8", *_text_charsets(message), "cp1252"]
    for charset in charsets:
        try:
            return value.decode(charset)
        except (LookupError, UnicodeDecodeError):
            continue
    return value.decode("cp1252", errors="replace")


def _text_charsets(message: Message) -> list[str]:
    """The charsets the message's parts declare, in order, without recursion."""
    found: list[str] = []
    pending = [message]
    while pending:
        part = pending.pop()
        if charset := part.get_content_charset():
            found.append(charset)
        inner = part.get_payload()
        if isinstance(inner, list):
            pending += reversed([child for child in inner if isinstance(child, Message)])
    return found


def _content(part: EmailMessage) -> str:
    """A text part decoded by its charset, or by the plain-text decoder when the charset is
    missing, unknown or wrong."""
    raw = part.get_payload(decode=True)
    data = raw if isinstance(raw, bytes) else b""
    charset = part.get_content_charset()
    if charset:
        try:
            return data.decode(charset)
        except (LookupError, UnicodeDecodeError):
            pass
    return decode_text(data)
