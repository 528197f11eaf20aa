"""The check of a page's images before PDFium draws them (sandbox/extractors/pdf_images.py):
each attack it stops, through the real PDF extractor, and that it decodes no image whole that
it can judge without (pypdf's decode re-encoded every image: 0.6 CPU-s on a 600-dpi scan)."""

from __future__ import annotations

import io
import itertools
import struct
import zlib
from typing import IO

import pypdf.generic._image_xobject as pypdf_images
import pytest
from PIL import Image
from pypdf import PdfReader, PdfWriter
from pypdf.generic import ContentStream

from sandbox.extractors.pdf import extract_pdf
from sandbox.extractors.pdf_decoders import refuse_hidden_decoders
from sandbox.extractors.pdf_images import check_page_images
from sandbox.extractors.pdfium import PdfiumPage
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits
from tests.image_builders import encoded
from tests.pdf_builders import CATALOG, ONE_PAGE, page, pdf, scan, stream

LIMITS = ParseLimits()
DRAWING = b"q 200 0 0 200 0 0 cm /Im0 Do Q"


def _image(data: bytes, entries: bytes, width: int = 64, height: int = 64) -> bytes:
    return stream(
        data, b"/Type /XObject /Subtype /Image /Width %d /Height %d %s " % (width, height, entries)
    )


def _page_of(image: bytes, *more: bytes, drawing: bytes = DRAWING) -> bytes:
    resources = page(b"/XObject << /Im0 5 0 R >>")
    return pdf([CATALOG, ONE_PAGE, resources, stream(drawing), image, *more])


def _check(payload: bytes) -> None:
    """The check alone, on the page's copy as the extractor hands it over (written, walked,
    and opened by PDFium)."""
    writer = PdfWriter()
    writer.add_page(PdfReader(io.BytesIO(payload)).pages[0])
    written = io.BytesIO()
    writer.write(written)
    checked = refuse_hidden_decoders(writer)
    drawn = PdfiumPage(written.getvalue())
    try:
        check_page_images(writer.pages[0], checked, drawn, LIMITS)
    finally:
        drawn.close()


def _refusal(payload: bytes, limits: ParseLimits = LIMITS) -> Refusal:
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", payload, limits)
    return refused.value


GREY = b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode"


def test_a_flate_image_cut_short_is_refused_with_the_rows_it_fills() -> None:
    """PDFium would draw the 30 rows there are and leave the rest blank: OCR of that page
    would pass off part of it as the whole."""
    refused = _refusal(_page_of(_image(zlib.compress(bytes(64 * 30)), GREY)))
    assert (refused.code, refused.reason) == (
        "unreadable",
        "a page image is truncated or corrupt: its samples fill 30 of its 64 rows",
    )


def test_the_rows_are_counted_in_the_colour_space_s_components() -> None:
    """Grey samples for an RGB image fill a third of it."""
    rgb = b"/ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode"
    refused = _refusal(_page_of(_image(zlib.compress(bytes(64 * 64)), rgb)))
    assert refused.reason.endswith("its samples fill 21 of its 64 rows")
    profile = stream(zlib.compress(bytes(16)), b"/N 4 /Filter /FlateDecode")
    icc = b"/ColorSpace [/ICCBased 6 0 R] /BitsPerComponent 8 /Filter /FlateDecode"
    refused = _refusal(_page_of(_image(zlib.compress(bytes(64 * 64 * 3)), icc), profile))
    assert refused.reason.endswith("its samples fill 48 of its 64 rows")


def test_a_stencil_mask_counts_one_bit_a_pixel() -> None:
    stencil = b"/ImageMask true /Filter /FlateDecode"
    refused = _refusal(_page_of(_image(zlib.compress(bytes(8 * 10)), stencil)))
    assert refused.reason.endswith("its samples fill 10 of its 64 rows")


def test_a_jpeg_larger_than_its_dictionary_says_is_refused_at_the_ceiling() -> None:
    """The dictionary declares 64x64; the JPEG inside is 1200x1200, over a 1-megapixel
    ceiling. Its own header is read before a pixel of it is decoded."""
    big = encoded(Image.new("L", (1200, 1200), 255), "JPEG")
    jpeg = b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /DCTDecode"
    refused = _refusal(_page_of(_image(big, jpeg)), ParseLimits(max_pixels=1_000_000))
    assert refused.code == "ceiling" and "1440000 pixels" in refused.reason


