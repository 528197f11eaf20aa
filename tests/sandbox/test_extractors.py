"""The extractors, called in-process: real documents scored by CER, hostile files refused.

Isolation (rlimits, namespaces, seccomp, Landlock) is the runner's and is tested there; these
tests show what each parser does with the bytes it is given. Every hostile file must end in a
``Refusal`` or an exception within its timeout, never a hang, and the bombs within bounded
memory. OCR is slow on two shared cores, so every corpus document is extracted once per session
and the hostile image tests refuse before tesseract runs wherever that is the point.
"""

from __future__ import annotations

import codecs
import functools
import io
import json
import random
import re
import resource
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import docx as python_docx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import EpsImagePlugin, Image, UnidentifiedImageError
from pypdf import PdfReader, PdfWriter
from pypdf.errors import PdfReadError

from sandbox import protocol
from sandbox.document import Document, ListItem
from sandbox.extractors import all as everything
from sandbox.extractors import docx as docx_extractor
from sandbox.extractors import image as image_extractor
from sandbox.extractors import ocr
from sandbox.extractors import pdf as pdf_extractor
from sandbox.extractors import text as text_extractor
from sandbox.extractors.image import decoded_frames
from sandbox.extractors.registry import Refusal, lookup
from sandbox.limits import ParseLimits
from tests.cer import cer, levenshtein, normalise
from tests.conftest import CORPUS_DIR
from tests.helpers import least_cpu_seconds
from tests.image_builders import (
    apng_with_sequence_errors,
    bmp_rle8,
    bmp_rle8_short,
    distinct_frames,
    encoded,
    jpeg2000,
    photo,
    png,
    tiff_with_looping_ifds,
)
from tests.in_process import rendered_by, words_of
from tests.mojibake import real_samples
from tests.pdf_builders import (
    CATALOG,
    FONT,
    ONE_PAGE,
    TEXT_CONTENT,
    flate_bomb,
    page,
    pdf,
    pdf_with_brotli_image,
    pdf_with_image,
    pdf_with_jbig2_image,
    pdf_with_jpx_image,
    pdf_with_truncated_jpeg_image,
    scan,
    stream,
)
from tests.sandbox.docx_builders import (
    WORD_NAMESPACE,
    document_xml,
    docx_with,
    odt,
    plain_zip,
    template_docx,
)

extract_docx = words_of(docx_extractor.extract_docx)
extract_image = words_of(image_extractor.extract_image)
extract_pdf = words_of(pdf_extractor.extract_pdf)
extract_text = words_of(text_extractor.extract_text)

LIMITS = ParseLimits()
KIND_OF_CATEGORY = {
    "pdf-text": "pdf",
    "pdf-form": "pdf",
    "pdf-scanned": "pdf",
    "docx": "docx",
    "image": "image",
}

# CER ceilings per corpus category, set with a margin above what this code measured (pypdf 7.1,
# python-docx 1.2, tesseract 5.3 eng, --psm 3):
#   pdf-text  max 0.136 (Korean report: docling's GT reorders footnotes and table cells)
#   pdf-scanned 0.000 both, the 90-degree-rotated page included (/Rotate over an upright scan)
#   docx      max 0.177 (numbered headings: the GT has outline numbers Word computes at render
#             time, which are not in the text runs)
#   image     max 0.078 (UNLV magazine page: column zoning), the rotated phototest PNG 0.000
#             (tesseract's layout analysis reads 90-degree text without OSD)
CER_CEILING = {"pdf-text": 0.20, "pdf-scanned": 0.05, "docx": 0.25, "image": 0.12}
# Files whose measured CER is above their category's ceiling for a known, accepted reason.
CER_EXCEPTIONS = {
    # 0.637: headers and footers are extracted on purpose, each under a marker line such as
    # "[first-page header]"; docling's GT leaves them out.
    "docling_docx_page_header_footer_first_page.docx": 0.70,
    # 0.538: pypdf emits the Arabic word twice around the Latin one (a 13-character GT).
    "pypdf-samples_habibi-arabic.pdf": 0.60,
}
# 0.826: vertical CID fonts without a usable ToUnicode map; pypdf outputs glyph codes (0.997),
# so the page is PDFium's text read column by column; the poem's two blocks of columns still
# interleave (pdftotext 0.830, pypdfium2 0.865). Strict, so a reader that separates the blocks
# makes this test fail and the list be updated.
CER_KNOWN_FAILURES = {"pdfminer_jo-japanese.pdf"}
# SOURCES.md: the Japanese reference uses full-width brackets where the PDF has vertical
# presentation forms; compare after NFKC.
NFKC_SCORED = {"pdfminer_jo-japanese.pdf"}


def _manifest() -> list[dict[str, object]]:
    return list(json.loads((CORPUS_DIR / "manifest.json").read_text())["documents"])


def _expected_file(document: dict[str, object]) -> str | None:
    truths = document["ground_truth"]
    assert isinstance(truths, list)
    for truth in truths:
        if truth["role"] == "expected" and truth["file"].endswith(".txt"):
            return str(truth["file"])
    return None


SCORED = [
    pytest.param(
        document["file"],
        document["category"],
        _expected_file(document),
        id=str(document["file"]),
        marks=[pytest.mark.xfail(strict=True, reason="blocks of vertical columns interleave")]
        if document["file"] in CER_KNOWN_FAILURES
        else [],
    )
    for document in _manifest()
    if _expected_file(document)
]
UNSCORED = [
    pytest.param(document["file"], document["category"], id=str(document["file"]))
    for document in _manifest()
    if not _expected_file(document)
]


@pytest.fixture(scope="session")
def extracted(corpus_dir: Path) -> Callable[[str, str], str]:
    """Extract each corpus document at most once per session (OCR is the slow part)."""

    @functools.cache
    def extract(name: str, category: str) -> str:
        function = lookup(KIND_OF_CATEGORY[category])
        assert function is not None
        read = rendered_by(function)
        return read("application/octet-stream", (corpus_dir / name).read_bytes(), LIMITS)

    return extract


# --- the corpus -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "category", "expected"), SCORED)
def test_corpus_cer_under_category_ceiling(
    name: str, category: str, expected: str, corpus_dir: Path, extracted: Callable[[str, str], str]
) -> None:
    form = "NFKC" if name in NFKC_SCORED else "NFC"
    measured = cer((corpus_dir / expected).read_text(), extracted(name, category), form)
    ceiling = CER_EXCEPTIONS.get(name, CER_CEILING[category])
    assert measured <= ceiling, f"{name}: CER {measured:.3f} above {ceiling}"


@pytest.mark.parametrize(("name", "category"), UNSCORED)
def test_corpus_documents_without_ground_truth_yield_text(
    name: str, category: str, extracted: Callable[[str, str], str]
) -> None:
    assert extracted(name, category).strip()


PDFS = [
    pytest.param(document["file"], document["category"], id=str(document["file"]))
    for document in _manifest()
    if KIND_OF_CATEGORY[str(document["category"])] == "pdf"
]


@pytest.mark.parametrize(("name", "category"), PDFS)
def test_every_corpus_pdf_page_opens_with_its_marker(
    name: str, category: str, corpus_dir: Path, extracted: Callable[[str, str], str]
) -> None:
    """Page n of the file is the text under ``[page n]``, in order, none missing or repeated,
    each after a blank line: a citation can name the page a sentence is on."""
    text = extracted(name, category)
    count = len(PdfReader(corpus_dir / name).pages)
    markers = re.findall(r"^\[page (\d+)\]$", text, re.MULTILINE)
    assert markers == [str(number) for number in range(1, count + 1)]
    assert text.startswith("[page 1]\n")
    assert text.count("\n\n[page ") == count - 1


