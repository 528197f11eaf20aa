"""Every extractor, imported by the fork server once, before it forks.

Importing this module registers the twelve kinds; :func:`warm_up` runs each parser's lazy
imports once, so none is left for a jailed child that could no longer read the files.
See docs/sandbox.md, "Shape" and "Notes by module".
"""

from __future__ import annotations

import encodings
import importlib
import io
import pkgutil
import zipfile
from typing import Any

import docx as python_docx
import pptx
from PIL import Image, ImageDraw
from pptx.util import Inches
from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject

from sandbox.extractors import (
    archive,
    docx,
    epub,
    html,
    image,
    mail,
    ocr,
    odf,
    pdf,
    rtf,
    slides,
    spreadsheet,
    text,
)
from sandbox.limits import ParseLimits

__all__ = [
    "archive",
    "docx",
    "epub",
    "html",
    "image",
    "mail",
    "odf",
    "pdf",
    "rtf",
    "samples",
    "slides",
    "spreadsheet",
    "text",
    "warm_up",
]


def warm_up() -> None:
    """Exercise every lazily imported path of the parsers once; tesseract itself is not run."""
    limits = ParseLimits()
    _warm_codecs()
    _warm_images(limits)
    _warm_pdf(limits)
    _warm_docx(limits)
    _warm_spreadsheet(limits)
    _warm_slides(limits)
    _warm_odf(limits)
    _warm_rtf(limits)
    _warm_web(limits)
    _warm_mail(limits)
    _warm_text(limits)


def _sample_image(mode: str) -> Image.Image:
    picture = Image.new(mode, (48, 32), "white")
    ImageDraw.Draw(picture).rectangle((8, 8, 40, 24), fill="black")
    return picture


def _warm_images(limits: ParseLimits) -> None:
    """Decode each accepted format (TIFF also with its fax and LZW codecs, GIF with two frames)
    and encode every kind of frame the OCR path hands tesseract."""
    samples: list[tuple[Image.Image, str, dict[str, Any]]] = [
        (_sample_image("RGB"), "PNG", {}),
        (_sample_image("RGBA"), "PNG", {}),
        (_sample_image("RGB"), "JPEG", {}),
        (_sample_image("1"), "TIFF", {"compression": "group4"}),
        (_sample_image("L"), "TIFF", {"compression": "tiff_lzw"}),
        (_sample_image("P"), "GIF", {"save_all": True, "append_images": [_sample_image("P")]}),
        (_sample_image("RGB"), "WEBP", {}),
        (_sample_image("RGB"), "BMP", {}),
    ]
    for picture, file_format, options in samples:
        buffer = io.BytesIO()
        picture.save(buffer, format=file_format, **options)
        with ocr.decoding_under(limits):
            for frame, _ in image.decoded_frames(buffer.getvalue(), limits):
                ocr.encode_for_tesseract(frame)


def samples() -> tuple[tuple[str, bytes], ...]:
    """A document of each of the commonest kinds (a note, a text PDF, a DOCX with a table): the
    fork server rehearses a job on them to learn which of its pages a job writes (see
    ``sandbox/prefault.py``)."""
    return (("text", _SAMPLE_TEXT.encode()), ("pdf", _sample_pdf()), ("docx", _sample_docx()))