def test_a_soft_mask_over_the_ceiling_is_refused_before_anything_is_decoded() -> None:
    mask = _image(zlib.compress(bytes(100)), GREY, 50_000, 50_000)
    image = _image(zlib.compress(bytes(64 * 64)), GREY + b" /SMask 6 0 R")
    refused = _refusal(_page_of(image, mask))
    assert refused.code == "ceiling" and "50000x50000" in refused.reason


def test_a_soft_mask_cut_short_is_refused() -> None:
    mask = _image(zlib.compress(bytes(64 * 2)), GREY)
    image = _image(zlib.compress(bytes(64 * 64)), GREY + b" /SMask 6 0 R")
    assert _refusal(_page_of(image, mask)).reason.endswith("its samples fill 2 of its 64 rows")


def test_an_image_inside_a_form_is_checked() -> None:
    form = stream(
        b"q 200 0 0 200 0 0 cm /Im1 Do Q",
        b"/Type /XObject /Subtype /Form /BBox [0 0 200 200] /Resources "
        b"<< /XObject << /Im1 6 0 R >> >>",
    )
    cut = _image(zlib.compress(bytes(64 * 5)), GREY)
    refused = _refusal(_page_of(form, cut))
    assert refused.reason.endswith("its samples fill 5 of its 64 rows")


def test_a_whole_jpeg_or_flate_image_is_not_decoded_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only what the check cannot judge without it goes to pypdf's decode."""
    decoded: list[object] = []

    def whole_decode(image: object) -> object:
        decoded.append(image)
        raise AssertionError("decoded whole")

    monkeypatch.setattr("sandbox.extractors.pdf_images._xobj_to_image", whole_decode)
    jpeg = _image(
        encoded(scan(), "JPEG"),
        b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /DCTDecode",
    )
    flate = _image(zlib.compress(scan().tobytes()), GREY)
    for image in (jpeg, flate):
        _check(_page_of(image))
    assert decoded == []
    # A CCITT fax image is not read in place: pypdf decodes it as it always did.
    fax = _image(b"\x00" * 16, b"/BitsPerComponent 1 /Filter /CCITTFaxDecode")
    with pytest.raises(AssertionError, match="decoded whole"):
        _check(_page_of(fax))
    assert len(decoded) == 1


