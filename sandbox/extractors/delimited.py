"""CSV and TSV: a delimited text's rows as one table, its first row the header.

Chosen by the declared media type (``text/csv``, ``text/tab-separated-values``): the bytes of
a CSV are text either way, and a text read as a table loses nothing but a layout. Decoding is
the text extractor's. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sandbox import codes
from sandbox.document import LINE_BREAK, MAX_COLUMNS, Block, Paragraph, Table, trimmed
from sandbox.extractors.registry import Refusal

if TYPE_CHECKING:  # the text extractor, which decodes the text, owns the budget and calls this
    from sandbox.extractors.text import TextBudget

_CSV = frozenset({"text/csv", "application/csv", "text/x-csv", "text/comma-separated-values"})
_TSV = frozenset({"text/tab-separated-values", "text/tsv"})
#: The separators a CSV is found to use, in the order a tie is settled: Excel in much of
#: Europe writes ";", exports use tabs and "|".
_DELIMITERS = ",;\t|"
#: How many of the first lines the separator is judged from.
_JUDGED_LINES = 50


def is_delimited(media_type: str) -> bool:
    return _essence(media_type) in _CSV | _TSV


def table(media_type: str, text: str, budget: TextBudget) -> list[Block]:
    """The rows of ``text`` as one table: rows without a value left out, columns after the last
    value trimmed, every field charged to the text budget (an empty one as a character, as a
    sheet's empty cell is); a TSV's "#" comment lines above it as a paragraph before it.

    The first row is the header, as RFC 4180 allows and as pandas and spreadsheet imports read
    it (csv's own guess at a header row missed csv-spectrum's plain "a,b"). A TSV has no
    quoting (IANA's definition): a field that starts with a quote mark is text, not the start
    of a field running to the next quote. A CSV quotes with double quotes, doubled inside a
    field (RFC 4180); only its separator is guessed (:func:`_separator`). csv's own sniffer is
    not used: it may take an apostrophe for the quote mark, which merges rows and eats the
    apostrophes, and its pattern takes time quadratic in the sample (16 s for 64 KB).
    """
    tab_separated = _essence(media_type) in _TSV
    preamble, body = _comments(text) if tab_separated else ("", text)
    blocks: list[Block] = [Paragraph(budget.spend(preamble))] if preamble.strip() else []
    lines = io.StringIO(body, newline="")
    if tab_separated:
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE, strict=False)
    else:
        reader = csv.reader(
            lines, delimiter=_separator(body), quotechar='"', doublequote=True, strict=False
        )
    rows: list[list[str]] = []
    with _field_limit(budget.allowance):
        try:
            for row in reader:
                if len(row) > MAX_COLUMNS:
                    raise Refusal(
                        codes.CEILING,
                        f"line {reader.line_num} has {len(row):,} fields, over the "
                        f"{MAX_COLUMNS} columns a table may have",
                    )
                budget.charge(len(row))
                if any(cell.strip() for cell in row):
                    rows.append([budget.spend(cell) for cell in row])
        except csv.Error as exc:
            if "field larger than field limit" in str(exc):
                raise budget.exceeded(f" (one field, at line {reader.line_num})") from exc
            raise Refusal(
                codes.UNREADABLE,
                f"the delimited text cannot be read at line {reader.line_num}: {exc}",
            ) from exc
    if rows:
        blocks.append(Table(trimmed(rows), header=True))
    return blocks


def _separator(text: str) -> str:
    """The separator that splits the most of the first lines into the same number of fields
    (more than one), ties settled in :data:`_DELIMITERS` order; a comma when none does. Linear
    in the lines judged; quoted separators count too, which only a line full of them misleads."""
    lines = [line for line in _first_lines(text) if line.strip()]
    best, best_lines = ",", 0
    for separator in _DELIMITERS:
        counts = Counter(line.count(separator) for line in lines)
        count, steady = max(counts.items(), key=lambda item: (item[1], item[0]), default=(0, 0))
        if count and steady > best_lines:
            best, best_lines = separator, steady
    return best


def _first_lines(text: str) -> Iterator[str]:
    start = 0
    for _ in range(_JUDGED_LINES):
        end = text.find("\n", start)
        yield text[start:] if end < 0 else text[start:end]
        if end < 0:
            return
        start = end + 1


def _comments(text: str) -> tuple[str, str]:
    """The lines starting with "#" at the top of a TSV, and the rest. A comment ends at any
    line break the renderer reads as one, so none can carry a line past this split."""
    end = 0
    while text.startswith("#", end):
        found = LINE_BREAK.search(text, end)
        end = len(text) if found is None else found.end()
    return text[:end], text[end:]


def _essence(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


@contextmanager
def _field_limit(characters: int) -> Iterator[None]:
    """csv's field limit, process-wide, raised to the text allowance for this read: a field
    longer than that is over the text ceiling anyway, and refused as it grows, not after."""
    before = csv.field_size_limit(characters)
    try:
        yield
    finally:
        csv.field_size_limit(before)