def test_pdf_page_markers_stand_between_the_pages_text(
    extracted: Callable[[str, str], str],
) -> None:
    pages = re.split(r"\n\n\[page \d+\]\n", extracted("docling_multi_page.pdf", "pdf-text"))
    assert len(pages) == 5
    assert pages[0].startswith("[page 1]\nThe Evolution of the Word Processor")
    assert all(page.strip() for page in pages)


def test_docx_reads_text_boxes_tables_and_notes_in_order(
    extracted: Callable[[str, str], str],
) -> None:
    textbox = extracted("docling_textbox.docx", "docx")
    assert "Student falls ill" in textbox and "Case closed." in textbox
    assert textbox.count("Student falls ill") == 1  # mc:Fallback does not repeat the box
    notes = extracted("pandoc_notes-footnote-endnote.docx", "docx")
    assert notes.splitlines() == [
        "## A footnote",
        "Test footnote.[1] Test endnote.[2]",
        "[1] My note.",
        "[2] This is an endnote at the end of the document.",
    ]
    sample = extracted("docling_word_sample.docx", "docx")
    row = "| Leaves | Ash, Elm, Maple | 50 |"
    assert sample.index("Here are some interesting things") < sample.index(row)
    assert sample.index(row) < sample.index("And let’s add another list")


def test_docx_merged_cells(extracted: Callable[[str, str], str]) -> None:
    lines = extracted("docling_word_tables.docx", "docx").splitlines()
    # A horizontal span: its text once, an empty cell under each further column it spans.
    assert "| Cell 1.0 | Merged Cell 1.1 1.2 |  | Cell 1.3 |" in lines
    assert lines.count("| Cell 2.0 | Merged Cell 1.1 2.1 | Cell 2.2 |") == 1  # vertical: repeated
    assert "|  |  | Merged Cell 0.2 1.2 |" in lines  # a row starting late keeps its column
    merged = extracted("python-docx_tbl-cell-access-merged.docx", "docx").splitlines()
    assert merged[:4] == ["| 1 | 2 | 3 |", "| --- | --- | --- |", "| 4 | 5 | 6 |", "| 7 | 8 | 9 |"]
    assert "| 4 |  | 6 |" in merged


def test_docx_headers_and_footers_once_each(extracted: Callable[[str, str], str]) -> None:
    sections = extracted("python-docx_hdr-header-footer.docx", "docx")
    assert sections.count("Header for section-1") == 1
    assert sections.count("Footer for section 1") == 1
    odd_even = extracted("python-docx_doc-odd-even-hdrs.docx", "docx").splitlines()
    assert odd_even[:4] == [
        "[header]",
        "Odd page header.",
        "[even-page header]",
        "Even page header.",
    ]


def test_docx_headers_open_and_footers_close_the_text_each_under_a_marker(
    extracted: Callable[[str, str], str],
) -> None:
    lines = extracted("docling_docx_page_header_footer_first_page.docx", "docx").splitlines()
    assert lines[:5] == [
        "[first-page header]",
        "FIRST PAGE HEADER (page 1 only)",
        "[header]",
        "REGULAR HEADER (page 2 onward)",
        "# Page header/footer regression fixture",
    ]
    assert lines[-5:] == [
        "This is body text on page 2.",
        "[first-page footer]",
        "FIRST PAGE FOOTER (page 1 only)",
        "[footer]",
        "REGULAR FOOTER (page 2 onward)",
    ]


def test_docx_list_numbers_and_bullets_as_the_reader_sees_them(
    extracted: Callable[[str, str], str],
) -> None:
    sample = extracted("docling_word_sample.docx", "docx")
    assert "1. Wear sunglasses\n2. Don’t forget to drink water\n3. Use sun cream\n" in sample
    assert "• You can relax and look around\n• Paddle about\n" in sample
    lists = extracted("docling_docx_lists.docx", "docx")
    # Nested bullets: the Symbol font's private-use bullet and Courier New's "o" as drawn.
    assert "• List item 1\n• List item 2\n  ◦ List item 1.1\n  ◦ List item 1.2\n" in lists
    assert "  ◦ List item 1.1\n    ▪ List item 1.1.1\n• List item 3" in lists
    # Two instances of one definition continue each other; an instance of its own restarts.
    assert "4. Fourth item with numId 2\n1. Single item of a new list\n1. Single" in lists
    # Numbering that comes from the paragraph style (List Bullet), with a level from numPr.
    assert "• Third item\n  – Sub-item A\n  – Sub-item B\n• Fourth item" in lists
    # Multi-level "%1.%2" templates, with unnumbered body paragraphs between the items.
    assert "  1.2 Greenhouse Shelves" in lists and "  2.2 Kitchen Tasks\n3. WORKSHOP" in lists


def test_docx_heading_numbers_from_styles_and_skipped_levels(
    extracted: Callable[[str, str], str],
) -> None:
    lines = extracted("docling_unit_test_headers_numbered.docx", "docx").splitlines()
    # Heading 1 numbered by its numPr, Heading 2 and 3 by their styles' numPr: headings at
    # their style's level (the Title a level 1), showing their numbers.
    headings = ["# Test Document", "# 1. Section 1", "## 1.1. Section 1.1", "# 2. Section 2"]
    assert [lines.index(heading) for heading in headings] == [0, 1, 4, 13]
    # A level skipped on the way down shows its start value and counts as used.
    assert lines.index("### 2.1.1. Section 2.1.1") + 3 == lines.index("## 2.2. Section 2.1")
    # Start values of 2 and 3 on the shallower levels of another list: "2.3.1.".
    assert "    2.3.1. Hardware Constraints – Egde Case" in lines
    assert "      2.3.8.3. Third sub-item at this level" in lines
    assert "## REFERENCES" in lines  # numFmt "none": a numbered heading with nothing drawn


# --- the CER helper -------------------------------------------------------------------------


def _reference_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


@given(st.text(alphabet="abc ", max_size=14), st.text(alphabet="abc ", max_size=14))
def test_levenshtein_matches_the_textbook_table(a: str, b: str) -> None:
    assert levenshtein(a, b) == _reference_distance(a, b)


def test_normalise_strips_markdown_as_sources_md_says() -> None:
    markdown = "## Title\n\n| a | b |\n| - | - |\n| **c** | d\\_e |\n<!-- image -->\n"
    assert normalise(markdown) == "Title a b c d_e"


# --- hostile PDFs -----------------------------------------------------------------------------


def _traced_peak(function: Callable[[], object]) -> tuple[BaseException | None, int]:
    """Run ``function``; return what it raised and the peak of Python allocations meanwhile."""
    tracemalloc.start()
    try:
        function()
    except Exception as exc:
        raised: BaseException | None = exc
    else:
        raised = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, peak


