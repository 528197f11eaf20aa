"""PDF pages as a reader sees them: scanned pages rendered before OCR, blank pages in scans,
repaired text layers, form values, and the pages whose text PDFium reads instead of pypdf.

Documents are built here from drawn text (Pillow's own font) or taken from the corpus; every
one goes through the real pypdf, PDFium and tesseract.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import pypdfium2
import pytest
from PIL import Image, ImageDraw, ImageFont, TiffImagePlugin
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    DictionaryObject,
    NameObject,
    NumberObject,
    TextStringObject,
)

from sandbox.extractors import pdf as pdf_extractor
from sandbox.extractors import pdfium
from sandbox.extractors.pdf import PDFIUM_MARKER
from sandbox.extractors.pdf_forms import form_has_values
from sandbox.extractors.pdf_text import repair, unmapped_share
from sandbox.extractors.pdfium import PdfiumPage, render_scale
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits
from tests.cer import cer
from tests.in_process import rendered_by, words_of
from tests.pdf_builders import CATALOG, FONT, pdf, pdf_of_pages, pdf_with_text_lines, stream
from tests.scanned_pdfs import image_page

extract_pdf = words_of(pdf_extractor.extract_pdf)
rendered_pdf = rendered_by(pdf_extractor.extract_pdf)

LIMITS = ParseLimits()
WORDS = "Quarterly report on the harbour"
# A letter page, in points.
WIDTH, HEIGHT = 612, 792


def _text_picture(mode: str, text: str = WORDS) -> Image.Image:
    """``text`` in black on white, large enough for tesseract at the rendering's dpi."""
    font = ImageFont.load_default(size=56)
    picture = Image.new(mode, (1600, 160), "white")
    ImageDraw.Draw(picture).text((30, 40), text, font=font, fill="black")
    return picture


def _ccitt_mask(picture: Image.Image) -> bytes:
    """The CCITT group 4 data of a bilevel picture, cut out of the one-strip TIFF Pillow
    writes (its data codes black as 1, hence /BlackIs1 below)."""
    buffer = io.BytesIO()
    picture.save(buffer, format="TIFF", compression="group4")
    tiff = Image.open(io.BytesIO(buffer.getvalue()))
    assert isinstance(tiff, TiffImagePlugin.TiffImageFile)
    (offset,), (length,) = tiff.tag_v2[273], tiff.tag_v2[279]
    return buffer.getvalue()[offset : offset + length]


def _background_jpeg() -> bytes:
    """A blank sheet as a scanner sees it: light grey noise, no pixel near black."""
    noise = Image.effect_noise((850, 1100), 6).point(lambda value: min(255, value + 140))
    buffer = io.BytesIO()
    noise.convert("L").save(buffer, format="JPEG", quality=70)
    return buffer.getvalue()


def _pages_tree(count: int) -> bytes:
    kids = b" ".join(b"%d 0 R" % (3 + 2 * index) for index in range(count))
    return b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count)


def _scanned_pdf(with_text: list[bool], missing_kid: bool = False, stamp: bytes = b"") -> bytes:
    """A scan, one page per entry: each a full-page background JPEG, and where the entry is
    True a CCITT image mask of :data:`WORDS` painted in black over it (a scanner's MRC output).
    ``missing_kid`` puts a page-tree entry that points to no object first; ``stamp`` is drawn as
    real text (Helvetica) at the foot of each page.
    """
    count = len(with_text)
    background_number = 3 + 2 * count
    mask_number = background_number + 1
    tree = _pages_tree(count)
    if missing_kid:
        tree = tree.replace(b"/Kids [", b"/Kids [999 0 R ").replace(
            b"/Count %d" % count, b"/Count %d" % (count + 1)
        )
    objects = [CATALOG, tree]
    for has_text in with_text:
        drawing = b"q %d 0 0 %d 0 0 cm /Bg Do Q" % (WIDTH, HEIGHT)
        if has_text:
            drawing += b" q 0 g 480 0 0 48 60 600 cm /Mk Do Q"
        if stamp:
            drawing += b" BT /F1 14 Tf 400 40 Td (%s) Tj ET" % stamp
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << /XObject "
            b"<< /Bg %d 0 R /Mk %d 0 R >> /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
            % (WIDTH, HEIGHT, background_number, mask_number, mask_number + 1, len(objects) + 2)
        )
        objects.append(stream(drawing))
    objects.append(
        stream(
            _background_jpeg(),
            b"/Type /XObject /Subtype /Image /Width 850 /Height 1100 /ColorSpace /DeviceGray "
            b"/BitsPerComponent 8 /Filter /DCTDecode ",
        )
    )
    picture = _text_picture("1")
    objects.append(
        stream(
            _ccitt_mask(picture),
            b"/Type /XObject /Subtype /Image /Width %d /Height %d /ImageMask true "
            b"/Filter /CCITTFaxDecode /DecodeParms << /K -1 /Columns %d /Rows %d /BlackIs1 true >> "
            % (picture.width, picture.height, picture.width, picture.height),
        )
    )
    objects.append(FONT)
    return pdf(objects)


