"""Refuses a zip container before any parser opens it, without inflating a member.

:mod:`zipfile` lists the central directory; this module checks what zipfile does not (end records,
ceilings, methods, names, local headers, members sharing bytes, archives inside the archive).
The rules, their reasons and the known gap: docs/spec-decisions.md (Archive guard).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass
from itertools import pairwise

from bridge.knowledge.errors import KnowledgeBridgeError


class ArchiveLimitExceeded(KnowledgeBridgeError):
    """A zip container was refused before any parser opened it; the message says why.

    When a configurable ceiling refused it, ``ceiling`` names the ``ExtractionLimits`` field and
    ``needed`` the least value that could admit the archive (``None``: not known), so the
    refusal can say what to raise and to what.
    """

    def __init__(
        self, message: str, ceiling: str | None = None, needed: float | None = None
    ) -> None:
        super().__init__(message)
        self.ceiling = ceiling
        self.needed = needed


# Record layouts, spelled as zipfile spells them so both read the same fields.
_END = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")
_LOCAL = struct.Struct("<4s2B4HL2L2H")
# A central entry is 46 fixed bytes, the name, extra and comment lengths lying at offset 28.
_CENTRAL_SIZE = 46
_CENTRAL_LENGTHS = struct.Struct("<28x3H")
_EXTRA_HEADER = struct.Struct("<2H")
_U64 = struct.Struct("<Q")
_DESCRIPTOR = struct.Struct("<3L")
_ZIP64_DESCRIPTOR = struct.Struct("<LQQ")

_LOCAL_SIGNATURE = b"PK\x03\x04"
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_END_SIGNATURE = b"PK\x05\x06"
_ZIP64_END_SIGNATURE = b"PK\x06\x06"
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
# Opens a spanned archive, and is also the optional first word of a data descriptor.
_SPANNED_SIGNATURE = b"PK\x07\x08"

# Bytes that begin a zip archive: a first local header, a bare end record (an empty archive) or
# the spanning marker. Payloads and member data starting with these are archives whatever their
# declared type or name.
_ARCHIVE_SIGNATURES = (_LOCAL_SIGNATURE, _END_SIGNATURE, _SPANNED_SIGNATURE)
_SIGNATURE_LENGTH = 4

# Declared types whose payload a zip reader will open. A payload declared as one of them is
# inspected even when its bytes do not look like a zip, so it is refused rather than handed to a
# parser that would find its own way in.
_ZIP_MEDIA_TYPES = frozenset({"application/zip", "application/x-zip-compressed"})
_ZIP_MEDIA_TYPE_FAMILIES = (
    "application/vnd.openxmlformats-officedocument.",
    "application/vnd.oasis.opendocument.",
)

# zipfile looks for the end record only in the last 64 KiB + 22 bytes (the longest comment plus the
# record) and takes the last signature there; searching the same window finds the same record,
# including the record of an archive appended to some other file.
_END_SEARCH_WINDOW = (1 << 16) + _END.size

# A zip64 end record with "extensible data" is longer than this; zipfile assumes it never is and
# would read the wrong bytes, so only the plain record is accepted.
_ZIP64_END_BODY_SIZE = _ZIP64_END.size - 12

_ZIP64_EXTRA_ID = 0x0001
# A 32-bit size or offset holding this value means "the real one is in the zip64 extra field".
_ZIP64_MARKER = 0xFFFFFFFF
_ZIP64_COUNT_MARKER = 0xFFFF

_STORED = 0
_DEFLATED = 8
_METHOD_NAMES = {1: "shrink", 6: "implode", 9: "deflate64", 12: "bzip2", 14: "lzma", 93: "zstd"}

# What zipfile raises, in one Python version or another, on an archive it cannot list; each
# becomes a refusal naming zipfile's reason, so no malformed upload fails the bridge untyped.
ZIPFILE_ERRORS = (
    OverflowError,  # a zip64 offset of 2**63 or more, which seek cannot take
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    ValueError,
    EOFError,
    OSError,
    struct.error,
)

_FLAG_ENCRYPTED = 0x0001
_FLAG_DATA_DESCRIPTOR = 0x0008
_FLAG_UTF8_NAME = 0x0800
# Encryption (traditional or strong), "compressed patched data" and a masked local header all mean
# the parser cannot read the member, or would read values this guard could not check.
_UNREADABLE_FLAGS = {
    _FLAG_ENCRYPTED: "encrypted",
    0x0020: "compressed patched data",
    0x0040: "strongly encrypted",
    0x2000: "written with masked local headers",
}
# The flags that say only that a member is encrypted, which its unpacking names (_sealed).
_ENCRYPTION_FLAGS = _FLAG_ENCRYPTED | 0x0040
# Flags that change how a member's data is located or decoded; the local header must agree with
# the central directory on them, or a streaming reader and zipfile read different bytes.
_LAYOUT_FLAGS = _FLAG_ENCRYPTED | _FLAG_DATA_DESCRIPTOR

# A nested archive is recognised from the first four inflated bytes. Legitimate deflate streams
# yield them within a few hundred bytes (one block header); a stream that needs more is padding
# itself to hide what it starts with, and is refused rather than followed.
_PEEK_INPUT_BYTES = 4096

# Member names appear in refusals; a 64 KiB name would bury the reason.
_NAME_SHOWN_CHARS = 80


@dataclass(frozen=True)
class _Limits:
    max_uncompressed_bytes: int
    max_expansion_ratio: float
    max_members: int
    max_nesting_depth: int

    def __post_init__(self) -> None:
        # A ceiling below one member, byte or level refuses every archive, and a NaN ratio
        # refuses none: misconfigurations, not policies. The bounds are the ones the caller's
        # ExtractionLimits enforces, so a limit it accepts never fails here.
        if (
            self.max_uncompressed_bytes < 1
            or not self.max_expansion_ratio > 0
            or self.max_members < 1
            or self.max_nesting_depth < 1
        ):
            raise ValueError("archive limits must be positive")


@dataclass(frozen=True)
class _Archive:
    """One archive to inspect: the upload, or the byte range of a stored member's data.

    Every position this module reads at is an index into ``data``, the whole upload; zipfile is
    handed the range alone, so its offsets count from ``start``.
    """

    data: bytes
    start: int
    end: int
    depth: int
    # Labels of the members this archive is nested in, outermost first.
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Directory:
    """Where the central directory lies, found the way zipfile finds it."""

    start: int
    end: int
    entries: int


@dataclass(frozen=True)
class _Zip64End:
    at: int
    entries: int
    size: int
    offset: int


@dataclass(frozen=True)
class _Span:
    """The bytes one member occupies: local header, name, extra, data and any descriptor."""

    label: str
    start: int
    data_start: int
    end: int


def is_zip_container(media_type: str, payload: bytes) -> bool:
    """Whether ``payload`` must pass :func:`inspect_zip_limits` before a parser sees it.

    Any one sign is enough, because each is a way zipfile would end up opening the bytes: the
    leading signature, a zip-based declared type, or an end record near the end (zipfile reads
    from the end, so a zip appended to a PDF or an image still opens).
    """
    kind = media_type.split(";", 1)[0].strip().lower()
    return (
        payload.startswith(_ARCHIVE_SIGNATURES)
        or kind in _ZIP_MEDIA_TYPES
        or kind.startswith(_ZIP_MEDIA_TYPE_FAMILIES)
        or kind.endswith("+zip")
        or _ends_with_end_record(payload)
    )


def _ends_with_end_record(payload: bytes) -> bool:
    """Whether an end record near the tail reaches exactly to the end of the payload.

    That is what an archive appended to another file looks like. A bare signature is not
    enough: four bytes of compressed PDF or image data match it about once in 65,000 files,
    and each such upload would be refused as a broken archive.
    """
    floor = max(0, len(payload) - _END_SEARCH_WINDOW)
    position = payload.rfind(_END_SIGNATURE, floor)
    while position >= 0:
        record = payload[position : position + _END.size]
        if len(record) == _END.size and position + _END.size + _END.unpack(record)[-1] == len(
            payload
        ):
            return True
        position = payload.rfind(_END_SIGNATURE, floor, position)
    return False


def listed_entries(payload: bytes) -> int | None:
    """How many entries zipfile would build an object for in listing ``payload``, counted
    without building one: the larger of the declared count and the entry signatures in the
    directory (zipfile walks it by bytes, whatever the count says). None when the end records
    are ones the guard refuses, which bound nothing."""
    archive = _Archive(payload, 0, len(payload), depth=1)
    try:
        directory = _read_directory(archive)
    except ArchiveLimitExceeded:
        return None
    signatures = payload.count(_CENTRAL_SIGNATURE, directory.start, directory.end)
    return max(directory.entries, signatures)


def inspect_zip_limits(
    payload: bytes,
    *,
    max_uncompressed_bytes: int,
    max_expansion_ratio: float,
    max_members: int,
    max_nesting_depth: int,
    follow_nested: bool = True,
) -> None:
    """Raise :class:`ArchiveLimitExceeded` unless the archive is well-formed and within limits.

    Work is linear in the size of the central directories (plus a sort of at most
    ``max_members`` spans per archive); no member is inflated. Without ``follow_nested`` the
    archives among the members are not inspected here: the caller unpacks each member and
    inspects it as an upload before anything reads it, and an encrypted member is left for
    that unpacking to name rather than refusing every other member with it.
    """
    limits = _Limits(max_uncompressed_bytes, max_expansion_ratio, max_members, max_nesting_depth)
    # A worklist rather than recursion, so no nesting limit can reach Python's recursion limit.
    pending = [_Archive(payload, 0, len(payload), depth=1)]
    while pending:
        archive = pending.pop()
        try:
            pending.extend(_inspect(archive, limits, follow_nested))
        except ArchiveLimitExceeded as exc:
            if not archive.path:
                raise
            where = "".join(f"inside member {label}: " for label in archive.path)
            raise ArchiveLimitExceeded(f"{where}{exc}", exc.ceiling, exc.needed) from exc


def _inspect(archive: _Archive, limits: _Limits, follow_nested: bool) -> list[_Archive]:
    """Check one archive; return the inner archives it holds, still to be checked (none when
    they are not followed)."""
    directory = _read_directory(archive)
    # Checked before the walk, so a record claiming millions of entries costs nothing.
    if directory.entries > limits.max_members:
        raise ArchiveLimitExceeded(
            f"the archive declares {directory.entries:,} members, over the limit of "
            f"{limits.max_members:,}",
            "max_members",
            directory.entries,
        )
    members = _list(archive, directory, unpacked=not follow_nested)
    _check_sizes(members, archive.end - archive.start, limits, unpacked=not follow_nested)
    spans = [_read_local_header(archive, member, directory) for member in members]
    _check_overlaps(spans)
    if not follow_nested:
        return []
    return [
        inner
        for member, span in zip(members, spans, strict=True)
        if (inner := _nested_archive(archive, member, span, limits)) is not None
    ]


def _read_directory(archive: _Archive) -> _Directory:
    payload = archive.data
    end_at = _find_end_record(archive)
    if end_at < 0:
        raise ArchiveLimitExceeded(
            f"no end-of-central-directory record in the last {_END_SEARCH_WINDOW:,} bytes; "
            "this is not a readable zip archive"
        )
    if end_at + _END.size > archive.end:
        raise ArchiveLimitExceeded("the end-of-central-directory record is cut off")
    (_, disk, directory_disk, entries_here, entries, size, offset, comment_length) = (
        _END.unpack_from(payload, end_at)
    )
    if end_at + _END.size + comment_length > archive.end:
        raise ArchiveLimitExceeded(
            f"the archive comment claims {comment_length:,} bytes but only "
            f"{archive.end - end_at - _END.size:,} follow the end record"
        )
    records_end = end_at
    locator_at = end_at - _ZIP64_LOCATOR.size
    if locator_at >= archive.start and payload.startswith(_ZIP64_LOCATOR_SIGNATURE, locator_at):
        zip64 = _read_zip64_end(archive, locator_at)
        # zipfile trusts the zip64 record while other readers trust a 32-bit field unless it
        # holds the "see zip64" marker; when both hold a real value they must be the same one.
        for what, small, large, marker in (
            ("disk number", disk, 0, _ZIP64_COUNT_MARKER),
            ("directory disk number", directory_disk, 0, _ZIP64_COUNT_MARKER),
            ("member count on this disk", entries_here, zip64.entries, _ZIP64_COUNT_MARKER),
            ("member count", entries, zip64.entries, _ZIP64_COUNT_MARKER),
            ("directory size", size, zip64.size, _ZIP64_MARKER),
            ("directory offset", offset, zip64.offset, _ZIP64_MARKER),
        ):
            if small not in (marker, large):
                raise ArchiveLimitExceeded(
                    f"the end record gives a {what} of {small:,} but the zip64 end record "
                    f"gives {large:,}"
                )
        entries, size, offset, records_end = zip64.entries, zip64.size, zip64.offset, zip64.at
    elif disk or directory_disk or entries_here != entries:
        raise ArchiveLimitExceeded("the end record describes a multi-disk (spanned) archive")
    # Recorded offsets count from where the directory's own offset says the archive began: past
    # the first byte when bytes were prepended (zipfile adds them to every offset, so a zip
    # appended to another file still opens), never before it.
    if records_end - size - offset < archive.start:
        raise ArchiveLimitExceeded(
            f"the end record places a {size:,}-byte central directory at offset {offset:,}, "
            f"which does not fit before the end records at offset {records_end - archive.start:,}"
        )
    return _Directory(start=records_end - size, end=records_end, entries=entries)


def _find_end_record(archive: _Archive) -> int:
    # zipfile first accepts a comment-less record in the last 22 bytes, and only then searches
    # backwards; the two can pick different records, and the parser's pick is the one that counts.
    payload, start, end = archive.data, archive.start, archive.end
    last_at = end - _END.size
    if (
        last_at >= start
        and payload.startswith(_END_SIGNATURE, last_at)
        and payload.endswith(b"\0\0", start, end)
    ):
        return last_at
    return payload.rfind(_END_SIGNATURE, max(start, end - _END_SEARCH_WINDOW), end)


def _read_zip64_end(archive: _Archive, locator_at: int) -> _Zip64End:
    payload = archive.data
    (_, record_disk, record_offset, disks) = _ZIP64_LOCATOR.unpack_from(payload, locator_at)
    if record_disk or disks > 1:
        raise ArchiveLimitExceeded("the zip64 locator describes a multi-disk (spanned) archive")
    record_at = locator_at - _ZIP64_END.size
    # zipfile reads the record from just before the locator, ignoring the locator's offset, and
    # silently falls back to the 32-bit record when it is not there; other readers follow the
    # offset. Only an archive where all of them land on the same record is accepted.
    if record_at < archive.start or not payload.startswith(_ZIP64_END_SIGNATURE, record_at):
        raise ArchiveLimitExceeded("a zip64 locator is present but no zip64 end record precedes it")
    (_, body_size, _, _, disk, directory_disk, entries_here, entries, size, offset) = (
        _ZIP64_END.unpack_from(payload, record_at)
    )
    if body_size != _ZIP64_END_BODY_SIZE:
        raise ArchiveLimitExceeded(
            f"the zip64 end record declares {body_size:,} bytes instead of "
            f"{_ZIP64_END_BODY_SIZE}; extensible data is not accepted"
        )
    if disk or directory_disk or entries_here != entries:
        raise ArchiveLimitExceeded("the zip64 end record describes a multi-disk (spanned) archive")
    if record_offset != offset + size:
        raise ArchiveLimitExceeded(
            f"the zip64 locator points at offset {record_offset:,} but the zip64 end record "
            f"follows the central directory at {offset + size:,}"
        )
    return _Zip64End(at=record_at, entries=entries, size=size, offset=offset)


def _list(archive: _Archive, directory: _Directory, *, unpacked: bool) -> list[zipfile.ZipInfo]:
    """The members as zipfile lists them, each checked for what zipfile lets through."""
    # zipfile walks the directory by byte count and ignores the declared entry count. Every entry
    # starts with a signature (a name holding one only over-counts), so counting them bounds its
    # work by the declared count, which max_members has bounded, and makes that count the real one.
    if archive.data.count(_CENTRAL_SIGNATURE, directory.start, directory.end) > directory.entries:
        raise ArchiveLimitExceeded(
            f"the central directory holds more entries than the {directory.entries:,} "
            "its end record declares"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(archive.data[archive.start : archive.end])) as listing:
            members = listing.infolist()
            directory_at = listing.start_dir
    except UnicodeDecodeError as exc:
        raise ArchiveLimitExceeded(
            f"member name {exc.object[:_NAME_SHOWN_CHARS]!r} is flagged UTF-8 but is not"
        ) from None
    except ZIPFILE_ERRORS as exc:
        reason = str(exc) or type(exc).__name__
        raise ArchiveLimitExceeded(f"zipfile refuses the central directory: {reason}") from exc
    # zipfile's rules for finding the end records differ between Python versions; the checks
    # below and the local header offsets hold only if both read the same directory.
    if archive.start + directory_at != directory.start:
        raise ArchiveLimitExceeded(
            f"zipfile finds the central directory at offset {directory_at:,}, not at "
            f"{directory.start - archive.start:,}"
        )
    if len(members) != directory.entries:
        raise ArchiveLimitExceeded(
            f"the end record declares {directory.entries:,} members but the central directory "
            f"holds {len(members):,}"
        )
    if members:
        _check_last_entry(archive.data, members[-1], len(members), directory)
    names: set[str] = set()
    folded: dict[str, str] = {}
    for member in members:
        name = member.orig_filename
        _check_member(member, unpacked=unpacked)
        # A reader keeps one member per name; which of two it keeps differs between readers
        # (and between a case-sensitive zipfile and the case-insensitive OOXML part names).
        if name in names:
            raise ArchiveLimitExceeded(f"member name {_show(name)} appears twice")
        key = name.casefold()
        if key in folded:
            raise ArchiveLimitExceeded(
                f"member names {_show(folded[key])} and {_show(name)} differ only in case"
            )
        names.add(name)
        folded[key] = name
    return members


def _check_last_entry(
    payload: bytes, member: zipfile.ZipInfo, count: int, directory: _Directory
) -> None:
    # zipfile stops reading once it has consumed the directory's declared size, cutting short the
    # name, extra or comment of a last entry that claims more; another reader takes the bytes
    # after the directory too, and sees another name.
    read = (len(_raw_name(member)), len(member.extra), len(member.comment))
    at = directory.end - _CENTRAL_SIZE - sum(read)
    if _CENTRAL_LENGTHS.unpack_from(payload, at) != read:
        raise ArchiveLimitExceeded(f"central directory entry {count:,} is cut off")


def _raw_name(member: zipfile.ZipInfo) -> bytes:
    """The name's bytes as recorded; zipfile decoded them with the codec the flags select."""
    return member.orig_filename.encode("utf-8" if member.flag_bits & _FLAG_UTF8_NAME else "cp437")