def test_a_stream_of_more_filters_than_pypdf_reads_is_over_a_ceiling() -> None:
    """100 nested Flate layers of 172 KB took 11 CPU-s to undo before pypdf's filter limit
    held here too; PDFium would then undo them all again."""
    layers = zlib.compress(bytes(64 * 64))
    for _ in range(99):
        layers = zlib.compress(layers)
    chain = b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter [" + b"/FlateDecode " * 100
    refused = _refusal(_page_of(_image(layers, chain + b"]")))
    assert refused.code == "ceiling" and "100 filters" in refused.reason


def test_a_cut_image_behind_a_png_predictor_is_refused() -> None:
    """pypdf pads a cut predictor row with zeros; counted before the predictor, 30 rows of
    64 are 30 rows, whatever /Columns the predictor's rows are cut in."""
    for columns, rows in ((64, 30), (4096, 0)):
        predicted = b"".join(b"\x00" + b"\xff" * columns for _ in range(30 * 64 // columns))
        predicted = predicted or b"\x00" + b"\xff" * 30 * 64
        parameters = b" /DecodeParms << /Predictor 15 /Columns %d >>" % columns
        refused = _refusal(_page_of(_image(zlib.compress(predicted), GREY + parameters)))
        assert refused.reason.endswith(f"its samples fill {rows} of its 64 rows"), columns


def test_a_whole_image_behind_a_png_predictor_is_read() -> None:
    rows = b"".join(b"\x02" + bytes(64) for _ in range(64))
    parameters = b" /DecodeParms << /Predictor 15 /Columns 64 >>"
    _check(_page_of(_image(zlib.compress(rows), GREY + parameters)))


def test_a_mask_sized_in_real_numbers_is_held_to_the_ceiling() -> None:
    """PDFium truncates /Width 2000.0 to 2000 pixels and draws the mask."""
    mask = stream(
        zlib.compress(bytes(250 * 2000)),
        b"/Type /XObject /Subtype /Image /Width 2000.0 /Height 2000 /ImageMask true "
        b"/Filter /FlateDecode",
    )
    image = _image(zlib.compress(bytes(64 * 64)), GREY + b" /Mask 6 0 R")
    refused = _refusal(_page_of(image, mask), ParseLimits(max_pixels=1_000_000))
    assert refused.code == "ceiling" and "2000x2000" in refused.reason


def test_samples_that_do_not_decode_are_unreadable_with_the_filter_named() -> None:
    hexed = b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /ASCIIHexDecode"
    refused = _refusal(_page_of(_image(b"zz not hex >", hexed)))
    assert refused.code == "unreadable"
    assert refused.reason.startswith("a page image does not decode (/ASCIIHexDecode: ")


CUT = _image(zlib.compress(bytes(64 * 7)), GREY)


def test_a_cut_image_in_a_tiling_pattern_is_refused() -> None:
    """pypdf's list of a page's images holds no pattern's: the check walks the page's copy."""
    fill = stream(b"/Pattern cs /P0 scn 0 0 200 200 re f")
    pattern = stream(
        b"q 64 0 0 64 0 0 cm /Im1 Do Q",
        b"/Type /Pattern /PatternType 1 /PaintType 1 /TilingType 1 /BBox [0 0 64 64] "
        b"/XStep 64 /YStep 64 /Resources << /XObject << /Im1 6 0 R >> >>",
    )
    payload = pdf([CATALOG, ONE_PAGE, page(b"/Pattern << /P0 5 0 R >>"), fill, pattern, CUT])
    assert _refusal(payload).reason.endswith("its samples fill 7 of its 64 rows")


def test_a_cut_image_in_an_annotation_s_appearance_is_refused() -> None:
    annotated = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
        b"/Annots [<< /Type /Annot /Subtype /Stamp /Rect [0 0 200 200] /AP << /N 5 0 R >> >>] >>"
    )
    appearance = stream(
        b"q 200 0 0 200 0 0 cm /Im1 Do Q",
        b"/Type /XObject /Subtype /Form /BBox [0 0 200 200] "
        b"/Resources << /XObject << /Im1 6 0 R >> >>",
    )
    payload = pdf([CATALOG, ONE_PAGE, annotated, stream(b"0 0 1 1 re f"), appearance, CUT])
    assert _refusal(payload).reason.endswith("its samples fill 7 of its 64 rows")


def test_an_image_whose_subtype_is_a_reference_is_held_to_the_ceiling() -> None:
    """pypdf takes it for a form; PDFium resolves the reference and draws a 2000x2000 image."""
    image = stream(
        zlib.compress(bytes(100)),
        b"/Type /XObject /Subtype 6 0 R /Width 2000 /Height 2000 " + GREY,
    )
    refused = _refusal(_page_of(image, b"/Image"), ParseLimits(max_pixels=1_000_000))
    assert refused.code == "ceiling" and "2000x2000" in refused.reason


def test_a_chain_of_masked_images_is_decoded_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """pypdf's decode of an image decodes its soft mask too, and that mask's: each image of
    the walk was decoded with every mask below it, 1,830 decodes for a chain of 60."""
    decodes: list[object] = []
    inner = pypdf_images._xobj_to_image

    def counted(image: object, *args: object, **kwargs: object) -> object:
        decodes.append(image)
        return inner(image, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pypdf_images, "_xobj_to_image", counted)
    monkeypatch.setattr("sandbox.extractors.pdf_images._xobj_to_image", counted)
    chain = 10
    # /BitsPerComponent as a real: a layout the check leaves to pypdf's decode.
    odd = b"/ColorSpace /DeviceGray /BitsPerComponent 8.0 /Filter /FlateDecode"
    images = [
        _image(zlib.compress(bytes(64 * 64)), odd + (b" /SMask %d 0 R" % (n + 5) * (n < chain)))
        for n in range(1, chain + 1)
    ]
    _check(_page_of(*images))
    assert len(decodes) == chain


def test_the_images_of_a_page_a_link_leads_to_are_not_the_page_s() -> None:
    """A link's destination drags the other page into the copy PDFium opens; PDFium renders
    none of it, so a damaged photo there does not refuse this scan."""
    scan = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
        b"/Annots [<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /Dest [6 0 R /Fit] >>] >>"
    )
    other = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] "
        b"/Resources << /XObject << /Im9 7 0 R >> >> >>"
    )
    two_pages = b"<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 >>"
    payload = pdf([CATALOG, two_pages, scan, stream(b"0 0 50 50 re f"), stream(b""), other, CUT])
    with pytest.raises(Refusal) as refused:
        extract_pdf("application/pdf", payload, ParseLimits(ocr=False))
    assert refused.value.code == "needs_ocr", refused.value.reason


