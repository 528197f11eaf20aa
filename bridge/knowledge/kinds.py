"""Which kind and media type a file on disk is declared as, for callers that only have a path.

A hint for routing, never a trust decision: the archive guard looks at the bytes whatever the
media type says, and the image extractor refuses any format outside its allowlist whatever the
extension says. See docs/queue.md, Routing and the OCR hand-off.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from pathlib import PurePath

from bridge.knowledge.archive import ZIPFILE_ERRORS, listed_entries

_BY_SUFFIX: dict[str, tuple[str, str]] = {
    ".pdf": ("pdf", "application/pdf"),
    ".docx": ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ".xlsx": ("spreadsheet", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ".xlsm": ("spreadsheet", "application/vnd.ms-excel.sheet.macroEnabled.12"),
    ".xlsb": ("spreadsheet", "application/vnd.ms-excel.sheet.binary.macroEnabled.12"),
    ".xls": ("spreadsheet", "application/vnd.ms-excel"),
    ".ods": ("spreadsheet", "application/vnd.oasis.opendocument.spreadsheet"),
    ".pptx": (
        "presentation",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    ".odt": ("odt", "application/vnd.oasis.opendocument.text"),
    ".rtf": ("rtf", "application/rtf"),
    ".odp": ("presentation", "application/vnd.oasis.opendocument.presentation"),
    ".epub": ("epub", "application/epub+zip"),
    ".html": ("html", "text/html"),
    ".htm": ("html", "text/html"),
    ".xhtml": ("html", "application/xhtml+xml"),
    ".eml": ("email", "message/rfc822"),
    ".msg": ("email", "application/vnd.ms-outlook"),
    ".zip": ("archive", "application/zip"),
    ".png": ("image", "image/png"),
    ".jpg": ("image", "image/jpeg"),
    ".jpeg": ("image", "image/jpeg"),
    ".tif": ("image", "image/tiff"),
    ".tiff": ("image", "image/tiff"),
    ".gif": ("image", "image/gif"),
    ".webp": ("image", "image/webp"),
    ".bmp": ("image", "image/bmp"),
    ".txt": ("text", "text/plain"),
    ".text": ("text", "text/plain"),
    ".md": ("text", "text/markdown"),
    ".csv": ("text", "text/csv"),
    ".tsv": ("text", "text/tab-separated-values"),
    ".log": ("text", "text/plain"),
    ".markdown": ("text", "text/markdown"),
    ".rst": ("text", "text/x-rst"),
    ".ipynb": ("text", "application/x-ipynb+json"),
    ".json": ("text", "application/json"),
    ".jsonld": ("text", "application/ld+json"),
    ".yaml": ("text", "application/yaml"),
    ".yml": ("text", "application/yaml"),
    ".toml": ("text", "application/toml"),
    ".xml": ("text", "application/xml"),
    ".py": ("text", "text/x-python"),
    ".java": ("text", "text/x-java"),
    ".js": ("text", "text/javascript"),
    ".mjs": ("text", "text/javascript"),
    ".ts": ("text", "application/typescript"),
    ".c": ("text", "text/x-c"),
    ".h": ("text", "text/x-c"),
    ".cc": ("text", "text/x-c++"),
    ".cpp": ("text", "text/x-c++"),
    ".hpp": ("text", "text/x-c++"),
    ".cs": ("text", "text/x-csharp"),
    ".go": ("text", "text/x-go"),
    ".rs": ("text", "text/x-rust"),
    ".rb": ("text", "text/x-ruby"),
    ".php": ("text", "text/x-php"),
    ".kt": ("text", "text/x-kotlin"),
    ".swift": ("text", "text/x-swift"),
    ".scala": ("text", "text/x-scala"),
    ".r": ("text", "text/x-r"),
    ".lua": ("text", "text/x-lua"),
    ".pl": ("text", "text/x-perl"),
    ".sh": ("text", "application/x-sh"),
    ".sql": ("text", "application/sql"),
    ".css": ("text", "text/css"),
    ".ini": ("text", "text/x-ini"),
    ".cfg": ("text", "text/x-ini"),
    ".tex": ("text", "text/x-tex"),
    ".ps1": ("text", "application/x-powershell"),
}

# Magic numbers for files whose name says nothing (uploads named "blob", "file", "scan"). A
# ZIP is told apart by its members (:func:`_zip_kind`).
_BY_MAGIC: tuple[tuple[bytes, tuple[str, str]], ...] = (
    (b"%PDF-", _BY_SUFFIX[".pdf"]),
    (b"{\\rtf", _BY_SUFFIX[".rtf"]),
    (b"\x89PNG\r\n\x1a\n", _BY_SUFFIX[".png"]),
    (b"\xff\xd8\xff", _BY_SUFFIX[".jpg"]),
    (b"II*\x00", _BY_SUFFIX[".tif"]),
    (b"MM\x00*", _BY_SUFFIX[".tif"]),
    (b"GIF8", _BY_SUFFIX[".gif"]),
    (b"BM", _BY_SUFFIX[".bmp"]),
)
_ZIP = b"PK\x03\x04"
#: The kinds whose files are ZIP packages or archives: a ZIP under any other name (a bundle
#: saved as .pdf) is named wrongly.
_ZIP_KINDS = frozenset({"docx", "spreadsheet", "presentation", "odt", "epub", "archive"})
#: A package's kind by a member only it has, in the order Office and e-book readers look.
_PACKAGE_MEMBERS = (
    ("word/document.xml", ".docx"),
    ("xl/workbook.xml", ".xlsx"),
    ("xl/workbook.bin", ".xlsb"),
    ("ppt/presentation.xml", ".pptx"),
    ("META-INF/container.xml", ".epub"),
)
#: Every Office Open XML package has this member; its parts' folder names the application.
_CONTENT_TYPES = "[Content_Types].xml"
_OFFICE_FOLDERS = (("word/", ".docx"), ("xl/", ".xlsx"), ("ppt/", ".pptx"))
#: OpenDocument and EPUB packages store their media type in a "mimetype" member this short.
_MAX_MEDIA_TYPE_BYTES = 100
_ENCRYPTED = 0x1  # general-purpose flag bit 0
#: The most entries a ZIP lists without zip64 records, more than any office suite or e-book
#: writer needs. zipfile builds an object for every entry it lists (about 30 MB for this many),
#: and a guess runs before the archive guard's member ceiling: a ZIP listing more is an
#: archive without being listed, which that ceiling then decides.
_MAX_LISTED_ENTRIES = 0xFFFF

#: What a file that is none of the above and not text is declared as: no parser exists for it,
#: so the bridge refuses it before dispatch with a reason, instead of a text parser guessing.
BINARY = ("binary", "application/octet-stream")

_TEXT_MARKS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
#: How much of a file the guess looks at for NUL bytes and a message's header.
_HEAD_BYTES = 8192
#: A message's header: fields every mail system writes, of which a text opening with two or
#: more (and nothing but fields before its first blank line) is an e-mail, not notes about
#: one, when one of them is a field only mail transport writes: minutes opening with "Date:"
#: and "Subject:" were read as a message, and their other lines lost.
_MAIL_FIELDS = frozenset(
    {
        "from", "to", "cc", "subject", "date", "message-id", "mime-version", "received",
        "return-path", "reply-to", "sender", "delivered-to", "content-type", "in-reply-to",
        "references", "dkim-signature", "x-mailer",
    }
)  # fmt: skip
_TRANSPORT_FIELDS = frozenset(
    {"message-id", "mime-version", "received", "return-path", "delivered-to", "dkim-signature"}
)
_FIELD = re.compile(rb"([!-9;-~]+):")


# The kind a media type names, for a file whose name says nothing (an e-mail's "attachment"
# declared application/pdf, an upload sent as Content-Type: application/epub+zip): the first
# suffix declaring that type decides.
_BY_MEDIA_TYPE: dict[str, tuple[str, str]] = {
    **{declared[1]: declared for declared in reversed(_BY_SUFFIX.values())},
    "application/x-zip-compressed": _BY_SUFFIX[".zip"],
}


def guess_kind(filename: str, payload: bytes, media_type: str = "") -> tuple[str, str]:
    """The (kind, media type) to declare for a file: by its name's suffix, then by the media
    type it came with, then by its bytes: a signature, a ZIP's members, a message's header,
    else text unless its first bytes hold NUL bytes without a byte-order mark.

    A ZIP of files under a name that is no ZIP's (a bundle saved as .pdf) is an archive: read
    as named, it was refused for the files it holds, not for what it is. A misnamed package (a
    DOCX saved as .pdf) keeps its name's kind: the sandbox reads it as its bytes say, and
    says so."""
    by_suffix = _BY_SUFFIX.get(PurePath(filename).suffix.lower())
    if by_suffix is not None:
        misnamed_zip = by_suffix[0] not in _ZIP_KINDS and payload.startswith(_ZIP)
        if misnamed_zip and _zip_kind(payload) == _BY_SUFFIX[".zip"]:
            return _BY_SUFFIX[".zip"]
        return by_suffix
    by_type = _BY_MEDIA_TYPE.get(media_type.partition(";")[0].strip().lower())
    if by_type is not None:
        return by_type
    head = payload[:_HEAD_BYTES]
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _BY_SUFFIX[".webp"]
    if head.startswith(_ZIP):
        return _zip_kind(payload)
    for magic, declared in _BY_MAGIC:
        if head.startswith(magic):
            return declared
    if b"\x00" in head and not head.startswith(_TEXT_MARKS):
        return BINARY
    if _opens_with_mail_header(head):
        return _BY_SUFFIX[".eml"]
    return _BY_SUFFIX[".txt"]


def _zip_kind(payload: bytes) -> tuple[str, str]:
    """A ZIP package by the media type it stores (OpenDocument, EPUB) or a member only its
    format has; any other ZIP is an archive, whose files are read one by one. Only the
    central directory and a "mimetype" member of at most :data:`_MAX_MEDIA_TYPE_BYTES` are
    read, and no directory of more than :data:`_MAX_LISTED_ENTRIES` entries is listed: the
    archive guard checks the rest before anything is inflated."""
    entries = listed_entries(payload)
    if entries is None or entries > _MAX_LISTED_ENTRIES:
        return _BY_SUFFIX[".zip"]
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
        names = frozenset(archive.namelist())
        stored = _stored_media_type(archive) if "mimetype" in names else None
    except ZIPFILE_ERRORS:
        return _BY_SUFFIX[".zip"]  # the archive guard says what is wrong with it
    by_type = _BY_MEDIA_TYPE.get(stored.removesuffix("-template")) if stored else None
    if by_type is not None and by_type[0] in _ZIP_KINDS:
        return by_type
    for member, suffix in _PACKAGE_MEMBERS:
        if member in names:
            return _BY_SUFFIX[suffix]
    if _CONTENT_TYPES in names:
        # An Office package whose main part has another name (Word Online writes
        # word/document2.xml): its folder says which.
        for folder, suffix in _OFFICE_FOLDERS:
            if any(name.startswith(folder) for name in names):
                return _BY_SUFFIX[suffix]
    return _BY_SUFFIX[".zip"]


def _stored_media_type(archive: zipfile.ZipFile) -> str | None:
    """The "mimetype" member's text, when it is that short, unencrypted and stored or deflated
    (an EPUB writer that deflates it is wrong, and common); None for anything else."""
    info = archive.getinfo("mimetype")
    if (
        max(info.file_size, info.compress_size) > _MAX_MEDIA_TYPE_BYTES
        or info.flag_bits & _ENCRYPTED
        or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
    ):
        return None
    try:
        return archive.read(info).decode("ascii", "replace").strip().lower()
    except (*ZIPFILE_ERRORS, zlib.error):
        return None


def _opens_with_mail_header(head: bytes) -> bool:
    """Whether ``head`` opens with a message's header: field lines (and their folded
    continuations) up to the first blank line or the end of ``head``, two or more of them
    fields of :data:`_MAIL_FIELDS`."""
    known: set[str] = set()
    fields = 0
    for raw in head.split(b"\n")[:-1]:  # the last line may be cut short
        line = raw.rstrip(b"\r")
        if not line:
            break
        if line[:1] in (b" ", b"\t") and fields:
            continue  # a folded field's continuation
        field = _FIELD.match(line)
        if field is None:
            return False
        fields += 1
        name = field.group(1).decode("ascii").lower()
        if name in _MAIL_FIELDS:
            known.add(name)
    return len(known) >= 2 and not known.isdisjoint(_TRANSPORT_FIELDS)
