"""PDFs that draw one image of a canary word through each road PDFium takes to an image decoder,
and the ways a file can hide the image's filter, for tests/sandbox/test_pdf_decoders.py.

Each page has no text layer, so it is rendered and OCR'd. The image is the canary drawn in
Pillow's font, stored as a real JPEG 2000 codestream (Pillow still encodes it; only its opener is
pruned in the sandbox), as a JBIG2 stream, or, for the control, as plain Flate-compressed grey
pixels that the sandbox does decode: the control shows the road is drawn and OCR'd, so only the
refusal keeps the canary from the answer.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont, ImageOps

from tests.image_builders import encoded
from tests.pdf_builders import CATALOG, JBIG2_DATA, ONE_PAGE, pdf, repaired_differently, stream

CANARY = "HIDDENJPX"
TEXT = "The quarterly report of the harbour board, with its logo"
# The page, in points, and the canary picture, in pixels (300 dpi at twice the points' size).
WIDTH, HEIGHT = 450, 100
_PIXELS = (900, 200)


@dataclass(frozen=True)
class Codec:
    """How the canary picture is stored: the filter that names it and the bytes."""

    label: str
    filter: bytes
    data: bytes


def canary(inverted: bool = False) -> Image.Image:
    """The canary word in black on white (white on black for a luminosity mask, where white
    is opaque)."""
    picture = Image.new("L", _PIXELS, 255)
    font = ImageFont.load_default(size=100)
    ImageDraw.Draw(picture).text((30, 50), CANARY, fill=0, font=font)
    return ImageOps.invert(picture) if inverted else picture


def flate(inverted: bool = False) -> Codec:
    return Codec("flate", b"/FlateDecode", zlib.compress(canary(inverted).tobytes()))


def jpx(inverted: bool = False) -> Codec:
    return Codec("jpx", b"/JPXDecode", encoded(canary(inverted), "JPEG2000"))


def jbig2(inverted: bool = False) -> Codec:
    return Codec("jbig2", b"/JBIG2Decode", JBIG2_DATA)


def image(codec: Codec, entries: bytes = b"", filter_entry: bytes | None = None) -> bytes:
    """The canary as an image XObject; ``filter_entry`` replaces its /Filter value."""
    return stream(
        codec.data,
        b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter %s %s"
        % (*_PIXELS, codec.filter if filter_entry is None else filter_entry, entries),
    )


def _page(resources: bytes, extra: bytes = b"") -> bytes:
    return (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << %s >> "
        b"/Contents 4 0 R %s>>" % (WIDTH, HEIGHT, resources, extra)
    )


_DRAW_IM0 = b"q %d 0 0 %d 0 0 cm /Im0 Do Q" % (WIDTH, HEIGHT)


def _form(content: bytes, resources: bytes, entries: bytes = b"") -> bytes:
    return stream(
        content,
        b"/Type /XObject /Subtype /Form /BBox [0 0 %d %d] /Resources << %s >> %s"
        % (WIDTH, HEIGHT, resources, entries),
    )


def page_image(image_object: bytes) -> bytes:
    """The image drawn by the page itself: the one road the old check covered."""
    return pdf(
        [CATALOG, ONE_PAGE, _page(b"/XObject << /Im0 5 0 R >>"), stream(_DRAW_IM0), image_object]
    )


def _tiling_pattern(image_number: int) -> bytes:
    """A tiling pattern of one tile, the page's size, whose own resources draw the image."""
    return stream(
        _DRAW_IM0,
        b"/Type /Pattern /PatternType 1 /PaintType 1 /TilingType 1 /BBox [0 0 %d %d] "
        b"/XStep %d /YStep %d /Resources << /XObject << /Im0 %d 0 R >> >> "
        % (WIDTH, HEIGHT, WIDTH, HEIGHT, image_number),
    )


_FILL_WITH_P0 = b"/Pattern cs /P0 scn 0 0 %d %d re f" % (WIDTH, HEIGHT)


def tiling_pattern_objects(image_object: bytes, *more: bytes) -> list[bytes]:
    """The objects of :func:`tiling_pattern`, the image sixth, ``more`` after it."""
    return [
        CATALOG,
        ONE_PAGE,
        _page(b"/Pattern << /P0 5 0 R >>"),
        stream(_FILL_WITH_P0),
        _tiling_pattern(6),
        image_object,
        *more,
    ]