def test_pdf_text_layer() -> None:
    payload = pdf([CATALOG, ONE_PAGE, page(), TEXT_CONTENT, FONT])
    assert extract_pdf("application/pdf", payload, LIMITS) == "Hello"


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_pdf_flate_bomb_is_refused_in_bounded_memory() -> None:
    bomb = stream(flate_bomb(), b"/Filter /FlateDecode ")
    payload = pdf([CATALOG, ONE_PAGE, page(), bomb, FONT])
    raised, peak = _traced_peak(lambda: extract_pdf("application/pdf", payload, LIMITS))
    assert isinstance(raised, Refusal) and raised.code == "ceiling", raised
    assert "decompressing" in raised.reason
    # pypdf stops inflating at 75 MB; the peak (~150 MiB) is that buffer and its copy.
    assert peak < 300 * 2**20


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "pages_objects",
    [
        pytest.param([b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>"], id="kid-is-root"),
        pytest.param(
            [ONE_PAGE, b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>"],
            id="two-node-cycle",
        ),
    ],
)
def test_pdf_cyclic_page_tree_raises(pages_objects: list[bytes]) -> None:
    payload = pdf([CATALOG, *pages_objects, TEXT_CONTENT, FONT])
    with pytest.raises(PdfReadError, match="cyclic"):
        extract_pdf("application/pdf", payload, LIMITS)


@pytest.mark.timeout(60)
def test_pdf_xref_chain_pointing_to_itself_ends() -> None:
    payload = pdf(
        [CATALOG, ONE_PAGE, page(), TEXT_CONTENT, FONT], trailer=lambda xref: b"/Prev %d " % xref
    )
    assert extract_pdf("application/pdf", payload, LIMITS) == "Hello"


@pytest.mark.timeout(60)
def test_pdf_stream_length_referring_to_itself_is_refused() -> None:
    looping = b"<< /Length 4 0 R >>\nstream\nBT ET\nendstream"
    payload = pdf([CATALOG, ONE_PAGE, page(), looping, FONT])
    with pytest.raises(Refusal, match="loop"):
        extract_pdf("application/pdf", payload, LIMITS)


@pytest.mark.timeout(60)
def test_pdf_claiming_ten_million_pages_is_refused_before_flattening() -> None:
    pages = b"<< /Type /Pages /Kids [3 0 R] /Count 10000000 >>"
    payload = pdf([CATALOG, pages, page(), TEXT_CONTENT, FONT])
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", payload, LIMITS)
    assert (refused.value.code, refused.value.reason) == (
        "ceiling",
        "10000000 pages exceeds the 20-page ceiling",
    )


@pytest.mark.timeout(60)
def test_pdf_with_more_pages_than_its_count_is_refused_whole() -> None:
    pages = b"<< /Type /Pages /Kids [%s] /Count 1 >>" % b" ".join([b"3 0 R"] * 312)
    payload = pdf([CATALOG, pages, page(), TEXT_CONTENT, FONT])
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", payload, LIMITS)
    assert refused.value.reason == "312 pages exceeds the 20-page ceiling"


def _encrypted_pdf(user_password: str) -> bytes:
    writer = PdfWriter(clone_from=io.BytesIO(pdf([CATALOG, ONE_PAGE, page(), TEXT_CONTENT, FONT])))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def test_pdf_encrypted_with_a_password_is_unreadable() -> None:
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", _encrypted_pdf("secret"), LIMITS)
    assert (refused.value.code, refused.value.reason) == (
        "unreadable",
        "the PDF is encrypted and does not open with an empty password",
    )


def test_pdf_encrypted_with_an_empty_password_opens() -> None:
    assert extract_pdf("application/pdf", _encrypted_pdf(""), LIMITS) == "Hello"


def test_pdf_without_a_header_is_unreadable() -> None:
    with pytest.raises(Refusal, match="not a PDF") as refused:
        extract_pdf("application/pdf", b"GIF89a" + bytes(100), LIMITS)
    assert refused.value.code == "unreadable"


def test_pdf_text_far_past_the_ceiling_is_refused() -> None:
    long_page = stream(b"BT /F1 12 Tf 20 100 Td (%s) Tj ET" % (b"x" * 500))
    payload = pdf([CATALOG, ONE_PAGE, page(), long_page, FONT])
    limits = ParseLimits(max_text_chars=100)
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", payload, limits)
    assert refused.value.reason == (
        "more than 400 characters of text exceeds the 100-character ceiling"
    )


def _image_xobject(width: int, height: int, samples: bytes) -> bytes:
    data = zlib.compress(samples)
    return stream(
        data,
        b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode " % (width, height),
    )


@pytest.mark.timeout(60)
def test_pdf_scanned_page_image_over_the_pixel_ceiling_is_refused() -> None:
    drawing = stream(b"q 200 0 0 200 0 0 cm /Im0 Do Q")
    payload = pdf(
        [
            CATALOG,
            ONE_PAGE,
            page(b"/XObject << /Im0 5 0 R >>"),
            drawing,
            _image_xobject(50_000, 50_000, bytes(100_000)),
        ]
    )
    raised, peak = _traced_peak(lambda: extract_pdf("application/pdf", payload, LIMITS))
    assert isinstance(raised, Refusal) and raised.code == "ceiling", raised
    assert peak < 50 * 2**20


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (
            pdf_with_jpx_image,
            "page/Resources/XObject/Im0 is filtered with /JPXDecode (JPEG 2000), a format "
            "the sandbox does not decode",
        ),
        (
            pdf_with_jbig2_image,
            "page/Resources/XObject/Im0 is filtered with /JBIG2Decode (JBIG2), a format the "
            "sandbox does not decode",
        ),
        (
            pdf_with_brotli_image,
            "a page image needs a decoder the sandbox does not have: brotli is required",
        ),
        (pdf_with_truncated_jpeg_image, "a page image is truncated or corrupt: "),
    ],
)
def test_pdf_page_image_the_sandbox_cannot_decode_is_unreadable(
    build: Callable[[], bytes], reason: str
) -> None:
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", build(), LIMITS)
    assert refused.value.code == "unreadable" and reason in refused.value.reason


def test_pdf_page_image_that_decodes_is_still_read() -> None:
    """The same page with its image as a plain JPEG is rendered and OCR'd; tesseract finds no
    text in a square ("Empty page!!"), and that page is empty, not a failed document."""
    assert (
        extract_pdf(
            "application/pdf", pdf_with_image(encoded(scan(), "JPEG"), b"/DCTDecode"), LIMITS
        )
        == ""
    )


@pytest.mark.parametrize(
    "bug",
    [
        KeyError("JPEG"),  # a format the sandbox decodes: not the pruned registry speaking
        KeyError("Image /Im0 not found"),
        IndexError("list index out of range"),
        TypeError("'NoneType' object is not subscriptable"),
    ],
)
def test_an_exception_that_is_not_pillow_reporting_damage_stays_a_parser_error(
    bug: Exception,
) -> None:
    with pytest.raises(type(bug)), ocr.damage_is_unreadable("a page image"):
        raise bug


# --- hostile DOCX -----------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_docx_external_entity_is_never_resolved(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-HOSTNAME-MARKER")
    doctype = f'<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>\n'
    body = "<w:p><w:r><w:t>before &xxe; after</w:t></w:r></w:p>"
    payload = docx_with({"word/document.xml": document_xml(body, doctype)})
    text = extract_docx("application/octet-stream", payload, LIMITS)
    assert "before" in text
    assert "SECRET" not in text


@pytest.mark.timeout(60)
def test_docx_billion_laughs_ends_fast_without_expansion() -> None:
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{level} "{f"&lol{level - 1};" * 10}">' for level in range(1, 10)
    ]
    doctype = f"<!DOCTYPE w:document [{''.join(entities)}]>\n"
    body = "<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>"
    payload = docx_with({"word/document.xml": document_xml(body, doctype)})
    started = time.monotonic()
    outcome: list[str] = []
    raised, peak = _traced_peak(
        lambda: outcome.append(extract_docx("application/octet-stream", payload, LIMITS))
    )
    assert time.monotonic() - started < 5
    assert peak < 50 * 2**20
    # libxml2 either refuses the amplification or leaves the entity unexpanded.
    assert raised is not None or "lollol" not in outcome[0]


def test_docx_merged_cell_repetition_counts_against_the_text_ceiling() -> None:
    restart = (
        '<w:tc><w:tcPr><w:vMerge w:val="restart"/></w:tcPr>'
        f"<w:p><w:r><w:t>{'x' * 1000}</w:t></w:r></w:p></w:tc>"
    )
    continued = "<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc></w:tr>"
    table = f"<w:tbl><w:tr>{restart}</w:tr>{continued * 10_000}</w:tbl>"
    payload = docx_with({"word/document.xml": document_xml(table)})
    with pytest.raises(Refusal) as refused:
        extract_docx("application/octet-stream", payload, ParseLimits(max_text_chars=1000))
    assert refused.value.code == "ceiling"


