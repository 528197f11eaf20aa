"""No road to PDFium's JPEG 2000 and JBIG2 decoders (sandbox/extractors/pdf_decoders.py).

Every document is built here and holds the canary word as an image (tests/sandbox/
hidden_images.py); every one goes through the real sandbox with OCR on: SandboxExtractor, a
jailed child, pypdf, the check, PDFium and tesseract. On each road the control, the canary as
Flate-compressed pixels, comes back as text: the road is drawn and OCR'd. The same canary in
JPEG 2000 or JBIG2 ends as UnreadableInput naming the road, and never as text.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pypdfium2
import pytest
from pypdf import PdfReader, PdfWriter, apply_configuration
from pypdf.generic import DictionaryObject

from sandbox.errors import SandboxError, UnreadableInput, UnreadableText
from sandbox.extractor import SandboxExtractor
from sandbox.extractors.pdf import extract_pdf
from sandbox.extractors.pdf_decoders import REFUSED
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.pdf_builders import pdf, pdf_with_object_stream, updated
from tests.sandbox import hidden_images
from tests.sandbox.hidden_images import (
    CANARY,
    Codec,
    flate,
    image,
    inline,
    inline_image,
    jbig2,
    jpx,
)
from tests.scanned_pdfs import scanned_pdf

LIMITS = ParseLimits(max_pages=4)
PDF = "application/pdf"
_REFUSED = "a format the sandbox does not decode: no stream of a page PDFium opens may name it"


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(SandboxLimits(), warm_children=1) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def extractor(runner: SandboxRunner) -> SandboxExtractor:
    return SandboxExtractor(parse_limits=LIMITS, runner=runner)


def _refused(extractor: SandboxExtractor, payload: bytes) -> SandboxError:
    with pytest.raises(UnreadableInput) as refused:
        extractor.extract("pdf", PDF, payload, max_pages=LIMITS.max_pages)
    assert CANARY not in str(refused.value)
    return refused.value


def _filtered(path: str, name: str, codec: str) -> str:
    return f"{path} is filtered with {name} ({codec}), {_REFUSED}"


def _named(path: str, name: str, codec: str) -> str:
    return f"{path} names {name} ({codec}) in its data, as an inline image in that format does"


# (road, builder of the page around the image, whether the image is a luminosity mask, where
# the refusal says the image is)
ROADS: list[tuple[str, Callable[[bytes], bytes], bool, str]] = [
    ("page image", hidden_images.page_image, False, "page/Resources/XObject/Im0"),
    (
        "tiling pattern",
        hidden_images.tiling_pattern,
        False,
        "page/Resources/Pattern/P0/Resources/XObject/Im0",
    ),
    ("form", hidden_images.form, False, "page/Resources/XObject/Fm0/Resources/XObject/Im0"),
    (
        "annotation appearance",
        hidden_images.annotation,
        False,
        "page/Annots[0]/AP/N/Resources/XObject/Im0",
    ),
    (
        "Type3 glyph",
        hidden_images.type3_glyph,
        False,
        "page/Resources/Font/T3/Resources/XObject/Im0",
    ),
    (
        "soft mask group",
        hidden_images.soft_mask_group,
        True,
        "page/Resources/ExtGState/GS0/SMask/G/Resources/XObject/Im0",
    ),
    ("image soft mask", hidden_images.image_soft_mask, True, "page/Resources/XObject/Im0/SMask"),
]
_ROAD_IDS = [road[0] for road in ROADS]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("road", "build", "inverted", "path"), ROADS, ids=_ROAD_IDS)
def test_the_control_drawn_on_each_road_is_read(
    extractor: SandboxExtractor,
    road: str,
    build: Callable[[bytes], bytes],
    inverted: bool,
    path: str,
) -> None:
    """The road is live: PDFium draws what it leads to, and OCR reads it."""
    payload = build(image(flate(inverted)))
    assert (
        extractor.extract("pdf", PDF, payload, max_pages=LIMITS.max_pages) == f"[page 1]\n{CANARY}"
    )


@pytest.mark.parametrize("codec", [jpx, jbig2], ids=["jpx", "jbig2"])
@pytest.mark.parametrize(("road", "build", "inverted", "path"), ROADS, ids=_ROAD_IDS)
def test_jpeg_2000_and_jbig2_on_each_road_are_refused_naming_it(
    extractor: SandboxExtractor,
    road: str,
    build: Callable[[bytes], bytes],
    inverted: bool,
    path: str,
    codec: Callable[[bool], Codec],
) -> None:
    stored = codec(inverted)
    refused = _refused(extractor, build(image(stored)))
    name = stored.filter.decode()
    assert str(refused) == _filtered(path, name, "JPEG 2000" if stored.label == "jpx" else "JBIG2")


# (how the inline image is written, the canary's codec, its /F value, the content filter, the
# name the refusal gives)
INLINE: list[tuple[str, Callable[[], Codec], bytes, bytes, str]] = [
    ("short name, raw data", jpx, b"/JPX", b"", "/JPX"),
    ("full name, raw data", jpx, b"/JPXDecode", b"", "/JPXDecode"),
    ("behind ASCIIHex", jpx, b"[/AHx /JPXDecode]", b"", "/JPXDecode"),
    ("in compressed content", jpx, b"[/AHx /JPX]", b"/FlateDecode", "/JPX"),
    ("escaped, in compressed content", jpx, b"[/AHx /JPX#44ecode]", b"/FlateDecode", "/JPXDecode"),
    ("content behind a filter array", jpx, b"/JPX", b"[/FlateDecode]", "/JPX"),
    ("JBIG2 short name", jbig2, b"/JBIG2", b"", "/JBIG2"),
    ("JBIG2, escaped", jbig2, b"[/AHx /#4ABIG2Decode]", b"/FlateDecode", "/JBIG2Decode"),
]


@pytest.mark.timeout(120)
def test_the_inline_control_is_read(extractor: SandboxExtractor) -> None:
    payload = inline(inline_image(flate(), b"[/AHx /Fl]"), b"/FlateDecode")
    assert (
        extractor.extract("pdf", PDF, payload, max_pages=LIMITS.max_pages) == f"[page 1]\n{CANARY}"
    )


@pytest.mark.parametrize(
    ("how", "codec", "filter_entry", "content_filter", "name"),
    INLINE,
    ids=[case[0] for case in INLINE],
)
def test_an_inline_image_in_jpeg_2000_or_jbig2_is_unreadable_not_a_parser_error(
    extractor: SandboxExtractor,
    how: str,
    codec: Callable[[], Codec],
    filter_entry: bytes,
    content_filter: bytes,
    name: str,
) -> None:
    """pypdf raised PdfReadError on an inline /JPX image (a ParserError); the check names it
    before pypdf or PDFium parse the page's images, however it is spelled or hidden."""
    refused = _refused(extractor, inline(inline_image(codec(), filter_entry), content_filter))
    assert str(refused).startswith(_named("page/Contents", name, REFUSED[name]))


