"""PDFium (through pypdfium2): the text of a PDF's pages, and rendering a page for OCR.

PDFium never opens the upload: it reads text from pypdf's checked text copy of the whole
document (:class:`PdfiumText`), and renders a page (or reads the text of one whose text
layer is broken) from pypdf's checked copy of that page alone (:class:`PdfiumPage`).
See docs/sandbox.md, "Parsers" and "What PDFium opens".
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pypdfium2
from PIL import Image

from sandbox import codes
from sandbox.extractors.ocr import check_pixels
from sandbox.extractors.pdf_layout import Fragment
from sandbox.extractors.registry import Refusal
from sandbox.limits import MIB, ParseLimits

# tesseract reads body text best at 300 dpi; more costs time for nothing, less loses small
# print. A page too large for 300 dpi within the pixel ceiling is rendered at the dpi that fits.
OCR_DPI = 300
_POINTS_PER_INCH = 72
# A pixel darker than mid-grey is ink; a page with fewer than one in 100,000 of them (under 90
# pixels of a letter page at 300 dpi, less than three full stops) is blank.
_INK_LEVEL = 128
_INK_SHARE = 100_000
# A page with fewer characters than this has too few steps to tell its writing direction.
_MIN_VERTICAL_STEPS = 8
#: How many steps between characters first tell a page's writing direction, and the spacing
#: of their starts over the page (fractions of the golden ratio's multiples: no period).
_SAMPLED_STEPS = 64
_GOLDEN = (math.sqrt(5) - 1) / 2
#: The code points PDFium reports for a character's UTF-16 halves, and the last there is.
_HIGH_SURROGATES = (0xD800, 0xDBFF)
_LOW_SURROGATES = (0xDC00, 0xDFFF)
_LAST_CODE_POINT = 0x10FFFF
_T = TypeVar("_T")
_CRLF = re.compile("\r\n")
#: What PDFium writes for a hyphen that ends a line, joining the line to the next
#: ("adip\ufffeiscing"): written back as the hyphen and the line break, which the repair of
#: broken words (``pdf_text.repair``) joins as it does pypdf's.
_HYPHEN_AT_LINE_END = "\ufffe"
_JOINING_HYPHEN = re.compile(_HYPHEN_AT_LINE_END)
_WORD = re.compile(r"\S+")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
#: Letters of the scripts set in vertical columns: Mongolian, CJK (radicals, kana, bopomofo,
#: ideographs, Hangul), their compatibility and vertical forms, and the ideographs past the
#: basic plane.
_VERTICAL_SCRIPTS = re.compile(
    "[\u1800-\u18af\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe10-\ufe1f"
    "\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]"
)
#: How deep the list of a page's images follows forms drawn inside forms.
_FORM_DEPTH = 64
#: The most stored bytes copied out of PDFium, per page, to tell the XObject images its content
#: draws from its inline ones: a 1 MiB image drawn 2,000 times off the page cost a red team
#: 3.5 CPU-s of comparing where PDFium rendered it in 0.1.
_MATCHED_BYTES = 256 * 1024 * 1024
#: Up to this many pixels (a letter or A4 page at 300 dpi has 8.4-8.7 million), a page that
#: draws nothing but images is drawn in colour and made grey by Pillow: PDFium's grey bitmap
#: path cost 14-45 % more on the corpus's grey scans, for byte-identical pixels. A colour
#: bitmap holds three bytes a pixel, so a larger page keeps the grey path and its memory; so
#: does a page with text, paths or annotations, which PDFium smooths differently in colour.
_COLOUR_DRAWN_PIXELS = 12_000_000
#: What a page drawn in colour may hold: images, and forms that hold only images.
_IMAGE_OBJECTS = frozenset({pypdfium2.raw.FPDF_PAGEOBJ_IMAGE, pypdfium2.raw.FPDF_PAGEOBJ_FORM})


@dataclass(frozen=True)
class DrawnImage:
    """An image PDFium draws, as its own content parser found it: its size in pixels, whether
    the page's own content draws it (not a form), and whether it is one of the images the
    caller already checked (its stored bytes and size are one's)."""

    size: tuple[int, int]
    in_page_content: bool
    checked: bool


class PdfiumPage:
    """One page as PDFium reads it: the only page of a PDF that pypdf wrote of it alone, after
    every stream of that copy was checked (``sandbox/extractors/pdf_decoders.py``).

    PDFium never opens the upload itself. Its xref repair, its reading of object streams and
    incremental updates may find objects pypdf never sees; opening pypdf's copy of one page
    leaves it exactly the objects that were checked, and page ``i`` of the document is pypdf's
    page ``i`` by construction.
    """

    def __init__(self, payload: bytes) -> None:
        try:
            self._document = pypdfium2.PdfDocument(payload)
        except pypdfium2.PdfiumError as exc:
            raise Refusal(codes.UNREADABLE, f"PDFium cannot open the page: {exc}") from exc
        if len(self._document) != 1:
            # The copy holds one page by construction; another count means PDFium's page tree
            # is not pypdf's, and page 0 would not be the page that was checked.
            pages = len(self._document)
            self._document.close()
            raise Refusal(codes.UNREADABLE, f"PDFium reads {pages} pages in a one-page copy")
        try:
            self._page = self._document[0]
        except pypdfium2.PdfiumError as exc:
            self._document.close()
            raise Refusal(codes.UNREADABLE, f"PDFium cannot load the page: {exc}") from exc

    def render(self, limits: ParseLimits) -> Image.Image:
        """Render the page in grey at :data:`OCR_DPI`, or at the dpi that keeps it within the
        pixel ceiling.

        The page is drawn in its content's own orientation: /Rotate is undone, as OCR of the
        page's images read them before (tesseract reads upright lines; a scanner stores the
        scan upright and /Rotate only turns the view).
        """
        width, height = self._page.get_size()
        scale = render_scale(width, height, limits)
        pixels = (math.ceil(width * scale), math.ceil(height * scale))
        check_pixels(pixels, limits)
        colour = pixels[0] * pixels[1] <= _COLOUR_DRAWN_PIXELS and self._draws_only_images()
        bitmap = self._page.render(
            scale=scale,
            rotation=(360 - self._page.get_rotation()) % 360,
            grayscale=not colour,
            rev_byteorder=colour,
        )
        picture: Image.Image = bitmap.to_pil()
        return picture.convert("L") if colour else picture

    def _draws_only_images(self) -> bool:
        """Whether the page draws images and nothing else: no text, path or shading, in its
        content or its forms, and no annotation over it."""
        if pypdfium2.raw.FPDFPage_GetAnnotCount(self._page.raw) != 0:
            return False
        found = False
        try:
            for drawn in self._page.get_objects(max_depth=_FORM_DEPTH):
                if drawn.type not in _IMAGE_OBJECTS:
                    return False
                found = found or drawn.type == pypdfium2.raw.FPDF_PAGEOBJ_IMAGE
        except pypdfium2.PdfiumError:
            return False  # the grey path draws whatever PDFium can; it decides nothing here
        return found

    def images(self, checked: Sequence[tuple[bytes, tuple[int, int]]] = ()) -> list[DrawnImage]:
        """Every image the page's content draws and every one the forms it draws do, inline
        ones included, as PDFium's parser reads them: the parser that draws them is the one
        to ask. pypdf's reading of the same content missed inline images PDFium draws (a NUL
        for a space, EI right after Flate data, content PDFium parses as stored because it
        rejects the filter's parameters).

        ``checked`` are the stored bytes and sizes of the images the caller checked; one the
        page's content draws is matched against them: its bytes are copied only when its
        length and size are one's, never kept, and at most :data:`_MATCHED_BYTES` of them per
        page (past that, the page is over a ceiling)."""
        by_shape: dict[tuple[int, tuple[int, int]], list[bytes]] = {}
        for stored, size in checked:
            by_shape.setdefault((len(stored), size), []).append(stored)
        copied = 0
        found = []
        try:
            for image in self._page.get_objects(
                filter=[pypdfium2.raw.FPDF_PAGEOBJ_IMAGE], max_depth=_FORM_DEPTH
            ):
                if not isinstance(image, pypdfium2.PdfImage):
                    continue
                size = image.get_px_size()
                in_page_content = image.level == 0
                length = pypdfium2.raw.FPDFImageObj_GetImageDataRaw(image, None, 0)
                candidates = by_shape.get((length, size), []) if in_page_content else []
                known = False
                if candidates:
                    copied += length
                    if copied > _MATCHED_BYTES:
                        raise Refusal(
                            codes.CEILING,
                            f"the page's content draws images of over {_MATCHED_BYTES // MIB} "
                            "MiB in all, more than the check compares",
                        )
                    stored = bytes(image.get_data())
                    known = any(stored == candidate for candidate in candidates)
                found.append(DrawnImage(size, in_page_content, known))
        except pypdfium2.PdfiumError as exc:
            raise Refusal(codes.UNREADABLE, f"PDFium cannot list the page's images: {exc}") from exc
        return found

    def text(self) -> str:
        """The page's text (:func:`page_text`)."""
        return page_text(self._page)

    def close(self) -> None:
        self._page.close()
        self._document.close()


class PdfiumText:
    """The text of every page of a document, as PDFium reads pypdf's checked text copy of it
    (``sandbox/extractors/pdf_text_copy.py``): one open for all its pages, where a copy of
    each page alone cost more than reading its text.

    A copy whose page count is not pypdf's is refused: page ``i`` must be pypdf's page ``i``,
    whose other readings (its form values, its OCR) stand beside this text.
    """

    def __init__(self, payload: bytes, pages: int) -> None:
        try:
            self._document = pypdfium2.PdfDocument(payload)
        except pypdfium2.PdfiumError as exc:
            raise Refusal(codes.UNREADABLE, f"PDFium cannot open the text copy: {exc}") from exc
        if len(self._document) != pages:
            found = len(self._document)
            self._document.close()
            raise Refusal(codes.UNREADABLE, f"PDFium reads {found} pages in a text copy of {pages}")

    def text(self, index: int) -> str:
        """Page ``index``'s text (:func:`page_text`)."""
        return self._read(index, page_text)

    def positioned(self, index: int) -> tuple[str, list[Fragment]]:
        """Page ``index``'s text (:func:`page_text`) with where each word of it starts, for
        the rules that place text by position (margin line numbers, form values); no words on
        a page written vertically, whose columns are no lines to place anything on."""
        return self._read(index, _positioned_text)

    def _read(self, index: int, reading: Callable[[pypdfium2.PdfPage], _T]) -> _T:
        try:
            page = self._document[index]
        except pypdfium2.PdfiumError as exc:
            raise Refusal(codes.UNREADABLE, f"PDFium cannot load page {index + 1}: {exc}") from exc
        try:
            return reading(page)
        finally:
            page.close()

    def close(self) -> None:
        self._document.close()


def _positioned_text(page: pypdfium2.PdfPage) -> tuple[str, list[Fragment]]:
    """:func:`page_text`, with a fragment for each word: its offsets in that text and its
    first character's origin (the point on the baseline its glyph is drawn from, as pypdf
    places the pieces it reads). Two calls to PDFium a word, none a character."""
    return _reading(page, positioned=True)


def _words(text_page: pypdfium2.PdfTextPage, raw: str) -> list[Fragment]:
    """A fragment for each word of ``raw`` (PDFium's text of the page, its line breaks
    ``\\r\\n``), its offsets in the text :func:`_reading` makes of it (``\\n`` line breaks,
    a hyphen and a line break for each hyphen PDFium joined the lines at)."""
    breaks = [match.start() for match in _CRLF.finditer(raw)]
    hyphens = [match.start() for match in _JOINING_HYPHEN.finditer(raw)]
    # PDFium counts its text in UTF-16 units: a character past the basic plane is two.
    astral = [match.start() for match in _ASTRAL.finditer(raw)]
    x, y = ctypes.c_double(), ctypes.c_double()
    fragments = []

    def _moved(offset: int) -> int:
        """Where ``offset`` of ``raw`` is in the text: each "\\r\\n" before it one
        character, each joining hyphen two."""
        return offset - bisect.bisect_left(breaks, offset) + bisect.bisect_left(hyphens, offset)

    for match in _WORD.finditer(raw):
        start, end = match.span()
        units = start + bisect.bisect_left(astral, start)
        character = pypdfium2.raw.FPDFText_GetCharIndexFromTextIndex(text_page, units)
        if character < 0 or not pypdfium2.raw.FPDFText_GetCharOrigin(
            text_page, character, ctypes.byref(x), ctypes.byref(y)
        ):
            continue
        fragments.append(Fragment(_moved(start), _moved(end), x.value, y.value))
    return fragments


def page_text(page: pypdfium2.PdfPage) -> str:
    """A page's text as PDFium maps its glyphs: in content order, or column by column when
    the page is written vertically (:func:`_reading`)."""
    return _reading(page, positioned=False)[0]


def _reading(page: pypdfium2.PdfPage, *, positioned: bool) -> tuple[str, list[Fragment]]:
    """A page's text, and where its words start when ``positioned`` (none on a page read by
    columns, which are no lines to place anything on).

    Only a page holding letters of a script written vertically (CJK, Mongolian) is judged
    for it: judging every page cost a page of prose a fifth of its reading. A sample of the
    page's steps decides; a page the sample finds vertical is judged again on every step,
    from the glyphs its columns need anyway, so a line structure that happens to repeat at
    the sample's spacing never scrambles a page.
    """
    text_page = page.get_textpage()
    try:
        raw = _page_text(text_page)
        if _VERTICAL_SCRIPTS.search(raw) and _sample_is_vertical(text_page):
            glyphs = _glyphs(text_page)
            if _steps_are_vertical(glyphs):
                return _by_columns(glyphs), []
        text = raw.replace("\r\n", "\n").replace(_HYPHEN_AT_LINE_END, "-\n")
        return text, _words(text_page, raw) if positioned else []
    finally:
        text_page.close()


@dataclass(frozen=True, slots=True)
class _Glyph:
    char: str
    x: float  # the centre of its box, in points
    y: float
    width: float


class _Reader:
    """One text page's characters and boxes through PDFium's own calls, one out-parameter set
    reused: pypdfium2's per-character wrappers (a text range and a box allocated for each
    character) cost a page read this way 8-12 ms, ten times PDFium's own text of it."""

    def __init__(self, text_page: pypdfium2.PdfTextPage) -> None:
        self._text_page = text_page
        self.count = max(0, text_page.count_chars())
        self._box = (ctypes.c_double(), ctypes.c_double(), ctypes.c_double(), ctypes.c_double())
        self._pointers = tuple(ctypes.byref(side) for side in self._box)

    def glyph(self, index: int) -> _Glyph | None:
        """Character ``index`` with the centre of its box, or None when it is not text a reader
        sees: a space or a generated line break, a character PDFium leaves out of its own text
        (its control codes: U+0002, U+0093, U+FFFE...), half of a surrogate pair, or one PDFium
        has no box for."""
        code = self._code(index)
        if code is None:
            return None
        if _HIGH_SURROGATES[0] <= code <= _HIGH_SURROGATES[1]:
            # PDFium keeps a character beyond the basic plane (CJK Extension B, say) as the two
            # halves of its UTF-16 pair, one index each: joined here, or dropped when alone.
            low = self._code(index + 1) if index + 1 < self.count else None
            if low is None or not _LOW_SURROGATES[0] <= low <= _LOW_SURROGATES[1]:
                return None
            code = 0x10000 + ((code - _HIGH_SURROGATES[0]) << 10) + (low - _LOW_SURROGATES[0])
        elif not 0 < code <= _LAST_CODE_POINT or _HIGH_SURROGATES[0] <= code <= _LOW_SURROGATES[1]:
            return None
        char = chr(code)
        if not char.strip():
            return None
        left, right, bottom, top = self._box  # FPDFText_GetCharBox's own order
        if not pypdfium2.raw.FPDFText_GetCharBox(self._text_page, index, *self._pointers):
            return None
        return _Glyph(
            char,
            (left.value + right.value) / 2,
            (bottom.value + top.value) / 2,
            abs(right.value - left.value),
        )

    def next_glyph(self, start: int) -> tuple[int, _Glyph] | None:
        """The first visible glyph at or after ``start``, with its index."""
        for index in range(start, self.count):
            glyph = self.glyph(index)
            if glyph is not None:
                return index, glyph
        return None

    def _code(self, index: int) -> int | None:
        """The code point of character ``index``, or None when PDFium's text leaves it out."""
        if pypdfium2.raw.FPDFText_GetTextIndexFromCharIndex(self._text_page, index) < 0:
            return None
        return int(pypdfium2.raw.FPDFText_GetUnicode(self._text_page, index))


def _page_text(text_page: pypdfium2.PdfTextPage) -> str:
    """The whole page's text in one call. pypdfium2's ``get_text_range`` trims the characters
    PDFium leaves out at either end by calling itself once per character: a page of a
    thousand control codes ended the job in a RecursionError."""
    count = text_page.count_chars()
    if count <= 0:
        return ""
    # Two UTF-16 units a character and the terminator: more than PDFium writes for any text.
    room = 2 * count + 1
    buffer = (ctypes.c_ushort * room)()
    written = pypdfium2.raw.FPDFText_GetText(text_page, 0, count, buffer)
    units = min(max(0, written - 1), room - 1)
    return bytes(memoryview(buffer).cast("B")[: 2 * units]).decode("utf-16-le", errors="ignore")


def _glyphs(text_page: pypdfium2.PdfTextPage) -> list[_Glyph]:
    """The page's visible characters in content order, each with the centre of its box."""
    reader = _Reader(text_page)
    return [glyph for index in range(reader.count) if (glyph := reader.glyph(index)) is not None]


def _sample_is_vertical(text_page: pypdfium2.PdfTextPage) -> bool:
    """Whether most of at most :data:`_SAMPLED_STEPS` steps, from a visible character to the
    next, go down a column rather than along a line: CJK set vertically, whose content order
    PDFium keeps, reads as scrambled lines.

    Every step of a page of prose cost more than reading its text. The samples start at the
    golden ratio's multiples (their gaps take two or three lengths), not at a fixed stride,
    so lines of one length cannot put every sample on the same kind of step; the search only
    moves forward, so a page of nothing but spaces costs one look per character, however many
    samples there are.
    """
    reader = _Reader(text_page)
    starts = sorted(
        int(reader.count * ((sample * _GOLDEN) % 1.0)) for sample in range(_SAMPLED_STEPS)
    )
    steps = down = 0
    cursor = 0
    for start in starts:
        first = reader.next_glyph(max(cursor, start))
        second = reader.next_glyph(first[0] + 1) if first is not None else None
        if first is None or second is None:
            break  # searched to the page's end: no later sample finds a step
        cursor = second[0] + 1
        steps += 1
        down += _goes_down(first[1], second[1])
    return steps >= _MIN_VERTICAL_STEPS and down > steps * 0.5


def _steps_are_vertical(glyphs: list[_Glyph]) -> bool:
    """The same judgement on every step of the page."""
    steps = list(itertools.pairwise(glyphs))
    down = sum(1 for one, two in steps if _goes_down(one, two))
    return len(steps) >= _MIN_VERTICAL_STEPS and down > len(steps) * 0.5


def _goes_down(one: _Glyph, two: _Glyph) -> bool:
    return abs(two.y - one.y) > abs(two.x - one.x)


def _by_columns(glyphs: list[_Glyph]) -> str:
    """Vertical text read as it is written: columns from right to left, each top to bottom,
    one line per column; characters whose centres lie within half a character's width of
    each other share a column."""
    tolerance = statistics.median(glyph.width for glyph in glyphs) / 2
    columns: list[list[_Glyph]] = []
    for glyph in sorted(glyphs, key=lambda glyph: -glyph.x):
        if columns and columns[-1][-1].x - glyph.x <= tolerance:
            columns[-1].append(glyph)
        else:
            columns.append([glyph])
    return "\n".join(
        "".join(glyph.char for glyph in sorted(column, key=lambda glyph: -glyph.y))
        for column in columns
    )


def has_ink(picture: Image.Image) -> bool:
    """Whether a rendered grey page has anything dark enough to be writing on it.

    A blank page of a scan is a light, noisy background; tesseract reports such a page as an
    error ("Empty page!!", Leptonica's "Error in pixScanForForeground"), which would fail the
    whole document for one blank page. Fewer dark pixels than a full stop or two is no text.
    """
    histogram = (picture if picture.mode == "L" else picture.convert("L")).histogram()
    dark = sum(histogram[:_INK_LEVEL])
    return dark > picture.width * picture.height // _INK_SHARE


def render_scale(width: float, height: float, limits: ParseLimits) -> float:
    """Pixels per point: :data:`OCR_DPI`, lowered until the page fits the pixel ceiling.

    A page without area (a zero or inverted box) has nothing to render and is unreadable.
    """
    if not (width > 0 and height > 0 and math.isfinite(width * height)):
        raise Refusal(codes.UNREADABLE, f"a page of {width}x{height} points has no area to render")
    scale = OCR_DPI / _POINTS_PER_INCH
    fitting = math.sqrt(limits.max_pixels / (width * height))
    # One pixel of slack each way: the bitmap's sides are rounded up.
    return min(scale, fitting * 0.999)