def _inline_image_pdf() -> bytes:
    """One page whose only content is an inline image (BI ... ID ... EI) of :data:`WORDS`,
    hex-encoded so no byte of the samples can read as the EI that ends it."""
    picture = _text_picture("L")
    inline = b"q 480 0 0 48 60 600 cm BI /W %d /H %d /CS /G /BPC 8 /F /AHx ID\n%s>\nEI Q" % (
        picture.width,
        picture.height,
        picture.tobytes().hex().encode(),
    )
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << >> /Contents 4 0 R >>"
        % (WIDTH, HEIGHT)
    )
    return pdf([CATALOG, _pages_tree(1), page, stream(inline)])


# --- OCR of rendered pages ---------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_scanned_page_of_a_background_and_a_text_mask_is_read() -> None:
    """Each image alone is a blank sheet or an inverted stencil; only the page as drawn reads."""
    assert extract_pdf("application/pdf", _scanned_pdf([True]), LIMITS) == WORDS


@pytest.mark.timeout(120)
def test_scan_encrypted_with_an_empty_password_is_rendered_too() -> None:
    """PDFium draws what pypdf opened with an empty user password (AES-256 here): pypdf's
    copy of the page, written without encryption."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_scanned_pdf([True]))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-256")
    buffer = io.BytesIO()
    writer.write(buffer)
    assert extract_pdf("application/pdf", buffer.getvalue(), LIMITS) == WORDS


@pytest.mark.timeout(120)
def test_scanned_page_with_a_stamp_of_real_text_is_still_read() -> None:
    """A Bates number in the text layer does not make a scanned page a text page: the page
    is OCR'd, and the rendering holds the stamp too."""
    text = extract_pdf("application/pdf", _scanned_pdf([True], stamp=b"ABC-000123"), LIMITS)
    assert text.split() == [*WORDS.split(), "ABC-000123"]


@pytest.mark.timeout(120)
def test_page_whose_only_image_is_inline_is_read() -> None:
    assert extract_pdf("application/pdf", _inline_image_pdf(), LIMITS) == WORDS


@pytest.mark.timeout(180)
def test_blank_page_of_a_scan_is_an_empty_page_not_a_failed_document() -> None:
    text = rendered_pdf("application/pdf", _scanned_pdf([True, False, True]), LIMITS)
    assert text == f"[page 1]\n{WORDS}\n\n[page 2]\n\n[page 3]\n{WORDS}"


def test_blank_page_needs_no_ocr() -> None:
    """With OCR off (the light queue) a page of only a scanned background is empty, not a
    document to hand to the OCR queue; a page with writing on it is."""
    no_ocr = ParseLimits(ocr=False)
    assert extract_pdf("application/pdf", _scanned_pdf([False]), no_ocr) == ""
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", _scanned_pdf([False, True]), no_ocr)
    assert refused.value.code == "needs_ocr"


