"""E-mail messages (RFC 822 / MIME, ``.eml``; Outlook's ``.msg`` is handed to
sandbox/extractors/outlook.py): the header lines a reader sees, the body, and what the message
carries, read by the one message reader (sandbox/extractors/messages.py).

The message is parsed by the standard library (``email`` with ``policy.default``), which
decodes encoded words, quoted-printable and base64; text is decoded by the charsets a browser
knows (the WHATWG labels the HTML reader uses). The body is text/plain preferred over
text/html, as a mail client shows the plain alternative, unless it is blank; an attached
``message/rfc822`` or ``message/global`` is read as part of the message; the files it carries,
wherever in it they sit, are handed back by its unpacking (``email-unpack``) to be read each as
an attachment of its own (sandbox/enclosures.py). See docs/sandbox.md, "Parsers" and
"Attachments".
"""

from __future__ import annotations

import email
import email.generator  # as_bytes imports it on first use, which a jailed child cannot
import email.header
import email.policy
import re
from collections.abc import Sequence
from email.message import EmailMessage, Message
from typing import Any

from sandbox import codes, enclosures
from sandbox.document import Document
from sandbox.extractors import html, messages, outlook
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
#: The text subtypes a mail client shows as the body, the one it prefers first.
_BODIES = ("plain", "html")
#: Parts that hold a message: RFC 6532's message/global is message/rfc822 in UTF-8.
_MESSAGES = ("message/rfc822", "message/global")
#: How an encoded attached message is written back out to be decoded: its lines as they came.
_AS_WRITTEN = email.policy.default.clone(refold_source="none")


class _Part(EmailMessage):
    """A part that parses each of its header lines once. ``policy.default`` parses a header
    anew on every read, and the parser and this reader read a part's Content-Type eight times:
    a message of 10,000 one-line attachments (:data:`MAX_PARTS`) took 10 CPU-s of its job's
    20 s wall, 13 of every 17 in header parsing."""

    def __init__(self, policy: email.policy.Policy | None = None) -> None:
        super().__init__(policy)
        # By the line as written (name and value), so no edit of the headers can go unseen.
        self._read: dict[tuple[str, str], Any] = {}

    def get(self, name: str, failobj: Any = None) -> Any:
        wanted = name.lower()
        for written, value in self.raw_items():
            if written.lower() == wanted:
                line = (written, value)
                if line not in self._read:
                    self._read[line] = self.policy.header_fetch_parse(written, value)
                return self._read[line]
        return failobj


_POLICY = email.policy.default.clone(message_factory=_Part)


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
    return _Rfc822(_parse(payload))


def _parse(payload: bytes) -> EmailMessage:
    """An RFC 822 message parsed, refused past the parser's recursion or :data:`MAX_PARTS`."""
    try:
        parsed = email.message_from_bytes(payload, policy=_POLICY)
    except RecursionError as exc:
        raise Refusal(codes.CEILING, "the message nests its parts too deep to parse") from exc
    _bound_parts(parsed)
    if not isinstance(parsed, EmailMessage):  # policy.default builds EmailMessage parts
        raise Refusal(codes.PARSER, "the e-mail parser built no message")
    return parsed


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
        messages.shown_type(part.get_content_type()),
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
    """The message a ``message/rfc822`` or ``message/global`` part holds, read as part of the
    message around it."""
    if part.get_content_type() not in _MESSAGES:
        return None
    inner = part.get_payload()
    if isinstance(inner, list) and inner and isinstance(inner[0], EmailMessage):
        return _unencoded(part, inner[0])
    return None


def _unencoded(part: EmailMessage, inner: EmailMessage) -> EmailMessage:
    """The message a part holds in base64 or quoted-printable (which RFC 2046 forbids for
    message/rfc822, RFC 6532 allows for message/global, and senders write): the parser reads
    the encoded text as a message of no headers, and the forward was shown as base64."""
    encoding = str(part.get("Content-Transfer-Encoding", "")).strip().lower()
    if encoding not in ("base64", "quoted-printable"):
        return inner
    carrier = Message()
    carrier["Content-Transfer-Encoding"] = encoding
    carrier.set_payload(inner.as_bytes(policy=_AS_WRITTEN).decode("ascii", "surrogateescape"))
    decoded = carrier.get_payload(decode=True)
    return _parse(decoded if isinstance(decoded, bytes) else b"")