@pytest.mark.parametrize(
    "body", ["<w:p><w:r><w:t>cut short", "<w:p>" * 300 + "deep" + "</w:p>" * 300]
)
def test_docx_whose_xml_is_not_well_formed_is_unreadable_not_a_parser_bug(body: str) -> None:
    """A part cut short, or nested past lxml's 256 levels, ended as "parser raised
    XMLSyntaxError", the outcome kept for airlock's own bugs."""
    payload = docx_with({"word/document.xml": document_xml(body)})
    with pytest.raises(Refusal, match="a part of the DOCX is not well-formed XML") as refused:
        extract_docx("application/octet-stream", payload, LIMITS)
    assert refused.value.code == "unreadable"


def test_docx_that_is_not_a_zip_is_unreadable() -> None:
    with pytest.raises(Refusal, match="not a DOCX package") as refused:
        extract_docx("application/octet-stream", b"%PDF-1.7 not a zip", LIMITS)
    assert refused.value.code == "unreadable"


def _zip_declaring(media_type: bytes, compression: int = zipfile.ZIP_STORED) -> bytes:
    """A ZIP whose first member, "mimetype", holds ``media_type``, as ODF and EPUB lay it out."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), media_type, compress_type=compression)
        archive.writestr("content.xml", "<content/>")
    return buffer.getvalue()


def _docx_without(member: str) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(template_docx()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            if name != member:
                target.writestr(name, source.read(name))
    return buffer.getvalue()


def _docx_without_a_main_document() -> bytes:
    empty = b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>'
    return docx_with({"_rels/.rels": empty})


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (
            odt,
            "the payload is an OpenDocument file (application/vnd.oasis.opendocument.text), "
            "not a DOCX package (it has no [Content_Types].xml)",
        ),
        (plain_zip, "the payload is a ZIP archive, not a DOCX package"),
        (
            lambda: _zip_declaring(b"application/epub+zip"),
            "the payload is a ZIP archive of type application/epub+zip, not a DOCX package",
        ),
        # A declared type is named only when it is short, stored and shaped like a media type.
        (
            lambda: _zip_declaring(b"text/plain\nINFO all good"),
            "the payload is a ZIP archive, not",
        ),
        (
            lambda: _zip_declaring(b"application/epub+zip", zipfile.ZIP_DEFLATED),
            "the payload is a ZIP archive, not",
        ),
        (lambda: _zip_declaring(b"a/" + b"b" * 200), "the payload is a ZIP archive, not"),
        (
            lambda: _docx_without("word/document.xml"),
            "the DOCX package is incomplete: There is no item named 'word/document.xml'",
        ),
        (
            _docx_without_a_main_document,
            "the DOCX package is incomplete: no relationship of type "
            "'http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument'",
        ),
    ],
)
def test_docx_that_is_another_archive_or_incomplete_is_unreadable(
    build: Callable[[], bytes], reason: str
) -> None:
    with pytest.raises(Refusal) as refused:
        extract_docx("application/octet-stream", build(), LIMITS)
    assert refused.value.code == "unreadable" and refused.value.reason.startswith(reason)


def test_docx_macro_enabled_package_is_unreadable() -> None:
    types = zipfile.ZipFile(io.BytesIO(template_docx())).read("[Content_Types].xml")
    macro = types.replace(
        b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
        b"application/vnd.ms-word.document.macroEnabled.main+xml",
    )
    with pytest.raises(Refusal, match="not a Word document") as refused:
        extract_docx("application/octet-stream", docx_with({"[Content_Types].xml": macro}), LIMITS)
    assert refused.value.code == "unreadable"


def _level(ilvl: int, number_format: str, text: str, start: int = 1, extra: str = "") -> str:
    return (
        f'<w:lvl w:ilvl="{ilvl}"><w:start w:val="{start}"/><w:numFmt w:val="{number_format}"/>'
        f'<w:lvlText w:val="{text}"/>{extra}</w:lvl>'
    )


def _numbering_xml(abstracts: dict[int, str], nums: dict[int, str]) -> bytes:
    """numbering.xml with abstract definitions (id → levels) and instances (numId → body)."""
    return (
        f'<w:numbering xmlns:w="{WORD_NAMESPACE}">'
        + "".join(
            f'<w:abstractNum w:abstractNumId="{key}">{levels}</w:abstractNum>'
            for key, levels in abstracts.items()
        )
        + "".join(f'<w:num w:numId="{key}">{body}</w:num>' for key, body in nums.items())
        + "</w:numbering>"
    ).encode()


def _item(text: str, num_id: int | None = None, ilvl: int = 0, style: str = "") -> str:
    properties = f'<w:pStyle w:val="{style}"/>' if style else ""
    if num_id is not None:
        properties += f'<w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num_id}"/></w:numPr>'
    return f"<w:p><w:pPr>{properties}</w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"


def _numbered_docx(numbering: bytes, paragraphs: list[str]) -> str:
    payload = docx_with(
        {"word/numbering.xml": numbering, "word/document.xml": document_xml("".join(paragraphs))}
    )
    return extract_docx("application/octet-stream", payload, LIMITS)


def test_docx_numbering_formats_templates_and_restarts() -> None:
    outline = "".join(
        [
            _level(0, "upperRoman", "%1."),
            _level(1, "upperLetter", "%1.%2)"),
            _level(2, "lowerLetter", "(%3)", start=26),
            _level(3, "lowerRoman", "%4.", start=4, extra='<w:lvlRestart w:val="0"/>'),
            _level(4, "decimal", "%1-%5", extra='<w:isLgl/><w:suff w:val="nothing"/>'),
            _level(5, "decimalZero", "%6"),
        ]
    )
    numbering = _numbering_xml(
        {1: outline, 2: _level(0, "bullet", "\uf0a7")},
        {
            1: '<w:abstractNumId w:val="1"/>',
            2: '<w:abstractNumId w:val="1"/>',  # continues numId 1's counters
            3: '<w:abstractNumId w:val="1"/>'
            '<w:lvlOverride w:ilvl="0"><w:startOverride w:val="7"/></w:lvlOverride>',
            4: '<w:abstractNumId w:val="2"/>',
        },
    )
    text = _numbered_docx(
        numbering,
        [
            _item("one", 1),
            _item("one-a", 1, 1),
            _item("z", 1, 2),
            _item("aa", 1, 2),
            _item("iv", 1, 3),
            _item("legal", 1, 4),
            _item("two", 2),  # resets levels 1, 2 and 4 but not 3 (lvlRestart 0)
            _item("v", 2, 3),
            _item("zero-padded", 2, 5),
            _item("plain paragraph"),
            _item("seven", 3),
            _item("square", 4),
        ],
    )
    assert text.splitlines() == [
        "I. one",
        "  I.A) one-a",
        "    (z) z",
        "    (aa) aa",
        "      iv. iv",
        "        1-1legal",
        "II. two",
        "      v. v",
        "          01 zero-padded",
        "plain paragraph",
        "VII. seven",
        "▪ square",
    ]


def test_docx_numbering_from_a_style_and_switched_off_by_num_id_zero() -> None:
    styles = (
        f'<w:styles xmlns:w="{WORD_NAMESPACE}">'
        '<w:style w:type="paragraph" w:styleId="Steps"><w:pPr><w:numPr><w:numId w:val="1"/>'
        "</w:numPr></w:pPr></w:style>"
        '<w:style w:type="paragraph" w:styleId="SubSteps"><w:basedOn w:val="Steps"/></w:style>'
        # A basedOn loop ends the walk instead of hanging it.
        '<w:style w:type="paragraph" w:styleId="Loop"><w:basedOn w:val="Loop"/></w:style>'
        "</w:styles>"
    ).encode()
    numbering = _numbering_xml(
        {1: _level(0, "decimal", "%1.") + _level(1, "lowerLetter", "%2.", extra="")},
        {1: '<w:abstractNumId w:val="1"/>'},
    )
    # The level of a style-numbered paragraph can come from the level that names the style.
    numbering = numbering.replace(
        b'<w:lvlText w:val="%2."/>', b'<w:lvlText w:val="%2."/><w:pStyle w:val="SubSteps"/>'
    )
    payload = docx_with(
        {
            "word/styles.xml": styles,
            "word/numbering.xml": numbering,
            "word/document.xml": document_xml(
                _item("first", style="Steps")
                + _item("detail", style="SubSteps")
                + _item("not numbered", 0, style="Steps")
                + _item("second", style="Steps")
                + _item("looped", style="Loop")
            ),
        }
    )
    text = extract_docx("application/octet-stream", payload, LIMITS)
    assert text.splitlines() == ["1. first", "  a. detail", "not numbered", "2. second", "looped"]


def test_docx_tab_stops_in_paragraph_properties_are_not_tabs() -> None:
    """w:tab inside w:pPr/w:tabs defines a tab stop; read as text it began every line of a
    style-formatted paragraph with a tab, which reads as an empty table cell."""
    body = (
        '<w:p><w:pPr><w:tabs><w:tab w:val="num" w:pos="720"/></w:tabs><w:rPr><w:i/></w:rPr>'
        "</w:pPr><w:r><w:t>First</w:t><w:tab/><w:t>item</w:t></w:r></w:p>"
    )
    payload = docx_with({"word/document.xml": document_xml(body)})
    assert extract_docx("application/octet-stream", payload, LIMITS) == "First\titem"


def test_docx_hostile_numbering_values_are_bounded() -> None:
    """Letter and roman counts that would grow without bound are drawn in decimal; a start value
    too long for int() is Word's default 0; a level out of range or a definition that does not
    exist draws nothing. Never an exception, never a megabyte of "a"."""
    numbering = _numbering_xml(
        {
            1: _level(0, "lowerLetter", "%1.", start=999_999)
            + _level(1, "upperRoman", "%2.", start=4_000)
            + _level(2, "decimal", "%3.").replace('w:val="1"/>', 'w:val="' + "9" * 5000 + '"/>', 1)
        },
        {1: '<w:abstractNumId w:val="1"/>', 2: '<w:abstractNumId w:val="404"/>'},
    )
    text = _numbered_docx(
        numbering,
        [
            _item("letters", 1),
            _item("roman", 1, 1),
            _item("digits", 1, 2),
            _item("no level", 1, 9),
            _item("no definition", 2),
        ],
    )
    assert text.splitlines() == [
        "999999. letters",
        "  4000. roman",
        "    0. digits",
        "no level",
        "no definition",
    ]


def test_docx_list_number_templates_count_against_the_text_ceiling() -> None:
    """A level template is drawn once per paragraph; a 10,000-placeholder template on a few
    thousand one-letter items would otherwise multiply a small package into megabytes."""
    numbering = _numbering_xml(
        {1: _level(0, "decimal", "%1" * 10_000)}, {1: '<w:abstractNumId w:val="1"/>'}
    )
    with pytest.raises(Refusal) as refused:
        _numbered_docx(numbering, [_item("x", 1)] * 2_000)
    assert refused.value.code == "ceiling"


# --- hostile images ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("side", [50_000, 7_000])
def test_png_over_the_pixel_ceiling_is_refused_from_its_header(side: int) -> None:
    payload = png(side, side, 0, b"\x00" * 1000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(Refusal) as refused:
        extract_image("image/png", payload, LIMITS)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert refused.value.code == "ceiling"
    assert after - before < 100 * 1024  # KiB: nothing near the 2.5 GB a decode would take
    assert LIMITS.max_pixels != Image.MAX_IMAGE_PIXELS  # the job's setting is undone


@pytest.mark.timeout(60)
def test_tiff_page_over_the_pixel_ceiling_behind_a_small_one_is_refused_before_ocr() -> None:
    first, second = distinct_frames(2)
    data = bytearray(encoded(first, "TIFF", save_all=True, append_images=[second]))
    first_ifd = struct.unpack_from("<I", data, 4)[0]
    entries = struct.unpack_from("<H", data, first_ifd)[0]
    second_ifd = struct.unpack_from("<I", data, first_ifd + 2 + 12 * entries)[0]
    for index in range(struct.unpack_from("<H", data, second_ifd)[0]):
        position = second_ifd + 2 + 12 * index
        tag = struct.unpack_from("<H", data, position)[0]
        if tag in (256, 257):  # ImageWidth, ImageLength, rewritten as LONG 50000
            struct.pack_into("<HHII", data, position, tag, 4, 1, 50_000)
    with pytest.raises(Refusal, match="50000x50000") as refused:
        next(decoded_frames(bytes(data), LIMITS))
    assert refused.value.code == "ceiling"


@pytest.mark.parametrize("file_format", ["JPEG", "PNG"])
def test_image_cut_in_half_is_unreadable(file_format: str) -> None:
    whole = encoded(photo(), file_format)
    with pytest.raises(Refusal, match="image data is truncated") as refused:
        extract_image("image/jpeg", whole[: len(whole) // 2], LIMITS)
    assert refused.value.code == "unreadable"


def test_image_data_far_shorter_than_declared_is_unreadable() -> None:
    # 200 rows of pixel data under a header declaring 20000; Pillow pads without complaint.
    rows = b"".join(b"\x00" + bytes(range(256)) * 3 + bytes(132) for _ in range(200))
    payload = png(300, 20_000, 2, rows)
    with pytest.raises(Refusal, match="image data is truncated") as refused:
        extract_image("image/png", payload, LIMITS)
    assert refused.value.code == "unreadable"


def test_jpeg_declaring_more_rows_than_it_holds_is_unreadable() -> None:
    jpeg = bytearray(encoded(photo().convert("L"), "JPEG"))
    marker = jpeg.find(b"\xff\xc0")
    struct.pack_into(">HH", jpeg, marker + 5, 6000, 6000)
    with pytest.raises(Refusal, match="needs at least"):
        extract_image("image/jpeg", bytes(jpeg), LIMITS)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("file_format", "options"),
    [("TIFF", {}), ("GIF", {"loop": 0}), ("WEBP", {"lossless": True})],
)
def test_more_frames_than_the_page_ceiling_are_refused_before_ocr(
    file_format: str, options: dict[str, object]
) -> None:
    first, *rest = distinct_frames(LIMITS.max_pages + 1 if file_format == "TIFF" else 60)
    payload = encoded(first, file_format, save_all=True, append_images=rest, **options)
    with pytest.raises(Refusal) as refused:
        extract_image("image/tiff", payload, LIMITS)
    assert (refused.value.code, refused.value.reason) == (
        "ceiling",
        "more than 20 frames exceeds the 20-page ceiling",
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("frame_count", [1, 2])
def test_tiff_whose_ifd_chain_loops_counts_each_frame_once(frame_count: int) -> None:
    payload = tiff_with_looping_ifds(frame_count)
    assert [total for _, total in decoded_frames(payload, LIMITS)] == [frame_count] * frame_count


@pytest.mark.timeout(60)
def test_self_looping_tiff_is_read_once_by_ocr() -> None:
    assert extract_image("image/tiff", tiff_with_looping_ifds(1), LIMITS) == ""


EPS = (
    b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n%%EndComments\n"
    b"newpath 0 0 moveto 10 10 lineto stroke\nshowpage\n%%EOF\n"
)


def test_eps_labelled_as_png_is_unreadable_and_ghostscript_never_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[object] = []
    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", lambda *args, **kw: calls.append(args))
    with pytest.raises(Refusal, match="looks like EPS, a format the sandbox does not") as refused:
        extract_image("image/png", EPS, LIMITS)
    assert refused.value.code == "unreadable"
    # Not even a caller that names no formats reaches the EPS opener.
    with pytest.raises(UnidentifiedImageError):
        Image.open(io.BytesIO(EPS)).load()
    assert calls == []


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (bmp_rle8_short, "the BMP image data is truncated or corrupt: not enough image data"),
        (
            apng_with_sequence_errors,
            "the PNG image data is truncated or corrupt: APNG contains frame sequence errors",
        ),
        (jpeg2000, "the payload looks like JPEG2000, a format the sandbox does not decode"),
    ],
)
def test_image_damaged_or_in_a_pruned_format_is_unreadable_and_named(
    build: Callable[[], bytes], reason: str
) -> None:
    with pytest.raises(Refusal) as refused:
        extract_image("image/png", build(), LIMITS)
    assert refused.value.code == "unreadable" and refused.value.reason.startswith(reason)


def test_an_rle8_bmp_with_all_its_data_is_read() -> None:
    """The RLE8 test file is short, not malformed: given its pixels, the same header decodes."""
    rows = b"".join(b"\x04\x80\x00\x00" for _ in range(2))
    frames = list(decoded_frames(bmp_rle8(4, 2, rows + b"\x00\x01"), LIMITS))
    assert len(frames) == 1 and frames[0][0].size == (4, 2)


def test_pillow_registry_holds_exactly_the_accepted_openers() -> None:
    assert set(Image.OPEN) == set(ocr.ACCEPTED_FORMATS)
    assert set(Image.ID) == set(ocr.ACCEPTED_FORMATS)


# --- the tesseract call -----------------------------------------------------------------------


def _fake_tesseract(tmp_path: Path, script: str) -> str:
    path = tmp_path / "tesseract"
    path.write_text("#!/bin/sh\ncat >/dev/null\n" + script)
    path.chmod(0o755)
    return str(path)


def test_tesseract_gets_one_thread_the_language_and_the_image_on_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One TSV word row (level 5, confidence 96) whose text is the environment and arguments.
    row = r"5\t1\t1\t1\t1\t1\t0\t0\t1\t1\t96\t%s\n"
    fake = _fake_tesseract(tmp_path, f'printf "header\\n{row}" "$OMP_THREAD_LIMIT $*"\n')
    monkeypatch.setattr(ocr, "TESSERACT", fake)
    text = ocr.ocr_image(Image.new("L", (32, 32), 255), ParseLimits(ocr_language="eng+deu"))
    assert text == "1 stdin stdout -l eng+deu --psm 3 tsv"


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (
            'echo "Estimating resolution as 300" >&2\n'
            'echo "Error in pixCreateNoInit: pixdata_malloc fail for data" >&2\nexit 0\n',
            "exited 0 but did not read the image: Error in pixCreateNoInit",
        ),
        ('echo "Empty page!!" >&2\nexit 0\n', "exited 0 but did not read the image: Empty page!!"),
        ("echo \"Failed loading language 'xyz'\" >&2\nexit 1\n", "exited with status 1: Failed"),
    ],
    ids=["leptonica-allocation-error", "empty-page", "non-zero-exit"],
)
def test_tesseract_failures_are_typed_even_with_exit_status_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, reason: str
) -> None:
    monkeypatch.setattr(ocr, "TESSERACT", _fake_tesseract(tmp_path, script))
    with pytest.raises(ocr.OcrFailed, match=reason):
        ocr.ocr_image(Image.new("L", (32, 32), 255), LIMITS)


# --- text -------------------------------------------------------------------------------------

FRENCH = (
    "Le cœur a ses raisons que la raison ne connaît point. L'été dernier, nous sommes allés "
    "à la plage près de Marseille; c'était très agréable et nous y retournerons."
)
JAPANESE = "日本語のテキストです。これはシフトJISでエンコードされた文章の例です。東京都渋谷区。"


@pytest.mark.parametrize(
    "payload",
    [
        FRENCH.encode("utf-8"),
        FRENCH.encode("utf-8-sig"),
        FRENCH.encode("utf-16"),
        codecs.BOM_UTF16_BE + FRENCH.encode("utf-16-be"),
        FRENCH.encode("utf-32"),
        FRENCH.encode("cp1252"),
    ],
    ids=["utf-8", "utf-8-bom", "utf-16-le-bom", "utf-16-be-bom", "utf-32-bom", "cp1252"],
)
def test_text_decodes_each_encoding_exactly(payload: bytes) -> None:
    assert extract_text("text/plain", payload, LIMITS) == FRENCH


@pytest.mark.parametrize(
    "text",
    ["Café crème brûlée\n", "Größe und Maße, naïve Café"],
)
def test_western_text_in_latin_1_is_read_as_windows_1252_not_a_central_european_page(
    text: str,
) -> None:
    """The detector's first guess for these was cp1250: "crčme brűlée", "naďve"."""
    assert extract_text("text/plain", text.encode("latin-1"), LIMITS) == text