@pytest.mark.timeout(120)
def test_a_page_of_many_images_is_one_ocr_run_within_a_one_page_ceiling() -> None:
    """Rendering makes a page one picture: three images of words on one page are read
    together under a one-page ceiling (OCR runs are bounded by the page ceiling)."""
    words = ["harbour", "lighthouse", "quay"]
    names = [b"/Im%d" % index for index in range(3)]
    drawing = b" ".join(
        b"q 480 0 0 48 60 %d cm %s Do Q" % (600 - 100 * index, name)
        for index, name in enumerate(names)
    )
    resources = b"/XObject << %s >>" % b" ".join(
        b"%s %d 0 R" % (name, 5 + index) for index, name in enumerate(names)
    )
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << %s >> "
        b"/Contents 4 0 R >>" % (WIDTH, HEIGHT, resources)
    )
    images = []
    for word in words:
        picture = _text_picture("L", word)
        images.append(
            stream(
                zlib.compress(picture.tobytes()),
                b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
                b"/BitsPerComponent 8 /Filter /FlateDecode " % (picture.width, picture.height),
            )
        )
    payload = pdf([CATALOG, _pages_tree(1), page, stream(drawing), *images])
    assert extract_pdf("application/pdf", payload, ParseLimits(max_pages=1)).split() == words


@pytest.mark.timeout(120)
def test_page_tree_the_two_parsers_count_differently_is_read_as_pypdf_counts_it() -> None:
    """pypdf skips a page-tree entry that points to nothing and PDFium counts it, so on the
    upload page 1 of one is not page 1 of the other. PDFium never opens the upload: it draws
    pypdf's copy of pypdf's page, so no page is rendered in place of another."""
    payload = _scanned_pdf([True], missing_kid=True)
    upload = pypdfium2.PdfDocument(payload)
    try:
        assert len(upload) == 2  # the disagreement is real: PDFium's first page is the hole
    finally:
        upload.close()
    assert extract_pdf("application/pdf", payload, LIMITS) == WORDS


def test_render_scale_is_300_dpi_and_fits_a_huge_page_in_the_pixel_ceiling() -> None:
    assert render_scale(WIDTH, HEIGHT, LIMITS) == 300 / 72
    largest = 14_400.0  # the largest page side PDF allows, 200 inches
    scale = render_scale(largest, largest, LIMITS)
    assert (largest * scale + 1) ** 2 <= LIMITS.max_pixels


@pytest.mark.parametrize(("width", "height"), [(0.0, 792.0), (612.0, -1.0), (float("inf"), 1.0)])
def test_page_without_a_finite_area_is_unreadable(width: float, height: float) -> None:
    """PDFium gives a page with an empty MediaBox a default size; a size it reports without
    area never reaches the division that picks the dpi."""
    with pytest.raises(Refusal) as refused:
        render_scale(width, height, LIMITS)
    assert refused.value.code == "unreadable" and "has no area to render" in refused.value.reason


def test_scanned_corpus_pages_still_read_exactly(corpus_dir: Path) -> None:
    """Rendering keeps the corpus scans at CER 0, the /Rotate'd one included."""
    for name in ("docling_ocr_test-scanned", "docling_ocr_test_rotated_90-scanned"):
        text = extract_pdf("application/pdf", (corpus_dir / f"{name}.pdf").read_bytes(), LIMITS)
        assert cer((corpus_dir / f"{name}.expected.txt").read_text(), text) == 0.0


# --- repaired text layers ----------------------------------------------------------------------


def test_ligatures_are_spelled_out_and_nothing_else_is_folded() -> None:
    assert repair("the ﬁrst eﬃcient ﬂow") == "the first efficient flow"
    assert repair("x² ½ ＡＢ") == "x² ½ ＡＢ"  # NFKC would fold these, losing meaning


@pytest.mark.parametrize(
    ("broken", "joined"),
    [
        ("an exam-\nple of it", "an example\nof it"),
        ("an exam-\nple\nnext", "an example\nnext"),
        ("soft\u00ad\nhyphen", "softhyphen"),
        ("well-\nKnown", "well-\nKnown"),  # a capital: more often a real hyphen
        ("page 12-\n13", "page 12-\n13"),  # numbers are ranges, not words
        ("a dash -\nthen", "a dash -\nthen"),  # not inside a word
    ],
)
def test_line_end_hyphens_inside_words_are_joined(broken: str, joined: str) -> None:
    assert repair(broken) == joined


def test_corpus_text_has_no_ligature_characters_left(corpus_dir: Path) -> None:
    payload = (corpus_dir / "pypdf-samples_multicolumn.pdf").read_bytes()
    assert "ﬁ" in "".join(page.extract_text() for page in PdfReader(io.BytesIO(payload)).pages)
    assert "ﬁ" not in extract_pdf("application/pdf", payload, LIMITS)


