"""PDF: the text layer of every page, and OCR of the rendered page where there is none.

pypdf's own ceilings and cycle checks bound hostile PDFs; the runner's limits are the backstop.
See docs/sandbox.md, "Parsers" and "Notes by module".
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from PIL import Image
from pypdf import PageObject, PasswordType, PdfReader, PdfWriter, apply_configuration
from pypdf.errors import LimitReachedError
from pypdf.generic import DictionaryObject, NameObject

from sandbox import codes, pages, quality
from sandbox.document import Block, Document, Notice, OcrText, PageBreak, Paragraph
from sandbox.extractors.ocr import EmptyPage, decoding_under, ocr_image
from sandbox.extractors.pdf_decoders import CheckedCopy, refuse_hidden_decoders
from sandbox.extractors.pdf_fonts import may_drop_glyphs
from sandbox.extractors.pdf_forms import FieldValue, field_values, form_has_values, value_edits
from sandbox.extractors.pdf_images import check_page_images
from sandbox.extractors.pdf_labels import page_labels
from sandbox.extractors.pdf_layout import (
    Fragment,
    apply,
    image_coverage,
    line_number_edits,
    may_have_numbered_lines,
    positioned_text,
)
from sandbox.extractors.pdf_text import repair, unmapped_share
from sandbox.extractors.pdf_text_copy import text_copy
from sandbox.extractors.pdfium import PdfiumPage, PdfiumText, has_ink, render_scale
from sandbox.extractors.registry import Refusal, extractor, report_progress
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

_LAYERS = "/OCProperties"
_KIDS = "/Kids"
# Readers accept a header anywhere in the first kilobyte; anything without one is not a PDF.
_HEADER = b"%PDF-"
_HEADER_WINDOW = 1024
_T = TypeVar("_T")
# pypdf sizes an image buffer at up to four bytes per pixel.
_BYTES_PER_PIXEL = 4
# A page whose text has more than one character in a hundred outside every script is read with
# a font map that does not hold (see pdf_text.unmapped_share); honest text has next to none.
BROKEN_SHARE = 0.01
# A page with fewer visible characters than this in its text layer, drawing one image over at
# least half of it, is a scan with a stamp (a Bates number, "CONFIDENTIAL") and is OCR'd: the
# rendering holds the stamp too.
SCAN_STAMP_CHARS = 40
SCAN_COVERAGE = 0.5
# Letters of the scripts written right to left. PDFium writes a lam-alef ligature's two letters
# in the order they are drawn ("اإل" for "الإ"), where pypdf's order is the reading one: a page
# holding them is read by pypdf.
_RIGHT_TO_LEFT = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")
# Words of letters, for telling a page PDFium cut into letters (:func:`_split_into_letters`).
_WORDS = re.compile(r"[^\W\d_]+")
_SPLIT_WORDS = 20
_LETTER_WORD_SHARE = 0.35
# The notice that opens a page whose text PDFium read instead of pypdf (docs/sandbox.md). Both
# counts are given because PDFium skips glyphs it cannot map: a reader must see when the page's
# text is a fraction of what is drawn.
PDFIUM_MARKER = (
    "[airlock: text of page {page} read by PDFium, {pdfium} characters; pypdf read {pypdf}, "
    "{share:.0%} of them unmapped]"
)


@extractor("pdf")
def extract_pdf(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    with _opened(payload, limits) as reader:
        return _document(reader, limits)


@extractor(pages.SPLIT_KIND)
def split_pdf(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Each page's text, or the page as a one-page PDF where it needs OCR; no split at all
    for a document of ``limits.fan_out_pages`` pages or fewer (see sandbox/pages.py)."""
    with _opened(payload, limits) as reader:
        total = len(reader.pages)
        if not pages.splits(total, limits):
            return pages.encode(pages.Plan(total, None))
        return pages.encode(pages.Plan(total, _parts(reader, payload, limits)))


