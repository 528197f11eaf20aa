"""OpenDocument text (ODT) and presentations (ODP), read from their content.xml with lxml.

content.xml is parsed under the one XML policy (sandbox/extractors/package_parts.py; an
OpenDocument part never has a DOCTYPE). Repeated spaces, cells and rows, which cost a few bytes
for any count, are charged to the text budget before they are written out.
See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from lxml import etree

from sandbox import codes, sniff
from sandbox.document import (
    MAX_COLUMNS,
    Block,
    Document,
    Furniture,
    Heading,
    ListItem,
    Notice,
    PageBreak,
    Paragraph,
    Table,
)
from sandbox.extractors import package_parts
from sandbox.extractors.registry import Refusal, extractor, report_progress
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_SVG = "{urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0}"
_PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_CONTENT = "content.xml"
#: Elements whose text is not the document's reading: tracked deletions, comments, the
#: declarations of sequences and forms, and a slide's thumbnail of itself.
_SKIPPED = frozenset(
    {
        f"{_TEXT}tracked-changes",
        f"{_OFFICE}annotation",
        f"{_OFFICE}annotation-end",
        f"{_TEXT}sequence-decls",
        f"{_OFFICE}forms",
        f"{_DRAW}page-thumbnail",
        # Impress writes a slide's comments in its own namespace (ODF 1.2 extended).
        "{http://openoffice.org/2009/office}annotation",
        "{http://openoffice.org/2009/office}annotation-end",
    }
)
_LIST_MARKER = "- "
_MAX_DEPTH = 8
#: Lengths in svg:x and svg:y, in millimetres per unit, for reading a slide's shapes in order.
_UNITS = {"cm": 10.0, "mm": 1.0, "in": 25.4, "pt": 25.4 / 72, "pc": 25.4 / 6, "px": 25.4 / 96}
_LENGTH = re.compile(r"(-?\d+(?:\.\d+)?)(cm|mm|in|pt|pc|px)")
#: Shapes whose tops lie within 2.5 mm are read as one row, left to right.
_ROW_MM = 2.5


def read_odt(payload: bytes, limits: ParseLimits) -> Document:
    """An OpenDocument text: headings, paragraphs, lists and tables in order, text boxes after
    the paragraph that anchors them, then footnotes and endnotes."""
    content = _content(payload)
    body = content.find(f"{_OFFICE}body/{_OFFICE}text")
    if body is None:
        raise Refusal(codes.UNREADABLE, "the OpenDocument text has no office:text body")
    walker = _Walker(TextBudget(limits), _hidden_text_styles(content))
    blocks = walker.blocks(body, depth=0)
    return Document(blocks + [Paragraph(note) for note in walker.notes] + _hid_notice(walker))


def read_odp(payload: bytes, limits: ParseLimits) -> Document:
    """An OpenDocument presentation, slide by slide, as a PPTX is read (sandbox/extractors/
    slides.py): a page marker, the title, the shapes in reading order, the speaker notes."""
    content = _content(payload)
    slides = content.findall(f"{_OFFICE}body/{_OFFICE}presentation/{_DRAW}page")
    if len(slides) > limits.max_pages:
        raise Refusal(
            codes.CEILING,
            f"{len(slides)} slides exceeds the {limits.max_pages}-page ceiling "
            "(each slide counts as a page)",
        )
    hidden = _hidden_page_styles(content)
    walker = _Walker(TextBudget(limits), _hidden_text_styles(content))
    blocks: list[Block] = []
    for number, slide in enumerate(slides, start=1):
        blocks.append(PageBreak(number))
        if slide.get(f"{_DRAW}style-name") in hidden:
            blocks.append(Notice(f"[airlock: slide {number} is hidden in the deck; left out]"))
        else:
            blocks += _slide(slide, walker)
        report_progress(number, len(slides))
    return Document(blocks + [Paragraph(note) for note in walker.notes] + _hid_notice(walker))


def _hid_notice(walker: _Walker) -> list[Block]:
    if not walker.hid_text:
        return []
    return [
        Notice("[airlock: text the document hides (hidden sections, paragraphs or text) left out]")
    ]


def _hidden_text_styles(content: etree._Element) -> frozenset[str]:
    """The automatic styles that hide their text (``text:display="none"``), with the styles
    built on them (``style:parent-style-name``). Common styles live in styles.xml, not read."""
    parents: dict[str, str] = {}
    hiding: set[str] = set()
    for style in content.iter(f"{_STYLE}style"):
        name = style.get(f"{_STYLE}name")
        if not name:
            continue
        parent = style.get(f"{_STYLE}parent-style-name")
        if parent:
            parents[name] = parent
        if any(
            properties.get(f"{_TEXT}display") == "none"
            for properties in style.iter(f"{_STYLE}text-properties")
        ):
            hiding.add(name)
    hidden = set(hiding)
    for name in parents:
        seen: set[str] = set()
        ancestor: str | None = name
        while ancestor is not None and ancestor not in seen:  # a loop of parents ends
            seen.add(ancestor)
            if ancestor in hiding:
                hidden.add(name)
                break
            ancestor = parents.get(ancestor)
    return frozenset(hidden)


def _content(payload: bytes) -> etree._Element:
    """content.xml of the package, parsed under the one policy."""
    archive = package_parts.opened(payload, "OpenDocument file")
    try:
        data = package_parts.member(archive, _CONTENT)
    except package_parts.MissingPart as exc:
        raise Refusal(codes.UNREADABLE, "the OpenDocument package has no content.xml") from exc
    return package_parts.xml_part(data, _CONTENT)


@dataclass
class _Walker:
    """Blocks out of ODF body elements, every element visited once and every character
    charged where it is written; text the document hides is counted, not read."""

    budget: TextBudget
    hidden_styles: frozenset[str] = frozenset()
    notes: list[str] = field(default_factory=list)
    hid_text: bool = False
    in_note: bool = False

    def hidden(self, element: etree._Element) -> bool:
        """Whether a reader of the document does not see ``element``: a section shown never
        or on a condition, a paragraph a hidden-paragraph field hides, hidden text, or any
        element whose style sets ``text:display="none"``. Said once, in a notice."""
        tag = element.tag
        hidden = (
            (tag == f"{_TEXT}section" and element.get(f"{_TEXT}display") in ("none", "condition"))
            or (tag == f"{_TEXT}hidden-text" and element.get(f"{_TEXT}is-hidden") == "true")
            or (
                tag in (f"{_TEXT}p", f"{_TEXT}h")
                and any(
                    field.get(f"{_TEXT}is-hidden") == "true"
                    for field in element.iter(f"{_TEXT}hidden-paragraph")
                )
            )
            or element.get(f"{_TEXT}style-name") in self.hidden_styles
        )
        self.hid_text = self.hid_text or hidden
        return hidden

    def blocks(self, container: etree._Element, depth: int) -> list[Block]:
        blocks: list[Block] = []
        for child in _elements(container):
            tag = child.tag
            if tag in _SKIPPED or self.hidden(child):
                continue
            if tag == f"{_TEXT}h":
                text = self.inline(child)
                if text.strip():
                    blocks.append(Heading(_level(child), text))
                blocks += self.frames(child)
            elif tag == f"{_TEXT}p":
                text = self.inline(child)
                if text.strip():
                    blocks.append(Paragraph(text))
                blocks += self.frames(child)
            elif tag == f"{_TEXT}list":
                blocks += self.list_items(child, depth)
            elif tag == f"{_TABLE}table":
                blocks += self.table(child)
            else:  # sections, index bodies, change spans: their contents
                blocks += self.blocks(child, depth)
        return blocks

    def list_items(self, listing: etree._Element, depth: int) -> list[Block]:
        """Items with a plain marker: the numbers a list style would draw are not computed."""
        blocks: list[Block] = []
        for item in _elements(listing):
            for child in _elements(item):
                if child.tag in _SKIPPED or self.hidden(child):
                    continue
                if child.tag == f"{_TEXT}list":
                    blocks += self.list_items(child, min(depth + 1, _MAX_DEPTH))
                elif child.tag in (f"{_TEXT}p", f"{_TEXT}h"):
                    text = self.inline(child)
                    if text.strip():
                        blocks.append(ListItem(_LIST_MARKER, depth, text))
                    blocks += self.frames(child)
                else:
                    blocks += self.blocks(child, depth)
        return blocks

    def inline(self, element: etree._Element) -> str:
        """The text of a paragraph: spans, links, spaces (``text:s``), tabs, line breaks, and
        a note's citation (its body goes to the notes); shapes are left to :meth:`frames`."""
        pieces: list[str] = []
        self._inline_into(element, pieces)
        return "".join(pieces)

    def _inline_into(self, element: etree._Element, pieces: list[str]) -> None:
        if element.text:
            pieces.append(self.budget.spend(element.text))
        for child in _elements(element):
            tag = child.tag
            if tag in _SKIPPED or self.hidden(child):
                pass  # its tail is the document's
            elif tag == f"{_TEXT}s":
                pieces.append(" " * self.budget.charge(_count(child, f"{_TEXT}c")))
            elif tag == f"{_TEXT}tab":
                pieces.append(self.budget.spend("\t"))
            elif tag == f"{_TEXT}line-break":
                pieces.append(self.budget.spend("\n"))
            elif tag == f"{_TEXT}note":
                pieces.append(self.note(child))
            elif not tag.startswith(_DRAW):  # shapes: see frames()
                self._inline_into(child, pieces)
            if child.tail:
                pieces.append(self.budget.spend(child.tail))

    def note(self, note: etree._Element) -> str:
        """The citation mark as the document numbers it; the note's text to the end. A note
        inside a note (no editor writes one) is not read: each level would read the next."""
        if self.in_note:
            return ""
        citation = note.find(f"{_TEXT}note-citation")
        mark = " ".join(self.inline(citation).split()) if citation is not None else ""
        mark = mark or str(len(self.notes) + 1)
        body = note.find(f"{_TEXT}note-body")
        self.in_note = True
        try:
            text = "" if body is None else self.text_of(body)
        finally:
            self.in_note = False
        self.notes.append(self.budget.spend(f"[{mark}] {text}".rstrip()))
        return self.budget.spend(f"[{mark}]")

    def text_of(self, container: etree._Element) -> str:
        """The blocks inside ``container`` (a cell, a note's body) as one line of text."""
        return " ".join(" ".join(_texts(self.blocks(container, depth=0))).split())

    def frames(self, anchor: etree._Element) -> list[Block]:
        """The shapes anchored in a paragraph (in its spans too, not inside another shape,
        whose own paragraphs read theirs): frames' text boxes, drawn shapes' text, read after
        it."""
        blocks: list[Block] = []
        for child in _elements(anchor):
            if child.tag.startswith(_DRAW):
                blocks += _shape(child, self)
            elif child.tag not in _SKIPPED and child.tag != f"{_TEXT}note":
                blocks += self.frames(child)
        return blocks

    def table(self, table: etree._Element) -> list[Block]:
        """Rows of cells. A repeated cell or row is written once per repetition, charged
        first; empty cells after a row's last value (LibreOffice writes 1,024 of them) and
        empty rows cost nothing. A covered cell (under a merge) is empty, so columns stay
        aligned. The header rows, when the table marks some, are its first."""
        rows: list[list[str]] = []
        header = False
        for row, in_header in _rows(table):
            cells = self.cells(row)
            if not cells:
                continue
            header = header or (in_header and not rows)
            repeat = _count(row, f"{_TABLE}number-rows-repeated")
            self.budget.charge((sum(map(len, cells)) + len(cells)) * (repeat - 1))
            rows += [cells] * repeat
        return [Table(rows, header)] if rows else []

    def cells(self, row: etree._Element) -> list[str]:
        """A row's cells up to its last value; none for a row without one."""
        cells: list[str] = []
        empty = 0  # empty cells seen since the last value, written out only if one follows
        for cell in _elements(row):
            if cell.tag not in (f"{_TABLE}table-cell", f"{_TABLE}covered-table-cell"):
                continue
            repeat = _count(cell, f"{_TABLE}number-columns-repeated")
            text = ""
            if cell.tag == f"{_TABLE}table-cell":
                text = self.text_of(cell)
            if not text:
                empty += repeat
                continue
            if len(cells) + empty + repeat > MAX_COLUMNS:
                raise Refusal(codes.CEILING, f"a table row spans more than {MAX_COLUMNS} columns")
            cells += [""] * self.budget.charge(empty) + [text] * repeat
            self.budget.charge((len(text) + 1) * (repeat - 1))  # the first copy is spent
            empty = 0
        return cells


