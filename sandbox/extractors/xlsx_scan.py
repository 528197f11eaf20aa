"""What calamine does not say about an XLSX sheet, read from its XML before calamine loads it:
which rows and columns are hidden, how far apart its outermost cells lie, and how many cells
hold an error value (calamine gives those as empty).

calamine reads hidden rows like the others (hidden text is where a planted instruction sits,
as in a hidden sheet), and lays out every cell between the first and the last before anyone
can count them (two cells at A1 and XFD1048576 ask it for 512 GB, and it aborts). Tags are
found by pattern in the part's bytes: linear, and no second XML parser over the sheet. A tag's
attributes are read up to the next "<", which no attribute value may hold: reading to the next
">" went quadratic over a comment of unclosed tags (140 KB of sheet, 18 CPU-s). A tag whose
attribute value holds a ">" hides the attributes after it from the pattern; the child's
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

from sandbox import codes
from sandbox.extractors.registry import Refusal

_WORKBOOK = "xl/workbook.xml"
_WORKBOOK_RELATIONSHIPS = "xl/_rels/workbook.xml.rels"
_PARSER_OPTIONS = {
    "resolve_entities": False,
    "load_dtd": False,
    "no_network": True,
    "huge_tree": False,
}
#: More sheets or relationships than a workbook may have (Excel's own bound on sheets is
#: memory): a part listing more is refused, not walked.
_MAX_SHEETS = 100_000
#: The workbook and its relationships are a few KB, but leftover defined names make some
#: workbooks megabytes (90,000 names: 5.2 MB): a part past this is refused.
_MAX_WORKBOOK_PART = 64 << 20
_ROW = re.compile(rb"<(?:[\w.-]+:)?row\b([^<>]*)>")
_COLUMN = re.compile(rb"<(?:[\w.-]+:)?col\b([^<>]*)>")
_CELL = re.compile(rb"<(?:[\w.-]+:)?c\b([^<>]*?)(/?)>")
#: calamine reads a column of any number of letters (ZZZZ1 is past Excel's last, XFD).
_REFERENCE = re.compile(rb"\sr\s*=\s*[\"']([A-Za-z]{1,7})(\d{1,7})[\"']")
_ERROR = re.compile(rb"\st\s*=\s*[\"']e[\"']")
#: An attribute; its name starts where no name character precedes it, so a long run of name
#: characters with no "=" after it is tried once, not from each of its characters (a comment
#: of 20 KB of letters cost 3.5 CPU-s).
_ATTRIBUTE = re.compile(rb"""(?<![\w.:-])([\w.:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
#: XML's character references and predefined entities, which calamine decodes in attribute
#: values: hidden="&#49;" hid a row from a pattern looking for "1".
_REFERENCES = re.compile(rb"&(?:#x([0-9a-fA-F]{1,6})|#([0-9]{1,7})|(lt|gt|amp|quot|apos));")
_ENTITIES = {b"lt": b"<", b"gt": b">", b"amp": b"&", b"quot": b'"', b"apos": b"'"}
_TRUE = frozenset({b"1", b"true"})
#: Excel's last column (XFD) and a bound above its last row.
_MAX_COLUMN = 16_384
_MAX_ROW = 10_000_000
_LAST_CODE_POINT = 0x10FFFF


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


def scan(payload: bytes) -> list[SheetScan | None] | None:
    """Each sheet's scan in the workbook's order (calamine's), None for a sheet whose part the
    scan cannot find; None when the package is no XLSX (no ``xl/workbook.xml``: calamine then
    says what it makes of it). A sheet without a scan is not read (:mod:`spreadsheet`): with
    one sheet's part not found, the whole scan was passed over once, every hidden row of the
    workbook shown with it.

    A workbook part this scan cannot parse is refused, not passed over: an undefined entity or
    300 levels of nesting, which calamine reads past, turned the scan off and every hidden row
    and the cell-span ceiling with it."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
        # Part names are case-insensitive in a package, as Excel and calamine read them.
        members = {name.lower(): name for name in archive.namelist()}
        if _WORKBOOK not in members:
            return None
        return [
            None if part is None else _scanned(_read(archive, part, None))
            for part in _sheet_parts(archive, members)
        ]
    except (zipfile.BadZipFile, EOFError, OSError):
        return None
    except (ValueError, etree.XMLSyntaxError) as exc:
        raise Refusal(
            codes.UNREADABLE,
            f"the workbook's parts cannot be read to find its hidden rows and its extent: {exc}",
        ) from exc


def _sheet_parts(archive: zipfile.ZipFile, members: dict[str, str]) -> list[str | None]:
    """The member holding each sheet of the workbook, in order (None when it has none), by
    the workbook's relationships."""
    rels = members.get(_WORKBOOK_RELATIONSHIPS)
    targets = {
        relation.get("Id"): relation.get("Target", "")
        for relation in _elements(archive, rels, "Relationship")
    }
    parts: list[str | None] = []
    for sheet in _elements(archive, members[_WORKBOOK], "sheet"):
        relation = next((value for key, value in sheet.items() if key.endswith("}id")), None)
        target = targets.get(relation, "")
        path = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
        parts.append(members.get(posixpath.normpath(path).lower()) if target else None)
    return parts


def _elements(
    archive: zipfile.ZipFile, member: str | None, local_name: str
) -> list[etree._Element]:
    """The elements of that local name in a part, in any namespace: Strict OOXML has its own,
    which calamine reads and a scan by the transitional one did not."""
    if member is None:
        return []
    found = []
    part = io.BytesIO(_read(archive, member, _MAX_WORKBOOK_PART))
    for _, element in etree.iterparse(
        part, events=("end",), tag=f"{{*}}{local_name}", **_PARSER_OPTIONS
    ):
        found.append(element)
        if len(found) > _MAX_SHEETS:
            raise ValueError(f"{member} lists more than {_MAX_SHEETS:,} {local_name}s")
    return found


def _read(archive: zipfile.ZipFile, member: str, ceiling: int | None) -> bytes:
    with archive.open(posixpath.normpath(member)) as part:
        data = part.read() if ceiling is None else part.read(ceiling + 1)
    if ceiling is not None and len(data) > ceiling:
        raise ValueError(f"{member} is over {ceiling} bytes")
    return data


def _scanned(sheet: bytes) -> SheetScan:
    return SheetScan(_hidden_rows(sheet), _hidden_columns(sheet), *_extent_and_errors(sheet))


def _hidden_rows(sheet: bytes) -> frozenset[int]:
    """Hidden rows by index; a row without ``r`` follows the one before it, as calamine
    numbers it (the schema makes ``r`` optional)."""
    hidden = set()
    number = 0
    for tag in _ROW.finditer(sheet):
        attributes = _attributes(tag[1])
        stated = attributes.get(b"r", b"")
        number = int(stated) if stated.isdigit() and len(stated) <= 7 else number + 1
        if attributes.get(b"hidden", b"").strip() in _TRUE:
            hidden.add(number - 1)
    return frozenset(hidden)


def _hidden_columns(sheet: bytes) -> frozenset[int]:
    """Hidden columns by index, from each ``col`` span's ``min`` and ``max`` in either order.
    The spans are merged before any index is listed: a span of every column costs 16,384
    entries once, not once per tag (0.45 ms a tag)."""
    spans = []
    for tag in _COLUMN.finditer(sheet):
        attributes = _attributes(tag[1])
        low, high = _column(attributes.get(b"min", b"")), _column(attributes.get(b"max", b""))
        if attributes.get(b"hidden", b"").strip() in _TRUE and low and high:
            spans.append((low - 1, high))
    hidden: set[int] = set()
    reached = -1
    for first, last in sorted(spans):
        hidden.update(range(max(first, reached), last))
        reached = max(reached, last)
    return frozenset(hidden)


def _column(number: bytes) -> int | None:
    """A ``col`` span's bound as calamine reads it ("0000003" is 3), at most Excel's last."""
    digits = number.strip().lstrip(b"0")
    if not number.strip().isdigit():
        return None
    return min(int(digits or b"0"), _MAX_COLUMN) if len(digits) <= 6 else _MAX_COLUMN


def _extent_and_errors(sheet: bytes) -> tuple[int, int, int]:
    """The rows and columns from the first valued cell to the last, and the error cells."""
    top = left = _MAX_ROW
    bottom = right = -1
    errors = 0
    for cell in _CELL.finditer(sheet):
        inside = cell[1] if b"&" not in cell[1] else _unescaped(cell[1])
        errors += _ERROR.search(inside) is not None
        reference = _REFERENCE.search(inside)
        if cell[2] or reference is None:
            continue  # a cell without a value (formatting alone) calamine does not lay out
        row, column = int(reference[2]) - 1, _column_index(reference[1])
        top, bottom = min(top, row), max(bottom, row)
        left, right = min(left, column), max(right, column)
    height = bottom - top + 1 if bottom >= 0 else 0
    width = right - left + 1 if right >= 0 else 0
    return height, width, errors


def _attributes(tag: bytes) -> dict[bytes, bytes]:
    """A tag's attributes by local name, their values decoded as calamine decodes them."""
    return {
        name.rpartition(b":")[2]: _unescaped(double or single)
        for name, double, single in _ATTRIBUTE.findall(tag)
    }


def _unescaped(value: bytes) -> bytes:
    if b"&" not in value:
        return value
    return _REFERENCES.sub(_referenced, value)


def _referenced(reference: re.Match[bytes]) -> bytes:
    hexadecimal, decimal, named = reference.groups()
    if named:
        return _ENTITIES[named]
    code = int(hexadecimal, 16) if hexadecimal else int(decimal)
    return chr(code).encode("utf-8", "replace") if code <= _LAST_CODE_POINT else b""


def _column_index(letters: bytes) -> int:
    index = 0
    for letter in letters.upper():
        index = index * 26 + letter - ord("A") + 1
    return index - 1