def tiling_pattern(image_object: bytes) -> bytes:
    """The page fills itself with a tiling pattern whose own resources draw the image."""
    return pdf(tiling_pattern_objects(image_object))


def form(image_object: bytes) -> bytes:
    """The page draws a form XObject, and the form draws the image."""
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/XObject << /Fm0 5 0 R >>"),
            stream(b"/Fm0 Do"),
            _form(_DRAW_IM0, b"/XObject << /Im0 6 0 R >>"),
            image_object,
        ]
    )


def annotation(image_object: bytes) -> bytes:
    """A stamp annotation whose appearance stream draws the image; the page's own content
    draws nothing visible."""
    return annotated(_form(_DRAW_IM0, b"/XObject << /Im0 7 0 R >>"), image_object)


def annotated(appearance: bytes, *more: bytes) -> bytes:
    """A page with one stamp annotation whose appearance stream is ``appearance`` (object 6),
    ``more`` objects after it."""
    stamp = b"<< /Type /Annot /Subtype /Stamp /Rect [0 0 %d %d] /AP << /N 6 0 R >> >>" % (
        WIDTH,
        HEIGHT,
    )
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"", b"/Annots [5 0 R] "),
            stream(b"q Q"),
            stamp,
            appearance,
            *more,
        ]
    )


def appearance(data: bytes, entries: bytes) -> bytes:
    """An appearance stream of stored ``data`` with the stream entries ``entries``."""
    return stream(
        data, b"/Type /XObject /Subtype /Form /BBox [0 0 %d %d] %s" % (WIDTH, HEIGHT, entries)
    )


def type3_glyph(image_object: bytes) -> bytes:
    """A Type3 font whose one glyph procedure draws the image from the font's resources; the
    glyph maps to a space, so the page has no text layer."""
    font = (
        b"<< /Type /Font /Subtype /Type3 /FontBBox [0 0 %d %d] /FontMatrix [1 0 0 1 0 0] "
        b"/CharProcs << /canary 6 0 R >> /Encoding << /Type /Encoding /Differences [65 /canary] >> "
        b"/FirstChar 65 /LastChar 65 /Widths [%d] /ToUnicode 8 0 R "
        b"/Resources << /XObject << /Im0 7 0 R >> >> >>" % (WIDTH, HEIGHT, WIDTH)
    )
    to_unicode = stream(
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap "
        b"/CMapName /Canary def 1 begincodespacerange <00> <FF> endcodespacerange "
        b"1 beginbfchar <41> <0020> endbfchar endcmap CMapName currentdict /CMap defineresource "
        b"pop end end"
    )
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/Font << /T3 5 0 R >>"),
            stream(b"BT /T3 1 Tf 0 0 Td (A) Tj ET"),
            font,
            stream(b"%d 0 d0 %s" % (WIDTH, _DRAW_IM0)),
            image_object,
            to_unicode,
        ]
    )


def soft_mask_group(image_object: bytes) -> bytes:
    """The page paints black through a luminosity soft mask whose group draws the image (the
    canary inverted, so the paint shows where the letters are)."""
    state = b"<< /Type /ExtGState /SMask << /Type /Mask /S /Luminosity /G 6 0 R >> >>"
    group = _form(
        _DRAW_IM0,
        b"/XObject << /Im0 7 0 R >>",
        b"/Group << /S /Transparency /CS /DeviceGray >> ",
    )
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/ExtGState << /GS0 5 0 R >>"),
            stream(b"/GS0 gs 0 g 0 0 %d %d re f" % (WIDTH, HEIGHT)),
            state,
            group,
            image_object,
        ]
    )


def image_soft_mask(mask_object: bytes) -> bytes:
    """The page draws a black image whose /SMask is the image (the canary inverted)."""
    black = stream(
        zlib.compress(bytes(_PIXELS[0] * _PIXELS[1])),
        b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode /SMask 6 0 R " % _PIXELS,
    )
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/XObject << /Im0 5 0 R >>"),
            stream(_DRAW_IM0),
            black,
            mask_object,
        ]
    )


