"""Slides (PPTX, and ODP through sandbox/extractors/odf.py): per slide in order, its page
marker, title, text in reading order, tables, and its speaker notes.

python-pptx parses every part with lxml and ``resolve_entities=False`` (as python-docx does);
no macro is run, no linked file or picture is fetched. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator

from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.exc import PackageNotFoundError
from pptx.presentation import Presentation as PresentationType
from pptx.shapes.base import BaseShape
from pptx.shapes.graphfrm import GraphicFrame
from pptx.shapes.group import GroupShape
from pptx.slide import Slide

from sandbox import codes, sniff
from sandbox.document import (
    MAX_COLUMNS,
    Block,
    Document,
    Furniture,
    Heading,
    Notice,
    PageBreak,
    Paragraph,
    Table,
)
from sandbox.extractors import odf
from sandbox.extractors.registry import Refusal, extractor, report_progress
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

#: Shapes whose tops lie within a tenth of an inch (in EMU) are read as one row, left to
#: right: two columns' boxes are rarely placed at exactly the same height.
_ROW_EMU = 91_440
#: python-pptx writes a line break inside a paragraph (<a:br>) as a vertical tab.
_LINE_BREAK = "\v"


@extractor("presentation")
def extract_presentation(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    found = sniff.zip_kind(payload) if payload.startswith(sniff.ZIP) else None
    if found == sniff.ODP_PACKAGE:
        return odf.read_odp(payload, limits)
    if found is None or found.kind != sniff.PRESENTATION:
        named = "not a ZIP package" if found is None else found.name
        raise Refusal(
            codes.UNREADABLE,
            f"the payload is {named}, not a presentation; airlock reads {sniff.SUPPORTED}",
        )
    presentation = _opened(payload)
    # Counted in the slide list itself: python-pptx's slide collection resolves (and renames
    # the part of) every entry when it is first touched, 100,000 of them for a forged list.
    listed = presentation.element.sldIdLst
    total = 0 if listed is None else len(listed)
    if total > limits.max_pages:
        raise Refusal(
            codes.CEILING,
            f"{total} slides exceeds the {limits.max_pages}-page ceiling "
            "(each slide counts as a page)",
        )
    budget = TextBudget(limits)
    blocks: list[Block] = []
    for number, slide in enumerate(_slides(presentation), start=1):
        blocks.append(PageBreak(number))
        if slide.element.get("show") in ("0", "false"):
            # A hidden slide is skipped in a slide show: what a hidden sheet or PDF layer is.
            blocks.append(Notice(f"[airlock: slide {number} is hidden in the deck; left out]"))
        else:
            blocks += _slide(slide, budget)
        report_progress(number, total)
    return Document(blocks)


def _opened(payload: bytes) -> PresentationType:
    """The PPTX presentation, or a refusal naming what is wrong with the package."""
    try:
        return Presentation(io.BytesIO(payload))
    except (KeyError, ValueError, PackageNotFoundError, zipfile.BadZipFile) as exc:
        # A part the package lists but lacks, a main part of another type (a template, a
        # show), a member zipfile cannot read.
        raise Refusal(codes.UNREADABLE, f"the PPTX package cannot be read: {exc}") from exc
    except etree.XMLSyntaxError as exc:
        raise Refusal(codes.UNREADABLE, f"a part of the PPTX is not well-formed: {exc}") from exc


def _slides(presentation: PresentationType) -> Iterator[Slide]:
    try:
        yield from presentation.slides
    except KeyError as exc:  # a slide list entry whose relationship the package lacks
        raise Refusal(codes.UNREADABLE, f"the PPTX lists a slide it lacks: {exc}") from exc


def _slide(slide: Slide, budget: TextBudget) -> list[Block]:
    """The slide's title as a heading, its shapes in reading order, then its speaker notes."""
    blocks: list[Block] = []
    title = slide.shapes.title
    if title is not None and title.text_frame.text.strip():
        blocks.append(Heading(1, budget.spend(_text(title.text_frame.text))))
    others = [shape for shape in slide.shapes if title is None or shape.shape_id != title.shape_id]
    blocks += _shapes(others, budget)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = _text(frame.text).strip() if frame is not None else ""
        if notes:
            blocks.append(Furniture("speaker notes", budget.spend(notes)))
    return blocks


def _shapes(shapes: list[BaseShape], budget: TextBudget) -> list[Block]:
    """Text boxes and tables, top to bottom and left to right; a group's shapes in its place."""
    blocks: list[Block] = []
    for shape in sorted(shapes, key=_position):
        if isinstance(shape, GroupShape) or shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            blocks += _shapes(list(shape.shapes), budget)  # type: ignore[attr-defined]
        elif isinstance(shape, GraphicFrame) and shape.has_table:
            blocks += _table(shape, budget)
        elif shape.has_text_frame:
            text = _text(shape.text_frame.text).strip()  # type: ignore[attr-defined]
            if text:
                blocks.append(Paragraph(budget.spend(text)))
    return blocks


def _position(shape: BaseShape) -> tuple[int, int]:
    """Where a shape sits, by row band then from the left; a shape without a position (one
    inheriting none from its layout) first, in the order the slide lists it."""
    top, left = shape.top, shape.left
    return ((top or 0) // _ROW_EMU, left or 0)


def _table(frame: GraphicFrame, budget: TextBudget) -> list[Block]:
    """A table's rows of cells; a cell covered by a merge is empty, so columns stay aligned;
    the first row is the header when the table is styled with one."""
    table = frame.table
    widest = max((len(row.cells) for row in table.rows), default=0)
    if max(widest, len(table.columns)) > MAX_COLUMNS:
        raise Refusal(
            codes.CEILING,
            f"a table has more than {MAX_COLUMNS} columns, the most a table may have",
        )
    rows = [
        ["" if cell.is_spanned else budget.spend(" ".join(cell.text.split())) for cell in row.cells]
        for row in table.rows
    ]
    rows = [row for row in rows if any(row)]
    return [Table(rows, header=bool(table.first_row))] if rows else []


def _text(text: str) -> str:
    return text.replace(_LINE_BREAK, "\n")