def _sample_pdf() -> bytes:
    """An encrypted (empty password) PDF with one compressed text page."""
    writer = PdfWriter()
    page = writer.add_blank_page(width=200, height=200)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
    )
    content = DecodedStreamObject()
    content.set_data(b"BT /F1 12 Tf 20 100 Td (warm) Tj ET")
    page.replace_contents(ArrayObject([content]))
    page.compress_content_streams()
    writer.encrypt(user_password="", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _warm_pdf(limits: ParseLimits) -> None:
    """Read the sample PDF; read scanned pages (CCITT fax and JPEG) as OCR reads them: copied
    alone and checked, their images checked (the fax decoded by pypdf, the JPEG at an eighth),
    read and rendered by PDFium; encode the rendering as OCR would."""
    pdf.extract_pdf("application/pdf", _sample_pdf(), limits)

    for mode in ("1", "L"):
        scan = io.BytesIO()
        _sample_image(mode).save(scan, format="PDF")
        ocr.encode_for_tesseract(pdf.warm_up(scan.getvalue(), limits))


def _warm_docx(limits: ParseLimits) -> None:
    docx.extract_docx("application/octet-stream", _sample_docx(), limits)


def _sample_docx() -> bytes:
    """A DOCX with a table, numbered and bulleted lists, a heading, first-page and default
    headers and a footer, as python-docx's own template writes it (with its numbering.xml)."""
    document = python_docx.Document()
    document.add_heading("warm", level=1)
    document.add_paragraph("warm")
    document.add_paragraph("step", style="List Number")
    document.add_paragraph("point", style="List Bullet 2")
    document.add_table(rows=1, cols=2).cell(0, 1).text = "cell"
    section = document.sections[0]
    section.different_first_page_header_footer = True
    section.first_page_header.paragraphs[0].text = "first"
    section.header.paragraphs[0].text = "header"
    section.footer.paragraphs[0].text = "footer"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


_SPREADSHEET_NS = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
_RELATIONSHIPS_NS = 'xmlns="http://schemas.openxmlformats.org/package/2006/relationships"'
_WARM_XLSX = {
    "[Content_Types].xml": (
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="xml" ContentType="application/xml"/></Types>'
    ),
    "_rels/.rels": (
        f'<Relationships {_RELATIONSHIPS_NS}><Relationship Id="rId1" Target="xl/workbook.xml" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'officeDocument"/></Relationships>'
    ),
    "xl/workbook.xml": (
        f'<workbook {_SPREADSHEET_NS} xmlns:r="http://schemas.openxmlformats.org/'
        'officeDocument/2006/relationships"><sheets><sheet name="warm" sheetId="1" '
        'r:id="rId1"/></sheets></workbook>'
    ),
    "xl/_rels/workbook.xml.rels": (
        f'<Relationships {_RELATIONSHIPS_NS}><Relationship Id="rId1" '
        'Target="worksheets/sheet1.xml" Type="http://schemas.openxmlformats.org/'
        'officeDocument/2006/relationships/worksheet"/></Relationships>'
    ),
    "xl/worksheets/sheet1.xml": (
        f'<worksheet {_SPREADSHEET_NS}><sheetData><row r="1"><c r="A1" t="inlineStr"><is>'
        '<t>warm</t></is></c><c r="B1"><v>1.5</v></c></row></sheetData></worksheet>'
    ),
}


def _warm_spreadsheet(limits: ParseLimits) -> None:
    """Read a one-sheet XLSX with a string and a number cell."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        for name, part in _WARM_XLSX.items():
            package.writestr(name, part)
    spreadsheet.extract_spreadsheet("application/octet-stream", buffer.getvalue(), limits)


def _warm_slides(limits: ParseLimits) -> None:
    """Read a deck as python-pptx's own template writes it: a title slide with a subtitle and
    speaker notes, and a slide with a text box and a table."""
    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "warm"
    first.placeholders[1].text = "subtitle"
    first.notes_slide.notes_text_frame.text = "notes"
    second = deck.slides.add_slide(deck.slide_layouts[6])
    second.shapes.add_textbox(Inches(1), Inches(1), Inches(2), Inches(1)).text_frame.text = "box"
    second.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(4), Inches(1)).table.cell(
        0, 0
    ).text = "cell"
    buffer = io.BytesIO()
    deck.save(buffer)
    slides.extract_presentation("application/octet-stream", buffer.getvalue(), limits)


_ODF_NAMESPACES = " ".join(
    f'xmlns:{prefix}="urn:oasis:names:tc:opendocument:xmlns:{name}"'
    for prefix, name in (
        ("office", "office:1.0"),
        ("text", "text:1.0"),
        ("table", "table:1.0"),
        ("draw", "drawing:1.0"),
        ("presentation", "presentation:1.0"),
    )
)
_WARM_ODF_BODIES = {
    "text": (
        "<office:text><text:h text:outline-level='1'>warm</text:h><text:p>a<text:s text:c='2'/>b"
        "</text:p><text:list><text:list-item><text:p>item</text:p></text:list-item></text:list>"
        "<table:table><table:table-row><table:table-cell><text:p>cell</text:p>"
        "</table:table-cell></table:table-row></table:table></office:text>"
    ),
    "presentation": (
        "<office:presentation><draw:page><draw:frame presentation:class='title'><draw:text-box>"
        "<text:p>warm</text:p></draw:text-box></draw:frame></draw:page></office:presentation>"
    ),
}


def _warm_odf(limits: ParseLimits) -> None:
    """Read an OpenDocument text with a heading, spaces, a list and a table, and a one-slide
    OpenDocument presentation."""
    for name, body in _WARM_ODF_BODIES.items():
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as package:
            package.writestr("mimetype", f"application/vnd.oasis.opendocument.{name}")
            package.writestr(
                "content.xml",
                f"<office:document-content {_ODF_NAMESPACES}><office:body>{body}</office:body>"
                "</office:document-content>",
            )
        kind = odf.extract_odt if name == "text" else slides.extract_presentation
        kind("application/octet-stream", buffer.getvalue(), limits)


def _warm_rtf(limits: ParseLimits) -> None:
    """Read an RTF with a Shift-JIS font, a Unicode character, hidden text and a table."""
    rtf.extract_rtf(
        "application/rtf",
        b"{\\rtf1\\ansi\\ansicpg1252{\\fonttbl{\\f1\\fcharset128 MS Gothic;}}"
        b"{\\f1 \\'83\\'5d}\\u8364?{\\v hidden}\\par"
        b"\\trowd\\cellx1000\\pard\\intbl cell\\cell\\row\\pard after}",
        limits,
    )


_WARM_PAGE = (
    "<!DOCTYPE html><html><head><meta charset='windows-1252'><style>.x{display:none}</style>"
    "</head><body><h1>warm</h1><p class=x>hidden</p><p style='color:#fff'>white</p>"
    "<ol><li>item</ol><table><tr><th>a<tr><td colspan=2>b</table><pre> pre</pre></body></html>"
)


def _warm_web(limits: ParseLimits) -> None:
    """Read a web page with a declared charset, a stylesheet, hidden text, a list and a table,
    and an EPUB of that page as an XHTML chapter with a linked stylesheet."""
    page = _WARM_PAGE.encode("cp1252")
    html.extract_html("text/html", page, limits)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr(
            "META-INF/container.xml",
            "<container xmlns='urn:oasis:names:tc:opendocument:xmlns:container'><rootfiles>"
            "<rootfile full-path='OPS/book.opf' media-type='application/oebps-package+xml'/>"
            "</rootfiles></container>",
        )
        book.writestr(
            "OPS/book.opf",
            "<package xmlns='http://www.idpf.org/2007/opf' version='3.0'><manifest>"
            "<item id='c1' href='c%201.xhtml' media-type='application/xhtml+xml'/></manifest>"
            "<spine><itemref idref='c1'/></spine></package>",
        )
        book.writestr(
            "OPS/c 1.xhtml",
            _WARM_PAGE.replace("<style>", "<link rel='stylesheet' href='s.css'/><style>"),
        )
        book.writestr("OPS/s.css", "p { color: red }")
    epub.extract_epub("application/epub+zip", buffer.getvalue(), limits)


_WARM_MESSAGE = b"""\
From: =?iso-8859-1?Q?J=FCrgen?= <j@example.com>
To: a@example.com, "B, C" <b@example.com>
Date: Wed, 17 May 2000 23:13:09 -0400
Subject: =?utf-8?B?d2FybQ==?=
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="inner"

--inner
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

M=FCller
--inner
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: base64

PHA+aHRtbDwvcD4=
--inner--
--outer
Content-Type: message/rfc822

Subject: forwarded

plain
--outer
Content-Type: application/pdf; name="a.pdf"
Content-Disposition: attachment; filename*=utf-8''r%C3%A9sum%C3%A9.pdf
Content-Transfer-Encoding: base64

JVBERi0=
--outer--
"""


def _warm_mail(limits: ParseLimits) -> None:
    """Read a message with encoded-word headers, an address list, quoted-printable and base64
    alternatives, an attached message and an attachment with an RFC 2231 name, and unpack it;
    unpack a ZIP archive with a deflated file and a directory."""
    mail.extract_email("message/rfc822", _WARM_MESSAGE, limits)
    mail.unpack_email("message/rfc822", _WARM_MESSAGE, limits)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("a/b.txt", "warm")
        bundle.writestr("c/", "")
    archive.unpack_archive("application/zip", buffer.getvalue(), limits)


def _warm_codecs() -> None:
    """Import every codec of the standard library.

    Codecs load by name on first use, and the names come from the document: charset_normalizer
    tries dozens while guessing, pypdf decodes names and ToUnicode maps with "charmap".
    """
    for module in pkgutil.iter_modules(encodings.__path__):
        try:
            importlib.import_module(f"encodings.{module.name}")
        except ImportError:  # Windows-only codecs (mbcs, oem)
            continue


_SAMPLE_TEXT = "Déjà vu, naïve façade — “quoted”."


def _warm_text(limits: ParseLimits) -> None:
    """Decode each byte-order-mark kind, plain UTF-8, and a legacy code page by detection."""
    for payload in (
        _SAMPLE_TEXT.encode("utf-8"),
        _SAMPLE_TEXT.encode("utf-8-sig"),
        _SAMPLE_TEXT.encode("utf-16"),
        _SAMPLE_TEXT.encode("utf-32"),
        _SAMPLE_TEXT.encode("cp1252"),
    ):
        text.extract_text("text/plain", payload, limits)
    notebook = (
        '{"metadata": {"kernelspec": {"language": "python"}}, "cells": [{"cell_type": "code", '
        '"source": ["print(1)"], "outputs": [{"output_type": "stream", "text": "1"}, '
        '{"output_type": "display_data", "data": {"image/png": "", "text/plain": "x"}}]}]}'
    )
    text.extract_text("application/x-ipynb+json", notebook.encode(), limits)
    text.extract_text("application/json", b'{"a": [1, 2.5, null, "\\u00e9"]}' * 1, limits)
    text.extract_text("application/json", b"[" + b'"x",' * 400 + b'"y"]', limits)
