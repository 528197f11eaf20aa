"""Hand-built PDFs with exact xref offsets, for the extractor, page and hostile-file tests."""

from __future__ import annotations

import functools
import io
import zlib
from collections.abc import Callable

from PIL import Image, ImageDraw, ImageFont
from pypdf import PdfReader, PdfWriter

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


def joined(*documents: bytes) -> bytes:
    """One PDF of the pages of ``documents``, in turn."""
    writer = PdfWriter()
    for document in documents:
        writer.append(PdfReader(io.BytesIO(document)))
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


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


def pdf_with_object_stream(objects: list[bytes], compressed: set[int]) -> bytes:
    """A PDF of ``objects`` (numbered from 1, the catalog first) whose objects numbered in
    ``compressed`` (no streams) live in one Flate-compressed object stream, found through a
    compressed xref stream: nothing of them is in the file's bytes as written."""
    out = bytearray(b"%PDF-1.7\n")
    offsets: dict[int, int] = {}
    for number, body in enumerate(objects, start=1):
        if number not in compressed:
            offsets[number] = len(out)
            out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    members = sorted(compressed)
    index, position = [], 0
    for number in members:
        index.append(b"%d %d" % (number, position))
        position += len(objects[number - 1]) + 1
    first = b" ".join(index) + b"\n"
    data = first + b"".join(objects[number - 1] + b"\n" for number in members)
    object_stream = len(objects) + 1
    offsets[object_stream] = len(out)
    out += b"%d 0 obj\n" % object_stream
    out += stream(
        zlib.compress(data),
        b"/Type /ObjStm /N %d /First %d /Filter /FlateDecode " % (len(members), len(first)),
    )
    out += b"\nendobj\n"
    xref = object_stream + 1
    offsets[xref] = len(out)
    rows = [bytes([0]) + bytes(4) + (65535).to_bytes(2, "big")]
    for number in range(1, xref + 1):
        if number in compressed:
            where = object_stream.to_bytes(4, "big") + members.index(number).to_bytes(2, "big")
            rows.append(bytes([2]) + where)
        else:
            rows.append(bytes([1]) + offsets[number].to_bytes(4, "big") + bytes(2))
    out += b"%d 0 obj\n" % xref
    out += stream(
        zlib.compress(b"".join(rows)),
        b"/Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Filter /FlateDecode " % (xref + 1),
    )
    out += b"\nendobj\nstartxref\n%d\n%%%%EOF\n" % offsets[xref]
    return bytes(out)


def _startxref(document: bytes) -> int:
    return int(document.rsplit(b"startxref\n", 1)[1].split(b"\n", 1)[0])


def updated(document: bytes, objects: dict[int, bytes]) -> bytes:
    """``document`` (as :func:`pdf` writes it) with an incremental update that defines
    ``objects`` anew: appended, with an xref section of their own and /Prev to the old one."""
    size = int(document.rsplit(b"/Size ", 1)[1].split(b" ", 1)[0])
    out = bytearray(document)
    offsets = {}
    for number, body in sorted(objects.items()):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n"
    out += b"".join(b"%d 1\n%010d 00000 n \n" % item for item in sorted(offsets.items()))
    out += b"trailer\n<< /Size %d /Root 1 0 R /Prev %d >>\n" % (
        max(size, *(number + 1 for number in objects)),
        _startxref(document),
    )
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def repaired_differently(document: bytes, objects: dict[int, bytes]) -> bytes:
    """``document`` (as :func:`pdf` writes it) with ``objects`` defined a second time after it
    and junk before its header. PDFium counts the xref's offsets from the header and reads the
    first definitions; pypdf finds the offsets wrong, rebuilds the xref from the file's bytes,
    and the later definitions win. Each parser sees an object the other does not."""
    body, tail = document.split(b"xref\n", 1)
    again = b"".join(
        b"%d 0 obj\n" % number + obj + b"\nendobj\n" for number, obj in objects.items()
    )
    tail = tail.rsplit(b"startxref\n", 1)[0]
    moved = b"startxref\n%d\n%%%%EOF\n" % (_startxref(document) + len(again))
    return b"%% junk before the header\n" * 8 + body + again + b"xref\n" + tail + moved


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


