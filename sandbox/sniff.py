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
import re
import struct
import zipfile
from dataclasses import dataclass

from sandbox import codes
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits

#: The kinds an upload may be declared as and read as (the bridge's kinds).
PDF, DOCX, SPREADSHEET, IMAGE, TEXT = "pdf", "docx", "spreadsheet", "image", "text"
PRESENTATION, ODT, RTF, HTML, EPUB = "presentation", "odt", "rtf", "html", "epub"
EMAIL = "email"
_NOUNS = {
    PDF: "a PDF",
    DOCX: "a DOCX package",
    SPREADSHEET: "a spreadsheet",
    PRESENTATION: "a presentation",
    ODT: "an OpenDocument text",
    RTF: "an RTF document",
    HTML: "an HTML page",
    EPUB: "an EPUB book",
    EMAIL: "an e-mail message",
    IMAGE: "an image",
    TEXT: "text",
}
#: What a refusal of an unsupported format offers instead.
SUPPORTED = (
    "PDF, DOCX, ODT, RTF, EPUB, HTML, e-mail (EML), presentations (PPTX, ODP), spreadsheets "
    "(XLSX, XLSM, XLSB, XLS, ODS), images (PNG, JPEG, TIFF, GIF, WebP, BMP), plain text (CSV "
    "and TSV as tables) and ZIP archives of these (declared as kind 'archive')"
)
#: What a ZIP that is no package is named: declared as an archive, its files are read.
PLAIN_ZIP = "a ZIP archive"
#: The kinds read from a ZIP package: one of them found to be another is read as the other.
_PACKAGES = frozenset({DOCX, SPREADSHEET, PRESENTATION, ODT, EPUB})
#: The kind text is read as when its media type says it is a web page or a message: by that
#: kind's reader, never as markup or raw RFC 822.
_TEXT_BY_MEDIA_TYPE = {
    "text/html": HTML,
    "application/xhtml+xml": HTML,
    "message/rfc822": EMAIL,
}
#: The first line of a text read as another kind than the one declared; the rest follows, "]".
NOTICE_PREFIX = "[airlock: declared as "

