"""What calamine does not say about an XLSX sheet, read from its XML before calamine loads it:
which rows and columns are hidden, how far apart its outermost cells lie, and how many cells
hold an error value (calamine gives those as empty).

calamine reads hidden rows like the others (hidden text is where a planted instruction sits,
as in a hidden sheet), and lays out every cell between the first and the last before anyone
can count them (two cells at A1 and XFD1048576 ask it for 512 GB, and it aborts). Tags are
found by pattern in the part's bytes: linear, and no second XML parser over the sheet. A tag
whose attribute value holds a ">" hides the attributes after it from the pattern; the child's
memory limit still bounds what calamine then allocates. XLSX and XLSM only; XLSB, XLS and ODS
keep calamine's view. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass

from lxml import etree

_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_OFFICE_RELATIONSHIPS = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PACKAGE_RELATIONSHIPS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_WORKBOOK = "xl/workbook.xml"
_WORKBOOK_RELATIONSHIPS = "xl/_rels/workbook.xml.rels"
#: The workbook and its relationships are a few KB; a larger one is not read.
_MAX_SMALL_PART = 4 << 20
_PARSER = etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=False)
_ROW = re.compile(rb"<(?:[\w.-]+:)?row\b([^>]*)>")
_COLUMN = re.compile(rb"<(?:[\w.-]+:)?col\b([^>]*)>")
_CELL = re.compile(rb"<(?:[\w.-]+:)?c\b([^>]*?)(/?)>")
_REFERENCE = re.compile(rb"\sr\s*=\s*[\"']([A-Za-z]{1,3})(\d{1,7})[\"']")
_NUMBER = re.compile(rb"\sr\s*=\s*[\"'](\d{1,7})[\"']")
_ERROR_CELL = re.compile(rb"<(?:[\w.-]+:)?c\b[^>]*?\st\s*=\s*[\"']e[\"']")
_HIDDEN = re.compile(rb"\shidden\s*=\s*[\"'](?:1|true)[\"']")
_SPAN = re.compile(rb"\smin\s*=\s*[\"'](\d{1,5})[\"'][^>]*?\smax\s*=\s*[\"'](\d{1,5})[\"']")
#: Excel's last column (XFD) and a bound above its last row.
_MAX_COLUMN = 16_384
_MAX_ROW = 10_000_000


@dataclass(frozen=True)
class SheetScan:
    """Rows and columns by 0-based index, as calamine numbers them."""

    hidden_rows: frozenset[int]
    hidden_columns: frozenset[int]
    #: The rows and columns from the first cell to the last, as calamine will lay them out.
    height: int
    width: int
    #: Cells holding an error value (#DIV/0!, #N/A), which calamine gives as empty.
    errors: int


def scan(payload: bytes) -> dict[str, SheetScan]:
    """Each worksheet's scan by sheet name; empty when the package is not laid out as Excel
    writes it (calamine then says what it makes of it)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
        sheets = _sheet_parts(archive)
        return {name: _scanned(_read(archive, part, None)) for name, part in sheets.items()}
    except (KeyError, zipfile.BadZipFile, ValueError, EOFError, OSError, etree.XMLSyntaxError):
        return {}


def _sheet_parts(archive: zipfile.ZipFile) -> dict[str, str]:
    """Sheet name -> the member holding it, by the workbook's relationships."""
    targets = {
        relation.get("Id"): relation.get("Target", "")
        for relation in _parsed(archive, _WORKBOOK_RELATIONSHIPS).iter(
            f"{_PACKAGE_RELATIONSHIPS}Relationship"
        )
    }
    parts = {}
    for sheet in _parsed(archive, _WORKBOOK).iter(f"{_MAIN}sheet"):
        target = targets.get(sheet.get(f"{_OFFICE_RELATIONSHIPS}id"))
        name = sheet.get("name")
        if target and name is not None:
            parts[name] = (
                target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
            )
    return parts


def _parsed(archive: zipfile.ZipFile, member: str) -> etree._Element:
    return etree.fromstring(_read(archive, member, _MAX_SMALL_PART), _PARSER)


def _read(archive: zipfile.ZipFile, member: str, ceiling: int | None) -> bytes:
    with archive.open(posixpath.normpath(member)) as part:
        data = part.read() if ceiling is None else part.read(ceiling + 1)
    if ceiling is not None and len(data) > ceiling:
        raise ValueError(f"{member} is over {ceiling} bytes")
    return data


def _scanned(sheet: bytes) -> SheetScan:
    hidden_rows = frozenset(
        int(number[1]) - 1
        for row in _ROW.finditer(sheet)
        if _HIDDEN.search(row[1]) and (number := _NUMBER.search(row[1]))
    )
    hidden_columns: set[int] = set()
    for tag in _COLUMN.finditer(sheet):
        span = _SPAN.search(tag[1])
        if span and _HIDDEN.search(tag[1]):
            first, last = int(span[1]), min(int(span[2]), _MAX_COLUMN)
            hidden_columns.update(range(first - 1, last))
    top = left = _MAX_ROW
    bottom = right = -1
    for cell in _CELL.finditer(sheet):
        reference = _REFERENCE.search(cell[1])
        if cell[2] or reference is None:
            continue  # a cell without a value (formatting alone) calamine does not lay out
        row, column = int(reference[2]) - 1, _column_index(reference[1])
        top, bottom = min(top, row), max(bottom, row)
        left, right = min(left, column), max(right, column)
    height = bottom - top + 1 if bottom >= 0 else 0
    width = right - left + 1 if right >= 0 else 0
    errors = sum(1 for _ in _ERROR_CELL.finditer(sheet))
    return SheetScan(frozenset(hidden_rows), frozenset(hidden_columns), height, width, errors)


def _column_index(letters: bytes) -> int:
    index = 0
    for letter in letters.upper():
        index = index * 26 + letter - ord("A") + 1
    return index - 1
