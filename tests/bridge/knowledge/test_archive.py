"""The archive guard against real crafted archives.

Ordinary archives are written with :mod:`zipfile`; malicious ones are assembled byte by byte
with the small builder below, because zipfile refuses to write the lies they tell.
"""

from __future__ import annotations

import contextlib
import io
import struct
import tracemalloc
import zipfile
import zlib
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.knowledge.archive import ArchiveLimitExceeded, inspect_zip_limits, is_zip_container
from bridge.knowledge.errors import KnowledgeBridgeError

MIB = 1 << 20
DEFAULTS: dict[str, Any] = {
    "max_uncompressed_bytes": 8 * MIB,
    "max_expansion_ratio": 100.0,
    "max_members": 1024,
    "max_nesting_depth": 1,
}
# Limits under which only the rule a test aims at can refuse.
LAVISH: dict[str, Any] = {
    "max_uncompressed_bytes": 1 << 40,
    "max_expansion_ratio": 1e12,
    "max_members": 1 << 20,
    "max_nesting_depth": 1,
}
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
STORED, DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
UTF8 = 0x0800
DATA_DESCRIPTOR = 0x0008
MARKER = 0xFFFFFFFF


def inspect(payload: bytes, **limits: Any) -> None:
    inspect_zip_limits(payload, **{**DEFAULTS, **limits})


def refused(payload: bytes, match: str, **limits: Any) -> str:
    with pytest.raises(ArchiveLimitExceeded, match=match) as caught:
        inspect(payload, **limits)
    return str(caught.value)


# --- builder -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """What one local or central header records about a member."""

    name: bytes
    method: int
    crc: int
    compressed: int
    uncompressed: int
    flags: int = 0
    extra: bytes = b""


@dataclass(frozen=True)
class Member:
    central: Header
    local: Header
    # Everything written after the local header: the member data, then any data descriptor.
    body: bytes


def deflate(content: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(content) + packer.flush()


def member(name: str | bytes, content: bytes, *, method: int = DEFLATED, flags: int = 0) -> Member:
    raw = name.encode() if isinstance(name, str) else name
    data = deflate(content) if method == DEFLATED else content
    header = Header(raw, method, zlib.crc32(content), len(data), len(content), flags)
    return Member(header, header, data)


def lying(honest: Member, **central: Any) -> Member:
    """The same member, with a central directory entry that claims something else."""
    return replace(honest, central=replace(honest.central, **central))


def local_header(h: Header) -> bytes:
    fixed = struct.pack(
        "<4s2B4HL2L2H",
        b"PK\x03\x04",
        20,
        0,
        h.flags,
        h.method,
        0,
        0x21,
        h.crc,
        h.compressed,
        h.uncompressed,
        len(h.name),
        len(h.extra),
    )
    return fixed + h.name + h.extra


def central_header(h: Header, offset: int) -> bytes:
    fixed = struct.pack(
        "<4s4B4HL2L5H2L",
        b"PK\x01\x02",
        20,
        0,
        20,
        0,
        h.flags,
        h.method,
        0,
        0x21,
        h.crc,
        h.compressed,
        h.uncompressed,
        len(h.name),
        len(h.extra),
        0,
        0,
        0,
        0,
        offset,
    )
    return fixed + h.name + h.extra


def end_record(entries: int, size: int, offset: int, comment: bytes = b"") -> bytes:
    fixed = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, entries, entries, size, offset, 0)
    return fixed[:-2] + struct.pack("<H", len(comment)) + comment


def zip64_end_records(entries: int, size: int, offset: int) -> bytes:
    record = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, offset + size, 1)
    return record + locator


def assemble(
    members: list[Member],
    *,
    offsets: list[int] | None = None,
    entries: int | None = None,
    directory_offset: int | None = None,
    comment: bytes = b"",
    zip64: bool = False,
) -> bytes:
    """An archive of ``members``; each keyword forges one field of the directory or end record."""
    body = bytearray()
    written = []
    for m in members:
        written.append(len(body))
        body += local_header(m.local) + m.body
    directory = b"".join(
        central_header(m.central, at) for m, at in zip(members, offsets or written, strict=True)
    )
    count = len(members) if entries is None else entries
    at = len(body) if directory_offset is None else directory_offset
    if zip64:
        tail = zip64_end_records(count, len(directory), at)
        tail += end_record(0xFFFF, MARKER, MARKER, comment)
    else:
        tail = end_record(count, len(directory), at, comment)
    return bytes(body) + directory + tail


