"""What calamine does not say about an XLSX sheet, read from its XML before calamine loads it:
which rows and columns are hidden (by their own sizes or the sheet's defaults), which cells'
number formats show nothing of their values, how far apart its outermost cells lie, and how
many cells hold an error value (calamine gives those as empty).

calamine reads hidden rows like the others (hidden text is where a planted instruction sits,
as in a hidden sheet), and lays out every cell between the first and the last before anyone
can count them (two cells at A1 and XFD1048576 ask it for 512 GB, and it aborts). Tags are
found by pattern in the part's bytes: linear, and no second XML parser over the sheet. A tag's
attributes are read up to the next "<", which no attribute value may hold, quotes and all (a
">" in a value ended the tag before its ``hidden``): reading to the next ">" went quadratic
over a comment of unclosed tags (140 KB of sheet, 18 CPU-s). Comments, CDATA sections and
processing instructions are passed over, as calamine's reader passes over them. Each cell is
placed as calamine places it (by its own reference, or after the cell before it), so a cell of
a hidden row is hidden wherever it lands. XLSX and XLSM only; XLSB, XLS and ODS keep
calamine's view. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import functools
import io
import posixpath
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from lxml import etree

from sandbox import codes
from sandbox.extractors.registry import Refusal

_WORKBOOK = "xl/workbook.xml"
_WORKBOOK_RELATIONSHIPS = "xl/_rels/workbook.xml.rels"
#: The styles relationship's type, Transitional and Strict: a type is one whole string (a
#: decoy "urn:x/styles" before the real one hid its formats).
_STYLES_RELATIONSHIPS = frozenset(
    {
        "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles",
        "http://purl.oclc.org/ooxml/officeDocument/relationships/styles",
    }
)
#: SpreadsheetML's namespace, Transitional and Strict: the styles' own elements are of it.
_SPREADSHEET_NAMESPACES = frozenset(
    {
        "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
        "http://purl.oclc.org/ooxml/spreadsheetml/main",
    }
)
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
#: A row, column, cell, sheetData or sheetFormatPr tag, or a row's or a cell's end, its
#: attributes read to the first ">" outside quotes; possessive, so a tag that never closes costs
#: one pass to the next "<".
_TAG = re.compile(
    rb"""<(?:(/)(?:[\w.-]+:)?(row|c)|"""
    rb"""(?:[\w.-]+:)?(row|col|c|sheetData|sheetFormatPr))(?=[\s/>])"""
    rb"""((?:[^<>"']++|"[^"<]*+"|'[^'<]*+')*+)>"""
)
#: Markup whose content calamine's reader passes over: a row tag written in a comment or a
#: CDATA section renumbered the rows after it, and a "</row>" in one would end a hidden row
#: before its cells. A document type is refused, not passed over: an entity's value may hold
#: any tag, a "]>" too, and no writer of sheets declares one.
_OPAQUE = re.compile(rb"<!--|<!\[CDATA\[|<\?|<!DOCTYPE")
_OPAQUE_ENDS = {b"<!--": b"-->", b"<![CDATA[": b"]]>", b"<?": b"?>"}
#: An attribute; its name starts where no name character precedes it, so a long run of name
#: characters with no "=" after it is tried once, not from each of its characters (a comment
#: of 20 KB of letters cost 3.5 CPU-s).
_ATTRIBUTE = re.compile(rb"""(?<![\w.:-])([\w.:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
#: The attributes before the one sought, each stepped over whole from the tag's start: a
#: search found ``r="A2"`` inside another attribute's value.
_BEFORE = rb"""(?:\s+[\w.:-]+\s*=\s*(?:"[^"]*"|'[^']*'))*?\s+"""
#: A cell's or a row's ``r`` as calamine reads it, undecoded: any number of letters (ZZZZ1 is
#: past Excel's last column, XFD; a row's "B5" is row 5), then the row. One pattern, as cheap
#: as a search: a million rows and cells are scanned in seconds.
_REFERENCE = re.compile(_BEFORE + rb"""r\s*=\s*["']([A-Za-z]*)(\d+)["']""")
_TYPE = re.compile(_BEFORE + rb"""t\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_STYLE = re.compile(_BEFORE + rb"""s\s*=\s*(?:"([^"]*)"|'([^']*)')""")
#: XML's character references and predefined entities, which calamine decodes in attribute
#: values: hidden="&#49;" hid a row from a pattern looking for "1".
_REFERENCES = re.compile(rb"&(?:#x([0-9a-fA-F]{1,6})|#([0-9]{1,7})|(lt|gt|amp|quot|apos));")
_ENTITIES = {b"lt": b"<", b"gt": b">", b"amp": b"&", b"quot": b'"', b"apos": b"'"}
#: The only values of ``hidden`` that show a row or column: xs:boolean's false. A reader
#: lenient about the rest may hide what the scan read as shown ("True" was shown).
_FALSE = frozenset({b"0", b"false"})
#: Excel's last column (XFD) and a bound above its last row.
_MAX_COLUMN = 16_384
_MAX_ROW = 10_000_000
_LAST_CODE_POINT = 0x10FFFF
#: What reading a part may raise: a damaged or unsupported member (a bad CRC, a compression
#: method or encryption zipfile does not read, a broken stream) or one that does not parse.
_UNREADABLE_PART = (
    *(zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError, zlib.error),
    *(ValueError, etree.XMLSyntaxError),
)
#: A number format's pieces: a quoted literal, an escaped character, a bracketed colour or
#: condition, or one character. A ";" of a literal or after a "\\" separates no sections.
_FORMAT_PIECE = re.compile(r'"[^"]*"?|[\\!_*].?|\[[^\]]*\]?|.', re.DOTALL)
#: Pieces that show none of a value: a space the width of the next character (``_)``), a
#: fill of it (``* ``), colours, conditions and locales in brackets (but elapsed time, ``[h]``).
_SHOWING_NOTHING = re.compile(r"\s|_.?|\*.?|\[(?![hms]+\])[^\]]*\]?", re.IGNORECASE | re.DOTALL)
#: The longest format code Excel takes is 255 characters; a longer one is a hostile file's,
#: judged to show nothing rather than parsed for each style using it.
_LONGEST_FORMAT = 1_024
#: Excel keeps at most about 64,000 cell formats.
_MAX_CELL_FORMATS = 65_536
#: What each section of a number format shows, in order (ECMA-376 Part 1, 18.8.31): with two
#: sections, zero takes the first; with one, every number does; text only the fourth.
_SECTION_VALUES = {
    1: (("positive", "negative", "zero"),),
    2: (("positive", "zero"), ("negative",)),
    3: (("positive",), ("negative",), ("zero",)),
}


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
    #: Whether a column no shown ``col`` span lists is hidden (the sheet's default width is
    #: zero), and the columns such spans list.
    unlisted_columns_hidden: bool = False
    listed_columns: frozenset[int] = frozenset()
    #: By (row, column), the values (``positive``, ``negative``, ``zero``, ``text``) of which a
    #: cell's number format shows nothing: ``;;;`` shows no value at all.
    unshown_values: dict[tuple[int, int], frozenset[str]] = field(default_factory=dict)

    def hides_column(self, column: int) -> bool:
        return column in self.hidden_columns or (
            self.unlisted_columns_hidden and column not in self.listed_columns
        )


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
    except (zipfile.BadZipFile, EOFError, OSError):
        return None
    try:
        # Part names are case-insensitive in a package, as Excel and calamine read them.
        members = {name.lower(): name for name in archive.namelist()}
        if _WORKBOOK not in members:
            return None
        relations = _elements(archive, members.get(_WORKBOOK_RELATIONSHIPS), "Relationship")
        unshown = _unshown_by_style(archive, _styles_part(members, relations))
        return [
            None if part is None else _scanned(_read(archive, part, None), unshown)
            for part in _sheet_parts(archive, members, relations)
        ]
    except _UNREADABLE_PART as exc:
        # A part that cannot be read is refused like one that cannot be parsed: a bad CRC on
        # the styles part turned the scan off, and every hidden row was read.
        raise Refusal(
            codes.UNREADABLE,
            f"the workbook's parts cannot be read to find its hidden rows and its extent: {exc}",
        ) from exc


def _sheet_parts(
    archive: zipfile.ZipFile, members: dict[str, str], relations: list[etree._Element]
) -> list[str | None]:
    """The member holding each sheet of the workbook, in order (None when it has none), by
    the workbook's relationships."""
    targets = {relation.get("Id"): relation.get("Target", "") for relation in relations}
    parts: list[str | None] = []
    for sheet in _elements(archive, members[_WORKBOOK], "sheet"):
        relation = next((value for key, value in sheet.items() if key.endswith("}id")), None)
        parts.append(_member(members, targets.get(relation, "")))
    return parts


def _member(members: dict[str, str], target: str) -> str | None:
    """The member a workbook relationship's target names, relative to ``xl/`` or absolute."""
    if not target:
        return None
    path = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
    return members.get(posixpath.normpath(path).lower())


def _styles_part(members: dict[str, str], relations: list[etree._Element]) -> str | None:
    """The workbook's styles part, found as Excel finds it: by its relationship's type."""
    return next(
        (
            _member(members, relation.get("Target", ""))
            for relation in relations
            if relation.get("Type", "").strip() in _STYLES_RELATIONSHIPS
        ),
        None,
    )


def _unshown_by_style(archive: zipfile.ZipFile, member: str | None) -> dict[int, frozenset[str]]:
    """For each cell style (a cell's ``s``, its index in ``cellXfs``) whose number format shows
    nothing of some values, those values (:func:`_unshown`). Custom formats are looked up by
    their id as a number (``0164`` is 164), every format of an id counted (two of one id
    leave the one Excel reads unknown); a built-in format shows every value. Only the styles'
    own ``numFmts`` and ``cellXfs`` count, not a decoy nested elsewhere or of another
    namespace; markup whose numbering Excel may read otherwise (a second ``cellXfs``, anything
    but ``xf`` in it, an ``mc:AlternateContent``) refuses the workbook."""
    if member is None:
        return {}
    codes: dict[int | None, set[str]] = {}
    formats: list[int | None] = []
    part = io.BytesIO(_read(archive, member, _MAX_WORKBOOK_PART))
    path: list[str] = []
    for event, element in etree.iterparse(part, events=("start", "end"), **_PARSER_OPTIONS):
        name = etree.QName(element)
        if event == "start":
            path.append(name.localname if name.namespace in _SPREADSHEET_NAMESPACES else "")
            if path[1:] == ["cellXfs"] and formats:
                raise ValueError(f"{member} has more than one list of cell formats")
            if path[1:2] == ["cellXfs"] and path[2:] not in ([], ["xf"]) and len(path) == 3:
                raise ValueError(f"{member} holds other markup among its cell formats")
            continue
        if path[1:] == ["numFmts", "numFmt"]:
            code = element.get("formatCode") or ""
            codes.setdefault(_number(element.get("numFmtId")), set()).add(code)
        elif path[1:] == ["cellXfs", "xf"]:
            formats.append(_number(element.get("numFmtId")))
            if len(formats) > _MAX_CELL_FORMATS:
                raise ValueError(f"{member} lists more than {_MAX_CELL_FORMATS:,} cell formats")
        path.pop()
        if len(path) > 1:
            # What is read is kept as numbers, and the tree let go: 2 million xf were 790 MB.
            element.clear()
            while element.getprevious() is not None:
                del element.getparent()[0]
    unshown_by_id = {
        number: frozenset().union(*map(_unshown, found)) for number, found in codes.items()
    }
    return {
        index: unshown_by_id[number]
        for index, number in enumerate(formats)
        if unshown_by_id.get(number)
    }


def _number(value: str | None) -> int | None:
    """An ``xsd:unsignedInt`` as Excel reads one (white space, a ``+``, leading zeros)."""
    digits = (value or "").strip().removeprefix("+").lstrip("0") or "0"
    return int(digits) if digits.isdecimal() and digits.isascii() and len(digits) < 12 else None


@functools.lru_cache(maxsize=1024)
def _unshown(code: str) -> frozenset[str]:
    """The values (``positive``, ``negative``, ``zero``, ``text``) a number format shows nothing
    of: a number's section by its sign shows nothing when it holds nothing but colours,
    conditions and spaces (``;;;`` hides every number), and text shows only where a fourth
    section places it with ``@``. An instruction under ``;;;`` is read by no one in Excel.
    Conditions (``[>100]``) are taken as the sign's sections: leaning to hiding costs only
    hostile files."""
    if not code.strip():
        return frozenset()  # no format at all: General
    if len(code) > _LONGEST_FORMAT:
        return frozenset(("positive", "negative", "zero", "text"))
    sections: list[list[str]] = [[]]
    for piece in _FORMAT_PIECE.findall(code):
        if piece == ";":
            sections.append([])
        else:
            sections[-1].append(piece)
    unshown = {
        value
        for section, values in zip(sections, _SECTION_VALUES[min(len(sections), 3)], strict=False)
        if all(_SHOWING_NOTHING.fullmatch(piece) for piece in section)
        for value in values
    }
    if len(sections) > 3 and "@" not in sections[3]:
        unshown.add("text")
    return frozenset(unshown)


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


def _scanned(sheet: bytes, unshown: dict[int, frozenset[str]]) -> SheetScan:
    walk = _Walk(unshown)
    for start, end in _tagged(sheet):
        for tag in _TAG.finditer(sheet, start, end):
            _, ended, name, inside = tag.groups()
            if name == b"c":
                walk.cell(inside, valued=not inside.endswith(b"/"))
            elif ended == b"c":
                walk.cell_ended()
            elif walk.cell_depth:
                continue  # calamine reads what a cell holds as the cell's: a row tag is no row
            elif name == b"sheetData":
                walk.data_started()
            elif name == b"sheetFormatPr":
                walk.sheet_format(_attributes(inside))
            elif name == b"col":
                walk.column_span(_attributes(inside))
            elif ended:
                walk.row_ended()
            elif inside.endswith(b"/"):
                walk.row_ended(inside)
            else:
                walk.row_started(inside)
    return walk.scanned()


def _tagged(sheet: bytes) -> Iterator[tuple[int, int]]:
    """The spans of a part outside its comments, CDATA sections and processing instructions;
    one left open hides the rest (calamine refuses the part)."""
    position = 0
    while (opaque := _OPAQUE.search(sheet, position)) is not None:
        if opaque[0] == b"<!DOCTYPE":
            raise ValueError("a sheet declares a document type")
        yield position, opaque.start()
        closed = sheet.find(_OPAQUE_ENDS[opaque[0]], opaque.end())
        if closed < 0:
            return
        position = closed + len(_OPAQUE_ENDS[opaque[0]])
    yield position, len(sheet)


class _Walk:
    """A sheet's tags in order, each cell placed as calamine places it: by its reference, or
    else on the row calamine is at (the last row's ``r``, one more for each row closed since)
    and one column after the cell before it. A cell inside a hidden row hides the row it is
    placed on: ``<row r="2" hidden="1">`` holding ``<c r="A5">`` showed its text on row 5."""

    def __init__(self, unshown: dict[int, frozenset[str]]) -> None:
        self.hidden_rows: set[int] = set()
        self.hidden_spans: list[tuple[int, int]] = []
        self.shown_spans: list[tuple[int, int]] = []
        #: The sheet's defaults (``sheetFormatPr``): whether a row it does not write is hidden
        #: (``zeroHeight``, or a zero default height), and the height and width of a row and a
        #: column that set none, when those hide them.
        self.unwritten_rows_hidden = False
        self.row_defaults: dict[bytes, bytes] = {}
        self.column_defaults: dict[bytes, bytes] = {}
        #: The values of which each cell style's number format shows nothing, and the cells
        #: having such a style.
        self.unshown = unshown
        self.unshown_values: dict[tuple[int, int], frozenset[str]] = {}
        #: Whether each row element now open is hidden, and its row (rows nest in a hostile
        #: sheet); and how many of them are hidden.
        self.open_rows: list[tuple[bool, int]] = []
        self.hidden_open = 0
        self.row = self.column = 0
        self.top = self.left = _MAX_ROW
        self.bottom = self.right = -1
        self.errors = 0
        self.in_data = False
        #: The cells now open: calamine ends a cell at its own end tag, and reads the rows and
        #: cells written inside it as its content.
        self.cell_depth = 0

    def data_started(self) -> None:
        """calamine numbers rows from 0 at the first ``sheetData`` and reads no other: a row
        tag before it (in ``sheetPr``) renumbered the rows without ``r`` after it."""
        if not self.in_data:
            self.in_data = True
            self.row = self.column = 0
            self.open_rows.clear()
            self.hidden_open = 0

    def sheet_format(self, attributes: dict[bytes, bytes]) -> None:
        """The sheet's default row height and column width (ECMA-376 Part 1, 18.3.1.81):
        ``zeroHeight`` hides the rows the sheet does not write (Excel and XlsxWriter write each
        row they show, at the default height, under it), a zero default height each row
        without a height of its own, a zero default width (``defaultColWidth``, else
        ``baseColWidth``) each column no ``col`` span gives a width. Any of them hid no text
        calamine read. Excel reads them before the sheet's columns and cells, and read after
        they would hide rows already judged shown: refused."""
        if self.in_data or self.hidden_spans or self.shown_spans:
            raise ValueError("a sheet's format properties follow its columns or cells")
        height = _concealing(attributes, b"defaultRowHeight", flag=None)
        self.unwritten_rows_hidden |= height or _concealing(
            attributes, b"defaultRowHeight", flag=b"zeroHeight"
        )
        if height:
            self.row_defaults = {b"ht": b"0"}
        width = b"defaultColWidth" if _has(attributes, b"defaultColWidth") else b"baseColWidth"
        if _concealing(attributes, width, flag=None):
            self.column_defaults = {b"width": b"0"}

    def row_started(self, tag: bytes) -> None:
        number = _REFERENCE.match(tag)
        if number is not None:
            self.row = _position(number)[0]
        hidden = (self.row_defaults or b"hidden" in tag or b"ht" in tag) and _concealing(
            self.row_defaults | _attributes(tag), b"ht"
        )
        self.open_rows.append((hidden, self.row))
        if hidden:
            self.hidden_open += 1
            self.hidden_rows.add(self.row)

    def row_ended(self, empty: bytes | None = None) -> None:
        """A row's end, or the whole of an empty row ``<row .../>`` given its tag."""
        if empty is not None:
            self.row_started(empty)
        if self.open_rows:
            self.hidden_open -= self.open_rows.pop()[0]
        self.row += 1
        self.column = 0

    def column_span(self, attributes: dict[bytes, bytes]) -> None:
        """A ``col`` span's ``min`` and ``max`` in either order, listed when it is hidden."""
        low = _column(attributes.get(b"min", b""))
        high = _column(attributes.get(b"max", b""))
        if not (low and high):
            return
        if _concealing(self.column_defaults | attributes, b"width"):
            self.hidden_spans.append((low - 1, high))
        else:
            self.shown_spans.append((low - 1, high))

    def cell(self, tag: bytes, *, valued: bool) -> None:
        if self.cell_depth:
            self.cell_depth += int(valued)
            return
        self.cell_depth = int(valued)
        self.errors += (b"e" in tag or b"&" in tag) and _type(tag) == b"e"
        reference = _REFERENCE.match(tag)
        row = self.row
        if reference is not None and reference[1]:
            row, self.column = _position(reference)
        if self.hidden_open or (self.unwritten_rows_hidden and not self._on_its_row(row)):
            self.hidden_rows.add(row)
        if valued:  # a cell without a value (formatting alone) calamine does not lay out
            self.top, self.bottom = min(self.top, row), max(self.bottom, row)
            self.left, self.right = min(self.left, self.column), max(self.right, self.column)
            self._formatted(tag, row)
        self.column += 1

    def _on_its_row(self, row: int) -> bool:
        """Whether a cell placed on ``row`` is inside that row's element: elsewhere (outside
        any row, or by a reference to another) it is on a row the sheet does not write."""
        return bool(self.open_rows) and row == self.open_rows[-1][1]

    def _formatted(self, tag: bytes, row: int) -> None:
        """Notes the cell when its style's number format shows nothing of some values."""
        if self.unshown:
            # A cell naming no style has the first (ECMA-376 Part 1, 18.3.1.4: s="0").
            number = _number((_attribute(_STYLE, tag) if b"s" in tag else b"0").decode("latin-1"))
            values = None if number is None else self.unshown.get(number)
            if values:
                self.unshown_values[(row, self.column)] = values

    def cell_ended(self) -> None:
        self.cell_depth = max(self.cell_depth - 1, 0)

    def scanned(self) -> SheetScan:
        height = self.bottom - self.top + 1 if self.bottom >= 0 else 0
        width = self.right - self.left + 1 if self.right >= 0 else 0
        return SheetScan(
            frozenset(self.hidden_rows),
            _merged(self.hidden_spans),
            height,
            width,
            self.errors,
            unlisted_columns_hidden=bool(self.column_defaults),
            listed_columns=_merged(self.shown_spans) if self.column_defaults else frozenset(),
            unshown_values=self.unshown_values,
        )


def _merged(spans: list[tuple[int, int]]) -> frozenset[int]:
    """The columns of the hidden spans, merged before any index is listed: a span of every
    column costs 16,384 entries once, not once per tag (0.45 ms a tag)."""
    hidden: set[int] = set()
    reached = -1
    for first, last in sorted(spans):
        hidden.update(range(max(first, reached), last))
        reached = max(reached, last)
    return frozenset(hidden)


def _concealing(
    attributes: dict[bytes, bytes], size: bytes, flag: bytes | None = b"hidden"
) -> bool:
    """Whether a row or column is hidden as some reader may take it: any ``flag`` (``hidden``)
    of any prefix not plainly false (a prefixed "0" after "1" overrode the one Excel reads),
    or a ``size`` (height or width) that is no number above zero (``ht="0"`` hides a row as
    surely)."""
    return any(
        (local == flag and value.strip() not in _FALSE) or (local == size and not _positive(value))
        for local, value in _local(attributes)
    )


def _has(attributes: dict[bytes, bytes], local_name: bytes) -> bool:
    return any(local == local_name for local, _ in _local(attributes))


def _local(attributes: dict[bytes, bytes]) -> Iterator[tuple[bytes, bytes]]:
    """Attributes by their local names, any prefix dropped."""
    return ((name.rpartition(b":")[2], value) for name, value in attributes.items())


def _positive(number: bytes) -> bool:
    try:
        return float(number) > 0
    except ValueError:
        return False


def _column(number: bytes) -> int | None:
    """A ``col`` span's bound as calamine reads it ("0000003" is 3), at most Excel's last."""
    digits = number.strip().lstrip(b"0")
    if not number.strip().isdigit():
        return None
    return min(int(digits or b"0"), _MAX_COLUMN) if len(digits) <= 6 else _MAX_COLUMN


def _position(reference: re.Match[bytes]) -> tuple[int, int]:
    """A reference's row and column, 0-based (column -1 without letters). One past any sheet
    is refused: calamine's 32-bit arithmetic wraps where Python's does not, so the scan would
    put a long ``r`` ("00000003") on another row than calamine."""
    letters, digits = reference.groups()
    if len(letters) > 7 or len(digits) > 7:
        raise ValueError("a row or cell reference is past any sheet's last")
    return int(digits) - 1, _column_index(letters)


def _type(tag: bytes) -> bytes:
    """A cell's ``t``, decoded."""
    return _attribute(_TYPE, tag)


def _attribute(pattern: re.Pattern[bytes], tag: bytes) -> bytes:
    """A cell's attribute that ``pattern`` finds (``t``, ``s``), decoded; empty when absent."""
    found = pattern.match(tag)
    if found is None:
        return b""
    return _unescaped(found[1] if found[1] is not None else found[2])


def _attributes(tag: bytes) -> dict[bytes, bytes]:
    """A tag's attributes by their whole name (``x:r`` is not ``r``), the first of a name
    winning as calamine looks one up, their values decoded as calamine decodes them."""
    found = reversed(_ATTRIBUTE.findall(tag))
    if b"&" not in tag:
        return {name: double or single for name, double, single in found}
    return {name: _unescaped(double or single) for name, double, single in found}


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


@functools.lru_cache(maxsize=4096)
def _column_index(letters: bytes) -> int:
    index = 0
    for letter in letters.upper():
        index = index * 26 + letter - ord("A") + 1
    return index - 1
