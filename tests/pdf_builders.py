"""Hand-built PDFs with exact xref offsets, for the extractor, page and hostile-file tests."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable

from PIL import Image, ImageDraw

from tests.image_builders import encoded

CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
ONE_PAGE = b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"
FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def page(resources: bytes = b"/Font << /F1 5 0 R >>") -> bytes:
    return (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Resources << %s >> "
        b"/Contents 4 0 R >>" % resources
    )


def stream(data: bytes, entries: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), entries) + data + b"\nendstream"


TEXT_CONTENT = stream(b"BT /F1 12 Tf 20 100 Td (Hello) Tj ET")


def pdf(objects: list[bytes], trailer: Callable[[int], bytes] = lambda xref: b"") -> bytes:
    """A PDF of ``objects`` (numbered from 1, the catalog first) with exact xref offsets."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\n" % (len(objects) + 1, trailer(xref))
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


@functools.cache
def flate_bomb() -> bytes:
    """A content stream that inflates to 1 GiB of zeros from about 1 MiB."""
    compressor = zlib.compressobj(9)
    zeros = bytes(1 << 20)
    return b"".join(compressor.compress(zeros) for _ in range(1024)) + compressor.flush()


def pdf_with_image(data: bytes, image_filter: bytes) -> bytes:
    """A one-page PDF without a text layer whose only content is a 64x64 image in ``data``."""
    image = stream(
        data,
        b"/Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter %s " % image_filter,
    )
    drawing = stream(b"q 200 0 0 200 0 0 cm /Im0 Do Q")
    return pdf([CATALOG, ONE_PAGE, page(b"/XObject << /Im0 5 0 R >>"), drawing, image])


def scan() -> Image.Image:
    picture = Image.new("L", (64, 64), 255)
    ImageDraw.Draw(picture).rectangle((8, 8, 56, 56), outline=0)
    return picture


def pdf_with_jpx_image() -> bytes:
    """Pillow still encodes JPEG 2000 (only its opener is pruned), so the image is genuine."""
    return pdf_with_image(encoded(scan(), "JPEG2000"), b"/JPXDecode")


def pdf_with_jbig2_image() -> bytes:
    # Never decoded: pypdf would need jbig2dec, which the sandbox never runs.
    return pdf_with_image(b"\x97JB2\r\n\x1a\n" + bytes(64), b"/JBIG2Decode")


def pdf_with_truncated_jpeg_image() -> bytes:
    whole = encoded(scan(), "JPEG")
    return pdf_with_image(whole[: len(whole) // 2], b"/DCTDecode")


def pdf_of_pages(pages: int) -> bytes:
    kids = b"3 0 R " * pages
    pages_node = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages)
    return pdf([CATALOG, pages_node, page(), TEXT_CONTENT, FONT])
