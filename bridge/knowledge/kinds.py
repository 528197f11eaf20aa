"""Which kind and media type a file on disk is declared as, for callers that only have a path.

A hint for routing, never a trust decision: the archive guard looks at the bytes whatever the
media type says, and the image extractor refuses any format outside its allowlist whatever the
extension says. See docs/queue.md, Routing and the OCR hand-off.
"""

from __future__ import annotations

from pathlib import PurePath

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

# Magic numbers for files whose name says nothing (uploads named "blob", "file", "scan").
_BY_MAGIC: tuple[tuple[bytes, tuple[str, str]], ...] = (
    (b"%PDF-", _BY_SUFFIX[".pdf"]),
    (b"{\\rtf", _BY_SUFFIX[".rtf"]),
    (b"\x89PNG\r\n\x1a\n", _BY_SUFFIX[".png"]),
    (b"\xff\xd8\xff", _BY_SUFFIX[".jpg"]),
    (b"II*\x00", _BY_SUFFIX[".tif"]),
    (b"MM\x00*", _BY_SUFFIX[".tif"]),
    (b"GIF8", _BY_SUFFIX[".gif"]),
    (b"BM", _BY_SUFFIX[".bmp"]),
    (b"PK\x03\x04", _BY_SUFFIX[".docx"]),
)


#: What a file that is none of the above and not text is declared as: no parser exists for it,
#: so the bridge refuses it before dispatch with a reason, instead of a text parser guessing.
BINARY = ("binary", "application/octet-stream")

_TEXT_MARKS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


# The kind a media type names, for a file whose name says nothing (an e-mail's "attachment"
# declared application/pdf): the first suffix declaring that type decides.
_BY_MEDIA_TYPE: dict[str, tuple[str, str]] = {
    **{declared[1]: declared for declared in reversed(_BY_SUFFIX.values())},
    "application/x-zip-compressed": _BY_SUFFIX[".zip"],
}


def guess_enclosed_kind(filename: str, media_type: str, head: bytes) -> tuple[str, str]:
    """:func:`guess_kind` for a file a container carries: by its name's suffix, then by the
    media type the container declares for it, then by its bytes."""
    if PurePath(filename).suffix.lower() not in _BY_SUFFIX:
        by_type = _BY_MEDIA_TYPE.get(media_type.partition(";")[0].strip().lower())
        if by_type is not None:
            return by_type
    return guess_kind(filename, head)


def guess_kind(filename: str, head: bytes) -> tuple[str, str]:
    """The (kind, media type) to declare for a file: by suffix, then by magic, then text
    unless ``head`` (the first few KiB) holds NUL bytes without a byte-order mark."""
    by_suffix = _BY_SUFFIX.get(PurePath(filename).suffix.lower())
    if by_suffix is not None:
        return by_suffix
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _BY_SUFFIX[".webp"]
    for magic, declared in _BY_MAGIC:
        if head.startswith(magic):
            return declared
    if b"\x00" in head and not head.startswith(_TEXT_MARKS):
        return BINARY
    return _BY_SUFFIX[".txt"]