def _check_member(member: zipfile.ZipInfo, *, unpacked: bool) -> None:
    name = _show(member.orig_filename)
    if "\0" in member.orig_filename:
        # zipfile cuts a name at NUL and other readers do not, so two readers see two names.
        raise ArchiveLimitExceeded(f"member name {name} contains a NUL byte")
    sealed = _sealed(member, unpacked=unpacked)
    for flag, description in _UNREADABLE_FLAGS.items():
        if member.flag_bits & flag and not (sealed and flag & _ENCRYPTION_FLAGS):
            raise ArchiveLimitExceeded(f"member {name} is {description}")
    # zipfile inflates bzip2 and lzma in one call with no output bound, so their declared sizes
    # bound nothing; stored and deflate are the only methods DOCX writers use anyway.
    if not sealed and member.compress_type not in (_STORED, _DEFLATED):
        method = _METHOD_NAMES.get(member.compress_type, f"method {member.compress_type}")
        raise ArchiveLimitExceeded(
            f"member {name} is compressed with {method}; only stored and deflate members are "
            "accepted"
        )
    # zipfile rejects an extra field that overruns; it applies every zip64 field in turn.
    _zip64_field(member.extra, f"the central entry of {name}")


def _sealed(member: zipfile.ZipInfo, *, unpacked: bool) -> bool:
    """Whether ``member`` is encrypted in an archive of files (``unpacked``): no reader decodes
    it, its unpacking names it as encrypted (sandbox/extractors/archive.py), so neither its
    method (WinZip's AES is method 99) nor the encryption header before its data (12 bytes a
    stored member holds more than its file) is a claim any reader believes."""
    return unpacked and bool(member.flag_bits & _FLAG_ENCRYPTED)