def _rows(table: etree._Element) -> Iterator[tuple[etree._Element, bool]]:
    """The table's rows in order, through header-rows, rows and row-groups; each with whether
    it is a header row."""
    for child in _elements(table):
        if child.tag == f"{_TABLE}table-row":
            yield child, False
        elif child.tag == f"{_TABLE}table-header-rows":
            for row in child.iter(f"{_TABLE}table-row"):
                yield row, True
        elif child.tag in (f"{_TABLE}table-rows", f"{_TABLE}table-row-group"):
            for row in child.iter(f"{_TABLE}table-row"):
                yield row, False


def _slide(slide: etree._Element, walker: _Walker) -> list[Block]:
    """A slide's title, then its shapes top to bottom and left to right, then its notes."""
    blocks: list[Block] = []
    body: list[tuple[tuple[float, float], int, list[Block]]] = []
    for index, shape in enumerate(_elements(slide)):
        if shape.tag in _SKIPPED or shape.tag == f"{_PRESENTATION}notes":
            continue
        read = _shape(shape, walker)
        if shape.get(f"{_PRESENTATION}class") == "title":
            title = " ".join(" ".join(_texts(read)).split())
            if title:
                blocks.append(Heading(1, title))
        else:
            body.append((_place(shape), index, read))
    for _, _, read in sorted(body, key=lambda placed: (placed[0], placed[1])):
        blocks += read
    notes = slide.find(f"{_PRESENTATION}notes")
    if notes is not None:
        read = [block for shape in _elements(notes) for block in _shape(shape, walker)]
        text = "\n".join(_texts(read)).strip()
        if text:
            blocks.append(Furniture("speaker notes", text))
    return blocks