@pytest.mark.parametrize(
    ("source", "encoding"),
    [("glib20-fr", "cp1252"), ("glib20-cs", "cp1250"), ("glib20-pl", "cp1250")],
)
def test_real_text_in_its_legacy_code_page_decodes_exactly(source: str, encoding: str) -> None:
    """Every sample of GLib's French messages in cp1252 (the detector's first guess was cp1257
    for six of eight: "reēu" for "reçu") and of its Czech and Polish ones in cp1250 (which a
    blanket preference for cp1252 would break: "pøíkaz" for "příkaz")."""
    samples = [sample for sample in real_samples() if sample.source == source]
    assert len(samples) >= 8
    for sample in samples:
        assert extract_text("text/plain", sample.text.encode(encoding), LIMITS) == sample.text


def test_text_detects_shift_jis() -> None:
    assert extract_text("text/plain", JAPANESE.encode("shift_jis"), LIMITS) == JAPANESE


def test_text_that_is_valid_utf8_takes_the_utf8_path() -> None:
    # Short enough for a detector to guess a legacy code page; UTF-8 decides first.
    assert extract_text("text/plain", "Grüße".encode(), LIMITS) == "Grüße"


@pytest.mark.parametrize(
    "payload",
    [random.Random(3).randbytes(4096), bytes(range(256)) * 16],
    ids=["random", "all-byte-values"],
)
def test_binary_is_not_text(payload: bytes) -> None:
    with pytest.raises(Refusal) as refused:
        extract_text("text/plain", payload, LIMITS)
    assert refused.value.code == "unreadable"