def with_zipfile(*entries: tuple[str, bytes, int]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content, method in entries:
            archive.writestr(name, content, compress_type=method)
    return buffer.getvalue()


class Unseekable:
    """An output zipfile cannot seek back into, so it writes data descriptors."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass


def streamed(*, force_zip64: bool) -> bytes:
    sink = Unseekable()
    # Unseekable has just what zipfile writes through; the stubs also ask for seek and tell.
    with zipfile.ZipFile(sink, "w", compression=DEFLATED) as archive:  # type: ignore[call-overload]
        for name in ("word/document.xml", "word/styles.xml"):
            with archive.open(name, "w", force_zip64=force_zip64) as handle:
                handle.write(b"<w:p>text</w:p>" * 200)
    return b"".join(sink.chunks)


XML = b'<?xml version="1.0"?><w:document><w:body><w:p>hello</w:p></w:body></w:document>'


def small_docx() -> bytes:
    return with_zipfile(
        ("[Content_Types].xml", XML, DEFLATED),
        ("word/document.xml", XML * 20, DEFLATED),
        ("media/logo.bin", bytes(range(200)), STORED),
    )


@cache
def zero_bomb() -> bytes:
    """One member that inflates to 50 MB of zeros; about 50 kB on the wire."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    chunk = bytes(MIB)
    data = b"".join(packer.compress(chunk) for _ in range(50)) + packer.flush()
    crc = 0
    for _ in range(50):
        crc = zlib.crc32(chunk, crc)
    header = Header(b"word/document.xml", DEFLATED, crc, len(data), 50 * MIB)
    return assemble([Member(header, header, data)])


def fifield_overlap(files: int, kernel_size: int) -> bytes:
    """Fifield's non-recursive bomb: every file's deflate stream quotes the local headers of
    the files after it in stored blocks, then runs on into one shared kernel."""
    kernel = deflate(bytes(kernel_size))
    data, content = kernel, bytes(kernel_size)
    headers: list[bytes] = []
    centrals: list[Header] = []
    for index in reversed(range(files)):
        header = Header(
            f"f{index}".encode(), DEFLATED, zlib.crc32(content), len(data), len(content)
        )
        centrals.insert(0, header)
        raw = local_header(header)
        headers.insert(0, raw)
        quote = b"\x00" + struct.pack("<HH", len(raw), len(raw) ^ 0xFFFF)
        data, content = quote + raw + data, raw + content
    # On the wire: header 0, quote of header 1, header 1, ..., header n-1, kernel.
    body = bytearray(headers[0])
    offsets = [0]
    for raw in headers[1:]:
        body += b"\x00" + struct.pack("<HH", len(raw), len(raw) ^ 0xFFFF)
        offsets.append(len(body))
        body += raw
    body += kernel
    directory = b"".join(central_header(h, at) for h, at in zip(centrals, offsets, strict=True))
    return bytes(body) + directory + end_record(files, len(directory), len(body))


# --- the corpus and ordinary archives --------------------------------------------------------


def test_every_real_docx_passes_with_the_default_limits(corpus_dir: Path) -> None:
    documents = sorted(corpus_dir.glob("*.docx"))
    assert documents, f"no .docx in {corpus_dir}"
    refusals = {}
    for path in documents:
        payload = path.read_bytes()
        assert is_zip_container(DOCX, payload)
        try:
            inspect(payload)
        except ArchiveLimitExceeded as exc:
            refusals[path.name] = str(exc)
    assert refusals == {}


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(small_docx(), id="stored-and-deflated"),
        pytest.param(with_zipfile(), id="empty-archive"),
        pytest.param(
            with_zipfile(("a.txt", b"", DEFLATED), ("b/", b"", STORED)), id="empty-members"
        ),
        pytest.param(streamed(force_zip64=False), id="data-descriptors"),
        pytest.param(streamed(force_zip64=True), id="zip64-data-descriptors"),
        pytest.param(assemble([member("a.xml", XML)], zip64=True), id="zip64-end-record"),
        pytest.param(
            assemble([member("a.xml", XML)], comment=b"made by hand"), id="archive-comment"
        ),
        pytest.param(
            assemble([member("\u00e9t\u00e9.xml".encode(), XML, flags=UTF8)]), id="utf8-name"
        ),
    ],
)
def test_ordinary_archives_pass(payload: bytes) -> None:
    inspect(payload)