def test_a_content_stream_dressed_as_an_image_is_still_searched(
    extractor: SandboxExtractor,
) -> None:
    """Its data is skipped only where it is reached as an image and nothing else: reached as
    the page's content too, it is searched."""
    payload = hidden_images.content_dressed_as_image(inline_image(jpx(), b"/JPX"))
    assert str(_refused(extractor, payload)).startswith(
        _named("page/Contents", "/JPX", "JPEG 2000")
    )


def test_an_inline_image_inside_a_form_is_found_in_the_forms_content(
    extractor: SandboxExtractor,
) -> None:
    refused = _refused(extractor, hidden_images.inline_in_form(inline_image(jpx(), b"/JPX")))
    assert str(refused).startswith(_named("page/Resources/XObject/Fm0", "/JPX", "JPEG 2000"))


# (how the filter is disguised, the document, the name the refusal gives, whether the name's
# bytes are nowhere in the file as written)
_PATTERN_IMAGE = "page/Resources/Pattern/P0/Resources/XObject/Im0"
DISGUISES: list[tuple[str, Callable[[], bytes], str, bool]] = [
    (
        "filter array",
        lambda: hidden_images.tiling_pattern(
            image(
                Codec("jpx", b"", zlib.compress(jpx().data)),
                filter_entry=b"[/FlateDecode /JPXDecode]",
            )
        ),
        "/JPXDecode",
        False,
    ),
    (
        "#-escaped name",
        lambda: hidden_images.tiling_pattern(image(jpx(), filter_entry=b"/JPX#44ecode")),
        "/JPXDecode",
        True,
    ),
    (
        "name by reference",
        lambda: pdf(
            hidden_images.tiling_pattern_objects(
                image(jbig2(), filter_entry=b"7 0 R"), b"/JBIG2Decode"
            )
        ),
        "/JBIG2Decode",
        False,
    ),
    (
        "name and page in an object stream",
        lambda: pdf_with_object_stream(
            hidden_images.tiling_pattern_objects(
                image(jpx(), filter_entry=b"7 0 R"), b"[/JPX#44ecode]"
            ),
            compressed={3, 7},
        ),
        "/JPXDecode",
        True,
    ),
    (
        "incremental update",
        lambda: updated(hidden_images.tiling_pattern(image(flate())), {6: image(jpx())}),
        "/JPXDecode",
        False,
    ),
]


