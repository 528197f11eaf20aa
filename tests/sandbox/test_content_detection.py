"""An upload is read as the kind its bytes are, whatever it was declared as, and says so; a
format airlock does not read is refused by name. Through the real sandbox, on corpus files."""

from __future__ import annotations

import gzip
import io
import zipfile
from collections.abc import Iterator

import docx as python_docx
import pytest

from sandbox import quality, sniff
from sandbox.errors import OcrRequired, UnreadableInput
from sandbox.limits import ParseLimits
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.sandbox.docx_builders import plain_zip

OCR = ParseLimits(ocr=True)
PDF = "docling_multi_page.pdf"
DOCX = "docling_word_sample.docx"
TIFF = "tesseract_phototest.tif"
SCAN = "docling_ocr_test-scanned.pdf"
MEDIA_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "image": "image/png",
    "text": "text/plain",
}


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner() as sandbox:
        yield sandbox


def _read(runner: SandboxRunner, kind: str, payload: bytes, limits: ParseLimits = OCR) -> str:
    return runner.run(kind, MEDIA_TYPES[kind], payload, limits).text


@pytest.mark.parametrize(
    ("name", "kind", "declared", "what"),
    [
        (PDF, "pdf", "docx", "a PDF"),
        (PDF, "pdf", "text", "a PDF"),
        (PDF, "pdf", "image", "a PDF"),
        (DOCX, "docx", "pdf", "a DOCX package"),
        (DOCX, "docx", "text", "a DOCX package"),
        (TIFF, "image", "text", "a TIFF image"),
        (TIFF, "image", "pdf", "a TIFF image"),
    ],
)
def test_an_upload_declared_as_another_kind_is_read_as_what_it_is_and_says_so(
    runner: SandboxRunner, name: str, kind: str, declared: str, what: str
) -> None:
    payload = (CORPUS_DIR / name).read_bytes()
    as_declared = _read(runner, declared, payload)
    nouns = {"pdf": "a PDF", "docx": "a DOCX package", "image": "an image", "text": "text"}
    notice = f"[airlock: declared as {nouns[declared]}, read as {what}]"
    assert as_declared == f"{notice}\n{_read(runner, kind, payload)}"


def test_a_scan_declared_as_text_needs_ocr_as_a_pdf_does_and_is_read_whole(
    runner: SandboxRunner,
) -> None:
    """The light stage hands it on to OCR like any scan; read there, in one child (only a job
    declared a PDF is split into pages by its caller), as the PDF reads with fan-out off."""
    payload = (CORPUS_DIR / SCAN).read_bytes()
    with pytest.raises(OcrRequired):
        _read(runner, "text", payload, ParseLimits(ocr=False))
    whole = ParseLimits(ocr=True, fan_out_pages=0)
    expected = f"[airlock: declared as text, read as a PDF]\n{_read(runner, 'pdf', payload, whole)}"
    assert _read(runner, "text", payload, ParseLimits(ocr=True, fan_out_pages=1)) == expected


def _ole2() -> bytes:
    """The header of a compound file, as a Word 97-2003 document begins."""
    return b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)


def _zip_of_text() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("minutes.txt", "the minutes")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("payload", "name"),
    [
        (
            _ole2(),
            "an OLE2 compound file (a Word 97-2003 .doc or an Outlook .msg; an Outlook .msg is "
            "read when declared as e-mail, an Excel .xls when declared a spreadsheet)",
        ),
        (b"\x7fELF\x02\x01\x01" + bytes(200), "an ELF executable"),
        (gzip.compress(b"text inside"), "a gzip stream"),
        (b"7z\xbc\xaf\x27\x1c" + bytes(30), "a 7-Zip archive"),
        (b"Rar!\x1a\x07\x01\x00" + bytes(30), "a RAR archive"),
        (b"PK\x03\x04 cut short", "a damaged ZIP archive"),
    ],
)
@pytest.mark.parametrize("declared", ["pdf", "image", "text"])
def test_a_format_airlock_does_not_read_is_refused_by_its_name(
    runner: SandboxRunner, payload: bytes, name: str, declared: str
) -> None:
    nouns = {"pdf": "a PDF", "image": "an image", "text": "text"}
    with pytest.raises(UnreadableInput) as refused:
        _read(runner, declared, payload)
    reason = (
        f"the payload is {name}, a format airlock does not read, not {nouns[declared]}; "
        f"airlock reads {sniff.SUPPORTED}"
    )
    assert str(refused.value) == reason