def test_force_zip64_local_headers_pass() -> None:
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", compression=DEFLATED) as archive,
        archive.open("word/document.xml", "w", force_zip64=True) as handle,
    ):
        handle.write(XML * 50)
    inspect(buffer.getvalue())


def test_a_zip_appended_to_another_file_is_inspected_where_zipfile_finds_it() -> None:
    payload = b"%PDF-1.7\n" + bytes(5000) + small_docx()
    assert zipfile.ZipFile(io.BytesIO(payload)).read("word/document.xml") == XML * 20
    inspect(payload)


# --- bombs -----------------------------------------------------------------------------------


def test_ratio_bomb_is_refused() -> None:
    reason = refused(zero_bomb(), r"member 'word/document.xml' declares 52,428,800 bytes from")
    assert "over the 100:1 limit" in reason


def test_ratio_bomb_is_decided_without_inflating() -> None:
    bomb = zero_bomb()
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveLimitExceeded):
            inspect(bomb)
        # Accepted under lavish limits, so every check ran, the nesting peek included.
        inspect(bomb, **LAVISH)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MIB, f"the guard allocated {peak:,} bytes for a {len(bomb):,}-byte payload"


def test_zero_compressed_bytes_is_an_unbounded_expansion() -> None:
    bomb = assemble([lying(member("a.xml", b""), uncompressed=10, compressed=0)])
    refused(bomb, "declares 10 bytes from 0 compressed, an unbounded expansion")


def test_total_size_bomb_is_refused() -> None:
    megabyte_of_zeros = member("x", bytes(MIB))
    members = [
        replace(
            megabyte_of_zeros,
            central=replace(megabyte_of_zeros.central, name=n),
            local=replace(megabyte_of_zeros.local, name=n),
        )
        for n in (f"part{i}.xml".encode() for i in range(20))
    ]
    refused(
        assemble(members),
        r"declared uncompressed size 9,437,184 bytes exceeds the 8,388,608-byte ceiling "
        r"\(reached at member 'part8.xml'\)",
        max_expansion_ratio=1e6,
    )


def test_zip64_absurd_declared_size_is_refused() -> None:
    honest = member("word/document.xml", XML)
    extra = struct.pack("<HHQ", 1, 8, 9_437_184_000)
    bomb = assemble([lying(honest, uncompressed=MARKER, extra=extra)])
    refused(
        bomb,
        "declared uncompressed size 9,437,184,000 bytes exceeds the 8,388,608-byte",
        max_expansion_ratio=1e12,
    )
    refused(bomb, r"declares 9,437,184,000 bytes from \d+ compressed")


def test_member_count_bomb_is_refused() -> None:
    entries = [(f"f{i}", b"", STORED) for i in range(2000)]
    refused(with_zipfile(*entries), "declares 2,000 members, over the limit of 1,024")


def test_an_end_record_claiming_ten_million_entries_is_refused_without_walking() -> None:
    payload = assemble([member("a.xml", XML)], entries=10_000_000, zip64=True)
    tracemalloc.start()
    try:
        refused(payload, "declares 10,000,000 members, over the limit of 1,024")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_whole_archive_expansion_is_refused_even_when_each_member_is_flat() -> None:
    kernel = member("k", bytes(10_000), method=STORED)
    names = [f"n{i}".encode() for i in range(1000)]
    shared = [replace(kernel, central=replace(kernel.central, name=n)) for n in names]
    directory = b"".join(central_header(m.central, 0) for m in shared)
    body = local_header(kernel.local) + kernel.body
    payload = body + directory + end_record(len(shared), len(directory), len(body))
    refused(
        payload,
        r"the archive declares 10,000,000 bytes uncompressed from a [\d,]+-byte "
        r"payload, [\d.]+:1 expansion over the 100:1 limit",
        max_uncompressed_bytes=1 << 30,
    )