def test_random_binary_reason() -> None:
    without_nul = bytes(byte for byte in random.Random(3).randbytes(4096) if byte)
    with pytest.raises(Refusal) as refused:
        extract_text("text/plain", without_nul, LIMITS)
    assert refused.value.reason == "the payload is not text in any encoding the detector trusts"


@pytest.mark.parametrize("payload", [b"MZ\x90\x00", b"\x7fELF\x02\x01\x01\x00" * 8])
def test_binary_with_nul_bytes_is_refused_before_any_guess(payload: bytes) -> None:
    # A detector would read these as UTF-16 without a byte-order mark: "text" made of noise.
    with pytest.raises(Refusal, match="NUL") as refused:
        extract_text("text/plain", payload, LIMITS)
    assert refused.value.code == "unreadable"


def test_nul_bytes_that_happen_to_be_utf8_are_not_text() -> None:
    with pytest.raises(Refusal, match="NUL"):
        extract_text("text/plain", b"abc\x00\x00\x00def", LIMITS)


def test_utf16_mark_on_odd_bytes_is_unreadable() -> None:
    with pytest.raises(Refusal, match="byte-order mark") as refused:
        extract_text("text/plain", b"\xff\xfea\x00b", LIMITS)
    assert refused.value.code == "unreadable"