def _zip64_field(extra: bytes, what: str) -> bytes | None:
    field: bytes | None = None
    at = 0
    # Trailing bytes too short for a field header are ignored, as zipfile ignores them (padding
    # written by alignment tools).
    while at + _EXTRA_HEADER.size <= len(extra):
        kind, length = _EXTRA_HEADER.unpack_from(extra, at)
        body_at = at + _EXTRA_HEADER.size
        at = body_at + length
        if at > len(extra):
            raise ArchiveLimitExceeded(
                f"extra field 0x{kind:04x} of {what} claims {length:,} bytes, past the end of "
                "its extra data"
            )
        if kind == _ZIP64_EXTRA_ID:
            # zipfile applies every zip64 field in turn, other readers the first; refuse the
            # ambiguity rather than pick.
            if field is not None:
                raise ArchiveLimitExceeded(f"{what} carries two zip64 extra fields")
            field = extra[body_at:at]
    return field


def _resolve_zip64(field: bytes | None, values: tuple[int, ...], what: str) -> tuple[int, ...]:
    # Without a zip64 field a marker is read literally, as zipfile reads it: 4 GiB, which the
    # size checks then refuse.
    if field is None:
        return values
    resolved: list[int] = []
    at = 0
    for value in values:
        if value != _ZIP64_MARKER:
            resolved.append(value)
            continue
        if at + _U64.size > len(field):
            raise ArchiveLimitExceeded(
                f"the zip64 extra field of {what} is too short for the values it must carry"
            )
        resolved.extend(_U64.unpack_from(field, at))
        at += _U64.size
    return tuple(resolved)


