"""CSV and TSV: a delimited text's rows as one table, its first row the header.

Chosen by the declared media type (``text/csv``, ``text/tab-separated-values``): the bytes of
a CSV are text either way, and a text read as a table loses nothing but a layout. Decoding is
the text extractor's. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sandbox import codes
from sandbox.document import MAX_COLUMNS, Block, Paragraph, Table
from sandbox.extractors.registry import Refusal

if TYPE_CHECKING:  # the text extractor, which decodes the text, owns the budget and calls this
    from sandbox.extractors.text import TextBudget

_CSV = frozenset({"text/csv", "application/csv", "text/x-csv", "text/comma-separated-values"})
_TSV = frozenset({"text/tab-separated-values", "text/tsv"})
#: How much of the text the dialect is guessed from, cut at a line end.
_SAMPLE_CHARS = 64 * 1024
#: The separators a CSV is found to use: Excel in much of Europe writes ";", exports use "|".
_DELIMITERS = ",;\t|"


def is_delimited(media_type: str) -> bool:
    return _essence(media_type) in _CSV | _TSV


def table(media_type: str, text: str, budget: TextBudget) -> list[Block]:
    """The rows of ``text`` as one table, rows without a value left out; the lines starting
    with "#" above it (a TSV's comments, a license) as a paragraph before it.

    A TSV has no quoting (IANA's definition): a field that starts with a quote mark is text, not
    the start of a field running to the next quote. A CSV's separator and quoting are guessed
    from its start; a guess that fails is a comma and double quotes, RFC 4180's. The first row
    is the header, as RFC 4180 allows and as pandas and spreadsheet imports read it: csv's own
    guess at a header row missed csv-spectrum's plain "a,b".
    """
    preamble, body = _comments(text)
    dialect = _TabSeparated if _essence(media_type) in _TSV else _sniffed(body)
    blocks: list[Block] = [Paragraph(budget.spend(preamble))] if preamble.strip() else []
    rows: list[list[str]] = []
    with _field_limit(budget.allowance):
        reader = csv.reader(io.StringIO(body, newline=""), dialect, strict=False)
        try:
            for row in reader:
                if len(row) > MAX_COLUMNS:
                    raise Refusal(
                        codes.CEILING,
                        f"line {reader.line_num} has {len(row):,} fields, over the "
                        f"{MAX_COLUMNS} columns a table may have",
                    )
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
        blocks.append(Table(rows, header=True))
    return blocks


class _TabSeparated(csv.excel_tab):
    quoting = csv.QUOTE_NONE


def _comments(text: str) -> tuple[str, str]:
    """The lines starting with "#" at the top of ``text``, and the rest."""
    end = 0
    while text.startswith("#", end):
        line_end = text.find("\n", end)
        end = len(text) if line_end < 0 else line_end + 1
    return text[:end], text[end:]


def _essence(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


def _sample(text: str) -> str:
    """The start of ``text`` the dialect and header are judged from, cut at a line end."""
    if len(text) <= _SAMPLE_CHARS:
        return text
    sample = text[:_SAMPLE_CHARS]
    return sample[: sample.rfind("\n") + 1] or sample


def _sniffed(text: str) -> type[csv.Dialect] | csv.Dialect:
    try:
        return csv.Sniffer().sniff(_sample(text), delimiters=_DELIMITERS)
    except csv.Error:
        return csv.excel


@contextmanager
def _field_limit(characters: int) -> Iterator[None]:
    """csv's field limit, process-wide, raised to the text allowance for this read: a field
    longer than that is over the text ceiling anyway, and refused as it grows, not after."""
    before = csv.field_size_limit(characters)
    try:
        yield
    finally:
        csv.field_size_limit(before)