def test_text_far_past_the_ceiling_is_refused() -> None:
    with pytest.raises(Refusal, match="exceeds the 10-character ceiling"):
        extract_text("text/plain", b"x" * 41, ParseLimits(max_text_chars=10))
    assert extract_text("text/plain", b"x" * 40, ParseLimits(max_text_chars=10)) == "x" * 40


# --- registration and warm-up -----------------------------------------------------------------


def test_all_registers_the_four_kinds() -> None:
    assert lookup("pdf") is pdf_extractor.extract_pdf
    assert lookup("docx") is docx_extractor.extract_docx
    assert lookup("image") is image_extractor.extract_image
    assert lookup("text") is text_extractor.extract_text


def test_warm_up_never_runs_tesseract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr, "TESSERACT", None)  # running it would raise OcrFailed
    everything.warm_up()


_NO_LAZY_IMPORTS = """
import json, sys
from pathlib import Path
import sandbox.extractors.all as everything
from sandbox.extractors.registry import Refusal, lookup
from sandbox.limits import ParseLimits
everything.warm_up()
before = set(sys.modules)
for path, kind in json.loads(sys.argv[1]):
    payload = Path(path).read_bytes()
    for data in (payload, payload[: len(payload) // 2]):
        try:
            lookup(kind)("application/octet-stream", data, ParseLimits())
        except Refusal:
            pass
        except Exception as exc:
            print("raised", kind, Path(path).name, type(exc).__name__, file=sys.stderr)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_warm_up_leaves_no_import_for_the_jailed_child(corpus_dir: Path) -> None:
    """After warm_up, reading real documents (and halves of them) imports nothing new.

    A module first imported after the fork would be read from disk by a child that has dropped
    its uid and may no longer read the interpreter's files.
    """
    documents = [
        [str(corpus_dir / name), KIND_OF_CATEGORY[category]]
        for name, category in ((str(d["file"]), str(d["category"])) for d in _manifest())
        if category != "image" and category != "pdf-scanned"
    ]
    documents += [
        [str(corpus_dir / "docling_ocr_test-scanned.pdf"), "pdf"],
        [str(corpus_dir / "tesseract_phototest.tif"), "image"],
    ]
    repo = Path(__file__).resolve().parents[2]
    completed = subprocess.run(
        [sys.executable, "-c", _NO_LAZY_IMPORTS, json.dumps(documents)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(completed.stdout.splitlines()[-1]) == [], completed.stderr


# --- DOCX tables as Markdown -----------------------------------------------------------------

rendered_docx = rendered_by(docx_extractor.extract_docx)


def _table_docx(rows: list[str], properties: str = "") -> bytes:
    table = f"<w:tbl><w:tblPr>{properties}</w:tblPr>{''.join(rows)}</w:tbl>"
    return docx_with({"word/document.xml": document_xml(table)})


def _row(*cells: str, row_properties: str = "") -> str:
    body = "".join(f"<w:tc><w:p><w:r><w:t>{cell}</w:t></w:r></w:p></w:tc>" for cell in cells)
    return f"<w:tr><w:trPr>{row_properties}</w:trPr>{body}</w:tr>"


@pytest.mark.parametrize(
    ("properties", "row_properties", "header"),
    [
        ("", "<w:tblHeader/>", True),  # repeated on every page
        ('<w:tblLook w:firstRow="1"/>', "", True),
        ('<w:tblLook w:val="04A0"/>', "", True),  # Word 2007: bit 0x20 is the first row
        ('<w:tblLook w:val="0400"/>', "", False),
        ('<w:tblLook w:firstRow="0"/>', "", False),
        ("", "", False),
    ],
)
def test_a_docx_tables_header_row_is_the_one_word_shows(
    properties: str, row_properties: str, header: bool
) -> None:
    rows = [_row("Name", "Qty", row_properties=row_properties), _row("pen", "2")]
    payload = _table_docx(rows, properties)
    lines = rendered_docx("application/octet-stream", payload, LIMITS).splitlines()
    expected = ["| Name | Qty |", "| --- | --- |", "| pen | 2 |"]
    assert lines == (expected if header else ["|  |  |", *expected[1:2], expected[0], expected[2]])


def test_a_docx_cell_cannot_break_its_table() -> None:
    """A pipe, a backslash before a pipe, and a line break inside a cell stay in the cell; a
    line of a paragraph that reads as a page marker is quoted."""
    cell = "<w:p><w:r><w:t>a | b \\| c</w:t><w:br/><w:t>[page 9]</w:t></w:r></w:p>"
    row = f"<w:tr><w:tc>{cell}</w:tc><w:tc><w:p/></w:tc></w:tr>"
    outside = "<w:p><w:r><w:t>[page 2]</w:t></w:r></w:p>"
    body = outside + f"<w:tbl>{row}</w:tbl>"
    payload = docx_with({"word/document.xml": document_xml(body)})
    lines = rendered_docx("application/octet-stream", payload, LIMITS).splitlines()
    assert lines == [
        ">[page 2]",
        "",
        "|  |  |",
        "| --- | --- |",
        "| a \\| b \\\\\\| c [page 9] |  |",
    ]


@pytest.mark.parametrize("span", ["1025", "99999999999", "1" + "0" * 5000])
def test_a_docx_row_spanning_past_the_column_ceiling_is_refused_not_padded(span: str) -> None:
    for where in (f'<w:gridBefore w:val="{span}"/>', ""):
        spanned = f'<w:tc><w:tcPr><w:gridSpan w:val="{span}"/></w:tcPr><w:p/></w:tc>'
        cell = "<w:tc><w:p/></w:tc>" if where else spanned
        row = f"<w:tr><w:trPr>{where}</w:trPr>{cell}</w:tr>"
        with pytest.raises(Refusal) as refused:
            extract_docx("application/octet-stream", _table_docx([row]), LIMITS)
        assert refused.value.code == "ceiling" and "1024 columns" in refused.value.reason


def test_a_docx_table_costs_time_linear_in_its_rows() -> None:
    """1,000 rows and 10 times as many: about 10 times the CPU, as every row is read and
    rendered once."""

    def seconds(rows: int) -> float:
        payload = _table_docx([_row(f"r{index}", "cell", "cell") for index in range(rows)])

        def read() -> None:
            text = rendered_docx(
                "application/octet-stream", payload, ParseLimits(max_text_chars=10**6)
            )
            assert text.count("\n") == rows + 1

        return least_cpu_seconds(read)

    assert seconds(10_000) < 25 * seconds(1_000)  # linear: ~10x; quadratic would be ~100x


def test_a_docx_list_number_longer_than_a_marker_starts_the_items_text() -> None:
    """A drawn number past 64 characters ("Article 1 of the Agreement on …:") is the start of
    the item's text: the document still holds to the schema the parent holds it to, where a
    marker that long once made the whole answer malformed."""
    template = "Article %1 of the Agreement on the Conservation of Small Cetaceans:"
    numbering = _numbering_xml(
        {1: _level(0, "decimal", template)}, {1: '<w:abstractNumId w:val="1"/>'}
    )
    payload = docx_with(
        {"word/numbering.xml": numbering, "word/document.xml": document_xml(_item("text", 1))}
    )
    document = docx_extractor.extract_docx("application/octet-stream", payload, LIMITS)
    assert isinstance(document, Document)
    framed = protocol.encode_document_answer(document, None)
    answer = protocol.decode_answer(framed[protocol.LENGTH.size :], parts=False)
    assert isinstance(answer, protocol.DocumentAnswer)
    (item,) = answer.document.blocks
    assert item == ListItem(
        "", 0, "Article 1 of the Agreement on the Conservation of Small Cetaceans: text"
    )


def test_empty_cells_padding_spans_count_against_the_text_budget() -> None:
    """One character and 1,023 empty cells a row: 300 such rows in a few kilobytes once made
    300,000 cells; each padding cell now costs like a character, so the ceiling refuses it."""
    late = _row("x", row_properties='<w:gridBefore w:val="1023"/>')
    spanned = '<w:tr><w:tc><w:tcPr><w:gridSpan w:val="1024"/></w:tcPr><w:p/></w:tc></w:tr>'
    for row in (late, spanned.replace("<w:p/>", "<w:p><w:r><w:t>x</w:t></w:r></w:p>")):
        with pytest.raises(Refusal) as refused:
            extract_docx(
                "application/octet-stream",
                _table_docx([row] * 300),
                ParseLimits(max_text_chars=50_000),
            )
        assert refused.value.code == "ceiling"


_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"


def test_docx_text_word_hides_is_left_out_with_a_notice() -> None:
    """Hidden text (``w:vanish``, directly or through a character or paragraph style based on a
    hidden one) is where a planted instruction sits, and was read as visible text."""
    styles = (
        f'<w:styles xmlns:w="{WORD_NAMESPACE}">'
        '<w:style w:type="character" w:styleId="Secret"><w:rPr><w:vanish/></w:rPr></w:style>'
        '<w:style w:type="character" w:styleId="Quiet"><w:basedOn w:val="Secret"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="Ghost"><w:rPr><w:vanish/></w:rPr></w:style>'
        "</w:styles>"
    ).encode()
    body = (
        "<w:p><w:r><w:t>Visible.</w:t></w:r><w:r><w:rPr><w:vanish/></w:rPr><w:t>SECRET1</w:t>"
        '</w:r><w:r><w:rPr><w:rStyle w:val="Quiet"/></w:rPr><w:t>SECRET2</w:t></w:r></w:p>'
        '<w:p><w:pPr><w:pStyle w:val="Ghost"/></w:pPr><w:r><w:t>SECRET3</w:t></w:r>'
        '<w:r><w:rPr><w:vanish w:val="0"/></w:rPr><w:t> Shown again.</w:t></w:r>'
        # A hyperlink in a hidden paragraph holding a run that shows itself again.
        '<w:hyperlink><w:r><w:rPr><w:vanish w:val="0"/></w:rPr><w:t> Linked.</w:t></w:r>'
        "</w:hyperlink></w:p>"
    )
    payload = docx_with({"word/document.xml": document_xml(body), "word/styles.xml": styles})
    text = rendered_docx("application/octet-stream", payload, LIMITS)
    assert text.splitlines() == [
        "Visible.",
        " Shown again. Linked.",
        "[airlock: 21 characters of hidden text left out]",
    ]


def test_docx_reads_the_alternative_content_word_shows() -> None:
    """Word shows an ``mc:Choice`` only when it knows every namespace the Choice requires, else
    the ``mc:Fallback``: every Choice was read, so a Choice requiring a namespace nobody knows
    carried text no reader of the document sees."""
    body = (
        f'<w:p xmlns:mc="{_MC}" xmlns:x="urn:nobody-knows" '
        'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml">'
        '<mc:AlternateContent><mc:Choice Requires="x"><w:r><w:t>NEVER SHOWN</w:t></w:r>'
        "</mc:Choice><mc:Fallback><w:r><w:t>Fallback shown.</w:t></w:r></mc:Fallback>"
        '</mc:AlternateContent><mc:AlternateContent><mc:Choice Requires="w14"><w:r>'
        "<w:t> Choice shown.</w:t></w:r></mc:Choice><mc:Fallback><w:r><w:t>OLD COPY</w:t>"
        "</w:r></mc:Fallback></mc:AlternateContent></w:p>"
    )
    payload = docx_with({"word/document.xml": document_xml(body)})
    assert extract_docx("application/octet-stream", payload, LIMITS) == (
        "Fallback shown. Choice shown."
    )


def test_docx_headers_word_never_shows_are_left_out_with_a_notice() -> None:
    """A first-page header without ``w:titlePg`` (an even-page one without
    ``w:evenAndOddHeaders``) is never drawn, and its text was read as the document's."""
    document = python_docx.Document()
    section = document.sections[0]
    section.different_first_page_header_footer = True
    section.first_page_header.paragraphs[0].text = "UNSHOWN first-page header"
    section.header.paragraphs[0].text = "Default header"
    section.different_first_page_header_footer = False
    document.add_paragraph("Body text.")
    buffer = io.BytesIO()
    document.save(buffer)
    lines = rendered_docx("application/octet-stream", buffer.getvalue(), LIMITS).splitlines()
    assert "UNSHOWN first-page header" not in lines
    assert lines[:3] == ["[header]", "Default header", "Body text."]
    assert lines[-1].startswith("[airlock: a header or footer Word does not show")


