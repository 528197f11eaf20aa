"""The hostile files every sandboxed parser must survive, with the outcome each must end in; the
hostile-file tests run them through the sandbox and the syscall trace runs them under strace.
"""

from __future__ import annotations

from collections.abc import Callable

from sandbox.errors import CeilingExceeded, ParserError, SandboxError, UnreadableInput
from sandbox.limits import MIB, SandboxLimits
from tests.image_builders import distinct_frames, encoded, photo, png
from tests.pdf_builders import CATALOG, FONT, ONE_PAGE, TEXT_CONTENT, flate_bomb, page, pdf, stream
from tests.sandbox.docx_builders import document_xml, docx_with
from tests.sandbox.hidden_images import annotation, image, inline, inline_image, jpx, tiling_pattern

WALL_SECONDS = 20.0
LIMITS = SandboxLimits(memory_bytes=1024 * MIB, cpu_seconds=15, wall_seconds=WALL_SECONDS)
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _billion_laughs() -> bytes:
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{level} "{f"&lol{level - 1};" * 10}">' for level in range(1, 10)
    ]
    doctype = f"<!DOCTYPE w:document [{''.join(entities)}]>\n"
    return docx_with(
        {"word/document.xml": document_xml("<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>", doctype)}
    )


def _truncated_jpeg() -> bytes:
    whole = encoded(photo(), "JPEG")
    return whole[: len(whole) // 2]


def _tiff_over_the_page_ceiling() -> bytes:
    first, *rest = distinct_frames(21)
    return encoded(first, "TIFF", save_all=True, append_images=rest)


def _eps_as_png() -> bytes:
    return b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n%%EOF\n"


# (label, kind, media type, payload builder, expected sandbox outcome)
HOSTILE: list[tuple[str, str, str, Callable[[], bytes], type[SandboxError]]] = [
    (
        "flate-bomb.pdf",
        "pdf",
        "application/pdf",
        lambda: pdf(
            [CATALOG, ONE_PAGE, page(), stream(flate_bomb(), b"/Filter /FlateDecode "), FONT]
        ),
        CeilingExceeded,
    ),
    (
        "cyclic-pages.pdf",
        "pdf",
        "application/pdf",
        lambda: pdf([CATALOG, b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>", TEXT_CONTENT, FONT]),
        ParserError,
    ),
    (
        "ten-million-pages.pdf",
        "pdf",
        "application/pdf",
        lambda: pdf(
            [
                CATALOG,
                b"<< /Type /Pages /Kids [3 0 R] /Count 10000000 >>",
                page(),
                TEXT_CONTENT,
                FONT,
            ]
        ),
        CeilingExceeded,
    ),
    # JPEG 2000 where the page's own images are not: PDFium's OpenJPEG would decode it.
    (
        "jpx-pattern.pdf",
        "pdf",
        "application/pdf",
        lambda: tiling_pattern(image(jpx())),
        UnreadableInput,
    ),
    (
        "jpx-annotation.pdf",
        "pdf",
        "application/pdf",
        lambda: annotation(image(jpx())),
        UnreadableInput,
    ),
    (
        "jpx-inline.pdf",
        "pdf",
        "application/pdf",
        lambda: inline(inline_image(jpx(), b"/JPX")),
        UnreadableInput,
    ),
    ("laughs.docx", "docx", DOCX, _billion_laughs, ParserError),
    (
        "huge.png",
        "image",
        "image/png",
        lambda: png(50_000, 50_000, 0, b"\x00" * 1000),
        CeilingExceeded,
    ),
    ("cut.jpg", "image", "image/jpeg", _truncated_jpeg, UnreadableInput),
    ("pages.tif", "image", "image/tiff", _tiff_over_the_page_ceiling, CeilingExceeded),
    ("eps.png", "image", "image/png", _eps_as_png, UnreadableInput),
]
