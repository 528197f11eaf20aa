"""Multi-page scanned PDFs made of the corpus's real scans, for the fan-out tests and bench.

The corpus's scanned documents are one page each; a document worth splitting is built by
putting its scans one after another, as a scanner's feeder would: the two image-only PDFs'
pages as they are, and the TIFF scans as 300-dpi image pages (Pillow's PDF writer). The same
arguments always give the same bytes.
"""

from __future__ import annotations

import io
from itertools import cycle, islice
from pathlib import Path

from PIL import Image
from pypdf import PageObject, PdfReader, PdfWriter

from tests.pdf_builders import CATALOG, FONT, ONE_PAGE, page, pdf, stream

SCANNED_PDFS = (
    "docling_ocr_test-scanned.pdf",
    "docling_ocr_test_rotated_90-scanned.pdf",
)
SCANNED_IMAGES = (
    "tesseract_phototest.tif",
    "tesseract_eurotext.tif",
)


def image_page(path: Path) -> bytes:
    """A scan as a one-page 300-dpi image PDF, as a scanner writes one."""
    with Image.open(path) as scan:
        buffer = io.BytesIO()
        scan.convert("L").save(buffer, format="PDF", resolution=300.0)
    return buffer.getvalue()


def scan_pages(corpus: Path) -> list[bytes]:
    """Each corpus scan as a one-page PDF, in a fixed order."""
    return [(corpus / name).read_bytes() for name in SCANNED_PDFS] + [
        image_page(corpus / name) for name in SCANNED_IMAGES
    ]


def scanned_pdf(corpus: Path, pages: int, text_page: str | None = None) -> bytes:
    """A PDF of ``pages`` scans taken in turn from the corpus; with ``text_page``, its second
    page is replaced by a page with that text in its text layer (a mixed document)."""
    writer = PdfWriter()
    for one_page in islice(cycle(scan_pages(corpus)), pages):
        writer.append(PdfReader(io.BytesIO(one_page)))
    if text_page is not None and pages > 1:
        writer.insert_page(_text_page(text_page), 1)
        writer.remove_page(2)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _text_page(text: str) -> PageObject:
    content = stream(b"BT /F1 12 Tf 20 100 Td (%s) Tj ET" % text.encode("ascii"))
    one_page = pdf([CATALOG, ONE_PAGE, page(), content, FONT])
    return PdfReader(io.BytesIO(one_page)).pages[0]
