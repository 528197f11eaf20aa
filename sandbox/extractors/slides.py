"""Slides (PPTX, and ODP through sandbox/extractors/odf.py): per slide in order, its page
marker, title, text in reading order, tables, and its speaker notes.

python-pptx parses every part with lxml and ``resolve_entities=False`` (as python-docx does);
no macro is run, no linked file or picture is fetched. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.exc import InvalidXmlError, PackageNotFoundError
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
    notice_reason,
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
_DRAWING = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_PRESENTATIONML = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_COMPATIBILITY = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_HIDDEN_SHAPES = "[airlock: hidden shapes of this slide left out]"
_UNREAD_FRAMES = (
    "[airlock: a chart, diagram, embedded object or shape in alternate forms of this slide "
    "is not read]"
)


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
        if (slide.element.get("show") or "").strip() in ("0", "false"):
            # A hidden slide is skipped in a slide show: what a hidden sheet or PDF layer is.
            blocks.append(Notice(f"[airlock: slide {number} is hidden in the deck; left out]"))
        else:
            blocks += _readable_slide(slide, number, budget)
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
    except AttributeError as exc:  # an entry whose part is not a slide (a layout, a master)
        raise Refusal(
            codes.UNREADABLE, f"the PPTX lists a part that is not a slide: {exc}"
        ) from exc


@contextmanager
def _parts_followable(number: int) -> Iterator[None]:
    """A slide whose relationships python-pptx cannot follow (its notes pointing back at the
    slide recurse without end) is unreadable by name, not a parser's crash."""
    try:
        yield
    except (RecursionError, KeyError) as exc:
        raise Refusal(
            codes.UNREADABLE,
            f"the parts of slide {number} refer to each other in a way no deck does "
            f"({type(exc).__name__})",
        ) from exc


def _readable_slide(slide: Slide, number: int, budget: TextBudget) -> list[Block]:
    """The slide's blocks, or a notice when python-pptx cannot read it: a shape it does not
    know (a ``p:sp`` without geometry) or a malformed attribute cost the whole deck before."""
    with _parts_followable(number):
        try:
            return _slide(slide, budget)
        except (etree.XMLSyntaxError, InvalidXmlError, NotImplementedError) as exc:
            return [
                Notice(f"[airlock: slide {number} cannot be read ({notice_reason(exc)}); left out]")
            ]


def _slide(slide: Slide, budget: TextBudget) -> list[Block]:
    """The slide's title as a heading, its shapes in reading order, then its speaker notes."""
    blocks: list[Block] = []
    title = slide.shapes.title
    if title is not None and _hidden(title):
        title = None  # read (and left out) with the other shapes
    if title is not None and title.text_frame.text.strip():
        blocks.append(Heading(1, budget.spend(_text(title.text_frame.text))))
    # By identity: a second shape may carry the title's id, and PowerPoint shows both.
    others = [
        shape for shape in slide.shapes if title is None or shape.element is not title.element
    ]
    left_out: set[str] = set()
    if next(slide.element.iter(f"{_COMPATIBILITY}AlternateContent"), None) is not None:
        left_out.add(_UNREAD_FRAMES)  # python-pptx does not read either form
    blocks += _shapes(others, budget, left_out)
    blocks += [Notice(notice) for notice in sorted(left_out)]
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = _text(frame.text).strip() if frame is not None else ""
        if notes:
            blocks.append(Furniture("speaker notes", budget.spend(notes)))
    return blocks


def _shapes(shapes: list[BaseShape], budget: TextBudget, left_out: set[str]) -> list[Block]:
    """Text boxes and tables, top to bottom and left to right; a group's shapes in its place.
    What is not read is named in ``left_out``: hidden shapes (the selection pane's "hide"),
    and charts, diagrams and embedded objects, whose text is not read."""
    blocks: list[Block] = []
    for shape in sorted(shapes, key=_position):
        if _hidden(shape):
            left_out.add(_HIDDEN_SHAPES)
        elif isinstance(shape, GroupShape) or shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            blocks += _shapes(list(shape.shapes), budget, left_out)  # type: ignore[attr-defined]
        elif isinstance(shape, GraphicFrame) and shape.has_table:
            blocks += _table(shape, budget)
        elif isinstance(shape, GraphicFrame):
            left_out.add(_UNREAD_FRAMES)
        elif shape.has_text_frame:
            text = _text(shape.text_frame.text).strip()  # type: ignore[attr-defined]
            if text:
                blocks.append(Paragraph(budget.spend(text)))
    return blocks


def _position(shape: BaseShape) -> tuple[int, int]:
    """Where a shape sits, by row band then from the left, from its own offset only; a shape
    without one (a placeholder placed by its layout) first, in the order the slide lists it.
    python-pptx's ``top`` looks an inheriting placeholder up in the layout and the master on
    every call: 700 placeholders cost it 47 s."""
    offset = next(shape.element.iter(f"{_DRAWING}off"), None)
    if offset is None:
        return (0, 0)
    return (_coordinate(offset.get("y")) // _ROW_EMU, _coordinate(offset.get("x")))


def _coordinate(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _hidden(shape: BaseShape) -> bool:
    properties = next(shape.element.iter(f"{_PRESENTATIONML}cNvPr"), None)
    return properties is not None and (properties.get("hidden") or "").strip() in ("1", "true")


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