#: A JBIG2 file header and zeros: no JBIG2 encoder is at hand, and the sandbox refuses the
#: filter before any decoder could read the data.
JBIG2_DATA = b"\x97JB2\r\n\x1a\n" + bytes(64)


def pdf_with_jbig2_image() -> bytes:
    return pdf_with_image(JBIG2_DATA, b"/JBIG2Decode")


def pdf_with_brotli_image() -> bytes:
    # pypdf decodes /BrotliDecode only with the brotli package, which the sandbox does not have.
    return pdf_with_image(bytes(64), b"/BrotliDecode")


def pdf_with_truncated_jpeg_image() -> bytes:
    whole = encoded(scan(), "JPEG")
    return pdf_with_image(whole[: len(whole) // 2], b"/DCTDecode")


def pdf_of_pages(pages: int) -> bytes:
    kids = b"3 0 R " * pages
    pages_node = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages)
    return pdf([CATALOG, pages_node, page(), TEXT_CONTENT, FONT])


def pdf_with_text_lines(lines: list[str]) -> bytes:
    """A one-page PDF whose text layer is ``lines``, any Unicode at all, one line each.

    Each distinct character gets a one-byte glyph code, and the font's ToUnicode map says which
    character that code is (a surrogate pair beyond the basic plane), as a PDF producer
    embedding a subset font writes it; both pypdf and PDFium read text through that map.
    """
    chars = sorted({char for line in lines for char in line} - {" "})
    if len(chars) > 254:
        raise ValueError("more distinct characters than one-byte codes")
    codes = {" ": 0x20} | {char: code for code, char in enumerate(chars, start=0x21)}
    entries = [
        b"<%02x> <%s>" % (code, char.encode("utf-16-be").hex().encode())
        for char, code in codes.items()
    ]
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /U def "
        b"1 begincodespacerange <00> <FF> endcodespacerange "
        + b"".join(
            b"%d beginbfchar %s endbfchar " % (len(chunk), b" ".join(chunk))
            for chunk in (entries[start : start + 100] for start in range(0, len(entries), 100))
        )
        + b"endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    shown = b"".join(
        b"0 -14 Td <%s> Tj " % bytes(codes[char] for char in line).hex().encode() for line in lines
    )
    content = stream(b"BT /F1 10 Tf 10 %d Td %sET" % (14 * len(lines) + 20, shown))
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>"
    height = 14 * len(lines) + 40
    page_object = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 %d] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>" % height
    )
    return pdf([CATALOG, ONE_PAGE, page_object, content, font, stream(cmap)])


def pdf_of_tiny_scans(pages: int, side: int = 200) -> bytes:
    """``pages`` pages of ``side`` points square without a text layer, each drawing one small
    shared image of the word PAGE at its own place: a few KB that ask for ``pages`` OCR runs
    (issue 20's "3.6 KB PDF of 20 tiny pages" that became 21 tasks)."""
    word = Image.new("L", (120, 40), 255)
    ImageDraw.Draw(word).text((6, 4), "PAGE", fill=0, font=ImageFont.load_default(size=28))
    first_content = 3 + pages
    image = first_content + pages
    kids = b" ".join(b"%d 0 R" % (3 + n) for n in range(pages))
    page_objects = [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources "
        b"<< /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>"
        % (side, side, image, first_content + n)
        for n in range(pages)
    ]
    drawings = [
        stream(b"q %d 0 0 %d %d %d cm /Im0 Do Q" % (side - 20, (side - 20) // 3, 10, 10 + n))
        for n in range(pages)
    ]
    picture = stream(
        zlib.compress(word.tobytes(), 9),
        b"/Type /XObject /Subtype /Image /Width 120 /Height 40 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode ",
    )
    return pdf(
        [
            CATALOG,
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
            *page_objects,
            *drawings,
            picture,
        ]
    )


def slow_text_pdf() -> bytes:
    """One page whose text layer sits behind 400,000 no-op text moves: pypdf walks them for
    seconds (6 CPU-s), in the light stage, and answers with the page's text."""
    content = b"BT /F1 12 Tf 20 100 Td (the slow page) Tj " + b"0 0 Td " * 400_000 + b"ET"
    contents = stream(zlib.compress(content, 9), b"/Filter /FlateDecode ")
    return pdf([CATALOG, ONE_PAGE, page(), contents, FONT])
