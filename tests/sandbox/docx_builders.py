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


#: The namespaces Word declares for drawings, text boxes, VML and its 2010 text effects.
DRAWING_NAMESPACES = (
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:v="urn:schemas-microsoft-com:vml" '
    'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml"'
)


def settings_xml(settings: str) -> bytes:
    """A settings part holding ``settings`` (``w:displayBackgroundShape``, ``w:revisionView``)."""
    return f'<w:settings xmlns:w="{WORD_NAMESPACE}">{settings}</w:settings>'.encode()


def theme_xml(light1: str) -> bytes:
    """python-docx's theme with its ``a:lt1`` colour (background1's) replaced by ``light1``."""
    source = zipfile.ZipFile(io.BytesIO(template_docx())).read("word/theme/theme1.xml").decode()
    start, end = source.index("<a:lt1>"), source.index("</a:lt1>")
    return (source[:start] + f"<a:lt1>{light1}" + source[end:]).encode()


def anchored_shape(shape: str, behind: bool = False) -> str:
    """A run holding a floating DrawingML shape (``wps:wsp`` content: its ``wps:spPr``, a text
    box), in front of the text or ``behind`` it, as Word anchors a banner or a text box."""
    return (
        f'<w:r><w:drawing><wp:anchor behindDoc="{int(behind)}" simplePos="0" relativeHeight="1" '
        'locked="0" layoutInCell="1" allowOverlap="1"><wp:simplePos x="0" y="0"/>'
        '<wp:extent cx="7772400" cy="2000000"/><wp:wrapNone/><wp:docPr id="1" name="Shape 1"/>'
        '<a:graphic><a:graphicData uri="http://schemas.microsoft.com/office/word/2010/'
        f'wordprocessingShape"><wps:wsp>{shape}<wps:bodyPr/></wps:wsp></a:graphicData>'
        "</a:graphic></wp:anchor></w:drawing></w:r>"
    )


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