def _shape(shape: etree._Element, walker: _Walker) -> list[Block]:
    """What a shape holds: a frame its text boxes and tables, a group its shapes, any other
    shape (a rectangle, a custom shape) the paragraphs it holds itself."""
    if shape.tag in _SKIPPED:
        return []
    if shape.tag == f"{_DRAW}g":
        return [block for inner in _elements(shape) for block in _shape(inner, walker)]
    if shape.tag != f"{_DRAW}frame":
        return walker.blocks(shape, depth=0)
    blocks: list[Block] = []
    for child in _elements(shape):
        if child.tag == f"{_DRAW}text-box":
            blocks += walker.blocks(child, depth=0)
        elif child.tag == f"{_TABLE}table":
            blocks += walker.table(child)
    return blocks


def _texts(blocks: list[Block]) -> list[str]:
    texts = []
    for block in blocks:
        if isinstance(block, Table):
            texts += [" ".join(row) for row in block.rows]
        elif isinstance(block, Heading | Paragraph | ListItem):
            texts.append(block.text)
    return texts


def _place(shape: etree._Element) -> tuple[float, float]:
    """Where a shape sits: its own position, or a group's first placed shape's."""
    placed = next((el for el in shape.iter() if el.get(f"{_SVG}y") is not None), shape)
    return (_millimetres(placed.get(f"{_SVG}y")) // _ROW_MM, _millimetres(placed.get(f"{_SVG}x")))


def _millimetres(length: str | None) -> float:
    found = _LENGTH.fullmatch(length or "")
    return float(found.group(1)) * _UNITS[found.group(2)] if found else 0.0


def _hidden_page_styles(content: etree._Element) -> frozenset[str]:
    """The drawing-page styles that hide a slide from the show."""
    return frozenset(
        name
        for style in content.iter(f"{_STYLE}style")
        if (name := style.get(f"{_STYLE}name"))
        and any(
            properties.get(f"{_PRESENTATION}visibility") == "hidden"
            for properties in style.iter(f"{_STYLE}drawing-page-properties")
        )
    )


def _elements(parent: etree._Element) -> Iterator[etree._Element]:
    """Child elements only: entity references and other nodes carry no text here."""
    return (child for child in parent if isinstance(child.tag, str))


def _level(heading: etree._Element) -> int:
    return min(max(_count(heading, f"{_TEXT}outline-level"), 1), 9)


def _count(element: etree._Element, attribute: str) -> int:
    """A count attribute (a repetition, a number of spaces, a level): 1 when absent or not a
    small positive number, which is what a reader shows for a broken one."""
    value = element.get(attribute, "1")
    return int(value) if value.isdigit() and 0 < len(value) <= 7 and int(value) > 0 else 1


@extractor("odt")
def extract_odt(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    found = sniff.zip_kind(payload) if payload.startswith(sniff.ZIP) else None
    if found is None or found.kind != sniff.ODT:
        named = "not a ZIP package" if found is None else found.name
        raise Refusal(
            codes.UNREADABLE,
            f"the payload is {named}, not an OpenDocument text; airlock reads {sniff.SUPPORTED}",
        )
    return read_odt(payload, limits)