def test_a_mask_without_a_size_is_unreadable() -> None:
    """pypdf's decode of it raised KeyError; PDFium draws nothing of it."""
    mask = stream(zlib.compress(bytes(64)), b"/Type /XObject /Subtype /Image /Height 64 " + GREY)
    image = _image(zlib.compress(bytes(64 * 64)), GREY + b" /SMask 6 0 R")
    refused = _refusal(_page_of(image, mask))
    assert (refused.code, refused.reason) == (
        "unreadable",
        "a page image declares no size it could be drawn at",
    )


def test_an_image_s_flate_is_inflated_only_as_far_as_the_image_needs() -> None:
    """200 MB of zeros behind a 1x1 image: read whole, pypdf stops at its 75 MB limit (a
    ceiling); PDFium reads the one byte it draws, and so does the check."""
    zeros = zlib.compressobj(9)
    flood = b"".join(zeros.compress(bytes(2**20)) for _ in range(200)) + zeros.flush()
    _check(_page_of(_image(flood, GREY, 1, 1)))


def _inline_page(content: bytes) -> bytes:
    return pdf([CATALOG, ONE_PAGE, page(b""), stream(content)])


#: A 64x64 grey inline image whose samples fill 30 rows.
CUT_INLINE = b"BI /W 64 /H 64 /CS /G /BPC 8 /F /Fl ID " + zlib.compress(bytes(64 * 30)) + b"\nEI"


_CUT = "a page image is truncated or corrupt: not enough image data"
_UNPARSED = "the page's inline images cannot be read and checked: pypdf raised AssertionError"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (CUT_INLINE, _CUT),
        (b"q 200 0 0 200 0 0 cm\n" + CUT_INLINE + b" Q", _CUT),
        (b"q%comment\r" + CUT_INLINE, _CUT),
        (CUT_INLINE.replace(b"BI /W", b"BI/W"), _CUT),
        (b"[1 2]" + CUT_INLINE, _UNPARSED),
        (b"(x)" + CUT_INLINE, _UNPARSED),
        (b"<00>" + CUT_INLINE, _UNPARSED),
    ],
)
def test_an_inline_image_is_checked_however_its_operator_is_delimited(
    content: bytes, reason: str
) -> None:
    """The page is parsed for inline images only where its content has the operator that opens
    one; an operator any reader takes for one is found, whatever delimits it. Behind operands
    pypdf cannot parse it (an assertion of its own failed out of the extractor), and the page
    is refused: PDFium would draw the image unchecked."""
    refused = _refusal(_inline_page(content))
    assert (refused.code, refused.reason) == ("unreadable", reason)