def _check_sizes(
    members: list[zipfile.ZipInfo], payload_length: int, limits: _Limits, *, unpacked: bool
) -> None:
    ratio = limits.max_expansion_ratio
    total = 0
    for member in members:
        name = _show(member.orig_filename)
        # A stored member cannot expand; a difference is a lie one of two readers will believe.
        if (
            member.compress_type == _STORED
            and member.file_size != member.compress_size
            and not _sealed(member, unpacked=unpacked)
        ):
            raise ArchiveLimitExceeded(
                f"stored member {name} declares {member.file_size:,} bytes uncompressed but "
                f"{member.compress_size:,} stored"
            )
        # Multiplying instead of dividing makes zero compressed bytes an unbounded expansion.
        if member.file_size > ratio * member.compress_size:
            steepness = (
                f"{member.file_size / member.compress_size:,.1f}:1"
                if member.compress_size
                else "an unbounded"
            )
            raise _ratio_exceeded(
                f"member {name} declares {member.file_size:,} bytes from "
                f"{member.compress_size:,} compressed, {steepness} expansion over the "
                f"{ratio:g}:1 limit",
                members,
                payload_length,
            )
        total += member.file_size
        if total > limits.max_uncompressed_bytes:
            raise ArchiveLimitExceeded(
                f"declared uncompressed size {total:,} bytes exceeds the "
                f"{limits.max_uncompressed_bytes:,}-byte ceiling (reached at member {name})",
                "max_uncompressed_bytes",
                sum(member.file_size for member in members),
            )
    # Implied by the member ratios while members do not share bytes; checked anyway because it
    # also refuses, before any local header is read, members that all claim the same data.
    if total > ratio * payload_length:
        raise _ratio_exceeded(
            f"the archive declares {total:,} bytes uncompressed from a {payload_length:,}-byte "
            f"payload, {total / payload_length:,.1f}:1 expansion over the {ratio:g}:1 limit",
            members,
            payload_length,
        )


