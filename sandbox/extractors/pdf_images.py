"""The images of a page about to be rendered: within the pixel ceiling, in a codec the sandbox
decodes, and whole, found out with as little decoding as that takes.

PDFium decodes every image again to draw it, so the check stops once it knows. A JPEG is
decoded at an eighth of its size (libjpeg reads every coded block all the same, so a cut or
corrupt one fails); samples behind lossless filters are inflated and must fill every row the
image declares. pypdf's own decode, used before for every image, builds a picture and writes it
out again as a PNG for its callers: on a 600-dpi scan that cost 0.6 CPU-s where tesseract read
the rendered page in 0.33. An image in any other codec (CCITT fax, LZW with a predictor pypdf
ignores, a filter the sandbox lacks) is still decoded whole by pypdf, whose refusals stand.
"""

from __future__ import annotations

import copy
import io
import math
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from PIL import Image
from pypdf import PageObject
from pypdf.errors import DependencyError, LimitReachedError
from pypdf.generic import ArrayObject, BooleanObject, DictionaryObject, NameObject, PdfObject
from pypdf.generic import StreamObject as Stream

# pypdf's own decode of one image, which its ImageFile calls; used for the codecs and layouts
# the check does not read in place.
from pypdf.generic._image_xobject import _xobj_to_image

from sandbox import codes
from sandbox.extractors.ocr import check_pixels, damage_is_unreadable
from sandbox.extractors.pdf_decoders import (
    DECODERS,
    PASSED_OVER,
    CheckedCopy,
    Decoder,
    DecodingWork,
    decodes_as_pdfium,
    filter_chain,
    resolved,
    undone,
)
from sandbox.extractors.pdfium import DrawnImage, PdfiumPage
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits

_WHAT = "a page image"
_MASKS = ("/SMask", "/Mask")
_PREDICTOR = "/Predictor"
#: Predictor values from 10 up are PNG's, whose rows start with their filter's byte.
_PNG_PREDICTORS = 10
_JPEG = frozenset({"/DCTDecode", "/DCT"})
_FLATE = frozenset({"/FlateDecode", "/Fl"})
#: The eighth that libjpeg decodes a JPEG at when asked for a draft of that size.
_DRAFT_SCALE = 8
_DEPTHS = frozenset({1, 2, 4, 8, 16})
#: Colour components of the colour spaces an image names directly; an array names its family
#: first (``[/ICCBased stream]``, ``[/Indexed base hival lookup]``).
_COMPONENTS = {
    "/DeviceGray": 1,
    "/G": 1,
    "/CalGray": 1,
    "/Indexed": 1,
    "/I": 1,
    "/Separation": 1,
    "/DeviceRGB": 3,
    "/RGB": 3,
    "/CalRGB": 3,
    "/Lab": 3,
    "/DeviceCMYK": 4,
    "/CMYK": 4,
}


def check_page_images(
    page: PageObject, copy: CheckedCopy, pdfium: PdfiumPage, limits: ParseLimits
) -> None:
    """Refuse the page if one of its images is over the pixel ceiling, in a codec the sandbox
    does not decode, or damaged: OCR of the page without it would pass off part of a page as
    the whole, and an image PDFium would draw is never one the sandbox would refuse.

    ``copy.images`` are every image stream of the page's copy, and the masks of each, found
    where PDFium may draw them (:func:`refuse_hidden_decoders` walks the whole copy: forms,
    patterns, annotations' appearances, glyphs); pypdf's list of the page's images, read
    before, missed all but its forms' and took an image whose /Subtype is a reference for a
    form. ``pdfium`` lists the images its own parser finds in the page's content and its
    forms, inline ones included: each is held to the ceiling before anything is decoded, and
    the inline images of the page's content must be the ones pypdf finds and decodes
    (:func:`_check_inline_images`).

    Runs under the PDF's open guards (pypdf's limits as ceilings, Pillow's bomb check). JPEG
    2000 and JBIG2 never get here: every stream of the page was checked for them.
    """
    images = copy.images
    sizes = [_declared_size(image) for image in images]
    # Told apart from the XObjects only where the content may hold an inline image: the
    # comparison copies their stored bytes. pypdf keeps those only in _data.
    checked = list(zip((image._data for image in images), sizes, strict=True))
    drawn = pdfium.images(checked if copy.opens_inline_image else ())
    for size in [*sizes, *(image.size for image in drawn)]:
        check_pixels(size, limits)  # every size first: nothing is decoded over the ceiling
    for image, size in zip(images, sizes, strict=True):
        with _page_image_is_unreadable():
            if not _whole(image, size, limits):
                decoded = _xobj_to_image(_unmasked(image))[2]  # pypdf decodes it whole
                decoded.load()  # pypdf may hand over a lazily opened image
    if copy.opens_inline_image:
        _check_inline_images(page, drawn)


