"""Office packages (XLSX, OpenDocument) built part by part, so a test can put an attack in any
one part."""

from __future__ import annotations

import io
import zipfile

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/package/2006/relationships"
_OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_CONTENT_TYPES = "http://schemas.openxmlformats.org/package/2006/content-types"
_SHEET_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
_BOOK_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
_STRINGS_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"
ODS_TYPE = "application/vnd.oasis.opendocument.spreadsheet"
_ODF_NAMESPACES = " ".join(
    f'xmlns:{prefix}="urn:oasis:names:tc:opendocument:xmlns:{name}"'
    for prefix, name in (
        ("office", "office:1.0"),
        ("table", "table:1.0"),
        ("text", "text:1.0"),
        ("draw", "drawing:1.0"),
        ("presentation", "presentation:1.0"),
        ("style", "style:1.0"),
        ("svg", "svg-compatible:1.0"),
    )
)


def sheet(rows: str, prologue: str = "", dimension: str = "") -> str:
    """A worksheet part holding ``rows`` (``<row>`` elements), after an optional prologue (a
    DOCTYPE) and ``<dimension ref=...>``."""
    declared = f'<dimension ref="{dimension}"/>' if dimension else ""
    return (
        f'<?xml version="1.0"?>{prologue}<worksheet xmlns="{MAIN}">{declared}'
        f"<sheetData>{rows}</sheetData></worksheet>"
    )


def inline_row(number: int, *cells: str) -> str:
    """A row of inline-string cells, from column A."""
    return (
        f'<row r="{number}">'
        + "".join(
            f'<c r="{chr(65 + index)}{number}" t="inlineStr"><is><t>{text}</t></is></c>'
            for index, text in enumerate(cells)
        )
        + "</row>"
    )


def xlsx(
    sheets: dict[str, str],
    *,
    states: dict[str, str] | None = None,
    shared_strings: str | None = None,
    workbook_prologue: str = "",
    content_types_prologue: str = "",
) -> bytes:
    """An XLSX package of ``sheets`` (name: worksheet part) in order; ``states`` marks sheets
    "hidden" or "veryHidden"; ``shared_strings`` is the sharedStrings part, when there is one."""
    states = states or {}
    overrides = [f'<Override PartName="/xl/workbook.xml" ContentType="{_BOOK_TYPE}"/>']
    entries, relationships = [], []
    for number, name in enumerate(sheets, start=1):
        state = f' state="{states[name]}"' if name in states else ""
        entries.append(f'<sheet name="{name}" sheetId="{number}" r:id="rId{number}"{state}/>')
        relationships.append(
            f'<Relationship Id="rId{number}" Type="{_OFFICE}/worksheet" '
            f'Target="worksheets/sheet{number}.xml"/>'
        )
        overrides.append(
            f'<Override PartName="/xl/worksheets/sheet{number}.xml" ContentType="{_SHEET_TYPE}"/>'
        )
    if shared_strings is not None:
        relationships.append(
            f'<Relationship Id="rIdS" Type="{_OFFICE}/sharedStrings" Target="sharedStrings.xml"/>'
        )
        overrides.append(
            f'<Override PartName="/xl/sharedStrings.xml" ContentType="{_STRINGS_TYPE}"/>'
        )
    parts = {
        "[Content_Types].xml": (
            f'<?xml version="1.0"?>{content_types_prologue}<Types xmlns="{_CONTENT_TYPES}">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            f"{''.join(overrides)}</Types>"
        ),
        "_rels/.rels": (
            f'<?xml version="1.0"?><Relationships xmlns="{_RELATIONSHIPS}">'
            f'<Relationship Id="rId1" Type="{_OFFICE}/officeDocument" Target="xl/workbook.xml"/>'
            "</Relationships>"
        ),
        "xl/workbook.xml": (
            f'<?xml version="1.0"?>{workbook_prologue}<workbook xmlns="{MAIN}" '
            f'xmlns:r="{_OFFICE}"><sheets>{"".join(entries)}</sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            f'<?xml version="1.0"?><Relationships xmlns="{_RELATIONSHIPS}">'
            f"{''.join(relationships)}</Relationships>"
        ),
    }
    for number, part in enumerate(sheets.values(), start=1):
        parts[f"xl/worksheets/sheet{number}.xml"] = part
    if shared_strings is not None:
        parts["xl/sharedStrings.xml"] = shared_strings
    return package(parts)