def test_fifield_overlapping_bomb_is_refused_by_the_overlap_rule_alone() -> None:
    bomb = fifield_overlap(files=10, kernel_size=100_000)
    # It is a real bomb: zipfile reads every file through the shared kernel.
    with zipfile.ZipFile(io.BytesIO(bomb)) as archive:
        assert sum(len(archive.read(n)) for n in archive.namelist()) > 10 * 100_000
    refused(bomb, r"member 'f1' starts at offset \d+, inside member 'f0'", **LAVISH)
    refused(bomb, "over the 100:1 limit")


def test_central_entries_sharing_one_local_header_are_refused() -> None:
    kernel = member("kernel", bytes(1000))
    copies = [kernel, lying(kernel, name=b"other")]
    body = local_header(kernel.local) + kernel.body
    directory = b"".join(central_header(m.central, 0) for m in copies)
    payload = body + directory + end_record(2, len(directory), len(body))
    refused(payload, "names a member 'other' but its local header names it 'kernel'", **LAVISH)
    same = body + central_header(kernel.central, 0) * 2
    refused(same + end_record(2, len(same) - len(body), len(body)), "'kernel' appears twice")


def test_member_data_running_into_the_central_directory_is_refused() -> None:
    short = member("a.xml", XML)
    stretched = replace(
        short,
        central=replace(short.central, compressed=1000, uncompressed=1000),
        local=replace(short.local, compressed=1000, uncompressed=1000),
    )
    refused(assemble([stretched]), "runs to offset 1,035, past the start of the central")


# --- nesting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", [STORED, DEFLATED], ids=["stored", "deflated"])
def test_a_zip_inside_a_zip_is_refused_whatever_its_name(method: int) -> None:
    payload = with_zipfile(("word/media/image.png", small_docx(), method))
    refused(
        payload,
        "member 'word/media/image.png' is itself a zip archive; nesting depth 2 "
        "exceeds the limit of 1",
    )


def test_an_empty_inner_archive_is_recognised() -> None:
    refused(with_zipfile(("a.png", with_zipfile(), STORED)), "is itself a zip archive")


def test_one_stored_level_is_inspected_when_the_limit_allows_it() -> None:
    inspect(with_zipfile(("inner.png", small_docx(), STORED)), max_nesting_depth=2)


def test_a_permitted_inner_archive_is_held_to_the_same_limits() -> None:
    payload = with_zipfile(("inner.png", zero_bomb(), STORED))
    refused(
        payload,
        "inside member 'inner.png': member 'word/document.xml' declares 52,428,800",
        max_nesting_depth=2,
    )


def test_deep_nesting_is_inspected_without_recursion() -> None:
    # Far past Python's recursion limit had each level been a nested call.
    payload = small_docx()
    for level in range(1500):
        payload = with_zipfile((f"level{level}.png", payload, STORED))
    inspect(payload, max_nesting_depth=1501)
    refused(payload, "nesting depth 1,501 exceeds the limit of 1,500", max_nesting_depth=1500)


def test_a_deflated_inner_archive_cannot_be_inspected() -> None:
    payload = with_zipfile(("inner.png", small_docx(), DEFLATED))
    refused(payload, "is a deflated zip archive, which cannot be inspected", max_nesting_depth=2)


def test_nesting_beyond_the_limit_is_refused_inside_a_permitted_level() -> None:
    innermost = with_zipfile(("c.png", small_docx(), STORED))
    payload = with_zipfile(("b.png", innermost, STORED))
    refused(
        payload,
        "inside member 'b.png': member 'c.png' is itself a zip archive; nesting "
        "depth 3 exceeds the limit of 2",
        max_nesting_depth=2,
    )


def test_a_deflate_stream_padded_to_hide_its_start_is_refused() -> None:
    # Empty non-final stored blocks inflate to nothing; zlib walks through any number of them.
    padding = (b"\x00" + struct.pack("<HH", 0, 0xFFFF)) * 1000
    data = padding + deflate(small_docx())
    content = small_docx()
    header = Header(b"image.png", DEFLATED, zlib.crc32(content), len(data), len(content))
    refused(
        assemble([Member(header, header, data)]), "yields no data in its first 4,096 compressed"
    )


def test_member_data_that_is_not_deflate_is_refused() -> None:
    header = Header(b"a.xml", DEFLATED, 0, 8, 8)
    refused(assemble([Member(header, header, b"\xff" * 8)]), "'a.xml' is not valid deflate data")