def _body(message: EmailMessage) -> EmailMessage | None:
    """The part a mail client shows as the message: plain text preferred, else HTML. A blank
    plain alternative gives way to the HTML one: a sender who leaves it blank (a newsletter)
    writes only in the HTML, and the message was read as its headers alone."""
    part = _found_body(message, _BODIES)
    if part is not None and part.get_content_subtype() == "plain" and _blank(part):
        return _found_body(message, ("html",)) or part
    return part


def _blank(part: EmailMessage) -> bool:
    """Whether a text part holds white space alone, judged on its bytes read as UTF-8 (white
    space is ASCII in the charsets mail is in) and not by the detector, which refuses junk:
    a message's files are unpacked whatever its body holds."""
    raw = part.get_payload(decode=True)
    return not isinstance(raw, bytes) or not raw.decode("utf-8", "replace").strip()


def _found_body(message: EmailMessage, preference: Sequence[str]) -> EmailMessage | None:
    try:
        found = message.get_body(preferencelist=preference)
    except RecursionError as exc:
        raise Refusal(codes.CEILING, "the message nests its parts too deep to read") from exc
    return found if isinstance(found, EmailMessage) else None


def _attachments(message: EmailMessage, body: EmailMessage | None) -> list[EmailMessage]:
    """Every leaf part but the body and its other renderings, in the message's order, an
    attached message as one part. Every other part is carried, wherever it sits: Apple Mail
    puts the attached files in a multipart/mixed inside the HTML alternative, and they were
    lost without a trace."""
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
    beside = _beside_body(body, parents)
    return [part for part in leaves if not _rendering(part, parents, beside)]


def _beside_body(body: EmailMessage | None, parents: dict[int, EmailMessage]) -> set[int]:
    """The other alternatives of each multipart/alternative that holds the body."""
    beside: set[int] = set()
    child, ancestor = body, parents.get(id(body))
    while ancestor is not None:
        if ancestor.get_content_subtype() == "alternative":
            beside.update(id(part) for part in ancestor.iter_parts() if part is not child)
        child, ancestor = ancestor, parents.get(id(ancestor))
    return beside


def _rendering(part: EmailMessage, parents: dict[int, EmailMessage], beside: set[int]) -> bool:
    """Whether ``part`` belongs to another rendering of the body, in an alternative beside
    the body's. Nothing else there does: a file, sent as an attachment or not, is the
    message's."""
    if part.is_attachment() or not _rendered(part, parents.get(id(part))):
        return False
    node: EmailMessage | None = part
    while node is not None:
        if id(node) in beside:
            return True
        node = parents.get(id(node))
    return False


def _rendered(part: EmailMessage, parent: EmailMessage | None) -> bool:
    """Whether ``part`` is what a rendering of a body is made of: a text body (plain or HTML)
    that is no named file, or a picture of a multipart/related (the HTML's)."""
    if part.get_content_maintype() == "text":
        return part.get_content_subtype() in _BODIES and not part.get_filename()
    return (
        part.get_content_maintype() == "image"
        and parent is not None
        and parent.get_content_subtype() == "related"
    )


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
    for charset in ["utf-8", *_text_charsets(message), "cp1252"]:
        text = _decoded(value, charset)
        if text is not None:
            return text
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
    text = _decoded(data, charset) if charset else None
    return decode_text(data) if text is None else text


def _decoded(data: bytes, charset: str) -> str | None:
    """``data`` in the charset a message names (lower case, as the parser gives it); None when
    the name is no WHATWG label or the data is not in that charset."""
    codec = html.BROWSER_CODECS.get(charset)  # punycode's decoding took 13 s for 300 KB
    if codec is None:
        return None
    try:
        return data.decode(codec)
    except UnicodeError:
        return None