def test_unmapped_share_counts_what_no_script_uses() -> None:
    assert unmapped_share("") == 0.0
    assert unmapped_share("plain words") == 0.0
    assert unmapped_share("ab\ufffd\ue000\u0378\x01") == pytest.approx(4 / 6)


def test_page_pypdf_misreads_is_read_by_pdfium_and_says_so(corpus_dir: Path) -> None:
    """pypdf reads this vertical Japanese poem as unassigned code points (12% of them);
    PDFium maps the glyphs it can (a third of them), its columns are read right to left as
    lines of the poem, and the page says whose text it is and how much of the page it holds."""
    payload = (corpus_dir / "pdfminer_jo-japanese.pdf").read_bytes()
    text = rendered_pdf("application/pdf", payload, LIMITS)
    marker, notice, body = text.split("\n", 2)
    assert marker == "[page 1]"
    assert notice == PDFIUM_MARKER.format(page=1, pdfium=262, pypdf=898, share=0.12)
    lines = body.splitlines()
    first_line = lines.index("（あらゆる透明な幽霊の複合体）")
    assert lines[first_line + 1] == "風景やみんなといっしょに"
    assert unmapped_share(body) == 0.0


def _private_use_pdf() -> bytes:
    """A page whose font's ToUnicode map sends every glyph to the private use area: PDFium
    honours the same map, so its text is no better and pypdf's stays."""
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /P def "
        b"1 begincodespacerange <00> <FF> endcodespacerange "
        b"1 beginbfrange <41> <5A> <E000> endbfrange endcmap "
        b"CMapName currentdict /CMap defineresource pop end end"
    )
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>"
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
    )
    content = stream(b"BT /F1 12 Tf 20 100 Td (ABCDEF) Tj ET")
    return pdf([CATALOG, _pages_tree(1), page, content, font, stream(cmap)])


def test_page_no_parser_reads_better_keeps_pypdfs_text() -> None:
    text = extract_pdf("application/pdf", _private_use_pdf(), LIMITS)
    assert text == "".join(chr(0xE000 + index) for index in range(6))


# --- form fields -------------------------------------------------------------------------------


def test_form_values_appear_after_their_labels(corpus_dir: Path) -> None:
    form = extract_pdf(
        "application/pdf",
        (corpus_dir / "pypdf-samples_libreoffice-form.pdf").read_bytes(),
        LIMITS,
    ).splitlines()
    assert "First Name Alice Last Name" in form
    assert form[-1] == "Bob"  # a field without a label on its line, on a line of its own


def test_a_value_typed_into_a_form_appears_in_its_reading_position(corpus_dir: Path) -> None:
    writer = PdfWriter(clone_from=corpus_dir / "pypdf-samples_pdflatex-forms.pdf")
    writer.update_page_form_field_values(writer.pages[0], {"Name": "bar"})
    buffer = io.BytesIO()
    writer.write(buffer)
    lines = extract_pdf("application/pdf", buffer.getvalue(), LIMITS).splitlines()
    assert lines[:2] == ["Name bar", "Check"]


def _form(*fields: DictionaryObject) -> DictionaryObject:
    catalog = DictionaryObject()
    catalog[NameObject("/AcroForm")] = DictionaryObject(
        {NameObject("/Fields"): ArrayObject(fields)}
    )
    return catalog


def _field(**entries: object) -> DictionaryObject:
    return DictionaryObject({NameObject(f"/{key}"): value for key, value in entries.items()})


def test_a_form_holds_values_only_when_a_text_or_choice_field_has_one() -> None:
    text, choice, button = NameObject("/Tx"), NameObject("/Ch"), NameObject("/Btn")
    assert not form_has_values(DictionaryObject())
    assert not form_has_values(_form())
    assert not form_has_values(_form(_field(FT=text), _field(FT=text, V=TextStringObject(" "))))
    assert not form_has_values(_form(_field(FT=button, V=NameObject("/Off"))))
    assert form_has_values(_form(_field(FT=text, V=TextStringObject("Alice"))))
    assert form_has_values(_form(_field(FT=choice, V=ArrayObject([TextStringObject("red")]))))
    # A value and a type inherited down the field tree, as a page's widget inherits them.
    inherited = _field(FT=text, V=TextStringObject("Bob"), Kids=ArrayObject([_field()]))
    assert form_has_values(_form(_field(Kids=ArrayObject([inherited]))))


