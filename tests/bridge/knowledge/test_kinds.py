"""What a file is declared as when only its name, the media type it came with and its bytes are
known: by suffix, by media type, then by bytes (a signature, a ZIP's members, a message's
header)."""

from __future__ import annotations

import struct
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from bridge.knowledge.kinds import BINARY, guess_kind
from tests.bridge.knowledge.test_archive import (
    MARKER,
    central_header,
    end_record,
    local_header,
    member,
    zip64_end_records,
)
from tests.helpers import zipped

DOCX = ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
XLSX = ("spreadsheet", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
PPTX = ("presentation", "application/vnd.openxmlformats-officedocument.presentationml.presentation")
ODT = ("odt", "application/vnd.oasis.opendocument.text")
ODS = ("spreadsheet", "application/vnd.oasis.opendocument.spreadsheet")
ODP = ("presentation", "application/vnd.oasis.opendocument.presentation")
EPUB = ("epub", "application/epub+zip")
ARCHIVE = ("archive", "application/zip")
EMAIL = ("email", "message/rfc822")
TEXT = ("text", "text/plain")
PDF = ("pdf", "application/pdf")


@pytest.mark.parametrize(
    ("name", "head", "declared"),
    [
        ("Report.PDF", b"", PDF),
        ("scan.tiff", b"", ("image", "image/tiff")),
        ("letter.docx", b"", DOCX),
        ("blob", b"%PDF-1.7\n", PDF),
        ("blob", b"\x89PNG\r\n\x1a\n\x00\x00", ("image", "image/png")),
        ("blob", b"RIFF\x10\x00\x00\x00WEBPVP8 ", ("image", "image/webp")),
        # A ZIP whose directory cannot be listed is an archive: the archive guard names why.
        ("blob", b"PK\x03\x04\x14\x00", ARCHIVE),
        ("notes", b"plain words", TEXT),
        ("notes", b"\xff\xfeh\x00i\x00", TEXT),  # UTF-16 with its mark
        ("tool.exe", b"MZ\x90\x00\x03\x00", BINARY),  # NUL bytes and no mark: not text
    ],
)
def test_guess_kind(name: str, head: bytes, declared: tuple[str, str]) -> None:
    assert guess_kind(name, head) == declared


@pytest.mark.parametrize(
    ("file", "declared"),
    [
        ("docling_word_sample.docx", DOCX),
        ("xlsx2csv_utf8.xlsx", XLSX),
        ("pango_hello-slides.pptx", PPTX),
        ("tika_testOpenOffice2.odt", ODT),
        ("tika_test-columnar-odf.ods", ODS),
        ("tika_LibreOfficeImpress_odp_1.3.odp", ODP),
        ("bitextual_bovary-english-epub3.epub", EPUB),
        # Its "mimetype" member is deflated, against the EPUB rules: its container says.
        ("tika_testEPUB.epub", EPUB),
        ("tika_test-documents.zip", ARCHIVE),
    ],
)
def test_a_package_without_a_name_is_told_by_its_members(
    corpus_dir: Path, file: str, declared: tuple[str, str]
) -> None:
    """Standard input and a body sent without a file name: every ZIP was declared a DOCX, and
    an EPUB or an archive was refused as a DOCX without [Content_Types].xml."""
    assert guess_kind("stdin", (corpus_dir / file).read_bytes()) == declared


def test_a_stored_media_type_decides_over_members_and_templates_count() -> None:
    """An OpenDocument file carrying Office parts is the OpenDocument file LibreOffice shows."""
    both = zipped(
        {"mimetype": b"application/vnd.oasis.opendocument.text", "word/document.xml": b""},
        zipfile.ZIP_STORED,
    )
    assert guess_kind("upload", both) == ODT
    template = zipped(
        {"mimetype": b"application/vnd.oasis.opendocument.spreadsheet-template"}, zipfile.ZIP_STORED
    )
    assert guess_kind("upload", template) == ODS


def test_a_word_online_document_is_a_docx() -> None:
    """Word Online names the main part word/document2.xml: the package's folder says it is a
    DOCX (it was declared an archive, and its XML parts read as text)."""
    online = zipped(
        {"[Content_Types].xml": b"<Types/>", "word/document2.xml": b"<w:document/>"},
        zipfile.ZIP_STORED,
    )
    assert guess_kind("upload", online) == DOCX
    assert guess_kind("report.pdf", online) == PDF


def test_a_member_offset_seek_cannot_take_is_an_archive_not_an_error() -> None:
    """A zip64 offset of 2**63 made zipfile's seek raise OverflowError, on the trusted side
    before the archive guard: untyped, and every file beside it in an archive was lost."""
    name, data = b"mimetype", b"application/epub+zip"
    crc = zlib.crc32(data)
    local = struct.pack(
        "<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(name), 0
    )
    zip64 = struct.pack("<2HQ", 1, 8, 2**63)
    central = struct.pack(
        "<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, crc, len(data), len(data),
        len(name), len(zip64), 0, 0, 0, 0, 0xFFFFFFFF,
    ) + name + zip64  # fmt: skip
    start = len(local) + len(name) + len(data)
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 1, 1, len(central), start, 0)
    assert guess_kind("upload", local + name + data + central + end) == ARCHIVE


