"""A message as a reader sees it, whichever format carries it: header lines, a body, and what
it has attached, each an attached message (read as part of it) or a file (read apart).

RFC 822 mail (sandbox/extractors/mail.py) and Outlook's MSG (sandbox/extractors/outlook.py)
store the same things in different shapes; one reader renders both, so a message reads the
same from either and both are bounded the same way. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sandbox import enclosures
from sandbox.document import Block, Document, Heading, Notice, Paragraph
from sandbox.extractors import html
from sandbox.extractors.text import TextBudget

#: Messages attached to messages, read this deep: a mail client shows a forward of a
#: forward, and a hundred nested messages are an attack on the reader, not a thread.
MAX_DEPTH = 8
#: The header lines a reader sees, in this order.
HEADERS = ("From", "To", "Cc", "Date", "Subject")
#: A header's value is shown up to this length: a 10 MB Subject is an attack, not a subject.
MAX_HEADER_CHARS = 2_000
#: Attached files named one by one in the message's text; past this, one notice counts them.
_NAMED_FILES = 100
_MAX_NAME_CHARS = 200
_UNNAMED = "unnamed"
#: What a named file's type is shown as when the message gives none or no media type.
_UNTYPED = "application/octet-stream"
#: A media type as RFC 2045 writes it, ``type/subtype`` in tokens of at most 127 characters
#: (RFC 6838): no space, parenthesis or bracket, so a declared type cannot end the notice that
#: names it and write another after it (an Outlook MIME tag did).
_TYPE_NAME = r"[!#$%&'*+.^_`{|}~0-9A-Za-z-]{1,127}"
_MEDIA_TYPE = re.compile(f"{_TYPE_NAME}/{_TYPE_NAME}")
#: What would close a name's quotes or the notice around it: a name holding
#: "a' (application/pdf, 1 bytes)] [airlock: ..." wrote a notice of airlock's mid-line.
_NOT_IN_A_NOTICE = str.maketrans("", "", "'[]")


@dataclass(frozen=True)
class Body:
    """The part a mail client shows as the message: its text, and whether it is HTML."""

    text: str
    html: bool


@dataclass(frozen=True)
class Attached:
    """Something a message carries: an attached ``message`` (read as part of this one), or a
    file of ``size`` bytes whose ``data`` is decoded only when it is unpacked."""

    name: str  # "" when the message gives none
    media_type: str
    size: int
    data: Callable[[], bytes]
    message: Message | None = None


class Message(Protocol):
    def header(self, name: str) -> str:
        """One of :data:`HEADERS`, decoded, on one line; "" when absent."""
        ...

    def body(self) -> Body | None: ...

    def attached(self) -> Sequence[Attached]:
        """What the message carries beside its body, in its order."""
        ...


def shown_name(name: object) -> str:
    """An attachment's name as the message gives it, on one line and bounded ("" for none)."""
    return " ".join(str(name or "").split())[:_MAX_NAME_CHARS]


def shown_type(declared: str) -> str:
    """An attachment's media type as the message declares it, without its parameters; any
    other text (Outlook's MIME tag is free text) is no type, and is not shown."""
    media_type = declared.partition(";")[0].strip()
    return media_type if _MEDIA_TYPE.fullmatch(media_type) else _UNTYPED


def read(message: Message, budget: TextBudget) -> Document:
    """The message's header lines and body, each attached message after it under a heading,
    and a notice naming each attached file (read apart, as an attachment of its own)."""
    reader = _Reader(budget)
    reader.message(message, depth=0)
    return Document(reader.blocks + html.hidden_notice(reader.hidden) + reader.file_notices())


def unpack(message: Message, packing: enclosures.Packing, depth: int = 0) -> None:
    """The files the message and its attached messages carry, in the order a reader meets
    them, decoded under the packing's ceilings (a file's size is known before it is decoded)."""
    for item in message.attached():
        name = item.name or _UNNAMED
        if item.message is None:
            if packing.admits(name, item.size):
                packing.add(name, item.media_type, item.data())
        elif depth + 1 >= MAX_DEPTH:
            packing.leave_out(name, f"it is a message nested past {MAX_DEPTH} messages")
        else:
            unpack(item.message, packing, depth + 1)


class _Reader:
    def __init__(self, budget: TextBudget) -> None:
        self.blocks: list[Block] = []
        self.hidden: Counter[str] = Counter()
        self._budget = budget
        self._files: list[str] = []

    def message(self, message: Message, depth: int) -> None:
        lines = [f"{name}: {value}" for name in HEADERS if (value := message.header(name))]
        if lines:
            self.blocks.append(Paragraph(self._budget.spend("\n".join(lines))))
        body = message.body()
        if body is not None:
            self._body(body)
        for item in message.attached():
            name = item.name or _UNNAMED
            described = f"{_quoted(name)} ({item.media_type}, {item.size:,} bytes)"
            if item.message is None:
                self._files.append(described)
            elif depth + 1 >= MAX_DEPTH:
                self._files.append(f"{described} nested past {MAX_DEPTH} messages, not read")
            else:
                title = f"Attached message {item.name}".strip()
                self.blocks.append(Heading(2, self._budget.spend(title)))
                self.message(item.message, depth + 1)

    def _body(self, body: Body) -> None:
        if body.html:
            page = html.read_page(body.text, self._budget, xhtml=False)
            self.blocks += page.blocks
            self.hidden.update(page.hidden)
        elif body.text.strip():
            self.blocks.append(Paragraph(self._budget.spend(body.text.strip())))

    def file_notices(self) -> list[Block]:
        """The attached files, named: each is read apart, and the message's text still says
        what it carried when one of them is left out. The trusted side unpacks a message only
        when its text holds one of these (bridge/knowledge/enclosures.py reads their opening
        words): a message without files costs one child."""
        named: list[Block] = [
            Notice(f"[airlock: attached file {described}]")
            for described in self._files[:_NAMED_FILES]
        ]
        rest = len(self._files) - len(named)
        if rest > 0:
            named.append(Notice(f"[airlock: {rest} more attached files]"))
        return named


def _quoted(name: str) -> str:
    """A name as a notice quotes it: in quotes it cannot close, without brackets, and with
    line breaks and invisible characters escaped (``repr`` quotes with ' when none is inside)."""
    return repr(name.translate(_NOT_IN_A_NOTICE))