def test_a_form_tree_that_loops_is_walked_to_an_end() -> None:
    looped = _field(FT=NameObject("/Tx"))
    looped[NameObject("/Kids")] = ArrayObject([looped])
    assert not form_has_values(_form(looped))


def test_the_pages_of_a_document_whose_form_is_empty_are_not_searched_for_values(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The form of the pdflatex sample has three fields and no value: its text is read without
    looking through the page's widgets (a quarter of a 15-page register's job)."""

    def searched(page: object) -> list[object]:
        raise AssertionError("a page was searched for form values")

    monkeypatch.setattr(pdf_extractor, "field_values", searched)
    lines = extract_pdf(
        "application/pdf",
        (corpus_dir / "pypdf-samples_pdflatex-forms.pdf").read_bytes(),
        LIMITS,
    ).splitlines()
    assert lines[:2] == ["Name", "Check"]


# --- margin line numbers -----------------------------------------------------------------------

TRANSCRIPT = [
    "THE COURT: Please be seated.",
    "MR. SMITH: Thank you, Your Honor.",
    "THE COURT: Call your first",
    "witness.",
]


def _numbered_page(numbers_x: int, numbers_y_offset: int = 0, count: int = 5) -> bytes:
    """A transcript page that draws its line numbers in one text block before the lines, as
    court reporters' software does; ``count`` numbers, one more than there are lines."""
    numbers = b" ".join(
        b"1 0 0 1 %d %d Tm (%d) Tj" % (numbers_x, 700 - 20 * index + numbers_y_offset, index + 1)
        for index in range(count)
    )
    lines = b" ".join(
        b"1 0 0 1 80 %d Tm (%s) Tj" % (700 - 20 * index, line.encode())
        for index, line in enumerate(TRANSCRIPT)
    )
    content = stream(b"BT /F1 12 Tf %s ET\nBT /F1 12 Tf %s ET" % (numbers, lines))
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
    )
    return pdf([CATALOG, _pages_tree(1), page, content, FONT])


def test_margin_line_numbers_are_kept_with_their_lines() -> None:
    text = extract_pdf("application/pdf", _numbered_page(numbers_x=40), LIMITS)
    numbered = [f"{index} {line}" for index, line in enumerate(TRANSCRIPT, start=1)]
    assert text.splitlines() == ["5", *numbered]  # line 5 is blank: its number stays alone


@pytest.mark.parametrize(
    ("numbers_x", "offset"),
    [(500, 0), (40, 10)],
    ids=["numbers-right-of-the-text", "numbers-off-the-baselines"],
)
def test_numbers_the_layout_does_not_tie_to_lines_stay_where_they_are(
    numbers_x: int, offset: int
) -> None:
    """Numbers right of the text, or off its baselines, are not moved to any line. (PDFium
    writes a column of single digits at the right margin as one word, "12345": its reading.)"""
    text = extract_pdf("application/pdf", _numbered_page(numbers_x, offset), LIMITS)
    numbers = ["12345"] if numbers_x > 80 else ["1", "2", "3", "4", "5"]
    assert text.splitlines() == [*numbers, *TRANSCRIPT]


def _form_pdf(widget: bytes) -> bytes:
    """A one-page form whose page says 'Name' and holds the widget ``widget`` (object 6)."""
    catalog = b"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [6 0 R] >> >>"
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Annots [6 0 R] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
    )
    content = stream(b"BT /F1 12 Tf 1 0 0 1 40 700 Tm (Name) Tj ET")
    return pdf([catalog, _pages_tree(1), page, content, FONT, widget])


@pytest.mark.parametrize(
    ("widget", "expected"),
    [
        (b"<< /Subtype /Widget /FT /Tx /T (n) /V (bar) /Rect [100 695 300 715] >>", "Name bar"),
        (b"<< /Subtype /Widget /Parent 6 0 R /V (bar) /Rect [100 695 300 715] >>", "Name"),
        (b"<< /Subtype /Widget /FT /Tx /V (bar) /Rect [(a) 695 300 715] >>", "Name"),
        (b"<< /Subtype /Widget /FT /Btn /V /Yes /Rect [100 695 300 715] >>", "Name"),
    ],
    ids=["text-field", "parent-cycle-without-type", "rect-not-numbers", "checkbox-state"],
)
def test_form_fields_are_read_only_for_text_values_and_never_loop(
    widget: bytes, expected: str
) -> None:
    assert extract_pdf("application/pdf", _form_pdf(widget), LIMITS) == expected