def _ratio_exceeded(
    message: str, members: list[zipfile.ZipInfo], payload_length: int
) -> ArchiveLimitExceeded:
    """The refusal, with the ratio that admits every member and the archive as a whole; none
    when a member claims bytes from no compressed bytes, which no ratio admits."""
    if any(member.file_size and not member.compress_size for member in members):
        return ArchiveLimitExceeded(message)
    ratios = [member.file_size / member.compress_size for member in members if member.compress_size]
    total = sum(member.file_size for member in members)
    return ArchiveLimitExceeded(
        message, "max_expansion_ratio", max([*ratios, total / max(payload_length, 1)])
    )


def _read_local_header(archive: _Archive, member: zipfile.ZipInfo, directory: _Directory) -> _Span:
    payload = archive.data
    name = _show(member.orig_filename)
    at = archive.start + member.header_offset
    if at + _LOCAL.size > directory.start:
        raise ArchiveLimitExceeded(
            f"the local header of {name} at offset {at:,} lies outside the member data, which "
            f"ends at offset {directory.start:,}"
        )
    (
        signature,
        _,
        _,
        flags,
        method,
        _,
        _,
        crc,
        compressed,
        uncompressed,
        name_length,
        extra_length,
    ) = _LOCAL.unpack_from(payload, at)
    if signature != _LOCAL_SIGNATURE:
        raise ArchiveLimitExceeded(f"no local header signature for {name} at offset {at:,}")
    name_at = at + _LOCAL.size
    extra_at = name_at + name_length
    data_start = extra_at + extra_length
    if data_start > directory.start:
        raise ArchiveLimitExceeded(f"the local header of {name} runs into the central directory")
    # Streaming readers trust the local header and zipfile the central directory; every value
    # that decides what gets decoded must be the same in both.
    if payload[name_at:extra_at] != _raw_name(member):
        local_name = _show(payload[name_at:extra_at].decode("cp437"))
        raise ArchiveLimitExceeded(
            f"the central directory names a member {name} but its local header names it "
            f"{local_name}"
        )
    if method != member.compress_type or (flags ^ member.flag_bits) & _LAYOUT_FLAGS:
        raise ArchiveLimitExceeded(
            f"the central directory and the local header of {name} disagree on its compression "
            "method or flags"
        )
    what = f"the local header of {name}"
    zip64 = _zip64_field(payload[extra_at:data_start], what)
    uncompressed, compressed = _resolve_zip64(zip64, (uncompressed, compressed), what)
    end = data_start + member.compress_size
    if member.flag_bits & _FLAG_DATA_DESCRIPTOR:
        if end <= directory.start:
            end += _descriptor_length(payload, member, end, directory.start, zip64)
    elif (crc, compressed, uncompressed) != (member.CRC, member.compress_size, member.file_size):
        raise ArchiveLimitExceeded(
            f"the central directory gives {name} crc {member.CRC:08x} and "
            f"{member.compress_size:,} -> {member.file_size:,} bytes, its local header crc "
            f"{crc:08x} and {compressed:,} -> {uncompressed:,} bytes"
        )
    if end > directory.start:
        raise ArchiveLimitExceeded(
            f"the data of {name} runs to offset {end:,}, past the start of the central "
            f"directory at offset {directory.start:,}"
        )
    return _Span(label=name, start=at, data_start=data_start, end=end)