def test_a_mimetype_member_is_read_only_when_short_and_readable() -> None:
    long_type = zipped(
        {"mimetype": b"application/epub+zip" + b" " * 200, "a.txt": b"x"}, zipfile.ZIP_STORED
    )
    assert guess_kind("upload", long_type) == ARCHIVE
    # Encrypted: zipfile would raise RuntimeError, which no caller expects from a guess.
    encrypted = bytearray(zipped({"mimetype": b"application/epub+zip"}, zipfile.ZIP_STORED))
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = encrypted.find(signature)
        encrypted[at + flags_at] |= 0x1
    assert guess_kind("upload", bytes(encrypted)) == ARCHIVE
    # Deflate data that does not inflate: zlib.error, also not the guess's to raise.
    broken = bytearray(zipped({"mimetype": b"application/epub+zip" * 3}, zipfile.ZIP_DEFLATED))
    data_at = broken.find(b"mimetype") + len(b"mimetype")
    broken[data_at : data_at + 4] = b"\xff\xff\xff\xff"
    assert guess_kind("upload", bytes(broken)) == ARCHIVE


def test_a_bundle_saved_under_another_name_is_an_archive_and_a_misnamed_package_is_not(
    corpus_dir: Path,
) -> None:
    """A ZIP of files named .pdf was refused for the ZIP files it holds ("nesting depth 2")
    instead of being read; a DOCX named .pdf keeps its name's kind, and the sandbox reads it
    as a DOCX and says it was declared a PDF."""
    bundle = zipped({"a.txt": b"first", "b.txt": b"second"}, zipfile.ZIP_STORED)
    assert guess_kind("bundle.pdf", bundle) == ARCHIVE
    assert guess_kind("notes.txt", bundle) == ARCHIVE
    docx = (corpus_dir / "docling_word_sample.docx").read_bytes()
    assert guess_kind("report.pdf", docx) == PDF


def test_the_media_type_decides_when_the_name_does_not() -> None:
    """Tika's clients send only a Content-Type; a name's suffix still comes first."""
    assert guess_kind("upload", b"PK\x03\x04", "application/epub+zip") == EPUB
    assert guess_kind("upload", b"From: a@example.com\n", "application/PDF; charset=binary") == PDF
    assert guess_kind("upload", b"", "application/octet-stream") == TEXT
    assert guess_kind("letter.docx", b"", "application/pdf") == DOCX


@pytest.mark.parametrize(
    ("head", "declared"),
    [
        (
            b"From: Ann <ann@example.com>\r\nTo: bo@example.com\r\nSubject: hi\r\n"
            b"Message-ID: <1@example.com>\r\n\r\nbody\r\n",
            EMAIL,
        ),
        (
            b"Received: from mx (mx [10.0.0.1])\n\tby example.com; Wed, 17 May 2000\n"
            b"X-Spam: no\nMessage-ID: <1@x>\n\nbody\n",
            EMAIL,
        ),
        # One mail field is a note, not a message; prose before the blank line is not a header.
        (b"Subject: groceries\n\nmilk\n", TEXT),
        (b"From: me\nTo: you\nthis line is prose\n\n", TEXT),
        (b"Dear Ann,\nFrom: me\nTo: you\n", TEXT),
        (b"From: me\nTo: you", TEXT),  # no whole line: the header may be cut off anywhere
        # Minutes, a note: fields people write too, and none only mail transport writes.
        (b"Date: 3 May\nSubject: budget\nAttendees: Ann\n\nWe met.\n", TEXT),
        (b"From: Ann <ann@example.com>\nTo: bo@example.com\nSubject: hi\n\nbody\n", TEXT),
    ],
)
def test_a_message_without_a_name_is_told_by_its_header(
    head: bytes, declared: tuple[str, str]
) -> None:
    """An e-mail on standard input was read as text: every header and the base64 of its
    attachments went to the model, the attachments unread."""
    assert guess_kind("stdin", head) == declared


def _many_entries(entries: int) -> bytes:
    """A ZIP whose central directory lists one empty word/document.xml ``entries`` times."""
    only = member("word/document.xml", b"", method=zipfile.ZIP_STORED)
    body = local_header(only.local)
    directory = central_header(only.central, 0) * entries
    if entries < 0xFFFF:
        return body + directory + end_record(entries, len(directory), len(body))
    tail = zip64_end_records(entries, len(directory), len(body))
    return body + directory + tail + end_record(0xFFFF, MARKER, MARKER)


def test_a_zip_listing_more_entries_than_any_package_is_an_archive_without_listing() -> None:
    """zipfile builds an object per central directory entry, and the guess listed a nameless
    ZIP before the archive guard's member ceiling could refuse it: 56 MB and 0.8 CPU-s for
    178,000 entries within the 8 MiB byte ceiling. Entries are counted first; past the most
    a ZIP lists without zip64 records, it is an archive, for the guard to refuse."""
    payload = _many_entries(100_000)
    tracemalloc.start()
    try:
        declared = guess_kind("blob", payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"the guess allocated {peak:,} bytes"
    assert declared == ARCHIVE
    # Up to that count the members still decide, as they do for every real package.
    assert guess_kind("blob", _many_entries(0xFFFF)) == DOCX