def _render_modes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each page PDFium renders while the test runs is drawn in grey."""
    modes: list[bool] = []
    render = pypdfium2.PdfPage.render

    def spy(page: pypdfium2.PdfPage, **options: object) -> pypdfium2.PdfBitmap:
        modes.append(bool(options.get("grayscale")))
        return render(page, **options)

    monkeypatch.setattr(pypdfium2.PdfPage, "render", spy)
    return modes


def _grey_rendering(payload: bytes) -> bytes:
    page = pypdfium2.PdfDocument(payload)[0]
    rotation = (360 - page.get_rotation()) % 360
    picture: Image.Image = page.render(scale=300 / 72, rotation=rotation, grayscale=True).to_pil()
    return picture.tobytes()


def test_a_page_of_images_only_is_drawn_in_colour_with_the_grey_paths_pixels(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan is drawn in colour and made grey by Pillow: the same pixels, byte for byte, as
    PDFium's grey path gives, which costs 14-45 % more on these pages. The A4 scans draw their
    image through a form; the letter is Pillow's image page."""
    scans = [
        (corpus_dir / f"{name}.pdf").read_bytes()
        for name in ("docling_ocr_test-scanned", "docling_ocr_test_rotated_90-scanned")
    ] + [image_page(corpus_dir / "tesseract_unlv_8087_054.3B.tif")]
    expected = [_grey_rendering(scan) for scan in scans]
    modes = _render_modes(monkeypatch)
    for scan, pixels in zip(scans, expected, strict=True):
        page = PdfiumPage(scan)
        try:
            assert page.render(LIMITS).tobytes() == pixels
        finally:
            page.close()
    assert modes == [False] * len(scans)


def _annotated(payload: bytes) -> bytes:
    """The page with a note annotation over it (a direct dictionary in /Annots)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(payload)))
    note = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Annot"),
            NameObject("/Subtype"): NameObject("/Text"),
            NameObject("/Rect"): ArrayObject([NumberObject(n) for n in (9, 9, 99, 99)]),
            NameObject("/Contents"): TextStringObject("a note"),
        }
    )
    writer.pages[0][NameObject("/Annots")] = ArrayObject([note])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_text_paths_annotations_and_large_pages_keep_the_grey_path(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PDFium smooths text and paths differently in colour, and a colour bitmap holds three
    bytes a pixel: a page with anything but images, or over 12 million pixels, is drawn grey."""
    letter = image_page(corpus_dir / "tesseract_unlv_8087_054.3B.tif")
    with Image.open(corpus_dir / "tesseract_unlv_8087_054.3B.tif") as scan:
        big = io.BytesIO()
        scan.convert("L").resize((3508, 4961)).save(big, format="PDF", resolution=300.0)
    path_only = pdf(
        [
            CATALOG,
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            stream(b"0 0 0 rg 100 100 300 200 re f"),
        ]
    )
    pages = {
        "text": _first_page_alone(corpus_dir / "pypdf-samples_multicolumn.pdf"),
        "a path": path_only,
        "an annotation": _annotated(letter),
        "17 million pixels": big.getvalue(),
    }
    modes = _render_modes(monkeypatch)
    for what, payload in pages.items():
        page = PdfiumPage(payload)
        try:
            page.render(LIMITS)
        finally:
            page.close()
        assert modes[-1], f"a page with {what} was drawn in colour"


def _first_page_alone(path: Path) -> bytes:
    """The document's first page in the one-page copy PDFium is given of it."""
    reader = PdfReader(path)
    return pdf_extractor._written(pdf_extractor._page_alone(reader, reader.pages[0]))


def _page_with_text_map(shown: bytes, mapping: bytes) -> bytes:
    """A page showing ``shown`` in Helvetica whose ToUnicode map is ``mapping`` (bfchar
    entries): the code points PDFium reports for its glyphs are the map's."""
    return _page_drawing(b"BT /F1 12 Tf 20 100 Td (" + shown + b") Tj ET", mapping)


