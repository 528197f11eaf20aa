"""The typed document a sandbox child answers: ordered blocks, each a kind the reader knows.

A child that answered a string could only flatten what it read: pages ran together, tables
became tab-separated cells, and a line inside a file could pass for a page boundary. Blocks
keep headings, list items, tables and pages as what they are, and the parent renders them
(sandbox/render.py), so every marker in the text comes from trusted code. One schema serves
both sides: the child builds these values, the parent decodes its answer strictly into them.
See docs/sandbox.md, "The typed document".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Literal

import msgspec

#: Page numbers above this are lies: no page ceiling comes near it (protocol.MAX_COUNT).
MAX_PAGE_NUMBER = 1_000_000
#: Word allows 63 columns and LibreOffice 1,024 in a text table. The bound keeps a forged
#: row from making the parent render one enormous separator line.
MAX_COLUMNS = 1024
#: A list's number or bullet as drawn ("1.", "(iv)", "•"), with the space or tab after it.
MAX_MARKER_CHARS = 64
#: Page labels are "iv", "A-12", "Annex 3": a label longer than this, or one holding a
#: control character, a quote or a bracket (which could close the page marker it is printed
#: in), is not kept.
MAX_LABEL_CHARS = 32
#: Characters no reader sees, which the trusted side removes from text before it reads page
#: markers (bridge/knowledge/attachments.py: C0 and C1 controls, bidi controls, U+FEFF, tag
#: characters, variation selectors, Hangul fillers), with the other zero-width format
#: characters; and the braille blank, which it turns into a space. A regular-expression class.
INVISIBLE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u115f\u1160\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff"
)
#: Every line break the trusted side reads as one (admission turns \r and the Unicode line
#: and paragraph separators into \n): the renderer splits at each, and a TSV comment ends at each.
LINE_BREAK = re.compile("\r\n|[\n\r\u2028\u2029]")
#: A label is printed inside its page marker: nothing that ends the line or the marker, and
#: nothing admission would remove or change (a label of fillers alone would vanish, and the
#: marker with it).
LABEL_PATTERN = f'^[^\t\n\r\u2028\u2029"\\[\\]{INVISIBLE}]+$'

_Level = Annotated[int, msgspec.Meta(ge=1, le=9)]
_Depth = Annotated[int, msgspec.Meta(ge=0, le=8)]
_PageNumber = Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE_NUMBER)]
_Marker = Annotated[str, msgspec.Meta(max_length=MAX_MARKER_CHARS)]
PageLabel = Annotated[str, msgspec.Meta(max_length=MAX_LABEL_CHARS, pattern=LABEL_PATTERN)]
_Confidence = Annotated[int, msgspec.Meta(ge=0, le=100)]
_Row = Annotated[list[str], msgspec.Meta(max_length=MAX_COLUMNS)]


def trimmed(rows: list[list[str]]) -> list[list[str]]:
    """``rows`` without the columns after the last one that holds a value in any row: a sheet
    or a CSV exported with trailing separators shows no empty columns."""
    used = max((index + 1 for row in rows for index, cell in enumerate(row) if cell), default=0)
    return [row[:used] for row in rows]


class _Block(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="block"):
    pass


class Paragraph(_Block, tag="paragraph", frozen=True):
    """Running text; its line breaks are the document's."""

    text: str


class Heading(_Block, tag="heading", frozen=True):
    """A heading by the document's own say (a heading style or outline level), not a guess."""

    level: _Level
    text: str


class ListItem(_Block, tag="item", frozen=True):
    """A list entry with its number or bullet as the document draws it, nested ``depth`` deep."""

    marker: _Marker
    depth: _Depth
    text: str


class Table(_Block, tag="table", frozen=True):
    """Rows of cells; ``header``: the first row is the table's header row."""

    rows: list[_Row]
    header: bool


class PageBreak(_Block, tag="page", frozen=True):
    """The start of a page: its index in the document, and the label it is printed with when
    the document gives one that differs from the index."""

    number: _PageNumber
    label: PageLabel | None = None


FurnitureRole = Literal[
    "header",
    "footer",
    "first-page header",
    "first-page footer",
    "even-page header",
    "even-page footer",
    "speaker notes",
]


class Furniture(_Block, tag="furniture", frozen=True):
    """Text beside the body rather than in it: a header or footer, named by where, or a slide's
    speaker notes."""

    role: FurnitureRole
    text: str


class Notice(_Block, tag="notice", frozen=True):
    """airlock's own remark about what follows (the quality flag, a kind read as another, a
    page read by another parser), kept apart from the document's words."""

    text: str


#: What a parser's words may not hold where a notice quotes them in parentheses: they quote
#: the file, and a quote, bracket or parenthesis written there closed the notice and printed
#: one in airlock's voice.
_NOT_IN_A_REASON = str.maketrans("", "", '"[]()')
_MAX_REASON_CHARS = 200


def notice_reason(words: object) -> str:
    """A parser's complaint (an exception) as a notice quotes it: one line, short, and unable
    to close the notice."""
    return " ".join(str(words).split()).translate(_NOT_IN_A_REASON)[:_MAX_REASON_CHARS]


class OcrText(_Block, tag="ocr", frozen=True):
    """Text tesseract read from a picture, with its mean word confidence when it read words."""

    text: str
    confidence: _Confidence | None


Block = Paragraph | Heading | ListItem | Table | PageBreak | Furniture | Notice | OcrText


class Document(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A document as read: its blocks in reading order."""

    blocks: list[Block]


def strings(document: Document) -> Iterator[str]:
    """Every string the document holds, for checks that must see all of them."""
    for block in document.blocks:
        if isinstance(block, Table):
            for row in block.rows:
                yield from row
        elif isinstance(block, ListItem):
            yield block.marker
            yield block.text
        elif isinstance(block, PageBreak):
            if block.label is not None:
                yield block.label
        else:
            yield block.text


def words(document: Document) -> str:
    """The document's own text, a line per block or table row, without airlock's notices and
    page markers: what the quality check judges."""
    return "\n".join(text for text in map(block_text, document.blocks) if text is not None)


def block_text(block: Block) -> str | None:
    """A block's own text as lines (a list item indented and after its marker, a table's rows
    tab-separated); None for a notice or a page break, which are airlock's."""
    if isinstance(block, Notice | PageBreak):
        return None
    if isinstance(block, Table):
        return "\n".join("\t".join(row) for row in block.rows)
    if isinstance(block, ListItem):
        return "  " * block.depth + block.marker + block.text
    return block.text