# --- a central directory that lies -----------------------------------------------------------


def test_central_sizes_disagreeing_with_the_local_header_are_refused() -> None:
    honest = member("word/document.xml", bytes(MIB))
    refused(
        assemble([lying(honest, uncompressed=10)]),
        r"the central directory gives 'word/document.xml' crc [0-9a-f]{8} and [\d,]+ -> 10 "
        r"bytes, its local header crc [0-9a-f]{8} and [\d,]+ -> 1,048,576 bytes",
    )


def test_central_name_disagreeing_with_the_local_header_is_refused() -> None:
    refused(
        assemble([lying(member("word/evil.xml", XML), name=b"word/document.xml")]),
        "names a member 'word/document.xml' but its local header names it 'word/evil.xml'",
    )


def test_central_crc_or_method_disagreeing_with_the_local_header_is_refused() -> None:
    honest = member("a.xml", XML)
    refused(assemble([lying(honest, crc=honest.central.crc ^ 1)]), "local header crc")
    stored = member("a.xml", XML, method=STORED)
    refused(
        assemble([replace(stored, local=replace(stored.local, method=DEFLATED))]),
        "disagree on its compression method or flags",
    )


def test_a_missing_local_header_is_refused() -> None:
    refused(assemble([member("a.xml", XML)], offsets=[5]), "no local header signature for 'a.xml'")
    refused(
        assemble([member("a.xml", XML)], offsets=[10**6]),
        "local header of 'a.xml' at offset 1,000,000 lies outside the member data",
    )


def test_a_data_descriptor_that_disagrees_is_refused() -> None:
    honest = member("a.xml", XML, flags=DATA_DESCRIPTOR)
    descriptor = struct.pack(
        "<4s3L",
        b"PK\x07\x08",
        honest.central.crc ^ 1,
        honest.central.compressed,
        honest.central.uncompressed,
    )
    local = replace(honest.local, crc=0, compressed=0, uncompressed=0)
    payload = assemble([replace(honest, local=local, body=honest.body + descriptor)])
    refused(payload, "the data descriptor of 'a.xml' does not repeat")


def test_the_entry_count_must_match_the_directory() -> None:
    two = [member("a.xml", XML), member("b.xml", XML)]
    refused(assemble(two, entries=3), "declares 3 members but the central directory holds 2")
    refused(assemble(two, entries=1), "holds more entries than the 1 its end record declares")


def test_a_central_directory_outside_the_payload_is_refused() -> None:
    refused(
        assemble([member("a.xml", XML)], directory_offset=5000),
        "does not fit before the end records",
    )


# --- methods, flags, names -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "name"), [(zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "lzma")]
)
def test_bzip2_and_lzma_members_are_refused(method: int, name: str) -> None:
    refused(
        with_zipfile(("a.xml", XML, method)),
        f"'a.xml' is compressed with {name}; only stored and deflate",
    )


def test_an_encrypted_member_is_refused() -> None:
    refused(assemble([member("a.xml", XML, flags=0x0001)]), "member 'a.xml' is encrypted")


def encrypted(name: str, method: int) -> Member:
    """A member as traditional PKWARE or WinZip AES (method 99) encryption writes it: its data
    opened by a 12-byte encryption header (zeros here: nothing decrypts it)."""
    content = b"what the password hides"
    data = bytes(12) + (deflate(content) if method == DEFLATED else content)
    header = Header(name.encode(), method, zlib.crc32(content), len(data), len(content), 0x0001)
    return Member(header, header, data)


def test_an_archive_of_files_leaves_an_encrypted_member_to_be_named() -> None:
    """A ZIP of files is unpacked member by member, and the unpacking names an encrypted one
    with its reason: refusing the archive for it would lose every other file. A package's
    parser would fail on it, so a package (every nested-following call) is still refused."""
    payload = assemble(
        [
            member("a.txt", XML),
            encrypted("stored.txt", STORED),
            encrypted("deflated.txt", DEFLATED),
            encrypted("aes.txt", 99),
        ]
    )
    inspect(payload, follow_nested=False)
    refused(payload, "member 'stored.txt' is encrypted")
    # What refuses any other member still refuses an encrypted one.
    bomb = lying(encrypted("bomb.txt", DEFLATED), uncompressed=1 << 30)
    refused(assemble([bomb]), "1,073,741,824 bytes from 37 compressed", follow_nested=False)