def _page_drawing(content: bytes, mapping: bytes) -> bytes:
    """A letter page whose ``content`` draws with /F1, Helvetica read through ``mapping``."""
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /M def "
        b"1 begincodespacerange <00> <FF> endcodespacerange "
        + mapping
        + b" endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>"
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
    )
    return pdf([CATALOG, _pages_tree(1), page, stream(content), font, stream(cmap)])


def _mapped(pairs: list[tuple[int, int]]) -> bytes:
    """bfchar entries sending each one-byte code to a character of the basic plane."""
    entries = b" ".join(b"<%02X> <%04X>" % pair for pair in pairs)
    return b"%d beginbfchar %s endbfchar" % (len(pairs), entries)


def test_glyphs_outside_the_basic_plane_are_kept_and_lone_surrogates_dropped() -> None:
    """PDFium keeps a character outside the basic plane as its two UTF-16 halves, one index
    each: they are read as the one character (a vertical page of CJK Extension B keeps it), and
    a half alone, which no text can encode, is left out instead of failing the page."""
    document = pypdfium2.PdfDocument(
        _page_with_text_map(
            b"ABC", b"3 beginbfchar <41> <D83DDE00> <42> <D800> <43> <0043> endbfchar"
        )
    )
    text_page = document[0].get_textpage()
    try:
        assert [glyph.char for glyph in pdfium._glyphs(text_page)] == ["\U0001f600", "C"]
    finally:
        text_page.close()
        document.close()


def test_the_writing_direction_is_judged_on_a_sample_of_a_long_page() -> None:
    """A page of prose asks PDFium for a few boxes, not one per character: reading every box
    cost a page ten times PDFium's own text of it."""
    line = b"The harbour report for the quarter shows more ships than the year before. "
    payload = pdf_with_text_lines([line.decode() * 6] * 40)
    page = PdfiumPage(payload)
    boxes = _calls_of(page, "FPDFText_GetCharBox")
    assert len(boxes) <= 2 * pdfium._SAMPLED_STEPS
    page.close()


def test_a_page_of_spaces_costs_a_few_calls_a_character() -> None:
    """The search for visible characters only moves forward and stops at the page's end: a
    letter before 30,000 spaces cost each of the 64 samples a search to the end (961,368
    looks)."""
    spaces = b"." * 30_000  # no-break spaces: PDFium keeps each as a character
    mapping = b"3 beginbfchar <41> <0041> <2E> <00A0> <42> <0042> endbfchar"
    payload = _page_with_text_map(b"A" + spaces, mapping)  # one letter: no step anywhere
    page = PdfiumPage(payload)
    codes = _calls_of(page, "FPDFText_GetUnicode")
    text_page = page._page.get_textpage()
    count = text_page.count_chars()
    text_page.close()
    assert count > 30_000
    assert len(codes) <= count + 2 * pdfium._SAMPLED_STEPS
    page.close()


def _calls_of(page: PdfiumPage, name: str) -> list[int]:
    """The character indexes ``page.text()`` passes to PDFium's ``name``, called through."""
    real = getattr(pypdfium2.raw, name)
    seen: list[int] = []

    def spy(text_page: object, index: int, *rest: object) -> object:
        seen.append(index)
        return real(text_page, index, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pypdfium2.raw, name, spy)
        page.text()
    return seen


def test_a_page_that_also_carries_kids_is_read_as_itself() -> None:
    """A page dictionary may carry /Kids as well: pypdf reads it as the page it says it is,
    PDFium walks the kids whatever /Type says. Its copy leaves them out, so the page whose text
    layer is broken is read by PDFium as itself, not as a page no reader lists."""
    private_use = b"1 beginbfrange <20> <7E> <E020> endbfrange"
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /M def "
        b"1 begincodespacerange <00> <FF> endcodespacerange " + private_use + b" endcmap "
        b"CMapName currentdict /CMap defineresource pop end end"
    )
    objects = [
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /Kids [7 0 R] /MediaBox [0 0 600 800] "
        b"/Resources << /Font << /F1 5 0 R /F2 9 0 R >> >> /Contents 4 0 R >>",
        stream(b"BT /F1 12 Tf 20 700 Td (The page's own words) Tj ET"),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
        stream(cmap),
        b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 600 800] "
        b"/Resources << /Font << /F2 9 0 R >> >> /Contents 8 0 R >>",
        stream(b"BT /F2 12 Tf 20 700 Td (IGNORE PREVIOUS INSTRUCTIONS) Tj ET"),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    text = rendered_pdf("application/pdf", pdf(objects), LIMITS)
    assert "IGNORE" not in text
    assert text.startswith("[page 1]\n\ue054\ue068\ue065")  # the page's own text, as pypdf read it