def ods(tables: dict[str, str], *, prologue: str = "", media_type: str = ODS_TYPE) -> bytes:
    """An OpenDocument spreadsheet of ``tables`` (name: ``<table:table-row>`` elements)."""
    body = "".join(
        f'<table:table table:name="{name}">{rows}</table:table>' for name, rows in tables.items()
    )
    return odf(
        f"<office:spreadsheet>{body}</office:spreadsheet>", prologue=prologue, media_type=media_type
    )


def odf(body: str, *, media_type: str, prologue: str = "", styles: str = "") -> bytes:
    """An OpenDocument package whose content.xml holds ``body`` in its office:body, after the
    automatic ``styles``."""
    return package(
        {
            "mimetype": media_type,
            "META-INF/manifest.xml": (
                '<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:'
                'opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" '
                f'manifest:media-type="{media_type}"/><manifest:file-entry '
                'manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                "</manifest:manifest>"
            ),
            "content.xml": (
                f'<?xml version="1.0"?>{prologue}<office:document-content {_ODF_NAMESPACES}>'
                f"<office:automatic-styles>{styles}</office:automatic-styles>"
                f"<office:body>{body}</office:body></office:document-content>"
            ),
        }
    )


def ods_row(*cells: str, repeated: int = 1) -> str:
    """A row of string cells, written ``repeated`` times."""
    written = "".join(
        f'<table:table-cell office:value-type="string"><text:p>{text}</text:p></table:table-cell>'
        for text in cells
    )
    return f'<table:table-row table:number-rows-repeated="{repeated}">{written}</table:table-row>'


def package(parts: dict[str, str]) -> bytes:
    """A ZIP of ``parts`` in order; "mimetype" is stored, as OpenDocument requires."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            method = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            archive.writestr(name, text, compress_type=method)
    return buffer.getvalue()


def laughs(root: str) -> str:
    """A DOCTYPE whose entity ``&bomb;`` expands to 10^9 characters."""
    levels = ['<!ENTITY l0 "ha">'] + [
        f'<!ENTITY l{level} "{f"&l{level - 1};" * 10}">' for level in range(1, 9)
    ]
    return f'<!DOCTYPE {root} [{"".join(levels)}<!ENTITY bomb "&l8;&l8;">]>'


def external(root: str, url: str) -> str:
    """A DOCTYPE whose entity ``&bomb;`` is the document at ``url``."""
    return f'<!DOCTYPE {root} [<!ENTITY bomb SYSTEM "{url}">]>'


_STYLES_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"


def number_formats(*codes: str) -> str:
    """A styles part whose cell style ``s="N"`` (N from 1) has the Nth custom number format of
    ``codes``; style 0 is General."""
    formats = "".join(
        f'<numFmt numFmtId="{164 + index}" formatCode="{code}"/>'
        for index, code in enumerate(codes)
    )
    styles = "".join(
        f'<xf numFmtId="{164 + index}" applyNumberFormat="1"/>' for index in range(len(codes))
    )
    return (
        f'<?xml version="1.0"?><styleSheet xmlns="{MAIN}"><numFmts count="{len(codes)}">'
        f'{formats}</numFmts><cellXfs count="{len(codes) + 1}"><xf numFmtId="0"/>{styles}'
        "</cellXfs></styleSheet>"
    )


def styled(workbook: bytes, styles: str) -> bytes:
    """``workbook`` (from :func:`xlsx`) with ``styles`` as its styles part, related from the
    workbook as Excel relates it."""
    source = zipfile.ZipFile(io.BytesIO(workbook))
    parts = {name: source.read(name).decode() for name in source.namelist()}
    parts["xl/_rels/workbook.xml.rels"] = parts["xl/_rels/workbook.xml.rels"].replace(
        "</Relationships>",
        f'<Relationship Id="rIdT" Type="{_OFFICE}/styles" Target="styles.xml"/></Relationships>',
    )
    parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
        "</Types>", f'<Override PartName="/xl/styles.xml" ContentType="{_STYLES_TYPE}"/></Types>'
    )
    parts["xl/styles.xml"] = styles
    return package(parts)
