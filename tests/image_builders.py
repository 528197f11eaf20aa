"""Hand-built images (PNG, TIFF, BMP, APNG, JPEG 2000) for the extractor and hostile-file tests."""

from __future__ import annotations

import io
import random
import struct
import zlib
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont


def png_chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def png(width: int, height: int, color_type: int, scanlines: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(scanlines))
        + png_chunk(b"IEND", b"")
    )


def encoded(picture: Image.Image, file_format: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format=file_format, **options)
    return buffer.getvalue()


def distinct_frames(count: int, size: tuple[int, int] = (16, 16)) -> list[Image.Image]:
    """Frames that differ, so no encoder merges them."""
    frames = []
    for index in range(count):
        frame = Image.new("L", size, 255)
        ImageDraw.Draw(frame).point((index % size[0], index // size[0]), fill=0)
        frames.append(frame)
    return frames


def photo() -> Image.Image:
    rng = random.Random(7)
    picture = Image.new("RGB", (400, 300), "white")
    draw = ImageDraw.Draw(picture)
    for _ in range(200):
        left, right = sorted(rng.sample(range(400), 2))
        top, bottom = sorted(rng.sample(range(300), 2))
        draw.rectangle((left, top, right, bottom), outline=(rng.randrange(256), 0, 90))
    return picture


def tiff_with_looping_ifds(frame_count: int) -> bytes:
    """A TIFF whose last IFD's next-IFD offset points back at the first IFD."""
    first, *rest = distinct_frames(frame_count)
    data = bytearray(encoded(first, "TIFF", save_all=True, append_images=rest))
    first_ifd = offset = struct.unpack_from("<I", data, 4)[0]
    while True:
        next_field = offset + 2 + 12 * struct.unpack_from("<H", data, offset)[0]
        following = struct.unpack_from("<I", data, next_field)[0]
        if following == 0:
            struct.pack_into("<I", data, next_field, first_ifd)
            return bytes(data)
        offset = following


def bmp_rle8(width: int, height: int, data: bytes) -> bytes:
    """An 8-bit BMP whose pixels are RLE8 ``data`` (Pillow writes no RLE, so by hand)."""
    palette = b"".join(bytes((level, level, level, 0)) for level in range(256))
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(data), 2835, 2835, 256, 0)
    offset = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset) + info + palette + data


def bmp_rle8_short() -> bytes:
    """64x64 pixels declared, one run of 5 and an end-of-bitmap mark given."""
    return bmp_rle8(64, 64, b"\x05\x01\x00\x01")


def apng_with_sequence_errors() -> bytes:
    """A three-frame APNG whose frame-data chunks carry a wrong sequence number (CRCs fixed)."""
    apng = bytearray(
        encoded(distinct_frames(1)[0], "PNG", save_all=True, append_images=distinct_frames(3)[1:])
    )
    position = 8
    while position < len(apng):
        (length,) = struct.unpack_from(">I", apng, position)
        if apng[position + 4 : position + 8] == b"fdAT":
            struct.pack_into(">I", apng, position + 8, 99)
            crc = zlib.crc32(apng[position + 4 : position + 8 + length])
            struct.pack_into(">I", apng, position + 8 + length, crc)
        position += 12 + length
    return bytes(apng)


def jpeg2000() -> bytes:
    return encoded(photo(), "JPEG2000")


def ruled_pages(side: int, pages: int) -> bytes:
    """A TIFF of ``pages`` grey pages of ``side`` x ``side`` pixels ruled every 40 rows.

    Deflate keeps it small on the wire (1.5 MB for ten 10000-pixel pages) while tesseract
    holds ~400 MB and a second of CPU per page for it: memory a job can make a process of its
    own hold, quickly, for as long as it likes.
    """
    page = Image.new("L", (side, side), 255)
    draw = ImageDraw.Draw(page)
    for row in range(0, side, 40):
        draw.line([0, row, side, row], fill=0, width=2)
    return encoded(
        page,
        "TIFF",
        compression="tiff_adobe_deflate",
        save_all=True,
        append_images=[page] * (pages - 1),
    )


#: A CJK font (Debian's fonts-wqy-microhei: Chinese and Japanese), which scripts/setup unpacks
#: into .venv, out of the font directories PDFium reads.
CJK_FONT = Path(__file__).resolve().parent.parent / ".venv" / "test-fonts" / "wqy-microhei.ttc"
#: Traditional Chinese prose, as a Taiwanese site's screenshot shows it.
TRADITIONAL_CHINESE = (
    "臺灣的氣候屬於亞熱帶與熱帶季風氣候，",
    "夏季漫長而潮濕，冬季短暫而溫和。",
    "國立圖書館收藏了許多珍貴的古籍與檔案，",
    "讀者可以在網路上查詢館藏資料。",
)
#: The same kind of prose in Simplified characters.
SIMPLIFIED_CHINESE = (
    "中华人民共和国的气候类型多样，",
    "国家图书馆收藏了许多珍贵的古籍与档案，",
    "读者可以在网络上查询馆藏资料。",
)
#: The opening of Miyazawa Kenji's "Ame ni mo makezu" (public domain), in columns.
VERTICAL_JAPANESE = (
    "雨ニモマケズ",
    "風ニモマケズ",
    "雪ニモ夏ノ暑サニモマケヌ",
    "丈夫ナカラダヲモチ",
    "慾ハナク決シテ瞋ラズ",
)


def cjk_lines(lines: tuple[str, ...]) -> bytes:
    """``lines`` drawn left to right, top to bottom, at 40 px, as a PNG screenshot."""
    font = ImageFont.truetype(CJK_FONT, 40)
    picture = Image.new("L", (900, 60 + 70 * len(lines)), 255)
    draw = ImageDraw.Draw(picture)
    for row, line in enumerate(lines):
        draw.text((30, 30 + row * 70), line, font=font, fill=0)
    return encoded(picture, "PNG")


def vertical_columns(columns: tuple[str, ...]) -> bytes:
    """``columns`` written top to bottom, the first on the right (tategaki), as a PNG."""
    font = ImageFont.truetype(CJK_FONT, 40)
    height = 60 + 48 * max(len(column) for column in columns)
    width = 80 + 70 * len(columns)
    picture = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(picture)
    for index, column in enumerate(columns):
        for row, char in enumerate(column):
            draw.text((width - 80 - index * 70, 30 + row * 48), char, font=font, fill=0)
    return encoded(picture, "PNG")