def _check_inline_images(page: PageObject, drawn: Sequence[DrawnImage]) -> None:
    """Refuse the page unless the inline images PDFium finds in its content are, size for
    size, the ones pypdf finds and decodes whole.

    The two parsers disagree on what content holds: a NUL is a space to PDFium alone, PDFium
    ends a Flate image where its data ends (so an EI glued to it opens another image pypdf
    takes for data), and PDFium parses a content stream as stored when it rejects the filter's
    parameters where pypdf decodes it. An image only PDFium sees would be drawn unchecked.
    An image PDFium draws whose stored bytes and size are an XObject's was checked as that
    XObject. Inline images inside forms are held to the ceiling only (docs/sandbox.md, Known
    gaps). Content with no operator that opens an inline image holds none, and the check is
    not called for it.
    """
    in_content = sorted(
        image.size for image in drawn if image.in_page_content and not image.checked
    )
    read = sorted(_inline_image_sizes(page))
    if read != in_content:
        raise Refusal(
            codes.UNREADABLE,
            f"PDFium finds {len(in_content)} inline image(s) in the page's content "
            f"({_listed(in_content)}) where the check reads {len(read)} ({_listed(read)}): "
            "what PDFium would draw cannot be checked",
        )


def _listed(sizes: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"{width}x{height}" for width, height in sizes) or "none"


def _inline_image_sizes(page: PageObject) -> list[tuple[int, int]]:
    """The size of each inline image pypdf finds in the page's content, each decoded whole (a
    damaged one refused)."""
    sizes = []
    with _inline_images_are_unreadable(), _page_image_is_unreadable():
        inline = page.images
        for key in inline.keys():  # noqa: SIM118 -- iterating the list itself decodes each one
            if isinstance(key, str) and key.startswith("~"):
                decoded = inline[key].image
                if decoded is None:
                    # pypdf logs its decoder's failure and hands over nothing.
                    raise Refusal(codes.UNREADABLE, f"{_WHAT} inline does not decode")
                decoded.load()
                sizes.append(decoded.size)
    return sizes


@contextmanager
def _inline_images_are_unreadable() -> Iterator[None]:
    """Refuse a page whose inline images pypdf cannot read. It parses the content to find them
    and decodes each as it goes, and any of its failures there (its own errors, an assertion
    that nothing precedes the operator, a ZeroDivisionError for /W 0, a TypeError for /W 8.5)
    raised out of the extractor as a parser error, where PDFium draws what it can. Its limits
    stay ceilings, and a verdict already reached stands."""
    try:
        yield
    except (Refusal, LimitReachedError, MemoryError):
        raise
    except Exception as exc:  # pypdf's decoders raise builtins as well as its own errors
        why = str(exc) or f"pypdf raised {type(exc).__name__}"
        raise Refusal(
            codes.UNREADABLE, f"the page's inline images cannot be read and checked: {why}"
        ) from exc


def _unmasked(image: Stream) -> Stream:
    """The image without its masks, which are in the list to check on their own: pypdf's decode
    applies a soft mask by decoding it, and the mask's own, so a chain of 60 masked images cost
    1,830 decodes instead of 60."""
    bare = copy.copy(image)
    for key in _MASKS:
        bare.pop(key, None)
    return bare


def _declared_size(image: Stream) -> tuple[int, int]:
    """The size PDFium draws the image at: a number it truncates to a whole one (``2000.0`` is
    2000 pixels to it, so a size written as a real cannot pass the ceiling unread). An image
    without one is unreadable: PDFium draws nothing of it, and pypdf's decode of it raised
    KeyError, TypeError or ZeroDivisionError."""
    width, height = resolved(image.get("/Width")), resolved(image.get("/Height"))
    if (
        isinstance(width, int | float)
        and isinstance(height, int | float)
        and math.isfinite(width)
        and math.isfinite(height)
        and width >= 1
        and height >= 1
    ):
        return int(width), int(height)
    raise Refusal(codes.UNREADABLE, f"{_WHAT} declares no size it could be drawn at")


def _whole(image: Stream, size: tuple[int, int], limits: ParseLimits) -> bool:
    """Whether the image's data holds all of it (a damaged one is refused); False when its
    filters or sample layout are not ones this check reads.

    pypdf's own limits on a stream hold here too (:class:`DecodingWork`). A PNG predictor is
    not undone but counted: its rows each carry one filter byte, and pypdf pads a cut last row
    with zeros, which would pass a cut image off as whole (and its predictor is pure Python:
    1.1 CPU-s for 4 MB).
    """
    chain = filter_chain(image)
    work = DecodingWork(len(chain), _WHAT)
    width, height = size
    row = _row_bytes(image, width)
    samples: bytes = image._data  # pypdf keeps the stored bytes only here
    predicted: DictionaryObject | None = None
    last = max((i for i, (name, _) in enumerate(chain) if name != PASSED_OVER), default=-1)
    for position, (name, parameters) in enumerate(chain):
        if name == PASSED_OVER:
            continue
        if predicted is not None:
            return False  # a filter after a predictor: not a layout this check reads
        if name in _JPEG and position == len(chain) - 1:
            _check_jpeg(samples, limits)
            return True
        decode = DECODERS.get(name or "")
        if decode is None or not decodes_as_pdfium(name, parameters):
            return False
        work.take_in(samples)
        unpredicted = parameters
        if _predictor(parameters) > 1:
            predicted = parameters
            unpredicted = DictionaryObject(
                {key: value for key, value in parameters.items() if key != _PREDICTOR}
            )
        enough = None
        if position == last and row is not None:
            enough = _stored_bytes(row * height, predicted)
        samples = _undone(samples, name, decode, unpredicted, enough)
    if row is None:
        return False
    held = len(samples) if predicted is None else _predicted_bytes(len(samples), predicted)
    if held < row * height:
        raise Refusal(
            codes.UNREADABLE,
            f"{_WHAT} is truncated or corrupt: its samples fill {held // row} of its {height} rows",
        )
    return True


