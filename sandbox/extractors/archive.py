"""ZIP archives of documents: each file handed back to be read as an attachment of its own.

The bridge's archive guard has already refused the archive unless its directory is sound and
its declared sizes, ratio and member count are within the ceilings; here the files are
inflated, in the order the archive lists them, each read no further than the size it declares
(zipfile checks its CRC at the end). Directories are not files; a link, an encrypted file, a
directory entry that carries data or a file that cannot be inflated is named with the reason.
See docs/sandbox.md, "Attachments".
"""

from __future__ import annotations

import stat
import zipfile

from sandbox import codes, enclosures
from sandbox.document import Document
from sandbox.extractors import package_parts
from sandbox.extractors.registry import Refusal, extractor
from sandbox.limits import ParseLimits

_ENCRYPTED = 0x1
#: Files in an archive carry no media type; the trusted side goes by the name and the bytes.
_UNDECLARED = "application/octet-stream"
#: What an empty directory entry's data may take: nothing, or the two bytes of an empty deflate
#: stream that writers deflating every entry give it (Java's ZipOutputStream). No byte of text
#: fits in two bytes of deflate, so no more is passed over unsaid.
_EMPTY_DATA_BYTES = {zipfile.ZIP_STORED: 0, zipfile.ZIP_DEFLATED: 2}


@extractor("archive")
def extract_archive(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    """An archive has no text of its own: its files are read apart, by the unpacking below."""
    raise Refusal(
        codes.UNREADABLE,
        "a ZIP archive is read file by file, each as an attachment of its own; this reader "
        "was asked for the archive's own text, and an archive has none",
    )


@extractor(enclosures.UNPACK_KINDS["archive"])
def unpack_archive(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    archive = package_parts.opened(payload, "archive")
    packing = enclosures.Packing(limits.max_members, limits.max_unpacked_bytes)
    for info in archive.infolist():
        if info.is_dir():
            if not _holds_nothing(info):
                packing.leave_out(
                    info.filename,
                    f"it is a folder, yet its entry carries {info.compress_size:,} bytes "
                    f"({info.file_size:,} uncompressed); a folder holds no data, so no reader "
                    "would show them",
                )
            continue
        name = info.filename
        if stat.S_ISLNK(info.external_attr >> 16):
            packing.leave_out(name, "it is a symbolic link, not a file")
        elif info.flag_bits & _ENCRYPTED:
            packing.leave_out(name, "it is encrypted")
        elif packing.admits(name, info.file_size):
            try:
                with archive.open(info) as member:
                    data = member.read(info.file_size + 1)
            except package_parts.MEMBER_ERRORS as exc:
                packing.leave_out(name, f"it cannot be inflated: {exc}")
                continue
            if len(data) != info.file_size:
                packing.leave_out(
                    name,
                    f"it inflates to {len(data):,}+ bytes, not the {info.file_size:,} declared",
                )
                continue
            packing.add(name, _UNDECLARED, data)
    return packing.answer()


def _holds_nothing(info: zipfile.ZipInfo) -> bool:
    """Whether a directory entry is the empty one it claims to be: every extracting tool makes
    it a folder and drops its data, which would hide whatever an uploader stored there."""
    most = _EMPTY_DATA_BYTES.get(info.compress_type, 0)
    return info.file_size == 0 and info.compress_size <= most
