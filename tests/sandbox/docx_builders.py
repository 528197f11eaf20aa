"""Hand-built DOCX and other ZIP packages for the extractor and hostile-file tests."""

from __future__ import annotations

import functools
import io
import zipfile

import docx as python_docx

WORD_NAMESPACE = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


@functools.cache
def template_docx() -> bytes:
    buffer = io.BytesIO()
    python_docx.Document().save(buffer)
    return buffer.getvalue()


def docx_with(replacements: dict[str, bytes]) -> bytes:
    """python-docx's template with some package members replaced."""
    source = zipfile.ZipFile(io.BytesIO(template_docx()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.namelist():
            target.writestr(member, replacements.get(member, source.read(member)))
    return buffer.getvalue()


def document_xml(
    body: str, doctype: str = "", root_attributes: str = "", background: str = ""
) -> bytes:
    """The main document part around ``body``; ``root_attributes`` go on ``w:document``, where
    Word declares its namespaces and which of them are ignorable; ``background`` (a page colour,
    ``w:background``) stands before the body."""
    return (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n{doctype}'
        f'<w:document xmlns:w="{WORD_NAMESPACE}" {root_attributes}>{background}'
        f"<w:body>{body}</w:body></w:document>"
    ).encode()


def styles_xml(styles: str) -> bytes:
    """A styles part holding ``styles`` (``w:style`` and ``w:docDefaults`` elements)."""
    return f'<w:styles xmlns:w="{WORD_NAMESPACE}">{styles}</w:styles>'.encode()


def odt() -> bytes:
    """An OpenDocument text as LibreOffice lays one out: "mimetype" first and uncompressed."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            zipfile.ZipInfo("mimetype"),
            "application/vnd.oasis.opendocument.text",
            compress_type=zipfile.ZIP_STORED,
        )
        archive.writestr(
            "content.xml",
            '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:'
            'office:1.0"><office:body><office:text>Hello</office:text></office:body>'
            "</office:document-content>",
        )
        archive.writestr(
            "META-INF/manifest.xml",
            '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:'
            'manifest:1.0"/>',
        )
    return buffer.getvalue()


def plain_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("notes.txt", "not a Word document")
    return buffer.getvalue()
