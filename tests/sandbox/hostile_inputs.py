"""The hostile files every sandboxed parser must survive, with the outcome each must end in; the
hostile-file tests run them through the sandbox and the syscall trace runs them under strace.
"""

from __future__ import annotations

from collections.abc import Callable

from sandbox.errors import (
    CeilingExceeded,
    ChildCrashed,
    ParserError,
    SandboxError,
    UnreadableInput,
)
from sandbox.limits import MIB, SandboxLimits
from tests.image_builders import distinct_frames, encoded, photo, png
from tests.pdf_builders import CATALOG, FONT, ONE_PAGE, TEXT_CONTENT, flate_bomb, page, pdf, stream
from tests.sandbox.docx_builders import document_xml, docx_with
from tests.sandbox.hidden_images import annotation, image, inline, inline_image, jpx, tiling_pattern
from tests.sandbox.spreadsheet_builders import MAIN, inline_row, ods, sheet, xlsx

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


XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def _far_corners() -> bytes:
    """Two cells, at A1 and at the last cell a sheet has: calamine would lay out every cell
    between (512 GB)."""
    far = '<row r="1048576"><c r="XFD1048576"><v>1</v></c></row>'
    return xlsx({"S": sheet(inline_row(1, "a") + far)})


def _shared_strings_claiming_billions() -> bytes:
    """A shared-strings table whose declared count calamine reserves room for."""
    table = (
        f'<sst xmlns="{MAIN}" count="2000000000" uniqueCount="2000000000"><si><t>a</t></si></sst>'
    )
    return xlsx({"S": sheet('<row r="1"><c r="A1" t="s"><v>0</v></c></row>')}, shared_strings=table)


def _repeated_cells() -> bytes:
    """One written cell repeated into 100,000 rows of 1,000 columns: 4 KB for 10^8 cells."""
    cell = (
        '<table:table-cell table:number-columns-repeated="1000" office:value-type="string">'
        "<text:p>x</text:p></table:table-cell>"
    )
    return ods(
        {"T": f'<table:table-row table:number-rows-repeated="100000">{cell}</table:table-row>'}
    )


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
    ("laughs.docx", "docx", DOCX, _billion_laughs, UnreadableInput),
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
    # The XLSX's reach is measured before calamine lays it out (sandbox/extractors/xlsx_scan.py).
    ("corners.xlsx", "spreadsheet", XLSX, _far_corners, CeilingExceeded),
    # calamine allocates what these ask for and aborts when the allocation fails: SIGABRT.
    ("strings.xlsx", "spreadsheet", XLSX, _shared_strings_claiming_billions, ChildCrashed),
    ("repeated.ods", "spreadsheet", XLSX, _repeated_cells, ChildCrashed),
]