def test_docx_embedded_documents_word_imports_are_named_not_lost_in_silence() -> None:
    """``w:altChunk`` imports a whole HTML, RTF or DOCX part where it stands; it is not read,
    and was dropped without a word."""
    body = (
        '<w:p><w:r><w:t>Before.</w:t></w:r></w:p><w:altChunk xmlns:r="http://schemas.'
        'openxmlformats.org/officeDocument/2006/relationships" r:id="rIdX"/>'
    )
    payload = docx_with({"word/document.xml": document_xml(body)})
    lines = rendered_docx("application/octet-stream", payload, LIMITS).splitlines()
    assert lines[0] == "Before."
    assert lines[-1].startswith("[airlock: 1 embedded documents (altChunk")


@pytest.mark.parametrize(
    "styles",
    [
        # The document's default run properties.
        "<w:docDefaults><w:rPrDefault><w:rPr><w:vanish/></w:rPr></w:rPrDefault></w:docDefaults>",
        # The default paragraph style, which a paragraph naming no style has.
        '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:rPr><w:vanish/>'
        "</w:rPr></w:style>",
    ],
)
def test_docx_text_hidden_by_the_documents_defaults_is_left_out(styles: str) -> None:
    """Only named styles were looked at: hidden text in a paragraph naming none was read."""
    part = f'<w:styles xmlns:w="{WORD_NAMESPACE}">{styles}</w:styles>'.encode()
    body = (
        "<w:p><w:r><w:t>SECRET</w:t></w:r></w:p>"
        '<w:p><w:r><w:rPr><w:vanish w:val="0"/></w:rPr><w:t>Shown.</w:t></w:r></w:p>'
    )
    payload = docx_with({"word/document.xml": document_xml(body), "word/styles.xml": part})
    assert rendered_docx("application/octet-stream", payload, LIMITS).splitlines() == [
        "Shown.",
        "[airlock: 6 characters of hidden text left out]",
    ]


def test_docx_empty_header_parts_word_does_not_show_raise_no_notice(corpus_dir: Path) -> None:
    """Word writes empty first-page and even-page parts into ordinary documents: nothing was
    left out of these, and a notice said something was."""
    for name in ("python-docx_hdr-header-footer.docx", "docling_word_sample.docx"):
        text = rendered_docx("application/octet-stream", (corpus_dir / name).read_bytes(), LIMITS)
        assert "Word does not show" not in text