def test_a_content_without_an_inline_image_is_not_parsed_for_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pypdf finds inline images by parsing the content in Python: a 1 KB PDF whose content
    inflated to 70 MB of spaces cost 10 CPU-s there. Tokens that merely contain the operator's
    letters, and the same content with an inline image, show the search tells them apart."""
    parses: list[object] = []
    parse = ContentStream._parse_content_stream

    def counted(self: ContentStream, stream_data: IO[bytes]) -> None:
        parses.append(stream_data)
        parse(self, stream_data)

    monkeypatch.setattr(ContentStream, "_parse_content_stream", counted)
    drawing = b"q 200 0 0 200 0 0 cm /Im0 Do Q /BIG BIx xBI ABIB " + b" " * 4_000_000
    _check(_page_of(_image(zlib.compress(bytes(64 * 64)), GREY), drawing=drawing))
    assert parses == []
    with pytest.raises(Refusal, match="not enough image data"):
        _check(_page_of(_image(zlib.compress(bytes(64 * 64)), GREY), drawing=drawing + CUT_INLINE))
    assert len(parses) == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (
            b"BI /W 64 /H 64 /CS /G /BPC 8 /F /Fl ID\nEI",
            "the page's inline images cannot be read and checked: Data is 0 bytes",
        ),
        (
            b"0 d) " + CUT_INLINE,
            "the page's inline images cannot be read and checked: Invalid Elementary Object",
        ),
    ],
)
def test_an_inline_image_pypdf_cannot_read_is_unreadable_not_a_parser_error(
    content: bytes, reason: str
) -> None:
    """pypdf parses the content and decodes each inline image in one go; an empty image, or
    content it cannot parse around one, raised its own errors out of the extractor."""
    refused = _refusal(_inline_page(content))
    assert refused.code == "unreadable" and refused.reason.startswith(reason), refused.reason


def _stored_zlib(data: bytes) -> bytes:
    """``data`` as one stored deflate block: the bytes appear in the stream as they are."""
    return (
        b"x\x01\x01"
        + struct.pack("<HH", len(data), 0xFFFF ^ len(data))
        + data
        + struct.pack(">I", zlib.adler32(data))
    )


def _nul_delimited_cut_image() -> bytes:
    """A cut 64x64 inline image whose operators are parted by NULs, a space to PDFium alone;
    its samples are letters and spaces (pypdf reads them as operators), with two lead bytes
    picked so that the checksum holds no delimiter either."""
    for first, second in itertools.product(range(65, 91), repeat=2):
        samples = bytes([first, second]) + b"A " * (64 * 30 // 2 - 2) + b"ZZ"
        if not set(struct.pack(">I", zlib.adler32(samples))) & set(
            b"\x00\t\n\x0b\x0c\r ()<>[]{}/%"
        ):
            break
    return b"BI\x00/W 64 /H 64 /CS /G /BPC 8 /F /Fl ID\x00" + _stored_zlib(samples) + b"\nEI\x00"


#: Where PDFium finds inline images pypdf does not (a red team's reproducers, 2026-12-06).
HIDDEN_FROM_PYPDF = [
    pytest.param(
        stream(
            zlib.compress(b"0 0 200 200 re f")
            + b"\n)))) ]]]] >> >\nq 200 0 0 200 0 0 cm\n"
            + CUT_INLINE
            + b"\nQ\n",
            b"/Filter /FlateDecode /DecodeParms << /Colors -1 >>",
        ),
        "64x64",
        "none",
        id="PDFium parses the content as stored, rejecting the filter's parameters",
    ),
    pytest.param(
        stream(b"q 100 0 0 100 50 50 cm\n" + _nul_delimited_cut_image() + b"\nQ\n"),
        "64x64",
        "none",
        id="NUL for a space",
    ),
    pytest.param(
        stream(
            b"q 100 0 0 100 50 50 cm\nBI /W 8 /H 8 /CS /G /BPC 8 /F /Fl ID "
            + zlib.compress(bytes([200]) * 64)
            + b"EI "
            + CUT_INLINE
            + b"\nQ\n"
        ),
        "8x8, 64x64",
        "8x8",
        id="EI glued to Flate data opens another image",
    ),
]


@pytest.mark.parametrize(("content", "pdfium_sees", "pypdf_sees"), HIDDEN_FROM_PYPDF)
def test_an_inline_image_only_pdfium_finds_refuses_the_page(
    content: bytes, pdfium_sees: str, pypdf_sees: str
) -> None:
    """PDFium's own parser says what it draws; an inline image it finds and pypdf does not
    (a cut one here, drawn part blank) went to the render unchecked."""
    payload = pdf([CATALOG, ONE_PAGE, page(b""), content])
    drawn = PdfiumPage(payload)
    try:
        assert len(drawn.images([])) == pdfium_sees.count("x")  # PDFium does draw them
    finally:
        drawn.close()
    refused = _refusal(payload)
    count = pdfium_sees.count("x")
    read = 0 if pypdf_sees == "none" else pypdf_sees.count("x")
    assert (refused.code, refused.reason) == (
        "unreadable",
        f"PDFium finds {count} inline image(s) in the page's content ({pdfium_sees}) where the "
        f"check reads {read} ({pypdf_sees}): what PDFium would draw cannot be checked",
    )


def test_every_image_pdfium_draws_is_held_to_the_ceiling_before_anything_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pypdf's decode swallowed the bomb error of a 49-megapixel inline image and handed over
    nothing, which the check skipped; one hidden from pypdf, or drawn by a form, was never
    measured at all. PDFium's sizes are read from the image's header, nothing decoded."""
    decoded: list[object] = []
    monkeypatch.setattr(pypdf_images, "_xobj_to_image", lambda *a: decoded.append(a))
    limits = ParseLimits(max_pixels=1_000)
    over = b"BI /W 64 /H 64 /CS /G /BPC 8 /F /Fl ID " + zlib.compress(bytes(64 * 64)) + b"\nEI"
    hidden = b"BI\x00/W 64 /H 64 /CS /G /BPC 8 ID\x00" + bytes(64 * 64) + b"\nEI\x00"
    in_form = pdf(
        [
            CATALOG,
            ONE_PAGE,
            page(b"/XObject << /Fm0 5 0 R >>"),
            stream(b"/Fm0 Do"),
            stream(
                b"q 100 0 0 100 0 0 cm " + over + b" Q",
                b"/Type /XObject /Subtype /Form /BBox [0 0 200 200]",
            ),
        ]
    )
    for payload in (_inline_page(over), _inline_page(hidden), in_form):
        refused = _refusal(payload, limits)
        assert (refused.code, refused.reason) == (
            "ceiling",
            "an image of 64x64 = 4096 pixels exceeds the 1000-pixel ceiling",
        )
    assert decoded == []