def _descriptor_length(
    payload: bytes, member: zipfile.ZipInfo, at: int, limit: int, zip64: bytes | None
) -> int:
    # The descriptor's signature is optional and a CRC may look like one, so each reading is
    # tried and the one that repeats the central directory's values wins; none doing so is the
    # same lie as a disagreeing local header.
    layout = _DESCRIPTOR if zip64 is None else _ZIP64_DESCRIPTOR
    expected = (member.CRC, member.compress_size, member.file_size)
    skips = (len(_SPANNED_SIGNATURE), 0) if payload.startswith(_SPANNED_SIGNATURE, at) else (0,)
    for skip in skips:
        if at + skip + layout.size <= limit and layout.unpack_from(payload, at + skip) == expected:
            return skip + layout.size
    raise ArchiveLimitExceeded(
        f"the data descriptor of {_show(member.orig_filename)} does not repeat the crc and sizes "
        "of the central directory"
    )


def _check_overlaps(spans: list[_Span]) -> None:
    # Members sharing bytes are how a few kilobytes declare gigabytes (Fifield's non-recursive
    # zip bombs quote one kernel from every entry); no writer ever produces them.
    for first, second in pairwise(sorted(spans, key=lambda span: span.start)):
        if second.start < first.end:
            raise ArchiveLimitExceeded(
                f"member {second.label} starts at offset {second.start:,}, inside member "
                f"{first.label} (offsets {first.start:,} to {first.end:,})"
            )