def _undone(
    samples: bytes,
    name: str | None,
    decode: Decoder,
    parameters: DictionaryObject,
    enough: int | None,
) -> bytes:
    """``samples`` through one filter; the last Flate of a chain only as far as the image needs
    (``enough`` bytes): a 1x1 image once inflated 74 MB of zeros to find its one byte."""
    if enough is not None and name in _FLATE:
        try:
            return zlib.decompressobj().decompress(samples, enough)
        except zlib.error:
            pass  # pypdf's decoder recovers more of a damaged stream: it reads it whole
    return undone(decode, samples, parameters, f"{_WHAT} does not decode ({name}: ")


def _predictor(parameters: DictionaryObject) -> int:
    value = resolved(parameters.get(_PREDICTOR))
    return value if isinstance(value, int) else 1


def _predicted_bytes(length: int, parameters: DictionaryObject) -> int:
    """The bytes of samples ``length`` bytes of predicted rows hold: a PNG predictor's rows are
    one byte longer than the samples they carry, a TIFF predictor's are not; a part row holds
    nothing PDFium draws."""
    row = _predictor_row(parameters)
    return length if row is None else length // (row + 1) * row


def _stored_bytes(samples: int, predicted: DictionaryObject | None) -> int:
    """The bytes that hold ``samples`` bytes of samples, predicted rows and all."""
    row = None if predicted is None else _predictor_row(predicted)
    return samples if row is None else math.ceil(samples / row) * (row + 1)


def _predictor_row(parameters: DictionaryObject) -> int | None:
    """Bytes of samples in one row of a PNG predictor (/Columns x /Colors samples of
    /BitsPerComponent bits), or None for no PNG predictor."""
    if _predictor(parameters) < _PNG_PREDICTORS:
        return None
    columns, colours, depth = (
        value if isinstance(value := resolved(parameters.get(key)), int) and value > 0 else default
        for key, default in (("/Columns", 1), ("/Colors", 1), ("/BitsPerComponent", 8))
    )
    return math.ceil(columns * colours * depth / 8)


def _check_jpeg(data: bytes, limits: ParseLimits) -> None:
    """Decode the JPEG at an eighth of its size: libjpeg still reads every block of it."""
    jpeg = Image.open(io.BytesIO(data), formats=["JPEG"])
    check_pixels(jpeg.size, limits)
    width, height = jpeg.size
    jpeg.draft(jpeg.mode, (math.ceil(width / _DRAFT_SCALE), math.ceil(height / _DRAFT_SCALE)))
    jpeg.load()


def _row_bytes(image: Stream, width: int) -> int | None:
    """Bytes of one row of samples, or None for a layout this check does not read."""
    stencil = resolved(image.get("/ImageMask"))
    if isinstance(stencil, BooleanObject) and stencil.value:
        return math.ceil(width / 8)
    depth = resolved(image.get("/BitsPerComponent"))
    components = _components(resolved(image.get("/ColorSpace")))
    if not isinstance(depth, int) or depth not in _DEPTHS or components is None:
        return None
    return math.ceil(width * components * depth / 8)


def _components(space: PdfObject | None) -> int | None:
    if isinstance(space, NameObject):
        return _COMPONENTS.get(str(space))
    if not isinstance(space, ArrayObject) or not space:
        return None
    family = str(resolved(space[0]))
    if family == "/ICCBased" and len(space) > 1:
        profile = resolved(space[1])
        count = resolved(profile.get("/N")) if isinstance(profile, Stream) else None
        return int(count) if isinstance(count, int) and count in (1, 3, 4) else None
    if family == "/DeviceN" and len(space) > 1:
        names = resolved(space[1])
        return len(names) if isinstance(names, ArrayObject) and names else None
    return _COMPONENTS.get(family)


@contextmanager
def _page_image_is_unreadable() -> Iterator[None]:
    """Refuse a page image Pillow finds damaged or does not decode, and one that needs a
    decoder the sandbox does not have (pypdf raises DependencyError for /BrotliDecode)."""
    with damage_is_unreadable(_WHAT):
        try:
            yield
        except DependencyError as exc:
            raise Refusal(
                codes.UNREADABLE, f"{_WHAT} needs a decoder the sandbox does not have: {exc}"
            ) from exc