@pytest.mark.parametrize(
    "inline",
    [
        b"BI /W 0 /H 8 /CS /G /BPC 8 ID " + bytes(64) + b"\nEI",
        b"BI /H 8 /CS /G /BPC 8 ID " + bytes(64) + b"\nEI",
        b"BI /W 8.5 /H 8 /CS /G /BPC 8 ID " + bytes(64) + b"\nEI",
        b"BI /W (8) /H 8 /CS /G /BPC 8 ID " + bytes(64) + b"\nEI",
        b"BI /W 8 /H 8 /CS 5 /BPC 8 ID " + bytes(64) + b"\nEI",
        b"BI /W 8 /H 8 /CS /G /BPC 8 /F [1] ID " + bytes(64) + b"\nEI",
        b"BI /W 8 /H 8 /CS /G /BPC 8 /F /Fl /DP << /Predictor 15 /Columns 0 >> ID "
        + zlib.compress(bytes(64))
        + b"\nEI",
        b"BI /W 8 /H 8 /CS /G /BPC 8 /F /RL ID \x05ab\nEI",
    ],
)
def test_an_inline_image_pypdf_fails_to_decode_is_unreadable_whatever_it_raises(
    inline: bytes,
) -> None:
    """pypdf's decoders raise builtins as well as their own errors (ZeroDivisionError for /W
    0, TypeError for /W 8.5, KeyError without /W, NotImplementedError for /F [1]): each
    escaped the extractor as a parser error."""
    refused = _refusal(_inline_page(b"q 100 0 0 100 0 0 cm " + inline + b" Q"))
    assert refused.code == "unreadable", refused.reason


def test_telling_xobjects_from_inline_images_compares_a_bounded_number_of_bytes() -> None:
    """Each image the page's content draws is compared with the XObjects checked, to tell it
    from an inline image: a 1 MiB image drawn 2,000 times off the page cost 3.5 CPU-s of
    comparing where PDFium rendered it in 0.1. Content without the inline image's operator
    is not compared at all; with one, past 256 MiB compared the page is over a ceiling."""
    side = 1024
    image = stream(
        bytes(side * side),
        b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8" % (side, side),
    )
    draws = b"q 0 0 0 0 re W n " + b"/Im0 Do\n" * 300 + b"Q 0 0 10 10 re f"

    def page_drawing(content: bytes) -> bytes:
        contents = stream(zlib.compress(content), b"/Filter /FlateDecode")
        return pdf([CATALOG, ONE_PAGE, page(b"/XObject << /Im0 5 0 R >>"), contents, image])

    _check(page_drawing(draws))  # no inline image: nothing compared, the page passes
    refused = _refusal(page_drawing(draws + b"\n% BI"), ParseLimits(ocr=False))
    assert (refused.code, refused.reason) == (
        "ceiling",
        "the page's content draws images of over 256 MiB in all, more than the check compares",
    )