@pytest.mark.parametrize("declared", ["pdf", "image", "text"])
def test_a_zip_declared_as_another_kind_is_refused_with_how_to_read_it(
    runner: SandboxRunner, declared: str
) -> None:
    """A ZIP named .txt: its files are read apart only when it is declared an archive, which
    the refusal says (the child that was handed it cannot unpack it for the trusted side)."""
    nouns = {"pdf": "a PDF", "image": "an image", "text": "text"}
    with pytest.raises(UnreadableInput) as refused:
        _read(runner, declared, _zip_of_text())
    assert str(refused.value) == (
        f"the payload is a ZIP archive, not {nouns[declared]}; declare it as an archive (kind "
        "'archive', a .zip name) to read each of its files"
    )


def test_a_zip_whose_directory_zipfile_cannot_list_is_named_damaged_not_a_parser_error(
    runner: SandboxRunner,
) -> None:
    """A central directory asking for ZIP version 15.1 makes zipfile raise NotImplementedError."""
    payload = bytearray(_zip_of_text())
    directory = payload.index(b"PK\x01\x02")
    payload[directory + 6] = 151  # "version needed to extract"
    with pytest.raises(UnreadableInput, match="the payload is a damaged ZIP archive"):
        _read(runner, "text", bytes(payload))


def test_the_quality_flag_stays_the_first_line_above_the_notice(runner: SandboxRunner) -> None:
    """A misdeclared upload whose text is unreadable, admitted: whoever reads it sees the
    warning first, then what it was read as."""
    document = python_docx.Document()
    document.add_paragraph("\ufffd" * 200)
    buffer = io.BytesIO()
    document.save(buffer)
    text = _read(runner, "pdf", buffer.getvalue(), ParseLimits(admit_unreadable=True))
    first, second, *_ = text.split("\n")
    assert first.startswith(quality.FLAG_PREFIX)
    assert second == "[airlock: declared as a PDF, read as a DOCX package]"


def test_a_zip_declared_as_docx_is_left_to_the_docx_reader_which_names_it(
    runner: SandboxRunner,
) -> None:
    with pytest.raises(UnreadableInput, match="the payload is a ZIP archive, not a DOCX package"):
        _read(runner, "docx", plain_zip())


@pytest.mark.parametrize(
    "text",
    [
        "BMW and BMX are brands.\n",  # "BM" without a bitmap header's size
        "PK is the abbreviation; a ZIP starts with PK and two bytes.\n",
        "The header of a PDF file is %PDF-1.7 followed by a comment.\n",
        "%PDF-1.7 is the version this text is about, and it names no object.\n",
        "GIF89a is the format's last version.\n",
        "BZh, said the bee.\n",
        "GIF8 is not enough.\n",
    ],
)
def test_text_that_merely_begins_like_a_signature_stays_text(
    runner: SandboxRunner, text: str
) -> None:
    assert _read(runner, "text", text.encode()) == text


def test_the_pages_kinds_are_never_sniffed() -> None:
    """The split, page and merge children read what their kind says; a page's PDF declared
    as a PDF is what it is, and the merge's JSON is nobody's upload."""
    limits = ParseLimits()
    for kind in ("pdf-split", "pdf-page", "pdf-merge"):
        assert sniff.reading(kind, "", b"\x89PNG\r\n\x1a\n", limits) == sniff.Reading(kind, limits)