@pytest.mark.parametrize(
    ("how", "build", "name", "hidden"), DISGUISES, ids=[case[0] for case in DISGUISES]
)
def test_a_disguised_filter_is_found(
    extractor: SandboxExtractor, how: str, build: Callable[[], bytes], name: str, hidden: bool
) -> None:
    """On the pattern road (the old check's blind spot), the name in an array, escaped, by
    reference, compressed in an object stream with the page that uses it, or in an update."""
    payload = build()
    assert (name.encode() not in payload) is hidden
    refused = _refused(extractor, payload)
    assert str(refused) == _filtered(_PATTERN_IMAGE, name, REFUSED[name])


@pytest.mark.timeout(120)
def test_an_image_only_pdfium_finds_in_the_upload_is_never_drawn(
    extractor: SandboxExtractor,
) -> None:
    """Junk before the header and a page defined twice: PDFium, opening the upload, reads the
    definition that draws a JPEG 2000 image, decodes it and would OCR the canary; pypdf
    rebuilds the xref and reads the one that draws nothing. PDFium opens only pypdf's copy of
    the page, so the answer is pypdf's empty page, and OpenJPEG never runs."""
    payload = hidden_images.drawn_by_pdfium_alone(image(jpx()))
    upload = pypdfium2.PdfDocument(payload)
    try:
        seen = [piece.get_filters() for piece in upload[0].get_objects()]
    finally:
        upload.close()
    assert seen == [["JPXDecode"]]
    resources = PdfReader(io.BytesIO(payload)).pages[0]["/Resources"]
    assert isinstance(resources, DictionaryObject) and "/XObject" not in resources
    assert extractor.extract("pdf", PDF, payload, max_pages=LIMITS.max_pages) == "[page 1]"


@pytest.mark.timeout(120)
def test_an_image_the_document_replaced_is_not_its_business(extractor: SandboxExtractor) -> None:
    """A JPEG 2000 image left in a revision an update replaced is drawn by neither parser: the
    rule is about what PDFium opens, and the page is read."""
    payload = updated(
        hidden_images.page_image(image(jpx())), {3: hidden_images.page_without_resources()}
    )
    assert b"/JPXDecode" in payload
    upload = pypdfium2.PdfDocument(payload)
    try:
        assert list(upload[0].get_objects()) == []  # PDFium draws no image there either
    finally:
        upload.close()
    assert extractor.extract("pdf", PDF, payload, max_pages=LIMITS.max_pages) == "[page 1]"


def test_a_page_with_a_text_layer_never_opens_pdfium_and_is_read(
    extractor: SandboxExtractor,
) -> None:
    """pypdf reads the text without decoding any image, and PDFium is not opened: a
    born-digital document with a JPEG 2000 logo reads as before."""
    payload = hidden_images.text_page(image(jpx()))
    assert extractor.extract("pdf", PDF, payload, max_pages=LIMITS.max_pages) == (
        f"[page 1]\n{hidden_images.TEXT}"
    )


# (what PDFium would decode and the check cannot, the appearance stream's entries, its data,
# what the refusal says)
UNCHECKABLE: list[tuple[str, bytes, bytes, str]] = [
    (
        "hex PDFium reads past a stray byte",
        b"/Filter /ASCIIHexDecode",
        b"zz" + inline_image(jpx(), b"/JPX").hex().encode() + b">",
        "page/Annots[0]/AP/N does not decode (/ASCIIHexDecode: ",
    ),
    (
        "LZW with a predictor",
        b"/Filter /LZWDecode /DecodeParms << /Predictor 2 /Columns 4 >>",
        b"\x80\x0b\x60\x50\x22\x0c\x0c\x85\x01",
        "page/Annots[0]/AP/N is LZW-encoded with a predictor or without early change, which the "
        "check cannot reproduce",
    ),
    (
        "LZW without early change",
        b"/Filter /LZWDecode /DecodeParms << /EarlyChange 0 >>",
        b"\x80\x0b\x60\x50\x22\x0c\x0c\x85\x01",
        "page/Annots[0]/AP/N is LZW-encoded with a predictor or without early change",
    ),
]