@pytest.mark.parametrize(
    ("first", "second", "reason"),
    [
        (member("a.xml", XML), member("a.xml", XML), "'a.xml' appears twice"),
        (
            member("word/document.xml", XML),
            member("Word/Document.XML", XML),
            "'word/document.xml' and 'Word/Document.XML' differ only in case",
        ),
        # The same name spelled in UTF-8 and in cp437 decodes to one string.
        (
            member("\u00e9.xml".encode(), XML, flags=UTF8),
            member(b"\x82.xml", XML),
            "'\u00e9.xml' appears twice",
        ),
    ],
    ids=["exact", "case-folded", "two-encodings"],
)
def test_duplicate_names_are_refused(first: Member, second: Member, reason: str) -> None:
    refused(assemble([first, second]), reason)


def test_names_zipfile_and_other_readers_would_read_differently_are_refused() -> None:
    refused(assemble([member(b"a.xml\x00.exe", XML)]), "contains a NUL byte")
    refused(assemble([member(b"\xff\xfe.xml", XML, flags=UTF8)]), "is flagged UTF-8 but is not")


# --- zip64 -----------------------------------------------------------------------------------


def test_malformed_zip64_extras_are_refused() -> None:
    honest = member("a.xml", XML)
    short = struct.pack("<HHL", 1, 4, 0)
    # zipfile reads the central entries and names the fault; the guard reads the local headers.
    refused(
        assemble([lying(honest, uncompressed=MARKER, extra=short)]),
        "zipfile refuses the central directory: Corrupt zip64 extra field",
    )
    local = replace(honest.local, uncompressed=MARKER, extra=short)
    refused(
        assemble([replace(honest, local=local)]),
        "zip64 extra field of the local header of 'a.xml' is too short",
    )
    overrun = struct.pack("<HH", 0x5455, 100) + b"xx"
    refused(
        assemble([lying(honest, extra=overrun)]),
        r"zipfile refuses the central directory: Corrupt extra field 5455 \(size=100\)",
    )
    refused(
        assemble([replace(honest, local=replace(honest.local, extra=overrun))]),
        "extra field 0x5455 of the local header of 'a.xml' claims 100 bytes",
    )
    twice = struct.pack("<HHQ", 1, 8, 5) * 2
    refused(assemble([lying(honest, extra=twice)]), "carries two zip64 extra fields")


def test_a_zip64_locator_without_its_record_is_refused() -> None:
    plain = assemble([member("a.xml", XML)])
    directory_end = len(plain) - 22
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, directory_end, 1)
    refused(plain[:-22] + locator + plain[-22:], "no zip64 end record precedes it")


def test_zip64_and_32_bit_end_records_must_agree() -> None:
    payload = assemble([member("a.xml", XML)], zip64=True)
    end = bytearray(payload[-22:])
    end[8:10] = struct.pack("<H", 7)
    end[10:12] = struct.pack("<H", 7)
    refused(
        payload[:-22] + bytes(end),
        "member count on this disk of 7 but the zip64 end record gives 1",
    )


def patched(payload: bytes, at: int, layout: str, value: int) -> bytes:
    """``payload`` with one little-endian field overwritten; ``at`` may count from the end."""
    at %= len(payload)
    field = struct.pack(layout, value)
    return payload[:at] + field + payload[at + len(field) :]


ZIP64_ARCHIVE = assemble([member("a.xml", XML)], zip64=True)
END, LOCATOR, RECORD = -22, -42, -98


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (patched(assemble([member("a.xml", XML)]), END + 4, "<H", 1), "describes a multi-disk"),
        (patched(ZIP64_ARCHIVE, END + 4, "<H", 1), "gives a disk number of 1 but the zip64"),
        (patched(ZIP64_ARCHIVE, LOCATOR + 16, "<L", 2), "zip64 locator describes a multi-disk"),
        (patched(ZIP64_ARCHIVE, RECORD + 16, "<L", 1), "zip64 end record describes a multi-disk"),
        (patched(ZIP64_ARCHIVE, RECORD + 4, "<Q", 52), "declares 52 bytes instead of 44"),
        (patched(ZIP64_ARCHIVE, LOCATOR + 8, "<Q", 7), "zip64 locator points at offset 7"),
    ],
    ids=[
        "disk",
        "disk-beside-zip64",
        "locator-disks",
        "zip64-disk",
        "extensible-data",
        "locator-offset",
    ],
)
def test_forged_end_records_are_refused(payload: bytes, reason: str) -> None:
    refused(payload, reason)


