"""Images: PNG, JPEG, TIFF, GIF, WebP and BMP, read by OCR one frame at a time.

The content decides the format, among the decoders :mod:`sandbox.extractors.ocr` leaves
registered; the media type is only a label. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator

from PIL import Image, ImageFile, UnidentifiedImageError

from sandbox import codes, quality
from sandbox.document import Block, Document, OcrText, PageBreak
from sandbox.extractors.ocr import (
    ACCEPTED_FORMATS,
    check_pixels,
    damage_is_unreadable,
    decoding_under,
    not_decoded,
    ocr_image,
    pruned_format,
)
from sandbox.extractors.registry import Refusal, extractor, report_progress
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

# The best ratio deflate can reach is about 1032:1, so PNG pixel data can never be smaller than
# 1/1032 of its raw scanlines (a filter byte and the row's samples each).
_DEFLATE_MAX_RATIO = 1032
# The fewest bits per pixel each PNG mode can be stored with (palette and grey: 1-bit depths).
_PNG_MIN_BITS = {"RGB": 24, "RGBA": 32, "LA": 16, "I;16": 16, "I": 16}
# A Huffman-coded JPEG spends at least one bit on each 8x8 block's DC code and one on its
# end-of-block code, so it needs at least a quarter byte per luminance block.
_JPEG_MIN_BYTES_PER_BLOCK = 0.25


@extractor("image")
def extract_image(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    """Each frame's OCR; the frames of a multi-frame image (a TIFF's pages) each open with
    their page marker."""
    if not limits.ocr:
        raise Refusal(codes.NEEDS_OCR, "an image can only be read by OCR")
    budget = TextBudget(limits)
    blocks: list[Block] = []
    with decoding_under(limits):
        for done, (frame, total) in enumerate(decoded_frames(payload, limits), start=1):
            if total > 1:
                blocks.append(PageBreak(done))
            text = budget.spend(ocr_image(frame, limits))
            blocks.append(OcrText(text, quality.last_confidence()))
            report_progress(done, total)
    return Document(blocks)


def decoded_frames(payload: bytes, limits: ParseLimits) -> Iterator[tuple[Image.Image, int]]:
    """Yield each frame of ``payload`` decoded, with the frame count, one at a time, after every
    check that can refuse the whole image has passed: nothing is OCR'd from an image that is
    refused later."""
    image = _open(payload)
    _refuse_implausibly_small(image, len(payload))
    damaged = f"the {image.format} image data"
    with damage_is_unreadable(damaged):
        frames = _count_frames(image, limits)
    for index in range(frames):
        with damage_is_unreadable(damaged):
            image.seek(index)
            image.load()
        yield image, frames


def _open(payload: bytes) -> ImageFile.ImageFile:
    """Identify the image among the accepted formats and read its header, nothing more.

    ``Image.open`` is lazy: no pixel is decoded until ``load()``, so the pixel ceiling is checked
    on the declared size first.
    """
    try:
        return Image.open(io.BytesIO(payload), formats=ACCEPTED_FORMATS)
    except UnidentifiedImageError as exc:
        known = pruned_format(payload)
        if known is not None:
            raise Refusal(codes.UNREADABLE, f"the payload looks like {not_decoded(known)}") from exc
        raise Refusal(
            codes.UNREADABLE,
            "the payload is not an image in a format the sandbox decodes "
            f"({', '.join(ACCEPTED_FORMATS)})",
        ) from exc


def _count_frames(image: Image.Image, limits: ParseLimits) -> int:
    """Count the frames and check each one's declared size, before any frame is decoded.

    Seeking reads a frame's header only. The walk stops one frame past the page ceiling:
    ``n_frames`` would walk the whole chain, and a TIFF chain can be millions of IFDs long. Every
    frame's size is checked here because Pillow checks only the first; a TIFF's second page can
    declare 50000x50000 behind a tiny first one.
    """
    check_pixels(image.size, limits)
    for index in range(1, limits.max_pages + 1):
        try:
            image.seek(index)
        except EOFError:
            return index
        check_pixels(image.size, limits)
    raise Refusal(
        codes.CEILING,
        f"more than {limits.max_pages} frames exceeds the {limits.max_pages}-page ceiling",
    )


def _refuse_implausibly_small(image: Image.Image, payload_size: int) -> None:
    """Refuse a PNG or JPEG too small to hold the pixels its header declares.

    Pillow fills a PNG whose compressed data ends early, or a JPEG that reaches its end marker
    early, without complaint; the result is mostly padding, which would cost OCR time and
    produce text from a picture that is not there. The bounds are what the codecs can reach at
    best, so no complete file is refused. (An arithmetic-coded JPEG can beat the Huffman bound;
    libjpeg decodes those, but they are rare enough that refusing a near-blank one is accepted.)
    """
    width, height = image.size
    if image.format == "PNG":
        raw_bytes = height * (1 + math.ceil(width * _PNG_MIN_BITS.get(image.mode, 1) / 8))
        needed = raw_bytes // _DEFLATE_MAX_RATIO
    elif image.format in ("JPEG", "MPO"):
        blocks = math.ceil(width / 8) * math.ceil(height / 8)
        needed = int(blocks * _JPEG_MIN_BYTES_PER_BLOCK)
    else:
        return
    if payload_size < needed:
        raise Refusal(
            codes.UNREADABLE,
            f"image data is truncated: a {width}x{height} {image.format} needs at least "
            f"{needed} bytes, the payload has {payload_size}",
        )