def shading(function_filter: bytes) -> bytes:
    """An axial shading whose sampled function's stream carries the filter. PDFium reads a
    function's samples without an image decoder; the rule refuses the filter wherever it is."""
    function = stream(
        bytes(range(256)),
        b"/FunctionType 0 /Domain [0 1] /Range [0 1] /Size [256] /BitsPerSample 8 "
        b"/Filter %s " % function_filter,
    )
    axial = b"<< /ShadingType 2 /ColorSpace /DeviceGray /Coords [0 0 %d 0] /Function 6 0 R >>" % (
        WIDTH
    )
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/Shading << /Sh0 5 0 R >>"),
            stream(b"/Sh0 sh"),
            axial,
            function,
        ]
    )


def inline_image(codec: Codec, filter_entry: bytes) -> bytes:
    """The image inline (BI ... ID ... EI) in a content stream; ``filter_entry`` is the whole
    /F value, so a test names how the codec is abbreviated, escaped or chained. Behind an
    /AHx first filter the data is hex, which no reader can take for the EI that ends it."""
    data = codec.data.hex().encode() + b">" if filter_entry.startswith(b"[/AHx") else codec.data
    return b"q %d 0 0 %d 0 0 cm BI /W %d /H %d /CS /G /BPC 8 /F %s ID\n%s\nEI Q" % (
        WIDTH,
        HEIGHT,
        *_PIXELS,
        filter_entry,
        data,
    )


def inline(drawing: bytes, content_filter: bytes = b"") -> bytes:
    """The page's content is ``drawing``; compressed with ``content_filter``, nothing of it is
    in the file's bytes as written."""
    if content_filter:
        content = stream(zlib.compress(drawing), b"/Filter %s " % content_filter)
    else:
        content = stream(drawing)
    return pdf([CATALOG, ONE_PAGE, _page(b""), content])


def inline_in_form(drawing: bytes) -> bytes:
    """The page draws a form XObject whose content is ``drawing``."""
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/XObject << /Fm0 5 0 R >>"),
            stream(b"/Fm0 Do"),
            _form(drawing, b""),
        ]
    )


def page_without_resources() -> bytes:
    """A definition of the page (object 3) that draws nothing."""
    return _page(b"")


def drawn_by_pdfium_alone(image_object: bytes) -> bytes:
    """The page drawing the image as PDFium repairs the file, and the same page without
    resources, drawing nothing, as pypdf repairs it (tests/pdf_builders.repaired_differently)."""
    return repaired_differently(page_image(image_object), {3: page_without_resources()})


def broken_text_layer(image_object: bytes) -> bytes:
    """A page with a text layer whose every glyph maps to the private use area, so its text is
    read by PDFium instead (no rendering), and a tiling pattern drawing the image."""
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /P def "
        b"1 begincodespacerange <00> <FF> endcodespacerange "
        b"1 beginbfrange <41> <5A> <E000> endbfrange endcmap "
        b"CMapName currentdict /CMap defineresource pop end end"
    )
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 8 0 R >>"
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/Pattern << /P0 5 0 R >> /Font << /F1 7 0 R >>"),
            stream(_FILL_WITH_P0 + b" BT /F1 12 Tf 20 40 Td (ABCDEFGHIJKLMN) Tj ET"),
            _tiling_pattern(6),
            image_object,
            font,
            stream(cmap),
        ]
    )


def content_dressed_as_image(drawing: bytes) -> bytes:
    """The page's content stream is ``drawing`` in the dictionary of an image, and is listed
    among the page's images too: PDFium parses a page's /Contents whatever its dictionary says."""
    dressed = stream(
        drawing,
        b"/Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 ",
    )
    return pdf([CATALOG, ONE_PAGE, _page(b"/XObject << /Im0 4 0 R >>"), dressed])


def text_page(image_object: bytes) -> bytes:
    """A page with a text layer of its own that also draws the image, as a born-digital
    document draws its logo."""
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
    return pdf(
        [
            CATALOG,
            ONE_PAGE,
            _page(b"/XObject << /Im0 5 0 R >> /Font << /F1 6 0 R >>"),
            stream(_DRAW_IM0 + b" BT /F1 12 Tf 20 40 Td (%s) Tj ET" % TEXT.encode()),
            image_object,
            font,
        ]
    )