@extractor(pages.PAGE_KIND)
def ocr_pdf_page(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """OCR of the one page of a one-page PDF a split made, with tesseract's counts."""
    with _opened(payload, limits) as reader, _Pages(reader) as document:
        if len(reader.pages) != 1:
            raise Refusal(codes.UNREADABLE, "a page job's PDF must hold exactly one page")
        scan = _ocr_page(document, 0, limits)
    readings = [pages.reading_of(reading) for reading in quality.readings()]
    return pages.encode(pages.PageReading("" if scan is None else scan.text, readings))


@extractor(pages.MERGE_KIND)
def merge_pdf_pages(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    """The pages of a document read in parts, in the blocks :func:`extract_pdf` makes of them,
    judged (by the child, after this) on every page's OCR run."""
    merge = pages.read_merge(payload)
    quality.add_readings(reading.counted() for reading in merge.readings)
    budget = TextBudget(limits)
    blocks: list[Block] = []
    for number, part in enumerate(merge.parts, start=1):
        blocks.append(PageBreak(number, part.label))
        if isinstance(part, pages.TextPart):
            blocks += _text_layer(_TextLayer(part.text, part.notice), budget)
        else:
            scan = OcrText(part.text, part.confidence) if part.text else None
            blocks += _scanned(scan, part.fallback, budget)
    return Document(blocks)


@contextmanager
def _opened(payload: bytes, limits: ParseLimits) -> Iterator[PdfReader]:
    """The document open under every guard, its page count within the ceiling."""
    if _HEADER not in payload[:_HEADER_WINDOW]:
        raise Refusal(
            codes.UNREADABLE, "the payload is not a PDF: no %PDF- header in its first 1 KiB"
        )
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
        yield reader


@contextmanager
def _pypdf_limits_are_ceilings() -> Iterator[None]:
    """Report pypdf's resource limits as ceilings: a document that inflates past 75 MB or
    declares a 2.5-gigapixel image is over a limit, like one with too many pages."""
    try:
        yield
    except LimitReachedError as exc:
        raise Refusal(codes.CEILING, f"the PDF exceeds a parser safety limit: {exc}") from exc


def _open_with_empty_password(reader: PdfReader) -> None:
    """Open documents that are encrypted only to restrict printing or editing.

    Those have an empty user password and any viewer opens them; a document that needs a real
    password cannot be read, and guessing is not the sandbox's business. AES needs the
    ``cryptography`` package: without it pypdf raises DependencyError, a parser error.
    """
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise Refusal(
            codes.UNREADABLE, "the PDF is encrypted and does not open with an empty password"
        )


def _refuse_over_page_ceiling(reader: PdfReader, limits: ParseLimits) -> None:
    """Refuse a document with more pages than the ceiling, whole: never its first pages.

    The page tree's declared /Count is checked first, so a file claiming ten million pages is
    refused before pypdf flattens anything; the flattened count is checked next, because
    /Count may lie in the other direction (pypdf bounds that walk by its page-tree limits).
    """
    for count in (_declared_page_count(reader), len(reader.pages)):
        if isinstance(count, int) and count > limits.max_pages:
            raise Refusal(
                codes.CEILING, f"{count} pages exceeds the {limits.max_pages}-page ceiling"
            )


def _declared_page_count(reader: PdfReader) -> object:
    """The root page-tree node's /Count as the file states it (indexing resolves references)."""
    root = reader.root_object
    if "/Pages" not in root:
        return None
    pages = root["/Pages"]
    if not isinstance(pages, DictionaryObject) or "/Count" not in pages:
        return None
    return pages["/Count"]


@dataclass(frozen=True)
class _TextLayer:
    """A page's text as its text layer reads; ``notice`` says when PDFium read it, not pypdf."""

    text: str
    notice: str | None = None


@dataclass(frozen=True)
class _NeedsOcr:
    """A page whose text is its rendering's OCR; ``fallback`` is kept when OCR reads nothing."""

    fallback: str


class _Pages:
    """One document's pages as ``pdf`` reads them, PDFium opened for the pages that need it.

    The single job, the split and the page job read every page through it, so the pages a
    split sends to OCR are exactly the pages the single job OCRs, their text is the single
    job's, and PDFium sees each page as the page job sees it: alone, in pypdf's checked copy.
    """

    def __init__(self, reader: PdfReader) -> None:
        self.reader = reader
        self._pdfium: tuple[int, PdfiumPage, CheckedCopy] | None = None
        # PDFium's reading of the text copy: opened at the first page, None where the copy
        # cannot be made or checked (then pypdf reads every page, as it did alone).
        self._text: PdfiumText | None = None
        self._text_tried = False
        # Field values live in the catalog's form; a document whose form holds none has none
        # to place, and skips resolving every link annotation of every page to find that out.
        self._has_form = form_has_values(reader.root_object)
        self.labels = page_labels(reader.root_object, len(reader.pages))

    def __enter__(self) -> _Pages:
        return self

    def __exit__(self, *_: object) -> None:
        self._close_pdfium()
        if self._text is not None:
            self._text.close()

    def __iter__(self) -> Iterator[tuple[int, PageObject, _TextLayer | _NeedsOcr]]:
        """Each page with its text, or with what OCR of it needs; progress said as it goes."""
        total = len(self.reader.pages)
        for index, page in enumerate(self.reader.pages):
            yield index, page, _read_page(self, index, self._has_form)
            report_progress(index + 1, total)

    def pdfium(self, index: int) -> PdfiumPage:
        """Page ``index`` as PDFium reads it, opened once for its text and its rendering.

        PDFium opens pypdf's copy of the page alone, and only once every stream of the copy is
        checked for the codecs the sandbox never runs (:func:`refuse_hidden_decoders`).
        """
        return self._opened(index)[1]

    def pdfium_text(self, index: int) -> str | None:
        """Page ``index``'s text as PDFium reads the document's text copy
        (``pdf_text_copy.py``), None where there is none to read: a copy that names a codec
        the sandbox never runs, cannot be decoded to be checked, cannot be written or whose
        pages PDFium does not count as pypdf does (the document is read by pypdf alone, as
        before), or a page PDFium cannot load (that page is)."""
        if not self._text_tried:
            self._text_tried = True
            try:
                self._text = PdfiumText(text_copy(self.reader), len(self.reader.pages))
            except MemoryError:
                raise
            except Exception:  # noqa: BLE001 - the copy is a shortcut: pypdf's reading stands
                self._text = None
        return self._from_copy(lambda text: text.text(index))

    def pdfium_positioned(self, index: int) -> tuple[str, list[Fragment]] | None:
        """Page ``index``'s text from the text copy with where its words start, None where
        there is none to read (as :meth:`pdfium_text`)."""
        return self._from_copy(lambda text: text.positioned(index))

    def _from_copy(self, reading: Callable[[PdfiumText], _T]) -> _T | None:
        """``reading`` of the opened text copy; None without one, or for a page PDFium
        cannot load (that page is pypdf's)."""
        if self._text is None:
            return None
        try:
            return reading(self._text)
        except Refusal:
            return None

    def images(self, index: int) -> CheckedCopy:
        """What the walk of page ``index``'s copy found: every image stream PDFium may draw,
        and whether its content may hold an inline image."""
        return self._opened(index)[2]

    def _opened(self, index: int) -> tuple[int, PdfiumPage, CheckedCopy]:
        if self._pdfium is not None and self._pdfium[0] == index:
            return self._pdfium
        self._close_pdfium()
        writer = _page_alone(self.reader, self.reader.pages[index])
        copy = _written(writer)
        # Checked as written: writing is the last step that could add an object to the copy.
        checked = refuse_hidden_decoders(writer)
        self._pdfium = (index, PdfiumPage(copy), checked)
        return self._pdfium

    def _close_pdfium(self) -> None:
        if self._pdfium is not None:
            self._pdfium[1].close()
            self._pdfium = None


def _document(reader: PdfReader, limits: ParseLimits) -> Document:
    """The pages in order, each opening with its page marker.

    A document long enough to be split is answered ``SplitRequired`` at its first page to OCR,
    unchecked and unrendered: read in pages, each page job checks and renders its page within a
    budget of its own, and doing it here first would only hold them back. With OCR off the light
    stage hands the document on; with OCR on, the extractor reads it in pages
    (sandbox/extractor.py), so a long scan gets the same per-page budgets on every path.
    """
    budget = TextBudget(limits)
    hand_on_unread = pages.splits(len(reader.pages), limits)
    blocks: list[Block] = []
    with _Pages(reader) as document:
        for index, page, reading in document:
            blocks.append(PageBreak(index + 1, document.labels[index]))
            if isinstance(reading, _TextLayer):
                blocks += _text_layer(reading, budget)
                continue
            if hand_on_unread and _draws(page):
                raise Refusal(codes.NEEDS_SPLIT, "a page has no text layer and needs OCR")
            blocks += _scanned(_ocr_page(document, index, limits), reading.fallback, budget)
    return Document(blocks)


def _text_layer(layer: _TextLayer, budget: TextBudget) -> list[Block]:
    """A page's blocks as its text layer reads: the notice of who read it, then its text."""
    notice: list[Block] = [] if layer.notice is None else [Notice(layer.notice)]
    return notice + ([Paragraph(budget.spend(layer.text))] if layer.text else [])


def _scanned(scan: OcrText | None, fallback: str, budget: TextBudget) -> list[Block]:
    """A scanned page's blocks: what OCR read, else its text layer's text (a stamp on a scan)."""
    if scan is not None and scan.text:
        return [OcrText(budget.spend(scan.text), scan.confidence)]
    return [Paragraph(budget.spend(fallback))] if fallback else []


def _read_page(document: _Pages, index: int, has_form: bool) -> _TextLayer | _NeedsOcr:
    """The page's text as PDFium reads it, laid out (:func:`_laid_out`) and repaired; or, where
    PDFium may leave glyphs out (``pdf_fonts.py``) or the page needs pypdf's reading
    (:func:`_needs_pypdf`), as :func:`_read_by_pypdf` reads it."""
    page = document.reader.pages[index]
    text = None if may_drop_glyphs(page) else document.pdfium_text(index)
    if text is None:
        return _read_by_pypdf(document, index, has_form)
    values = field_values(page) if has_form else []
    if values or may_have_numbered_lines(text):
        positioned = document.pdfium_positioned(index)
        if positioned is None:
            return _read_by_pypdf(document, index, has_form)
        text = _laid_out(*positioned, values)
    text = repair(text).strip()
    if _needs_pypdf(text):
        return _read_by_pypdf(document, index, has_form)
    return _TextLayer(text)


def _needs_pypdf(text: str) -> bool:
    """Whether a page is pypdf's to read, PDFium's text of it being ``text``: text that is
    broken, empty or a scan's stamp (the choice between a text layer and OCR is made on
    pypdf's reading, as it was), right-to-left writing (see :data:`_RIGHT_TO_LEFT`), and
    words PDFium split into letters (:func:`_split_into_letters`)."""
    return (
        _visible(text) < SCAN_STAMP_CHARS
        or unmapped_share(text) > BROKEN_SHARE
        or _RIGHT_TO_LEFT.search(text) is not None
        or _split_into_letters(text)
    )


def _split_into_letters(text: str) -> bool:
    """Whether more than :data:`_LETTER_WORD_SHARE` of a page's words (of at least
    :data:`_SPLIT_WORDS`) are one letter: PDFium cut an OCR layer's words apart ("Nort h Buon
    a Vist a Driv e", where pypdf reads "North Buona Vista Drive"); on 107 pages of real PDFs
    the share was at most 0.23 elsewhere (0.22 on Korean prose), 0.42 to 0.47 there."""
    words = _WORDS.findall(text)
    if len(words) < _SPLIT_WORDS:
        return False
    return sum(1 for word in words if len(word) == 1) > _LETTER_WORD_SHARE * len(words)


def _read_by_pypdf(document: _Pages, index: int, has_form: bool) -> _TextLayer | _NeedsOcr:
    """The page's text layer as pypdf reads it, laid out and repaired; the text PDFium reads
    of the page alone where pypdf's is broken; or, where there is none, that the page needs
    OCR."""
    page = document.reader.pages[index]
    text = _laid_out_text(page, has_form)
    share = unmapped_share(text)
    if share > BROKEN_SHARE:
        replacement = repair(document.pdfium(index).text()).strip()
        if unmapped_share(replacement) < share:
            marker = PDFIUM_MARKER.format(
                page=index + 1,
                pdfium=_visible(replacement),
                pypdf=_visible(text),
                share=share,
            )
            return _TextLayer(replacement, marker)
    text = repair(text).strip()
    if not text:
        return _NeedsOcr("")
    if _visible(text) < SCAN_STAMP_CHARS and image_coverage(page) >= SCAN_COVERAGE:
        return _NeedsOcr(text)
    return _TextLayer(text)


def _parts(
    reader: PdfReader, payload: bytes, limits: ParseLimits
) -> list[pages.TextPart | pages.ScanPart] | None:
    """Each page's part, or None when the one-page PDFs outgrow :func:`pages.split_allowance`
    or its pages to OCR carry too few pixels to be worth a task each
    (:func:`pages.worth_splitting`).

    A page that draws nothing is its text, as the single job reads it without rendering: it
    is worth no page job.
    """
    budget = TextBudget(limits)
    room = pages.split_allowance(len(payload))
    parts: list[pages.TextPart | pages.ScanPart] = []
    pixels: list[int] = []
    with _Pages(reader) as document:
        for index, page, reading in document:
            label = document.labels[index]
            if isinstance(reading, _TextLayer):
                parts.append(pages.TextPart(budget.spend(reading.text), reading.notice, label))
                continue
            if not _draws(page):
                parts.append(pages.TextPart(budget.spend(reading.fallback), label=label))
                continue
            single = _written(_page_alone(reader, page))
            room -= len(single)
            if room < 0:
                return None
            parts.append(pages.ScanPart(single, reading.fallback, label))
            pixels.append(_pixels_to_read(page, limits))
    return parts if pages.worth_splitting(pixels) else None


def _pixels_to_read(page: PageObject, limits: ParseLimits) -> int:
    """The pixels OCR of the page renders, sized as :meth:`PdfiumPage.render` sizes them, from
    the crop box as pypdf reads it (PDFium draws the same box); 0 for a box without area, which
    the page's reading refuses anyway."""
    box = page.cropbox
    width, height = abs(float(box.width)), abs(float(box.height))
    try:
        scale = render_scale(width, height, limits)
    except Refusal:
        return 0
    return math.ceil(width * scale) * math.ceil(height * scale)


def _page_alone(reader: PdfReader, page: PageObject) -> PdfWriter:
    """The page alone in a PDF of its own, with what it uses (fonts, images) and nothing else:
    the OCR of it needs no other page, and its reader parses none.

    The document's optional-content settings (``/OCProperties``: which layers are shown) go
    with it: without them PDFium draws every layer, and a layer hidden from readers (text an
    attacker hid to reach the model) would be OCR'd, or a shown one lost.
    """
    writer = PdfWriter()
    # A page may also carry /Kids: pypdf reads it as the leaf it says it is, PDFium walks the
    # kids whatever /Type says, and would read a page no other reader shows as this one.
    writer.add_page(page, excluded_keys=(_KIDS,))
    layers = reader.root_object.get(_LAYERS)
    if layers is not None:
        writer.root_object[NameObject(_LAYERS)] = layers.clone(writer)
    return writer


def _written(writer: PdfWriter) -> bytes:
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _visible(text: str) -> int:
    return len("".join(text.split()))


def _laid_out_text(page: PageObject, has_form: bool) -> str:
    """pypdf's text of the page, laid out (:func:`_laid_out`; positions come with the text in
    the same pass: measured at no extra cost)."""
    return _laid_out(*positioned_text(page), field_values(page) if has_form else [])


def _laid_out(text: str, fragments: list[Fragment], values: list[FieldValue]) -> str:
    """A page's text with its form values placed and its margin line numbers moved to their
    lines, by where its pieces start (pypdf's or PDFium's reading alike)."""
    edits = line_number_edits(text, fragments) + value_edits(text, fragments, values)
    return apply(text, edits)


def _ocr_page(document: _Pages, index: int, limits: ParseLimits) -> OcrText | None:
    """OCR a page without a text layer as one picture, rendered the way a reader sees it.

    Rendering the whole page counts everything it draws: text masks over a blank scanned
    background, inline images, vector-drawn letters. Every stream the page uses is checked for
    JPEG 2000 and JBIG2 first, wherever it is drawn from (:meth:`_Pages.pdfium`), and the
    page's images are checked against the sandbox's decoders and pixel ceiling, and for damage
    (see :func:`check_page_images`), so PDFium never draws an image the sandbox would refuse. A page
    with no ink is empty (None), not a failure.
    """
    page = document.reader.pages[index]
    if not _draws(page):
        return None  # a blank page, without rendering it
    pdfium = document.pdfium(index)
    check_page_images(page, document.images(index), pdfium, limits)
    picture = pdfium.render(limits)
    if not has_ink(picture):
        return None
    if not limits.ocr:
        raise Refusal(codes.NEEDS_OCR, "a page has no text layer and needs OCR")
    try:
        text = ocr_image(picture, limits)
    except EmptyPage:
        return None  # one page without writing must not fail the document
    return OcrText(text, quality.last_confidence())


def warm_up(payload: bytes, limits: ParseLimits) -> Image.Image:
    """Read the one page of ``payload`` (a scan) as a page to OCR is read, short of OCR: its
    copy written and checked, its images checked, PDFium's text and rendering of it. The
    rendering is returned, for the caller to warm what OCR does with it."""
    with _opened(payload, limits) as reader, _Pages(reader) as document:
        pdfium = document.pdfium(0)
        check_page_images(reader.pages[0], document.images(0), pdfium, limits)
        pdfium.text()
        return pdfium.render(limits)


def _draws(page: PageObject) -> bool:
    """Whether the page's content draws anything at all."""
    contents = page.get_contents()
    return contents is not None and bool(contents.get_data().strip())