@pytest.mark.parametrize(
    ("how", "entries", "data", "reason"), UNCHECKABLE, ids=[case[0] for case in UNCHECKABLE]
)
def test_a_stream_the_check_cannot_decode_as_pdfium_would_is_refused(
    extractor: SandboxExtractor, how: str, entries: bytes, data: bytes, reason: str
) -> None:
    """PDFium's hex decoder skips what is not a hex digit, pypdf's refuses it; pypdf's LZW
    applies neither a predictor nor /EarlyChange. What PDFium would parse there is unseen,
    so the page is refused rather than passed."""
    payload = hidden_images.annotated(hidden_images.appearance(data, entries))
    assert str(_refused(extractor, payload)).startswith(reason)


def test_a_shading_function_filtered_so_is_refused_too(extractor: SandboxExtractor) -> None:
    """PDFium reads a sampled function without an image decoder, but the rule is by filter,
    not by use: one rule with no list of uses to keep up."""
    refused = _refused(extractor, hidden_images.shading(b"/JPXDecode"))
    assert str(refused) == _filtered(
        "page/Resources/Shading/Sh0/Function", "/JPXDecode", "JPEG 2000"
    )


def test_pdfiums_text_of_a_page_is_checked_as_its_rendering_is(
    extractor: SandboxExtractor,
) -> None:
    """A page whose text layer maps to the private use area is read by PDFium for its text,
    never rendered. The same check comes first: without the image the page's text is judged
    (and refused as unreadable text); with it, the page is refused before PDFium opens."""
    with pytest.raises(UnreadableText):
        extractor.extract("pdf", PDF, hidden_images.broken_text_layer(image(flate())), max_pages=4)
    refused = _refused(extractor, hidden_images.broken_text_layer(image(jpx())))
    assert str(refused) == _filtered(_PATTERN_IMAGE, "/JPXDecode", "JPEG 2000")


@pytest.mark.timeout(180)
def test_a_page_job_checks_its_page_as_the_single_job_does(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """Read in pages, the split copies the page for a page job, which opens PDFium on it:
    the page job runs the same check, and the document fails naming the page."""
    writer = PdfWriter()
    for document in (scanned_pdf(corpus_dir, 1), hidden_images.tiling_pattern(image(jpx()))):
        writer.append(PdfReader(io.BytesIO(document)))
    buffer = io.BytesIO()
    writer.write(buffer)
    payload = buffer.getvalue()
    in_pages = SandboxExtractor(
        parse_limits=replace(LIMITS, fan_out_pages=1), runner=runner, page_workers=2
    )
    with pytest.raises(UnreadableInput) as refused:
        in_pages.extract("pdf", PDF, payload, max_pages=LIMITS.max_pages)
    assert str(refused.value) == "page 2 of 2: " + _filtered(
        _PATTERN_IMAGE, "/JPXDecode", "JPEG 2000"
    )


def _ceiling(payload: bytes) -> str:
    """The reason the PDF extractor, in this process, refuses ``payload`` as over a ceiling."""
    with pytest.raises(Refusal) as refused:
        extract_pdf(PDF, payload, LIMITS)
    assert refused.value.code == "ceiling", refused.value.reason
    return refused.value.reason


def test_a_stream_only_pdfium_parses_is_undone_within_pypdfs_filter_count() -> None:
    """pypdf's text path decodes the page's content under its own limits, never an
    annotation's appearance: there the check undid any number of filters (100 nested Flate
    layers took 11 CPU-s where they met the limit), so it holds pypdf's count itself."""
    layers = b"q Q"
    for _ in range(17):
        layers = zlib.compress(layers)
    payload = hidden_images.annotated(
        hidden_images.appearance(layers, b"/Filter [" + b"/FlateDecode " * 17 + b"]")
    )
    assert _ceiling(payload) == (
        "the PDF exceeds a parser safety limit: page/Annots[0]/AP/N has 17 filters, over the 16 "
        "a stream may have"
    )


def test_a_stream_only_pdfium_parses_is_undone_within_pypdfs_decoding_work() -> None:
    """The bytes all of a stream's filters take in together are bounded as pypdf bounds them
    (300 MB by default; lowered here so that the test builds megabytes, not hundreds)."""
    data = (b"q Q" + b" " * 1_000_000).hex().encode().hex().encode()
    payload = hidden_images.annotated(
        hidden_images.appearance(data, b"/Filter [/ASCIIHexDecode /ASCIIHexDecode]")
    )
    with apply_configuration(stream_decoding_work_maximum_length=5_000_000):
        reason = _ceiling(payload)
    assert reason == (
        "the PDF exceeds a parser safety limit: page/Annots[0]/AP/N's filters take in over "
        "5000000 bytes"
    )
    with apply_configuration(stream_decoding_work_maximum_length=7_000_000):
        extract_pdf(PDF, payload, LIMITS)  # 6 MB in all: within, and read