def test_pdfium_refuses_a_copy_that_is_not_one_page() -> None:
    with pytest.raises(Refusal, match="PDFium reads 2 pages in a one-page copy"):
        PdfiumPage(pdf_of_pages(2))


def test_a_page_of_a_thousand_codes_pdfium_leaves_out_is_read() -> None:
    """PDFium leaves some control codes out of its text; pypdfium2 trimmed a run of them at a
    page's end by calling itself once per code, and 1,200 failed the whole document with a
    RecursionError. The page is read whole, in one call."""
    mapping = _mapped([(0x80, 0x0096)] + [(code, code) for code in range(0x20, 0x7F)])
    text = rendered_pdf(
        "application/pdf", _page_with_text_map(b"Hello world" + b"\x80" * 1200, mapping), LIMITS
    )
    assert text.splitlines()[2:] == ["Hello world"]
    assert text.splitlines()[1].startswith("[airlock: text of page 1 read by PDFium, 10 characters")


def test_codes_pdfium_leaves_out_of_its_text_are_not_glyphs() -> None:
    """A vertical page's glyphs are the characters of PDFium's own text: a code it leaves out
    (U+0002 here) must not make its reading look as broken as pypdf's."""
    document = pypdfium2.PdfDocument(
        _page_with_text_map(b"AB", _mapped([(0x41, 0x65E5), (0x42, 0x0002)]))
    )
    text_page = document[0].get_textpage()
    try:
        assert [glyph.char for glyph in pdfium._glyphs(text_page)] == ["\u65e5"]
    finally:
        text_page.close()
        document.close()


def test_lines_that_repeat_at_the_samples_spacing_are_not_read_as_columns() -> None:
    """A page of 64 lines, each opening with a raised initial, has one step down in 24: a
    sample taken at a fixed stride of 24 characters landed on every one of them and read the
    page as columns. Every step is counted before a page is read by columns."""
    mapping = _mapped([(code, code) for code in range(0x20, 0x7F)])
    words = b"the_quick_brown_fox_jumps_over_the_lazy_dog_" * 3
    content = [b"BT /F1 6 Tf "]
    for line in range(64):
        y = 780 - line * 12
        content.append(b"1 0 0 1 20 %d Tm (%c) Tj " % (y + 6, 65 + line % 26))
        content.append(b"1 0 0 1 20 %d Tm (%s) Tj " % (y, words[line % 20 : line % 20 + 18]))
    content.append(b"ET")
    page = PdfiumPage(_page_drawing(b"".join(content), mapping))
    try:
        assert page.text().startswith("A\nthe_quick_brown_fo\nB\nhe_quick_brown_fox\n")
    finally:
        page.close()


def test_a_vertical_page_of_spaced_letters_is_read_by_columns() -> None:
    """Letters of vertical columns nine no-break spaces apart (PDFium keeps each space as a
    character) are still steps of the page: the search for the next letter has no reach."""
    han = [(0x41 + index, 0x65E5 + index) for index in range(26)]
    mapping = _mapped([(0x2E, 0x00A0), *han])
    content = [b"BT /F1 12 Tf "]
    for column in range(5):
        letters = b"".join(bytes([0x41 + (column * 9 + row) % 26]) + b"." * 9 for row in range(9))
        content.append(b"0 -1 1 0 %d 780 Tm (%s) Tj " % (500 - column * 20, letters))
    content.append(b"ET")
    page = PdfiumPage(_page_drawing(b"".join(content), mapping))
    try:
        columns = page.text().split("\n")
    finally:
        page.close()
    assert columns[:2] == ["日旦旧旨早旪旫旬旭", "旮旯旰旱旲旳旴旵时"]
