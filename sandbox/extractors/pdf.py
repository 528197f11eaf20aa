"""PDF: the text layer of every page, and OCR of the images on pages that have none.

pypdf 7 carries its own ceilings (decompressed stream length, page-tree size and depth, image
buffer size, parsing work per content stream) and detects cycles in the page tree, the xref
chain and object references. Those are why a FlateDecode bomb, a cyclic page tree or a looping
xref chain ends in a refusal, an exception or a plain result within bounded time and memory;
the runner's CPU and wall-clock limits are the backstop, not the mechanism.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager

from PIL import Image
from pypdf import PageObject, PasswordType, PdfReader, apply_configuration
from pypdf.errors import DependencyError, LimitReachedError
from pypdf.generic import DictionaryObject

from sandbox.extractors.ocr import damage_is_unreadable, decoding_under, ocr_image
from sandbox.extractors.registry import Refusal, extractor, report_progress
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

# Readers accept a header anywhere in the first kilobyte; anything without one is not a PDF.
_HEADER = b"%PDF-"
_HEADER_WINDOW = 1024
# Images with a side this short hold no legible line of text (rules, bullets, dots); OCR'ing
# each would cost a tesseract run for nothing.
_MIN_OCR_SIDE = 16
# pypdf sizes an image buffer at up to four bytes per pixel.
_BYTES_PER_PIXEL = 4


@extractor("pdf")
def extract_pdf(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    if _HEADER not in payload[:_HEADER_WINDOW]:
        raise Refusal("unreadable", "the payload is not a PDF: no %PDF- header in its first 1 KiB")
    # jbig2dec_binary=None: pypdf would otherwise exec jbig2dec for JBIG2 images, a second
    # program fed attacker bytes (and one the jail does not let the child execute).
    with (
        apply_configuration(
            jbig2dec_binary=None,
            image_maximum_buffer_size=limits.max_pixels * _BYTES_PER_PIXEL,
        ),
        decoding_under(limits),
        _pypdf_limits_are_ceilings(),
    ):
        reader = PdfReader(io.BytesIO(payload), strict=False)
        _open_with_empty_password(reader)
        _refuse_over_page_ceiling(reader, limits)
        return _document_text(reader, limits)


@contextmanager
def _pypdf_limits_are_ceilings() -> Iterator[None]:
    """Report pypdf's resource limits as ceilings: a document that inflates past 75 MB or
    declares a 2.5-gigapixel image is over a limit, like one with too many pages."""
    try:
        yield
    except LimitReachedError as exc:
        raise Refusal("ceiling", f"the PDF exceeds a parser safety limit: {exc}") from exc


def _open_with_empty_password(reader: PdfReader) -> None:
    """Open documents that are encrypted only to restrict printing or editing.

    Those have an empty user password and any viewer opens them; a document that needs a real
    password cannot be read, and guessing is not the sandbox's business. AES needs the
    ``cryptography`` package: without it pypdf raises DependencyError, a parser error.
    """
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise Refusal("unreadable", "the PDF is encrypted and does not open with an empty password")


def _refuse_over_page_ceiling(reader: PdfReader, limits: ParseLimits) -> None:
    """Refuse a document with more pages than the ceiling, whole: never its first pages.

    The page tree's declared /Count is checked first, so a file claiming ten million pages is
    refused before pypdf flattens anything; the flattened count is checked next, because
    /Count may lie in the other direction (pypdf bounds that walk by its page-tree limits).
    """
    for count in (_declared_page_count(reader), len(reader.pages)):
        if isinstance(count, int) and count > limits.max_pages:
            raise Refusal("ceiling", f"{count} pages exceeds the {limits.max_pages}-page ceiling")


def _declared_page_count(reader: PdfReader) -> object:
    """The root page-tree node's /Count as the file states it (indexing resolves references)."""
    root = reader.root_object
    if "/Pages" not in root:
        return None
    pages = root["/Pages"]
    if not isinstance(pages, DictionaryObject) or "/Count" not in pages:
        return None
    return pages["/Count"]


def _document_text(reader: PdfReader, limits: ParseLimits) -> str:
    """Join the pages' text in order, a blank line between pages."""
    budget = TextBudget(limits)
    ocr_runs = _OcrRuns(limits)
    texts = []
    total = len(reader.pages)
    for done, page in enumerate(reader.pages, start=1):
        text = page.extract_text().strip()
        if not text:
            text = "\n\n".join(filter(None, map(ocr_runs.read, scanned_images(page))))
        texts.append(budget.spend(text))
        report_progress(done, total)
    return "\n\n".join(texts)


def scanned_images(page: PageObject) -> Iterator[Image.Image]:
    """Yield the decoded images of a page without a text layer, one at a time.

    pypdf decodes each image only when it is reached, under its image buffer limit (set from
    the pixel ceiling) and Pillow's bomb check; :func:`ocr_image` checks the pixel ceiling again.
    An image that is damaged, or in a codec the sandbox does not decode, makes the page
    unreadable: OCR'ing the page without it would pass off a partial page as the whole.
    """
    images = iter(page.images)
    while True:
        with _page_image_is_unreadable():
            image_file = next(images, None)
            if image_file is None:
                return
            image = image_file.image
            if image is None or min(image.size) < _MIN_OCR_SIDE:
                continue
            image.load()  # pypdf may hand over a lazily opened image
        yield image


@contextmanager
def _page_image_is_unreadable() -> Iterator[None]:
    """Refuse a page image Pillow finds damaged or does not decode, and one that needs a
    decoder the sandbox does not run (pypdf raises DependencyError for JBIG2: jbig2dec is never
    executed)."""
    what = "a page image"
    with damage_is_unreadable(what):
        try:
            yield
        except DependencyError as exc:
            raise Refusal(
                "unreadable", f"{what} needs a decoder the sandbox does not run: {exc}"
            ) from exc


class _OcrRuns:
    """OCR work counts against the page ceiling: a document may have tesseract read at most
    ``max_pages`` images, so a textless page holding thousands of small images cannot turn one
    page into thousands of OCR runs."""

    def __init__(self, limits: ParseLimits) -> None:
        self._limits = limits
        self._runs = 0

    def read(self, image: Image.Image) -> str:
        if not self._limits.ocr:
            raise Refusal("needs_ocr", "a page has no text layer and its images need OCR")
        self._runs += 1
        if self._runs > self._limits.max_pages:
            ceiling = self._limits.max_pages
            raise Refusal(
                "ceiling",
                f"more than {ceiling} embedded images to OCR exceeds the {ceiling}-page ceiling",
            )
        return ocr_image(image, self._limits)
