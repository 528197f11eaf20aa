"""Spreadsheets (XLSX, XLSM, XLSB, XLS, ODS): each sheet's name, then its cells as a table.

python-calamine reads all five formats in Rust: no XML entity is ever expanded (its XML reader
has no DTD support, so a billion-laughs or an external entity is a parse error), macros are
never run and formulas never evaluated (a cell's cached value is what is read), and external
links are never followed. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import datetime
import io
import math
from collections.abc import Sequence

import python_calamine

from sandbox import codes, sniff
from sandbox.document import (
    MAX_COLUMNS,
    Block,
    Document,
    Heading,
    Notice,
    Table,
    notice_reason,
    trimmed,
)
from sandbox.extractors import xlsx_scan
from sandbox.extractors.registry import Refusal, extractor, report_progress
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

#: Sheets that hold cells. Chart sheets hold none; a VBA module is code, never read.
_CELL_SHEETS = (python_calamine.SheetTypeEnum.WorkSheet, python_calamine.SheetTypeEnum.MacroSheet)
#: A sheet name is at most 31 characters in Excel; a forged one is cut to this in a notice.
_MAX_NAME_CHARS = 100
#: Quotes and brackets of a sheet's name would end the notice that names it, for the reader.
_NOT_IN_A_NOTICE = str.maketrans("", "", '"[]')
#: Floats at or beyond this are shown as floats: an int() of them would print digits the
#: double does not hold.
_EXACT_INTEGERS = 2.0**53


@extractor("spreadsheet")
def extract_spreadsheet(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    workbook = _opened(payload)
    sheets = workbook.sheets_metadata
    if len(sheets) > limits.max_pages:
        raise Refusal(
            codes.CEILING,
            f"{len(sheets)} sheets exceeds the {limits.max_pages}-page ceiling "
            "(each sheet counts as a page)",
        )
    scans = xlsx_scan.scan(payload) if payload.startswith(sniff.ZIP) else None
    budget = TextBudget(limits)
    blocks: list[Block] = []
    named: set[str] = set()
    for index, sheet in enumerate(sheets):
        name = budget.spend(" ".join(sheet.name.split())[:_MAX_NAME_CHARS])
        repeated = sheet.name.casefold() in named
        named.add(sheet.name.casefold())
        if repeated:
            # Excel allows no two sheets one name, and calamine finds a sheet by its name: the
            # second was read as the first, under the second's scan, hidden rows and all.
            blocks.append(
                Notice(f'[airlock: sheet "{_named(name)}" repeats an earlier name; left out]')
            )
        elif sheet.visible != python_calamine.SheetVisibleEnum.Visible:
            # A hidden sheet is what a hidden PDF layer is: text its author kept from readers,
            # the place a planted instruction would sit. Said, never read.
            blocks.append(
                Notice(f'[airlock: sheet "{_named(name)}" is hidden in the workbook; left out]')
            )
        elif sheet.typ in _CELL_SHEETS and scans is not None and _unscanned(scans, index):
            # An XLSX sheet the scan could not find: its hidden rows are not known, and
            # calamine would show them.
            blocks.append(
                Notice(
                    f'[airlock: sheet "{_named(name)}" cannot be checked for hidden rows (its '
                    "part is not where the workbook says); left out]"
                )
            )
        elif sheet.typ in _CELL_SHEETS:
            blocks.append(Heading(1, name))
            scan = scans[index] if scans is not None else None
            blocks += _sheet(workbook, index, name, scan, budget)
        report_progress(index + 1, len(sheets))
    return Document(blocks)


def _unscanned(scans: list[xlsx_scan.SheetScan | None], index: int) -> bool:
    """Whether the scan of an XLSX has nothing for sheet ``index`` (by position: two sheets
    may share a name, and one's scan was applied to both)."""
    return index >= len(scans) or scans[index] is None


def _sheet(
    workbook: python_calamine.CalamineWorkbook,
    index: int,
    name: str,
    scan: xlsx_scan.SheetScan | None,
    budget: TextBudget,
) -> list[Block]:
    """One sheet's table, or a notice saying why it cannot be read: a cell calamine cannot
    convert (Excel 365's ``#SPILL!``, a duration past Python's) loses its sheet, not the
    workbook.

    Each cell of the used range costs one character of the text budget before a row is read,
    empty or not (as a DOCX table's padding cells do), so a sparse range of a billion empty
    cells is refused as the work it is. For an XLSX the range is measured in the sheet's XML
    before calamine lays it out (:mod:`sandbox.extractors.xlsx_scan`).
    """
    charged = 0
    if scan is not None:
        charged = budget.charge(scan.height * scan.width, _reach(name, scan.height, scan.width))
    try:
        loaded = workbook.get_sheet_by_index(index)
        if loaded.width > MAX_COLUMNS:
            raise Refusal(
                codes.CEILING,
                f'sheet "{name}" spans {loaded.width:,} columns, over the {MAX_COLUMNS} a '
                "table may have",
            )
        cells = loaded.height * loaded.width
        budget.charge(max(0, cells - charged), _reach(name, loaded.height, loaded.width))
        rows = list(loaded.iter_rows())
    except (python_calamine.CalamineError, ValueError, OverflowError) as exc:
        reason = notice_reason(exc)  # calamine's words quote the file
        return [Notice(f'[airlock: sheet "{_named(name)}" cannot be read ({reason}); left out]')]
    shown = _Shown(scan or _UNSCANNED)
    kept = shown.rows(rows, loaded.start or (0, 0), budget)
    blocks: list[Block] = [Table(trimmed(kept), header=False)] if kept else []
    if shown.hid_a_value:
        blocks.append(
            Notice(f'[airlock: the hidden rows and columns of sheet "{_named(name)}" are left out]')
        )
    if shown.unshown:
        counted = "1 cell" if shown.unshown == 1 else f"{shown.unshown} cells"
        blocks.append(
            Notice(
                f'[airlock: sheet "{_named(name)}" has {counted} its number format shows '
                "nothing of; left out]"
            )
        )
    if scan is not None and scan.errors:
        counted = "1 cell" if scan.errors == 1 else f"{scan.errors} cells"
        blocks.append(
            Notice(
                f'[airlock: sheet "{_named(name)}" has {counted} holding an error value '
                "(#DIV/0!, #N/A), shown empty]"
            )
        )
    return blocks


#: What a sheet without a scan (XLSB, XLS, ODS) hides: nothing calamine does not know.
_UNSCANNED = xlsx_scan.SheetScan(frozenset(), frozenset(), 0, 0, 0)


class _Shown:
    """A sheet's rows as a reader of it sees them: without its hidden rows and columns, and
    without the values their number format shows nothing of (``;;;``), each counted for the
    notices that say so."""

    def __init__(self, scan: xlsx_scan.SheetScan) -> None:
        self._scan = scan
        self.hid_a_value = False
        self.unshown = 0

    def rows(
        self, rows: Sequence[Sequence[object]], start: tuple[int, int], budget: TextBudget
    ) -> list[list[str]]:
        kept: list[list[str]] = []
        for number, row in enumerate(rows, start=start[0]):
            shown = [
                (column, self._text(number, column, value))
                for column, value in enumerate(row, start=start[1])
            ]
            hidden_row = number in self._scan.hidden_rows
            self.hid_a_value = self.hid_a_value or any(
                text for column, text in shown if hidden_row or self._scan.hides_column(column)
            )
            visible = [text for column, text in shown if not self._scan.hides_column(column)]
            if not hidden_row and any(visible):
                kept.append([budget.spend(text) for text in visible])
        return kept

    def _text(self, row: int, column: int, value: object) -> str:
        """A cell's value as text, or nothing when its number format shows nothing of it."""
        text = _shown(value)
        unshown = self._scan.unshown_values
        if text and unshown and _kind(value) in unshown.get((row, column), ()):
            self.unshown += 1
            return ""
        return text


def _kind(value: object) -> str:
    """Which section of a number format shows a value: text (and TRUE or FALSE), or a
    number's by its sign; a date is a positive number of days, a time of day one from zero."""
    if isinstance(value, str | bool):
        return "text"
    if isinstance(value, datetime.timedelta):
        number = value.total_seconds()
    elif isinstance(value, datetime.time):
        number = int(value != datetime.time.min)
    elif isinstance(value, int | float):
        number = value
    else:
        number = 1  # a date
    return "positive" if number > 0 else "negative" if number < 0 else "zero"


def _reach(name: str, height: int, width: int) -> str:
    return f' (sheet "{name}" spans {height:,} rows by {width:,} columns)'


def _named(name: str) -> str:
    """A sheet's name as a notice quotes it."""
    return name.translate(_NOT_IN_A_NOTICE)


def _opened(payload: bytes) -> python_calamine.CalamineWorkbook:
    """The workbook, or a refusal naming what the payload is when it is none."""
    if payload.startswith(sniff.OLE2):
        what = "an OLE2 compound file (an XLS workbook by its signature)"
    else:
        found = sniff.zip_kind(payload) if payload.startswith(sniff.ZIP) else None
        if found is None or found.kind != sniff.SPREADSHEET:
            named = (
                "neither a ZIP package nor an OLE2 file (a CSV or an HTML table saved as .xls "
                "is text: send it as text)"
                if found is None
                else found.name
            )
            raise Refusal(
                codes.UNREADABLE,
                f"the payload is {named}, not a spreadsheet; airlock reads {sniff.SUPPORTED}",
            )
        what = found.name
    try:
        return python_calamine.CalamineWorkbook.from_filelike(io.BytesIO(payload))
    except python_calamine.PasswordError as exc:
        raise Refusal(codes.UNREADABLE, f"the payload is {what} encrypted with a password") from exc
    except (python_calamine.CalamineError, ValueError) as exc:
        # calamine tries each of its readers in turn and, when none opens the file, reports
        # only that: "Cannot detect file format" also stands for a damaged part or a DTD.
        raise Refusal(
            codes.UNREADABLE, f"the payload is {what} that cannot be read: {exc}"
        ) from exc


def _shown(value: object) -> str:
    """A cell's cached value as text: whole numbers without ".0", dates and times in ISO form
    to the second (ODS stores times as fractions of a day, whose rounding shows as
    microseconds no sheet displays), booleans as Excel writes them."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < _EXACT_INTEGERS:
            return str(int(value))
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, datetime.datetime):
        return _to_second(value).isoformat(sep=" ")
    if isinstance(value, datetime.time):
        moment = datetime.datetime.combine(datetime.date.min, value)
        return _to_second(moment).time().isoformat()
    if isinstance(value, datetime.date | datetime.timedelta | int | str):
        return str(value)
    return ""


def _to_second(moment: datetime.datetime) -> datetime.datetime:
    rounded = moment.replace(microsecond=0)
    if moment.microsecond >= 500_000 and rounded < datetime.datetime.max - datetime.timedelta(1):
        rounded += datetime.timedelta(seconds=1)
    return rounded
