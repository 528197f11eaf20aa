"""What an upload is, by its first bytes, whatever it was declared as.

An upload's kind comes from its name or media type, which a user or a browser got wrong: a PDF
saved as ``.docx``, a photo named ``.txt``, a ZIP as ``.pdf``. Read as the declared kind it is
refused as damaged, or worse, a binary file is decoded as text of some code page. The child
reads it as the kind its bytes say and says so, or refuses it naming what it is. Only
signatures that fix a format at offset 0 are trusted: a text that merely mentions ``%PDF-``
further on stays text. See docs/sandbox.md, "Content detection".
"""

from __future__ import annotations

import dataclasses
import io
import struct
import zipfile
from dataclasses import dataclass

from sandbox import codes
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits

#: The kinds an upload may be declared as and read as (the bridge's kinds).
PDF, DOCX, IMAGE, TEXT = "pdf", "docx", "image", "text"
_NOUNS = {PDF: "a PDF", DOCX: "a DOCX package", IMAGE: "an image", TEXT: "text"}
#: The first line of a text read as another kind than the one declared; the rest follows, "]".
NOTICE_PREFIX = "[airlock: declared as "

_DOCX_MAIN = "word/document.xml"
_ZIP = b"PK\x03\x04"
#: Signatures made of printable ASCII, which a text may start with too.
_TEXT_LIKE_SIGNATURES = frozenset({b"%PDF-", b"GIF87a", b"GIF89a", b"BZh"})
#: How much of the payload is looked at for binary bytes, and for a PDF's first object.
_HEAD_BYTES = 1024
_PDF_OBJECTS_BYTES = 1 << 20
#: What zipfile raises, in one Python version or another, on a directory it cannot list. The
#: bridge's archive guard holds the same list on purpose: sandbox imports nothing of bridge
#: (docs/architecture.md), so each side of the boundary keeps its own.
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    ValueError,
    EOFError,
    OSError,
    struct.error,
)
_BMP_HEADER = struct.Struct("<2sI")


@dataclass(frozen=True)
class Sniffed:
    """What the bytes are: ``kind`` when airlock reads it (else ""), and its name for people."""

    kind: str
    name: str


#: Signatures at offset 0 of formats read here, and of formats named in a refusal.
_SIGNATURES: tuple[tuple[bytes, Sniffed], ...] = (
    (b"%PDF-", Sniffed(PDF, "a PDF")),
    (b"\x89PNG\r\n\x1a\n", Sniffed(IMAGE, "a PNG image")),
    (b"\xff\xd8\xff", Sniffed(IMAGE, "a JPEG image")),
    (b"GIF87a", Sniffed(IMAGE, "a GIF image")),
    (b"GIF89a", Sniffed(IMAGE, "a GIF image")),
    (b"II*\x00", Sniffed(IMAGE, "a TIFF image")),
    (b"MM\x00*", Sniffed(IMAGE, "a TIFF image")),
    (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        Sniffed("", "an OLE2 compound file (a Word 97-2003 .doc, an Excel .xls, an Outlook .msg)"),
    ),
    (b"\x7fELF", Sniffed("", "an ELF executable")),
    (b"\x1f\x8b", Sniffed("", "a gzip stream")),
    (b"BZh", Sniffed("", "a bzip2 stream")),
    (b"\xfd7zXZ\x00", Sniffed("", "an xz stream")),
    (b"7z\xbc\xaf\x27\x1c", Sniffed("", "a 7-Zip archive")),
    (b"Rar!\x1a\x07", Sniffed("", "a RAR archive")),
)


@dataclass(frozen=True)
class Reading:
    """How the child reads a job: the kind, its limits, and the first line that says it was
    declared as another (None when it is read as declared)."""

    kind: str
    limits: ParseLimits
    notice: str | None = None


def reading(declared: str, payload: bytes, limits: ParseLimits) -> Reading:
    """How to read an upload declared as ``declared``; raises :class:`Refusal` naming what it
    is when its bytes are a format airlock does not read. The pages' kinds pass as they are.

    A PDF found under another kind is read in one child (``fan_out_pages`` 0): only a job
    declared a PDF is split into pages by its caller.
    """
    if declared not in _NOUNS or (declared == DOCX and payload.startswith(_ZIP)):
        return Reading(declared, limits)  # the DOCX extractor names other packages itself
    found = sniffed(payload)
    if found is None or found.kind == declared:
        return Reading(declared, limits)
    if not found.kind:
        raise Refusal(
            codes.UNREADABLE,
            f"the payload is {found.name}, a format airlock does not read, not {_NOUNS[declared]}",
        )
    whole = dataclasses.replace(limits, fan_out_pages=0) if found.kind == PDF else limits
    notice = f"{NOTICE_PREFIX}{_NOUNS[declared]}, read as {found.name}]"
    return Reading(found.kind, whole, notice)


def sniffed(payload: bytes) -> Sniffed | None:
    """What ``payload`` is by its signature, or None when no signature fixes it (text, or a
    format named nowhere here)."""
    for signature, found in _SIGNATURES:
        if payload.startswith(signature):
            return found if _confirmed(signature, payload) else None
    if payload[:4] == b"RIFF" and payload[8:12] == b"WEBP":
        return Sniffed(IMAGE, "a WebP image")
    if _is_bmp(payload):
        return Sniffed(IMAGE, "a BMP image")
    if payload.startswith(_ZIP):
        return _zip_kind(payload)
    return None


def _confirmed(signature: bytes, payload: bytes) -> bool:
    """Whether a signature a text can start with ("%PDF-1.7 is the current version", "GIF89a
    is a format", "BZh, said the bee") starts the format: binary bytes follow it, or a PDF's
    objects do (a PDF may be plain ASCII)."""
    if signature not in _TEXT_LIKE_SIGNATURES:
        return True
    head = payload[:_HEAD_BYTES]
    if any(byte < 0x09 or 0x0E <= byte < 0x20 or byte == 0x7F for byte in head):
        return True
    return signature == b"%PDF-" and b"endobj" in payload[:_PDF_OBJECTS_BYTES]


def _is_bmp(payload: bytes) -> bool:
    """ "BM" alone starts many texts ("BMW"): the header's file size must be the payload's."""
    if len(payload) < _BMP_HEADER.size:
        return False
    magic, size = _BMP_HEADER.unpack_from(payload)
    return bool(magic == b"BM" and size == len(payload))


def _zip_kind(payload: bytes) -> Sniffed:
    """A DOCX package when its main document is listed; any other ZIP is named as one (the
    DOCX extractor names OpenDocument and EPUB packages itself). Only the central directory is
    read, never a member."""
    try:
        names = zipfile.ZipFile(io.BytesIO(payload)).namelist()
    except _ZIP_ERRORS:
        return Sniffed("", "a damaged ZIP archive")
    return Sniffed(DOCX, "a DOCX package") if _DOCX_MAIN in names else Sniffed("", "a ZIP archive")