def test_a_malformed_central_directory_is_refused() -> None:
    only = member("a.xml", XML)
    one = assemble([only])
    directory_at = len(local_header(only.local)) + len(only.body)
    refused(
        patched(one, directory_at, "<L", 0),
        "zipfile refuses the central directory: Bad magic number for central directory",
    )
    refused(patched(one, directory_at + 28, "<H", 500), "central directory entry 1 is cut off")
    # Ten bytes of slack after the one entry, which the end record counts as two.
    directory_size = len(one) + END - directory_at + 10
    slack = one[:END] + bytes(10) + end_record(2, directory_size, directory_at)
    refused(slack, "zipfile refuses the central directory: Truncated central directory")


def test_entries_beyond_the_declared_count_are_refused_before_zipfile_lists_them() -> None:
    only = member("a", b"", method=STORED)
    body = local_header(only.local)
    # zipfile would build one ZipInfo for each of these, whatever the end record declares.
    directory = central_header(only.central, 0) * 100_000
    payload = body + directory + end_record(1, len(directory), len(body))
    tracemalloc.start()
    try:
        refused(payload, "holds more entries than the 1 its end record declares")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"the guard allocated {peak:,} bytes"


def test_a_name_holding_the_central_signature_is_refused() -> None:
    # The price of bounding zipfile's walk by counting signatures; no writer puts one in a name.
    refused(
        assemble([member(b"a\x50\x4b\x01\x02.xml", XML)]),
        "holds more entries than the 1 its end record declares",
    )


def test_an_end_record_hidden_in_the_comment_is_the_one_inspected() -> None:
    honest, hidden = member("word/document.xml", XML), member("evil.xml", bytes(MIB))
    body = local_header(honest.local) + honest.body
    hidden_at = len(body)
    body += local_header(hidden.local) + hidden.body
    listed = central_header(honest.central, 0)
    secret = central_header(hidden.central, hidden_at)
    secret_at = len(body) + len(listed) + 22
    tail = secret + end_record(1, len(secret), secret_at)
    payload = body + listed + end_record(1, len(listed), len(body), comment=tail)
    # zipfile takes the last end record, the one inside the comment.
    assert zipfile.ZipFile(io.BytesIO(payload)).namelist() == ["evil.xml"]
    refused(payload, r"member 'evil.xml' declares 1,048,576 bytes from [\d,]+ compressed")


def test_a_format_version_zipfile_cannot_open_is_refused() -> None:
    only = member("a.xml", XML)
    directory_at = len(local_header(only.local)) + len(only.body)
    refused(
        patched(assemble([only]), directory_at + 6, "<B", 75),
        "zipfile refuses the central directory: zip file version 7.5",
    )


def test_a_local_header_running_into_the_directory_is_refused() -> None:
    refused(patched(assemble([member("a.xml", XML)]), 28, "<H", 500), "runs into the central")


def test_a_stored_member_cannot_expand() -> None:
    stored = member("a.bin", b"x" * 100, method=STORED)
    header = replace(stored.central, uncompressed=200)
    refused(
        assemble([Member(header, header, stored.body)]),
        "stored member 'a.bin' declares 200 bytes uncompressed but 100 stored",
    )


def test_long_names_are_shortened_in_refusals() -> None:
    name = "word/" + "x" * 300
    reason = refused(assemble([member(name, XML), member(name, XML)]), "appears twice")
    assert len(reason) < 120 and "xxx...'" in reason


# --- broken input ----------------------------------------------------------------------------


def test_empty_and_garbage_payloads_are_refused() -> None:
    refused(b"", "no end-of-central-directory record")
    refused(b"%PDF-1.7\n" + bytes(range(256)) * 40, "no end-of-central-directory record")
    refused(b"PK\x05\x06\x00", "the end-of-central-directory record is cut off")


def test_truncated_archives_are_refused_at_every_cut() -> None:
    payload = small_docx()
    for cut in range(len(payload)):
        with pytest.raises(ArchiveLimitExceeded):
            inspect(payload[:cut])


