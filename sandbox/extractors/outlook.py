"""Outlook messages (``.msg``, [MS-OXMSG]): an OLE2 compound file of MAPI properties, read
for the same header lines, body and attachments as an RFC 822 message.

olefile reads the compound file; nothing else of Outlook's is needed, because a message is a
storage of property streams (``__substg1.0_IIIITTTT``: property id, then type) and a table of
fixed-size ones (``__properties_version1.0``). Recipients and attachments are storages of their
own; an attached message is a message storage inside its attachment, read as part of this one.
A crafted file allocation table makes olefile loop or allocate (olefile#30): the child's CPU,
memory and wall-clock limits end that, and every stream is read no further than its stated
size, itself bounded. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import datetime
import email.utils
import io
import struct
from collections.abc import Sequence

import olefile

from sandbox import codes
from sandbox.extractors import html, messages
from sandbox.extractors.messages import Attached, Body
from sandbox.extractors.registry import Refusal
from sandbox.extractors.text import decode_text

#: A stream is read up to this size: no property a reader shows is larger, and an attachment
#: past it would be left out by the unpacking's byte ceiling anyway.
MAX_STREAM_BYTES = 64 << 20

_UNICODE, _ANSI, _BINARY = 0x001F, 0x001E, 0x0102
_SUBJECT, _BODY, _HTML = 0x0037, 0x1000, 0x1013
_SENDER_NAME, _SENDER_ADDRESS, _SENDER_SMTP = 0x0C1A, 0x0C1F, 0x5D01
_DISPLAY_TO, _DISPLAY_CC = 0x0E04, 0x0E03
_SUBMITTED, _DELIVERED = 0x0039, 0x0E06
_CODEPAGE, _INTERNET_CODEPAGE = 0x3FFD, 0x3FDE
#: What a string property is decoded as when no object up to the message names a code page.
_DEFAULT_CODEPAGE = "cp1252"
_EXCHANGE_ADDRESS = "/O="
_DISPLAY_NAME, _EMAIL_ADDRESS, _SMTP_ADDRESS = 0x3001, 0x3003, 0x39FE
_RECIPIENT_TYPE = 0x0C15
_ATTACH_DATA, _ATTACH_FILENAME, _ATTACH_LONG_FILENAME = 0x3701, 0x3704, 0x3707
_ATTACH_MIME_TAG, _ATTACH_METHOD = 0x370E, 0x3705
_EMBEDDED_MESSAGE = 5
_RECIPIENT_TYPES = {1: "To", 2: "Cc"}
# The fixed-size property table opens with a header: 32 bytes in the message itself, 24 in an
# attached message, 8 in a recipient's or an attachment's storage; then 16 bytes a property.
_TOP_HEADER, _EMBEDDED_HEADER, _OBJECT_HEADER = 32, 24, 8
_ENTRY = struct.Struct("<II8s")
_FILETIME_EPOCH = datetime.datetime(1601, 1, 1, tzinfo=datetime.UTC)
_MAX_FILETIME = 2_650_467_743_999_999_999  # 9999-12-31
_ATTACHMENT_PREFIX = "__attach_version1.0_#"
_RECIPIENT_PREFIX = "__recip_version1.0_#"
_MESSAGE_STORAGE = f"__substg1.0_{_ATTACH_DATA:04X}000D"
#: What olefile raises on a compound file it cannot read; each is the file's refusal.
_OLE_ERRORS = (OSError, ValueError, IndexError, KeyError, struct.error, EOFError)


def parsed(payload: bytes) -> messages.Message:
    """The message an Outlook file holds; refused when it is not a readable compound file or
    not a message."""
    try:
        # A file object, never the bytes: olefile takes bytes shorter than a sector table for
        # a file name, and would open whatever path they spell.
        ole = olefile.OleFileIO(io.BytesIO(payload))
        paths = [tuple(path) for path in ole.listdir(streams=True, storages=True)]
    except RecursionError as exc:
        raise Refusal(codes.CEILING, "the Outlook message nests its storages too deep") from exc
    except _OLE_ERRORS as exc:
        raise Refusal(codes.UNREADABLE, f"the Outlook message cannot be read: {exc}") from exc
    if ("__properties_version1.0",) not in paths:
        raise Refusal(
            codes.UNREADABLE,
            "the OLE2 compound file holds no message properties: it is not an Outlook .msg "
            "(a Word 97-2003 .doc has the same signature)",
        )
    return _Message(_File(ole, frozenset(paths)), (), _TOP_HEADER)


class _File:
    """The compound file, its entries listed once."""

    def __init__(self, ole: olefile.OleFileIO, paths: frozenset[tuple[str, ...]]) -> None:
        self.ole = ole
        self.paths = paths

    def stream(self, path: tuple[str, ...]) -> bytes | None:
        if path not in self.paths:
            return None
        try:
            if self.ole.get_type(list(path)) != olefile.STGTY_STREAM:
                return None
            with self.ole.openstream(list(path)) as stream:
                data: bytes = stream.read(MAX_STREAM_BYTES + 1)
        except _OLE_ERRORS as exc:
            raise Refusal(codes.UNREADABLE, f"{'/'.join(path)} cannot be read: {exc}") from exc
        if len(data) > MAX_STREAM_BYTES:
            raise Refusal(codes.CEILING, f"{'/'.join(path)} is over {MAX_STREAM_BYTES >> 20} MiB")
        return data

    def size(self, path: tuple[str, ...]) -> int:
        try:
            return int(self.ole.get_size(list(path)))
        except _OLE_ERRORS:
            return 0

    def children(self, storage: tuple[str, ...], prefix: str) -> list[tuple[str, ...]]:
        """The storages directly under ``storage`` whose names start with ``prefix``, in order."""
        depth = len(storage) + 1
        return sorted(
            path
            for path in self.paths
            if len(path) == depth and path[:-1] == storage and path[-1].startswith(prefix)
        )


class _Properties:
    """One object's properties (a message, a recipient, an attachment) in storage ``at``."""

    def __init__(
        self, file: _File, at: tuple[str, ...], header: int, codepage: str = _DEFAULT_CODEPAGE
    ) -> None:
        self._file = file
        self._at = at
        self._fixed: dict[int, bytes] = {}
        table = file.stream((*at, "__properties_version1.0")) or b""
        for offset in range(header, len(table) - _ENTRY.size + 1, _ENTRY.size):
            tag, _, value = _ENTRY.unpack_from(table, offset)
            self._fixed[tag >> 16] = value
        # A recipient's or an attachment's properties rarely name a code page: theirs is the
        # message's (``codepage``). Read as cp1252, a Big5 display name came out as mojibake.
        own = self.integer(_INTERNET_CODEPAGE) or self.integer(_CODEPAGE)
        self.codepage = f"cp{own}" if own else codepage

    def stream(self, prop: int, kind: int) -> bytes | None:
        return self._file.stream((*self._at, f"__substg1.0_{prop:04X}{kind:04X}"))

    def text(self, prop: int) -> str:
        """A string property, stored as UTF-16 or in the message's code page; "" when absent."""
        wide = self.stream(prop, _UNICODE)
        if wide is not None:
            return wide.decode("utf-16-le", errors="replace").rstrip("\x00")
        narrow = self.stream(prop, _ANSI)
        if narrow is None:
            return ""
        try:
            return narrow.decode(self.codepage).rstrip("\x00")
        except (LookupError, UnicodeDecodeError):
            return decode_text(narrow).rstrip("\x00")

    def integer(self, prop: int) -> int | None:
        value = self._fixed.get(prop)
        return None if value is None else int.from_bytes(value[:4], "little")

    def time(self, prop: int) -> datetime.datetime | None:
        value = self._fixed.get(prop)
        if value is None:
            return None
        ticks = int.from_bytes(value, "little")
        if not 0 < ticks <= _MAX_FILETIME:
            return None
        return _FILETIME_EPOCH + datetime.timedelta(microseconds=ticks // 10)


class _Message:
    """A message storage as the message reader takes it."""

    def __init__(
        self, file: _File, at: tuple[str, ...], header: int, codepage: str = _DEFAULT_CODEPAGE
    ) -> None:
        self._file = file
        self._at = at
        self._properties = _Properties(file, at, header, codepage)

    def header(self, name: str) -> str:
        properties = self._properties
        if name == "From":
            value = _address(
                properties.text(_SENDER_NAME),
                properties.text(_SENDER_SMTP) or properties.text(_SENDER_ADDRESS),
            )
        elif name in ("To", "Cc"):
            value = self._recipients(name) or properties.text(
                _DISPLAY_TO if name == "To" else _DISPLAY_CC
            )
        elif name == "Date":
            sent = properties.time(_SUBMITTED) or properties.time(_DELIVERED)
            value = "" if sent is None else email.utils.format_datetime(sent)
        else:
            value = properties.text(_SUBJECT)
        return " ".join(value.split())[: messages.MAX_HEADER_CHARS]

    def _recipients(self, role: str) -> str:
        found = []
        for storage in self._file.children(self._at, _RECIPIENT_PREFIX):
            recipient = _Properties(self._file, storage, _OBJECT_HEADER, self._properties.codepage)
            if _RECIPIENT_TYPES.get(recipient.integer(_RECIPIENT_TYPE) or 1) == role:
                address = recipient.text(_SMTP_ADDRESS) or recipient.text(_EMAIL_ADDRESS)
                found.append(_address(recipient.text(_DISPLAY_NAME), address))
        return ", ".join(filter(None, found))

    def body(self) -> Body | None:
        plain = self._properties.text(_BODY)
        if plain.strip():
            return Body(plain, html=False)
        markup = self._properties.stream(_HTML, _BINARY)
        if markup is not None:
            return Body(html.decoded(markup), html=True)
        wide = self._properties.text(_HTML)
        return Body(wide, html=True) if wide.strip() else None

    def attached(self) -> Sequence[Attached]:
        return [
            self._attached(storage) for storage in self._file.children(self._at, _ATTACHMENT_PREFIX)
        ]

    def _attached(self, storage: tuple[str, ...]) -> Attached:
        properties = _Properties(self._file, storage, _OBJECT_HEADER, self._properties.codepage)
        name = messages.shown_name(
            properties.text(_ATTACH_LONG_FILENAME)
            or properties.text(_ATTACH_FILENAME)
            or properties.text(_DISPLAY_NAME)
        )
        media_type = messages.shown_type(properties.text(_ATTACH_MIME_TAG))
        inner = (*storage, _MESSAGE_STORAGE)
        if properties.integer(_ATTACH_METHOD) == _EMBEDDED_MESSAGE and inner in self._file.paths:
            return Attached(
                name,
                "message/rfc822",
                0,
                lambda: b"",
                _Message(self._file, inner, _EMBEDDED_HEADER, properties.codepage),
            )
        data_path = (*storage, f"__substg1.0_{_ATTACH_DATA:04X}{_BINARY:04X}")
        return Attached(
            name,
            media_type,
            self._file.size(data_path),
            lambda: self._file.stream(data_path) or b"",
        )


def _address(name: str, address: str) -> str:
    """``name <address>`` as a reader writes it. Not ``email.utils.formataddr``, which writes a
    name outside ASCII as an RFC 2047 encoded word for a mail transport ("=?utf-8?b?...")
    and a model cannot read it. An Exchange address (``/O=ORG/OU=.../CN=NAME``) names a
    directory entry, not a mailbox: the name alone says more."""
    if address.upper().startswith(_EXCHANGE_ADDRESS) and name:
        return name
    if not address:
        return name
    return f"{name} <{address}>" if name and name != address else address