_DOCX_MAIN = "word/document.xml"
_PPTX_MAIN = "ppt/presentation.xml"
_ROOT_RELATIONSHIPS = "_rels/.rels"
_RELATIONSHIP = re.compile(rb"<(?:[\w.-]+:)?Relationship\b([^>]*)>")
_ATTRIBUTE = re.compile(rb"""([\w.:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_MAX_RELATIONSHIPS_BYTES = 64 << 10
#: An Excel package's workbook part, as XML (XLSX, XLSM) or binary records (XLSB).
_WORKBOOK_PARTS = frozenset({"xl/workbook.xml", "xl/workbook.bin"})
ZIP = b"PK\x03\x04"
OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# OpenDocument and EPUB packages name their media type in a "mimetype" member, stored: read
# only when it is that short, stored, unencrypted and shaped like a media type.
_MAX_MEDIA_TYPE = 100
_ENCRYPTED = 0x1  # general-purpose flag bit 0
_MEDIA_TYPE = re.compile(rb"[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*")
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


#: OpenDocument packages by the media type their "mimetype" member stores (templates alike).
ODP_PACKAGE = Sniffed(PRESENTATION, "an OpenDocument presentation")
_ODF_KINDS = {
    f"application/vnd.oasis.opendocument.{name}{template}": found
    for name, found in (
        ("spreadsheet", Sniffed(SPREADSHEET, "an OpenDocument spreadsheet")),
        ("presentation", ODP_PACKAGE),
        ("text", Sniffed(ODT, "an OpenDocument text")),
    )
    for template in ("", "-template")
}
_EPUB_PACKAGE = ("application/epub+zip", Sniffed(EPUB, "an EPUB book"))
#: How a web page opens, after a byte-order mark and white space: a text that merely quotes
#: markup further on stays text.
_HTML_OPENING = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n\f]*<(?:!doctype\s+html|html)[\s>]", re.I)

#: Signatures at offset 0 of formats read here, and of formats named in a refusal.
_SIGNATURES: tuple[tuple[bytes, Sniffed], ...] = (
    (b"%PDF-", Sniffed(PDF, "a PDF")),
    # Printable, but no text opens with "{\rtf" but an RTF document.
    (b"{\\rtf", Sniffed(RTF, "an RTF document")),
    (b"\x89PNG\r\n\x1a\n", Sniffed(IMAGE, "a PNG image")),
    (b"\xff\xd8\xff", Sniffed(IMAGE, "a JPEG image")),
    (b"GIF87a", Sniffed(IMAGE, "a GIF image")),
    (b"GIF89a", Sniffed(IMAGE, "a GIF image")),
    (b"II*\x00", Sniffed(IMAGE, "a TIFF image")),
    (b"MM\x00*", Sniffed(IMAGE, "a TIFF image")),
    (
        OLE2,
        Sniffed(
            "",
            "an OLE2 compound file (a Word 97-2003 .doc or an Outlook .msg; an Outlook .msg is "
            "read when declared as e-mail, an Excel .xls when declared a spreadsheet)",
        ),
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


#: The kinds of the Office main parts a package's root relationships may name.
_MAIN_PARTS = {
    _DOCX_MAIN: Sniffed(DOCX, "a DOCX package"),
    "xl/workbook.xml": Sniffed(SPREADSHEET, "an Excel workbook"),
    "xl/workbook.bin": Sniffed(SPREADSHEET, "an Excel workbook"),
    _PPTX_MAIN: Sniffed(PRESENTATION, "a PowerPoint presentation"),
}


def reading(declared: str, media_type: str, payload: bytes, limits: ParseLimits) -> Reading:
    """How to read an upload declared as ``declared``; raises :class:`Refusal` naming what it
    is when its bytes are a format airlock does not read. The pages' kinds pass as they are;
    text declared as a web page or a message by its ``media_type`` is read as one.

    A PDF found under another kind is read in one child (``fan_out_pages`` 0): only a job
    declared a PDF is split into pages by its caller.
    """
    if declared not in _NOUNS or (declared == SPREADSHEET and payload.startswith(OLE2)):
        # An OLE2 file declared a spreadsheet is an XLS as far as its signature can tell (a
        # Word 97 .doc has the same one): the spreadsheet reader says which.
        return Reading(declared, limits)
    if declared == EMAIL and payload.startswith(OLE2):
        return Reading(declared, limits)  # Outlook's .msg: the e-mail reader says if it is one
    if declared == TEXT:
        declared = _TEXT_BY_MEDIA_TYPE.get(media_type.partition(";")[0].strip().lower(), TEXT)
    found = sniffed(payload)
    if found is None or found.kind == declared:
        return Reading(declared, limits)
    if not found.kind:
        if declared in _PACKAGES and payload.startswith(ZIP):
            return Reading(declared, limits)  # the package's own reader names what it lacks
        if found.name == PLAIN_ZIP:
            # Its files are read apart, by the trusted side, only when it is declared one.
            raise Refusal(
                codes.UNREADABLE,
                f"the payload is {PLAIN_ZIP}, not {_NOUNS[declared]}; declare it as an archive "
                "(kind 'archive', a .zip name) to read each of its files",
            )
        raise Refusal(
            codes.UNREADABLE,
            f"the payload is {found.name}, a format airlock does not read, not "
            f"{_NOUNS[declared]}; airlock reads {SUPPORTED}",
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
    if payload.startswith(ZIP):
        return zip_kind(payload)
    if _HTML_OPENING.match(payload):
        return Sniffed(HTML, "an HTML page")
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


def zip_kind(payload: bytes) -> Sniffed:
    """What a ZIP package is by the members it lists: a DOCX by its main document, an Excel
    workbook by its workbook part, a PowerPoint presentation by its presentation part, an
    OpenDocument text, spreadsheet or presentation or an EPUB by its stored media type; any
    other is named, not read. Only the central directory and a stored "mimetype" member of at
    most :data:`_MAX_MEDIA_TYPE` bytes are read."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
        names = frozenset(archive.namelist())
    except _ZIP_ERRORS:
        return Sniffed("", "a damaged ZIP archive")
    # The stored media type first: no Office Open XML package has one, so a package with both
    # is an OpenDocument file carrying Office parts, and LibreOffice shows its ODF side.
    declared = _declared_media_type(archive)
    if declared in _ODF_KINDS:
        return _ODF_KINDS[declared]
    if declared == _EPUB_PACKAGE[0]:
        return _EPUB_PACKAGE[1]
    main = _main_part(archive)
    if main is not None:
        return main
    if _DOCX_MAIN in names:
        return Sniffed(DOCX, "a DOCX package")
    if names & _WORKBOOK_PARTS:
        return Sniffed(SPREADSHEET, "an Excel workbook")
    if _PPTX_MAIN in names:
        return Sniffed(PRESENTATION, "a PowerPoint presentation")
    return Sniffed("", package_name(archive))


def _main_part(archive: zipfile.ZipFile) -> Sniffed | None:
    """An Office package by the main part its root relationships name, as Office opens it: a
    workbook carrying a stray ``word/document.xml`` is a workbook. None when the package has
    no readable ``_rels/.rels`` naming one of the three that it holds.

    The part is read by pattern, not parsed: detection runs before any parser, and the
    worker, which imports this module with the sandbox, loads no XML parser. A part the
    pattern misreads only names the reader, which judges the package itself."""
    try:
        info = archive.getinfo(_ROOT_RELATIONSHIPS)
        if info.file_size > _MAX_RELATIONSHIPS_BYTES:
            return None
        relationships = archive.read(info)
    except (KeyError, *_ZIP_ERRORS):
        return None
    for element in _RELATIONSHIP.finditer(relationships):
        attributes = {
            name.split(b":")[-1]: double or single
            for name, double, single in _ATTRIBUTE.findall(element.group(1))
        }
        if attributes.get(b"Type", b"").endswith(b"/officeDocument"):
            target = attributes.get(b"Target", b"").decode("ascii", "replace").lstrip("/")
            return _MAIN_PARTS.get(target) if target in archive.namelist() else None
    return None


def package_name(archive: zipfile.ZipFile) -> str:
    """A ZIP that is not an Office package, named by the media type OpenDocument and EPUB
    files store in their "mimetype" member; an upload labelled .docx is often one."""
    declared = _declared_media_type(archive)
    if declared is None:
        return PLAIN_ZIP
    if declared.startswith("application/vnd.oasis.opendocument."):
        return f"an OpenDocument file ({declared})"
    return f"a ZIP archive of type {declared}"


def _declared_media_type(archive: zipfile.ZipFile) -> str | None:
    try:
        info = archive.getinfo("mimetype")
    except KeyError:
        return None
    if (
        info.compress_type != zipfile.ZIP_STORED
        or info.flag_bits & _ENCRYPTED
        or max(info.file_size, info.compress_size) > _MAX_MEDIA_TYPE
    ):
        return None
    try:
        declared = archive.read(info)
    except _ZIP_ERRORS:  # headers that disagree or point outside
        return None
    return declared.decode() if _MEDIA_TYPE.fullmatch(declared) else None