def test_an_archive_missing_its_first_bytes_is_refused() -> None:
    refused(small_docx()[10:], "does not fit before the end records")


def test_a_comment_longer_than_what_follows_is_refused() -> None:
    payload = assemble([member("a.xml", XML)], comment=b"0123456789")
    lengthened = payload[:-12] + struct.pack("<H", 100) + payload[-10:]
    refused(lengthened, "the archive comment claims 100 bytes but only 10 follow")


def test_the_refusal_is_a_bridge_error_and_bad_limits_are_a_bug() -> None:
    assert issubclass(ArchiveLimitExceeded, KnowledgeBridgeError)
    for bad in ({"max_nesting_depth": 0}, {"max_expansion_ratio": float("nan")}):
        with pytest.raises(ValueError, match="must be positive"):
            inspect(small_docx(), **bad)


# --- is_zip_container ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("media_type", "payload", "expected"),
    [
        ("application/pdf", b"PK\x03\x04rest", True),
        ("application/octet-stream", b"PK\x05\x06" + bytes(18), True),
        ("image/png", b"PK\x07\x08PK\x03\x04", True),
        ("APPLICATION/ZIP; charset=binary", b"", True),
        ("application/x-zip-compressed", b"", True),
        (f" {DOCX.upper()} ;q=1", b"", True),
        ("application/vnd.oasis.opendocument.text", b"", True),
        ("application/epub+zip", b"", True),
        ("application/vnd.example+zip; v=2", b"", True),
        ("application/pdf", b"%PDF-1.7\n" + bytes(1000) + with_zipfile(), True),
        ("application/pdf", b"%PDF-1.7\n1 0 obj << >> endobj\n%%EOF\n", False),
        # A chance signature inside compressed data is not an end record reaching the end.
        ("application/pdf", b"%PDF-1.7\nstream PK\x05\x06" + bytes(40) + b"endstream\n", False),
        ("text/plain", b"hello", False),
        ("application/zipper", b"", False),
        # Beyond zipfile's search window the end record is not found by anyone.
        ("application/pdf", b"%PDF" + with_zipfile() + bytes(70_000), False),
    ],
)
def test_is_zip_container(media_type: str, payload: bytes, expected: bool) -> None:
    assert is_zip_container(media_type, payload) is expected


# --- fuzz ------------------------------------------------------------------------------------


SEEDS = [
    small_docx(),
    streamed(force_zip64=True),
    assemble([member("a.xml", XML), member("b.bin", b"\x00" * 50, method=STORED)], zip64=True),
    with_zipfile(("inner.png", with_zipfile(("x.xml", XML, DEFLATED)), STORED)),
]
FIELD_VALUES = st.sampled_from(
    [
        b"\x00\x00",
        b"\xff\xff",
        b"\x00\x00\x00\x00",
        b"\xff\xff\xff\xff",
        b"PK\x05\x06",
        b"PK\x03\x04",
        b"PK\x01\x02",
        b"PK\x06\x07",
        b"PK\x06\x06",
        b"\x01\x00\x10\x00",
    ]
)
FUZZ = settings(
    max_examples=400,
    deadline=timedelta(seconds=1),
    suppress_health_check=[HealthCheck.too_slow],
)


def decided(payload: bytes) -> None:
    """Only a pass or an ArchiveLimitExceeded may come out; anything else fails the test."""
    with contextlib.suppress(ArchiveLimitExceeded):
        inspect(payload, max_nesting_depth=2)


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_only_ever_raise_the_refusal(payload: bytes) -> None:
    decided(payload)
    decided(payload + end_record(1, 46, 0))


@FUZZ
@given(
    st.sampled_from(SEEDS),
    st.lists(
        st.tuples(st.integers(min_value=0), st.binary(min_size=1, max_size=4) | FIELD_VALUES),
        max_size=6,
    ),
    st.integers(min_value=0),
)
def test_mutated_archives_only_ever_raise_the_refusal(
    seed: bytes, patches: list[tuple[int, bytes]], cut: int
) -> None:
    mutated = bytearray(seed)
    for position, replacement in patches:
        at = position % len(mutated)
        mutated[at : at + len(replacement)] = replacement
    decided(bytes(mutated))
    decided(bytes(mutated[: cut % (len(mutated) + 1)]))
