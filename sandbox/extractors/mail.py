"""E-mail messages (RFC 822 / MIME, ``.eml``): the header lines a reader sees, the body, and
what the message carries.

The message is parsed by the standard library (``email`` with ``policy.default``), which
decodes encoded words, quoted-printable and base64. Its header lines come first (From, To,
Cc, Date, Subject); then the body, text/plain preferred over text/html as a mail client
shows the plain alternative, an HTML body read by the HTML reader (its hidden text left out
and counted); then each attached message, in the same form, nested up to
:data:`MAX_DEPTH`. Attached files are named in a notice with their type and size, and handed
back by the message's unpacking (``email-unpack``) to be read each as an attachment of its
own (sandbox/enclosures.py). See docs/sandbox.md, "Parsers" and "Attachments".
"""

from __future__ import annotations

import email
import email.header
import email.policy
import re
from collections import Counter
from email.message import EmailMessage, Message

from sandbox import codes, enclosures
from sandbox.document import Block, Document, Heading, Notice, Paragraph
from sandbox.extractors import html
from sandbox.extractors.registry import Refusal, extractor
from sandbox.extractors.text import TextBudget, decode_text
from sandbox.limits import ParseLimits

#: Messages attached to messages, read this deep: a mail client shows a forward of a
#: forward, and a hundred nested messages are an attack on the reader, not a thread.
MAX_DEPTH = 8
#: Parts of one message walked, at most: a boundary bomb is refused by count, not by memory.
MAX_PARTS = 10_000
#: Attachments named one by one; past this, one notice counts the rest.
_NAMED_ATTACHMENTS = 100
_HEADERS = ("From", "To", "Cc", "Date", "Subject")
#: A header's value is shown up to this length: a 10 MB Subject is an attack, not a subject.
_MAX_HEADER_CHARS = 2_000
#: A header longer than this, as written, is cut before it is parsed.
_MAX_RAW_HEADER_CHARS = 8_000
#: How the parser keeps a header's raw 8-bit byte: a lone surrogate (surrogateescape).
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


@extractor("email")
def extract_email(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    reader = _Reader(TextBudget(limits))
    reader.message(_parsed(payload), depth=0)
    return Document(reader.blocks + html.hidden_notice(reader.hidden) + reader.file_notices())


@extractor(enclosures.UNPACK_KINDS["email"])
def unpack_email(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """The files the message and its attached messages carry, in the order a reader meets
    them, decoded (base64, quoted-printable) under the job's member and byte ceilings."""
    packing = enclosures.Packing(limits.max_members, limits.max_unpacked_bytes)
    _unpack(_parsed(payload), 0, packing)
    return packing.answer()


def _unpack(message: EmailMessage, depth: int, packing: enclosures.Packing) -> None:
    for part in _attachments(message, _body(message)):
        inner = _attached_message(part)
        name = _name(part, f"attachment {part.get_content_type()}")
        if inner is None:
            raw = part.get_payload(decode=True)
            packing.add(name, part.get_content_type(), raw if isinstance(raw, bytes) else b"")
        elif depth + 1 >= MAX_DEPTH:
            packing.leave_out(name, f"it is a message nested past {MAX_DEPTH} messages")
        else:
            _unpack(inner, depth + 1, packing)


def _parsed(payload: bytes) -> EmailMessage:
    try:
        message = email.message_from_bytes(payload, policy=email.policy.default)
    except RecursionError as exc:
        raise Refusal(codes.CEILING, "the message nests its parts too deep to parse") from exc
    _bound_parts(message)
    if not isinstance(message, EmailMessage):  # policy.default builds EmailMessage parts
        raise Refusal(codes.PARSER, "the e-mail parser built no message")
    return message


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


class _Reader:
    def __init__(self, budget: TextBudget) -> None:
        self.blocks: list[Block] = []
        self.hidden: Counter[str] = Counter()
        self._budget = budget
        self._files: list[str] = []

    def message(self, message: EmailMessage, depth: int) -> None:
        """One message's header lines, body and attached messages."""
        lines = [f"{name}: {value}" for name in _HEADERS if (value := _header(message, name))]
        if lines:
            self.blocks.append(Paragraph(self._budget.spend("\n".join(lines))))
        body = _body(message)
        if body is not None:
            self._body(body)
        for part in _attachments(message, body):
            inner = _attached_message(part)
            if inner is None:
                self._files.append(_described(part))
            elif depth + 1 >= MAX_DEPTH:
                self._files.append(f"{_described(part)} nested past {MAX_DEPTH} messages, not read")
            else:
                title = f"Attached message {_name(part, '')}".strip()
                self.blocks.append(Heading(2, self._budget.spend(title)))
                self.message(inner, depth + 1)

    def _body(self, part: EmailMessage) -> None:
        text = _content(part)
        if part.get_content_subtype() == "html":
            page = html.read_page(text, self._budget, xhtml=False)
            self.blocks += page.blocks
            self.hidden.update(page.hidden)
        elif text.strip():
            self.blocks.append(Paragraph(self._budget.spend(text.strip())))

    def file_notices(self) -> list[Block]:
        """The attached files, named: each is read apart, as an attachment of its own, and the
        message's text still says what it carried when one of them is left out."""
        named: list[Block] = [
            Notice(f"[airlock: attached file {description}]")
            for description in self._files[:_NAMED_ATTACHMENTS]
        ]
        rest = len(self._files) - len(named)
        if rest > 0:
            named.append(Notice(f"[airlock: {rest} more attached files]"))
        return named


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
    return " ".join(text.split())[:_MAX_HEADER_CHARS]


def _cut_header(raw: str) -> str:
    """A header too long to parse, cut to its first characters and its encoded words
    decoded where they are whole."""
    head = raw[:_MAX_RAW_HEADER_CHARS].encode("ascii", "surrogateescape").decode("ascii", "replace")
    try:
        text = str(email.header.make_header(email.header.decode_header(head)))
    except (ValueError, LookupError, UnicodeError):
        text = head
    return " ".join(text.split())[:_MAX_HEADER_CHARS] + " [cut]"


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


def _name(part: EmailMessage, fallback: str) -> str:
    name = part.get_filename() or fallback
    return " ".join(str(name).split())[:200]


def _described(part: EmailMessage) -> str:
    """An attachment for a notice: its name, type and decoded size."""
    raw = part.get_payload(decode=True)
    size = len(raw) if isinstance(raw, bytes) else 0
    return f"{_name(part, 'unnamed')!r} ({part.get_content_type()}, {size:,} bytes)"