def _nested_archive(
    archive: _Archive, member: zipfile.ZipInfo, span: _Span, limits: _Limits
) -> _Archive | None:
    if not _peek(archive.data, member, span).startswith(_ARCHIVE_SIGNATURES):
        return None
    if archive.depth >= limits.max_nesting_depth:
        raise ArchiveLimitExceeded(
            f"member {span.label} is itself a zip archive; nesting depth {archive.depth + 1:,} "
            f"exceeds the limit of {limits.max_nesting_depth:,}",
            "max_nesting_depth",
            archive.depth + 1,
        )
    if member.compress_type != _STORED:
        raise ArchiveLimitExceeded(
            f"member {span.label} is a deflated zip archive, which cannot be inspected without "
            "inflating it"
        )
    return _Archive(
        archive.data,
        span.data_start,
        span.data_start + member.compress_size,
        depth=archive.depth + 1,
        path=(*archive.path, span.label),
    )


def _peek(payload: bytes, member: zipfile.ZipInfo, span: _Span) -> bytes:
    data_end = span.data_start + member.compress_size
    if member.compress_type == _STORED:
        return payload[span.data_start : min(data_end, span.data_start + _SIGNATURE_LENGTH)]
    window_end = min(data_end, span.data_start + _PEEK_INPUT_BYTES)
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        head = inflater.decompress(payload[span.data_start : window_end], _SIGNATURE_LENGTH)
    except zlib.error as exc:
        raise ArchiveLimitExceeded(f"member {span.label} is not valid deflate data") from exc
    if len(head) < _SIGNATURE_LENGTH and not inflater.eof and window_end < data_end:
        raise ArchiveLimitExceeded(
            f"member {span.label} yields no data in its first {_PEEK_INPUT_BYTES:,} compressed "
            "bytes, so what it holds cannot be seen without inflating it"
        )
    return head


def _show(name: str) -> str:
    if len(name) > _NAME_SHOWN_CHARS:
        name = name[: _NAME_SHOWN_CHARS - 3] + "..."
    return repr(name)
