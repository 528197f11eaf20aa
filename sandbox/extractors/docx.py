"""DOCX: headers, body text in document order, footnotes and endnotes, then footers.

Read from the WordprocessingML elements, text boxes and tracked insertions included; list
numbers from :mod:`sandbox.extractors.docx_numbering`; no XML entity is fetched or expanded.
See docs/sandbox.md, "Parsers" and "Notes by module".
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from docx.exceptions import InvalidXmlError
from docx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE
from docx.opc.part import Part, XmlPart
from docx.oxml.parser import parse_xml
from docx.package import Package
from lxml import etree

from sandbox import codes, sniff
from sandbox.document import (
    MAX_COLUMNS,
    MAX_MARKER_CHARS,
    Block,
    Document,
    Furniture,
    FurnitureRole,
    Heading,
    ListItem,
    Notice,
    Paragraph,
    Table,
    words,
)
from sandbox.extractors.docx_numbering import Numbering
from sandbox.extractors.registry import Refusal, extractor
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_MATH = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"

# Elements that hold paragraphs and tables and only wrap them (content controls, custom XML).
_BLOCK_WRAPPERS = frozenset({_W + "sdt", _W + "sdtContent", _W + "customXml"})
# Subtrees whose text must not be read inside a paragraph: mc:Fallback repeats mc:Choice (a
# text box would appear twice), w:moveFrom is text tracked as moved away (it appears again at
# its w:moveTo), and w:txbxContent is read separately, as paragraphs of its own.
# w:pPr and w:rPr are properties: a w:tab inside them is a tab stop, not a tab character.
_SKIPPED_INLINE = frozenset({_MC + "Fallback", _W + "moveFrom", _W + "pPr", _W + "rPr"})
_TEXT_BOX = _W + "txbxContent"
_ALTERNATE = _MC + "AlternateContent"
#: The extension namespaces Word reads, which an ``mc:Choice`` may require: Word shows a
#: Choice only when it knows every namespace the Choice names, else its Fallback.
_KNOWN = frozenset(
    {
        "http://schemas.microsoft.com/office/word/2010/wordprocessingShape",
        "http://schemas.microsoft.com/office/word/2010/wordprocessingGroup",
        "http://schemas.microsoft.com/office/word/2010/wordprocessingCanvas",
        "http://schemas.microsoft.com/office/word/2010/wordprocessingInk",
        "http://schemas.microsoft.com/office/word/2010/wordprocessingDrawing",
        "http://schemas.microsoft.com/office/word/2010/wordml",
        "http://schemas.microsoft.com/office/word/2012/wordml",
        "http://schemas.microsoft.com/office/word/2015/wordml/symex",
        "http://schemas.microsoft.com/office/word/2016/wordml/cid",
        "http://schemas.microsoft.com/office/word/2018/wordml",
        "http://schemas.microsoft.com/office/word/2018/wordml/cex",
        "http://schemas.microsoft.com/office/drawing/2010/main",
        "http://schemas.microsoft.com/office/drawing/2014/chartex",
        "http://schemas.microsoft.com/office/drawing/2016/ink",
        "http://schemas.microsoft.com/office/drawing/2017/model3d",
        "http://schemas.openxmlformats.org/officeDocument/2006/math",
        "urn:schemas-microsoft-com:vml",
        "urn:schemas-microsoft-com:office:office",
        "urn:schemas-microsoft-com:office:word",
    }
)
#: The namespaces Word reads besides its extensions, which no ``mc:Ignorable`` makes it ignore.
_UNDERSTOOD = _KNOWN | {
    _W[1:-1],
    _R[1:-1],
    _MC[1:-1],
    "http://schemas.openxmlformats.org/drawingml/2006/main",
    "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "http://schemas.openxmlformats.org/drawingml/2006/picture",
}
#: The namespaces ``mc:Ignorable`` makes ignorable where an element stands, and the
#: (namespace, local name or ``*``) pairs ``mc:ProcessContent`` says to read the content of.
_Scope = tuple[frozenset[str], frozenset[tuple[str, str]]]
_REMEMBERED_SCOPES = 4096
#: How far a style's ``w:basedOn`` chain is followed (a cycle must not loop).
_MAX_BASED_ON = 64
_UNSHOWN_FURNITURE = (
    "[airlock: a header or footer Word does not show (a first-page or even-page one the "
    "document does not use) left out]"
)
_NOTE_REFERENCES = {_W + "footnoteReference": "footnote", _W + "endnoteReference": "endnote"}
#: What a run draws besides its text, which a hidden run draws none of.
_SHOWN_BY_A_RUN = frozenset(
    {
        _W + "tab", _W + "ptab", _W + "br", _W + "cr", _W + "noBreakHyphen", _TEXT_BOX,
        *_NOTE_REFERENCES,
    }
)  # fmt: skip
_NOTE_PARTS = {RELATIONSHIP_TYPE.FOOTNOTES: "footnote", RELATIONSHIP_TYPE.ENDNOTES: "endnote"}
# Separator "notes" hold the line drawn above the notes, not text.
_SEPARATOR_NOTE_TYPES = frozenset({"separator", "continuationSeparator", "continuationNotice"})
# In the order a reader meets them: the first page's, then every page's, then even pages'.
_FURNITURE: dict[str, dict[str, FurnitureRole]] = {
    "header": {"first": "first-page header", "default": "header", "even": "even-page header"},
    "footer": {"first": "first-page footer", "default": "footer", "even": "even-page footer"},
}
_HEADING_NAME = re.compile(r"heading ([1-9])")
_HEX = re.compile(r"[0-9A-Fa-f]{1,4}")
_LOOK_FIRST_ROW = 0x20
_COUNT_DIGITS = len(str(MAX_COLUMNS + 1))
_OUTLINE_LEVELS = frozenset("012345678")
# Every OOXML package has this member; an archive without it is some other kind of ZIP.
_CONTENT_TYPES = "[Content_Types].xml"


@extractor("docx")
def extract_docx(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    with _well_formed():
        document_part = _main_part(payload)
        numbering, styles = _definitions(document_part)
        walker = _Walker(
            TextBudget(limits),
            Numbering(numbering, styles),
            _heading_levels(styles),
            _vanish(styles),
        )
        # Walked in reading order, so list counters and note numbers advance as a reader's would.
        body = walker.blocks(document_part.element.body)
        shown = _shown_furniture(document_part)
        headers = _furniture(document_part, walker, "header", shown)
        footers = _furniture(document_part, walker, "footer", shown)
        notes = _notes(document_part, walker)
    hidden: list[Block] = []
    if walker.hidden_characters:
        # As the RTF reader says it: hidden text is where a planted instruction sits.
        hidden.append(
            Notice(f"[airlock: {walker.hidden_characters} characters of hidden text left out]")
        )
    if walker.unshown_furniture:
        hidden.append(Notice(_UNSHOWN_FURNITURE))
    if walker.embedded_documents:
        hidden.append(
            Notice(
                f"[airlock: {walker.embedded_documents} embedded documents (altChunk: HTML, RTF "
                "or another DOCX Word imports where it stands) not read]"
            )
        )
    return Document(headers + body + notes + footers + hidden)


@contextmanager
def _well_formed() -> Iterator[None]:
    """A part that is not well-formed XML (cut short, nested past lxml's 256 levels, a DTD's
    entities) makes the document unreadable by name: python-docx parses parts as it meets
    them, and its errors were reported as a parser's bug."""
    try:
        yield
    except (etree.XMLSyntaxError, InvalidXmlError) as exc:
        raise Refusal(
            codes.UNREADABLE, f"a part of the DOCX is not well-formed XML: {exc}"
        ) from exc


def _main_part(payload: bytes) -> XmlPart:
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
    except zipfile.BadZipFile as exc:
        raise Refusal(
            codes.UNREADABLE, "the payload is not a DOCX package (not a ZIP archive)"
        ) from exc
    if _CONTENT_TYPES not in archive.namelist():
        raise Refusal(
            codes.UNREADABLE,
            f"the payload is {sniff.package_name(archive)}, not a DOCX package "
            f"(it has no {_CONTENT_TYPES})",
        )
    try:
        part = Package.open(io.BytesIO(payload)).main_document_part
    except KeyError as exc:
        # python-docx reports a piece missing from the package as KeyError: no main document,
        # a relationship to a member the archive lacks, a part without a content type.
        missing = exc.args[0] if exc.args else ""
        raise Refusal(codes.UNREADABLE, f"the DOCX package is incomplete: {missing}") from exc
    if part.content_type != CONTENT_TYPE.WML_DOCUMENT_MAIN or not isinstance(part, XmlPart):
        # Macro-enabled documents, templates and other Office packages are not what the kind
        # promises; python-docx refuses them too.
        raise Refusal(
            codes.UNREADABLE,
            f"the package is not a Word document (main part is {part.content_type})",
        )
    return part


class _Walker:
    """Reads paragraphs and tables into blocks: headings, list items, paragraphs, tables.

    Every character is counted against the text budget where it enters the output: once where
    the XML holds it, and once more for each copy a vertically merged cell makes, which is the
    one way a DOCX can produce more text than its XML contains.
    """

    def __init__(
        self,
        budget: TextBudget,
        numbering: Numbering,
        heading_levels: dict[str, int],
        vanish: _Vanish,
    ) -> None:
        self._budget = budget
        self._numbering = numbering
        self._heading_levels = heading_levels
        self._vanish = vanish
        #: Whether the style of the table whose cell is being read turns hidden text around,
        #: and whether its conditional formatting hides it all (:func:`_conditionally_hidden`).
        self._table_hides = False
        self._table_forced = False
        self.note_numbers: dict[tuple[str, str], int] = {}
        #: Characters Word does not show (hidden text), left out; and whether a header or
        #: footer part Word does not show was.
        self.hidden_characters = 0
        self.unshown_furniture = False
        #: Documents Word imports where they stand (``w:altChunk``: HTML, RTF, another DOCX),
        #: which are not read: named, so their text is not lost without a word.
        self.embedded_documents = 0
        self._compatibility = _Compatibility()

    def blocks(self, container: etree._Element) -> list[Block]:
        """The paragraphs and tables directly inside ``container``, in order."""
        blocks: list[Block] = []
        for child in container:
            if child.tag == _W + "p":
                blocks += self._paragraph(child)
            elif child.tag == _W + "tbl":
                blocks += self._table(child)
            elif child.tag in _BLOCK_WRAPPERS:
                blocks += self.blocks(child)
            elif child.tag == _ALTERNATE and (branch := _chosen_branch(child)) is not None:
                blocks += self.blocks(branch)
            elif child.tag == _W + "altChunk":
                self.embedded_documents += 1
            elif self._compatibility.reading(child) == "content":
                blocks += self.blocks(child)
        return blocks

    def _paragraph(self, paragraph: etree._Element) -> list[Block]:
        """The paragraph (a heading at its level, a list item after its number), then the
        paragraphs of any text boxes anchored in it."""
        number, depth = self._numbering.prefix(paragraph)
        pieces: list[str] = []
        boxes: list[etree._Element] = []
        style = paragraph.find(f"{_W}pPr/{_W}pStyle")
        hidden = self._vanish.paragraph_hidden(
            None if style is None else style.get(_W + "val"), self._table_hides
        )
        self._inline(paragraph, pieces, boxes, hidden)
        text = "\n".join(line for line in "".join(pieces).split("\n") if line.strip())
        blocks: list[Block] = []
        level = self._heading_level(paragraph) if text else None
        if level is not None:
            # A numbered heading ("2.1 Scope") is a heading that shows its number.
            title = self._budget.spend(number) + text.lstrip() if number else text
            blocks.append(Heading(level, title))
        elif text and number:
            # A number drawn longer than a marker may be ("Article 12 of the Agreement on …")
            # is the start of the item's text.
            drawn = self._budget.spend(number)
            marker = drawn if len(drawn) <= MAX_MARKER_CHARS else ""
            blocks.append(ListItem(marker, depth, drawn[len(marker) :] + text.lstrip()))
        elif text:
            blocks.append(Paragraph(text))
        for box in boxes:
            # A text box is a story of its own: the style of a table it is anchored in does
            # not reach its text.
            with self._in_table(hides=False, forced=False):
                blocks += self.blocks(box)
        return blocks

    @contextmanager
    def _in_table(self, *, hides: bool, forced: bool) -> Iterator[None]:
        """Reads in a table whose style ``hides`` text (a toggle) or is ``forced`` to hide it
        all, or neither, and then as before: a nested table's cells have their own table's
        style, not the outer one's."""
        outer = self._table_hides, self._table_forced
        self._table_hides, self._table_forced = hides, forced
        try:
            yield
        finally:
            self._table_hides, self._table_forced = outer

    def _heading_level(self, paragraph: etree._Element) -> int | None:
        """The paragraph's heading level by its own outline level, else by its style's."""
        properties = paragraph.find(_W + "pPr")
        if properties is None:
            return None
        level = _outline_level(properties)
        style = properties.find(_W + "pStyle")
        if level is None and style is not None:
            level = self._heading_levels.get(style.get(_W + "val", ""))
        return level

    def _inline(
        self,
        element: etree._Element,
        pieces: list[str],
        boxes: list[etree._Element],
        hidden: bool,
    ) -> None:
        """The text of ``element``'s runs into ``pieces``, its text boxes into ``boxes``;
        ``hidden``: whether its runs are hidden text unless their own properties say not.
        Hiddenness decides what a run shows, not what is walked: a hyperlink or an insertion
        inside a hidden paragraph may hold a run that shows itself again."""
        for child in element:
            tag = child.tag
            if tag == _W + "r":
                self._inline(child, pieces, boxes, self._run_hidden(child, hidden))
            elif tag in (_W + "t", _MATH + "t") and hidden:
                self.hidden_characters += len(child.text or "")
            elif tag in (_W + "t", _MATH + "t"):
                pieces.append(self._budget.spend(child.text or ""))
            elif hidden and tag in _SHOWN_BY_A_RUN:
                continue  # a hidden run draws no tab, break, note mark or text box either
            elif tag in (_W + "tab", _W + "ptab"):
                pieces.append("\t")
            elif tag in (_W + "br", _W + "cr"):
                pieces.append("\n")
            elif tag == _W + "noBreakHyphen":
                pieces.append("-")
            elif tag in _NOTE_REFERENCES:
                pieces.append(self._note_mark(_NOTE_REFERENCES[tag], child.get(_W + "id", "")))
            elif tag == _TEXT_BOX:
                boxes.append(child)
            elif tag == _ALTERNATE:
                branch = _chosen_branch(child)
                if branch is not None:
                    self._inline(branch, pieces, boxes, hidden)
            elif tag not in _SKIPPED_INLINE and self._compatibility.reading(child) != "nothing":
                self._inline(child, pieces, boxes, hidden)

    def _run_hidden(self, run: etree._Element, inherited: bool) -> bool:
        """Whether Word hides the run: its own ``w:vanish`` (or ``w:specVanish``) decides, as
        direct formatting sets the toggle absolutely; else a character style that sets vanish
        turns what it inherits from its paragraph around (a toggle property: ECMA-376 Part 1,
        17.7.3), so a hidden character style in a hidden paragraph shows its text."""
        if self._table_forced:
            return True
        properties = run.find(_W + "rPr")
        if properties is not None:
            for tag in (_W + "vanish", _W + "specVanish"):
                toggle = properties.find(tag)
                if toggle is not None:
                    return _on(toggle)
        style = None if properties is None else properties.find(_W + "rStyle")
        style_id = self._vanish.style_of("character", style)
        if not self._vanish.toggles(style_id):
            return inherited
        # A hidden default character style hides its runs outright: whether Word applies the
        # default's properties to a run naming none (ECMA-376 17.3.2.29 calls an omitted
        # rStyle "no character style") is not known, and as a toggle it showed a hidden
        # paragraph's text.
        return True if style_id == self._vanish.default_styles.get("character") else not inherited

    def _note_mark(self, kind: str, note_id: str) -> str:
        """Number notes in order of first reference, footnotes and endnotes together."""
        number = self.note_numbers.setdefault((kind, note_id), len(self.note_numbers) + 1)
        return f"[{number}]"

    def _table(self, table: etree._Element) -> list[Block]:
        """The table's rows of cells, rows without text left out; its first row is its header
        when the document says so (see :func:`_first_row_is_header`).

        A horizontally merged cell is one w:tc: its text appears once, followed by an empty
        cell for each further column it spans, so the cells after it stay under their
        columns. A vertically merged cell repeats its text on every row it spans, as Word shows
        it; it is resolved by grid column in one pass, where python-docx walks up the rows for
        every continued cell.
        """
        style = table.find(f"{_W}tblPr/{_W}tblStyle")
        style_id = self._vanish.style_of("table", style)
        with self._in_table(
            hides=self._vanish.toggles(style_id), forced=style_id in self._vanish.forced
        ):
            return self._rows(table)

    def _rows(self, table: etree._Element) -> list[Block]:
        """The table's rows, read as :meth:`_table` says."""
        rows: list[list[str]] = []
        merged_above: dict[int, str] = {}
        header = False
        for index, row in enumerate(_wrapped_children(table, _W + "tr")):
            # A row that starts late keeps its cells under their columns.
            column = _columns(row.find(f"{_W}trPr/{_W}gridBefore"), 0)
            cells = [""] * self._budget.charge(column)
            for cell in _wrapped_children(row, _W + "tc"):
                merge = cell.find(f"{_W}tcPr/{_W}vMerge")
                if merge is not None and merge.get(_W + "val") != "restart":
                    text = self._budget.spend(merged_above.get(column, ""))
                else:
                    text = " ".join(words(Document(self.blocks(cell))).split())
                    merged_above[column] = text
                span = _columns(cell.find(f"{_W}tcPr/{_W}gridSpan"), 1)
                column += span
                if column > MAX_COLUMNS:
                    raise Refusal(
                        codes.CEILING, f"a table row spans more than {MAX_COLUMNS} columns"
                    )
                # An empty cell padding a span costs like a character: a row that starts late
                # or spans 1,023 columns cannot fill 20,000 rows with 20 million cells.
                cells += [text] + [""] * self._budget.charge(span - 1)
            if any(cells):
                header = header or (index == 0 and _first_row_is_header(table, row))
                rows.append(cells)
        return [Table(rows, header)] if rows else []


class _Compatibility:
    """What Word reads of an element by markup compatibility (ECMA-376 Part 3): one in a
    namespace that ``mc:Ignorable`` names and Word does not know is ignored with all it holds,
    unless ``mc:ProcessContent`` names it, when only the element itself is. Its text was read,
    text no reader of the document sees, and a processed element's paragraphs were dropped.

    Both attributes reach the element they stand on and everything inside it. What reaches
    each element is remembered, so a deep nest of unknown elements costs a step each, not its
    depth each; and all forgotten past :data:`_REMEMBERED_SCOPES` elements, so a million of
    them cost no memory (the walk meets them in document order: what is forgotten is found
    again once).
    """

    def __init__(self) -> None:
        #: The scope reaching each element looked at, or above one.
        self._scopes: dict[etree._Element, _Scope] = {}

    def reading(self, element: etree._Element) -> Literal["nothing", "content", "all"]:
        """``"nothing"`` (ignored, with its content), ``"content"`` (the element ignored, its
        content read) or ``"all"``."""
        tag = element.tag
        # Most elements are WordprocessingML's: answered before any string is split.
        if not isinstance(tag, str) or tag.startswith(_W) or not tag.startswith("{"):
            return "all"
        namespace, _, name = tag[1:].partition("}")
        if namespace in _UNDERSTOOD:
            return "all"
        ignorable, processed = self._scope(element)
        if namespace not in ignorable:
            return "all"
        return "content" if {(namespace, name), (namespace, "*")} & processed else "nothing"

    def _scope(self, element: etree._Element) -> _Scope:
        if len(self._scopes) > _REMEMBERED_SCOPES:
            self._scopes.clear()
        unknown: list[etree._Element] = []
        node: etree._Element | None = element
        while node is not None and node not in self._scopes:
            unknown.append(node)
            node = node.getparent()
        scope = self._scopes[node] if node is not None else (frozenset(), frozenset())
        for node in reversed(unknown):
            scope = _widened(scope, node)
            self._scopes[node] = scope
        return scope


def _widened(scope: _Scope, element: etree._Element) -> _Scope:
    """``scope`` with what ``element``'s own ``mc:Ignorable`` and ``mc:ProcessContent`` add,
    their prefixes read by the namespaces declared where they stand."""
    prefixes = (element.get(_MC + "Ignorable") or "").split()
    names = (element.get(_MC + "ProcessContent") or "").split()
    if not prefixes and not names:
        return scope  # lxml gathers an element's nsmap from all above it: not for nothing
    namespaces = element.nsmap
    ignorable = scope[0] | {namespaces[prefix] for prefix in prefixes if prefix in namespaces}
    processed = scope[1] | {
        (namespaces[prefix], local)
        for prefix, _, local in (name.rpartition(":") for name in names)
        if prefix in namespaces
    }
    return ignorable, processed


def _first_row_is_header(table: etree._Element, row: etree._Element) -> bool:
    """Whether Word shows the first row as the table's header: repeated on every page
    (``w:tblHeader``), or formatted as the header by the table's style (``w:tblLook``, its
    ``firstRow`` attribute or, in the 2007 form, bit 0x20 of its hexadecimal ``val``). Word sets
    the latter on every table it inserts, and readers take such a first row for the header."""
    if row.find(f"{_W}trPr/{_W}tblHeader") is not None:
        return True
    look = table.find(f"{_W}tblPr/{_W}tblLook")
    if look is None:
        return False
    first_row = look.get(_W + "firstRow")
    if first_row is not None:
        return first_row in ("1", "true", "on")
    value = look.get(_W + "val") or ""
    return _HEX.fullmatch(value) is not None and bool(int(value, 16) & _LOOK_FIRST_ROW)


def _wrapped_children(parent: etree._Element, tag: str) -> Iterator[etree._Element]:
    """Children of ``parent`` with ``tag``, also inside content controls wrapping them (a form's
    repeating section wraps whole rows in a w:sdt)."""
    for child in parent:
        if child.tag == tag:
            yield child
        elif child.tag in _BLOCK_WRAPPERS:
            yield from _wrapped_children(child, tag)


def _columns(element: etree._Element | None, default: int) -> int:
    """A grid count from w:gridBefore or w:gridSpan, ``default`` if absent or not a count; a
    count above the column ceiling reads as just above it (a 5,000-digit count is never
    converted, and one of a billion never pads a row)."""
    value = element.get(_W + "val") if element is not None else None
    if value is None or not value.isascii() or not value.isdigit():
        return default
    if len(value) > _COUNT_DIGITS:
        return MAX_COLUMNS + 1
    return min(int(value), MAX_COLUMNS + 1)


def _furniture(
    document_part: XmlPart, walker: _Walker, role: str, shown: frozenset[str]
) -> list[Block]:
    """Each section's headers (or footers), first-page, then default, then even-page, each
    part once and named by which it is (``first-page header``).

    A section without a reference of a kind has the previous section's of that kind (ECMA-376
    Part 1, 17.10.5): a later section with ``w:titlePg`` shows a first-page header the first
    section names but does not show. Sections that show the same part, or parts with identical
    text, contribute it once. A first-page part counts only in a section that gives its first
    page a different header (``w:titlePg``), an even-page one only when the document gives even
    pages their own (``w:evenAndOddHeaders``), in ``shown``: Word never draws one otherwise,
    and a planted instruction in one reached the model.
    """
    blocks: list[Block] = []
    seen_parts: set[int] = set()
    seen_texts: set[str] = set()
    unshown: list[XmlPart] = []
    references: dict[str | None, str | None] = {}
    for section in _sections(document_part.element.body):
        references = references | {
            reference.get(_W + "type"): reference.get(_R + "id")
            for reference in section.iterchildren(f"{_W}{role}Reference")
        }
        title_page = section.find(_W + "titlePg")
        for kind, name in _FURNITURE[role].items():
            part = document_part.related_parts.get(references.get(kind))
            if not isinstance(part, XmlPart) or id(part) in seen_parts:
                continue
            if (kind == "first" and (title_page is None or not _on(title_page))) or (
                kind == "even" and "even" not in shown
            ):
                unshown.append(part)
                continue
            seen_parts.add(id(part))
            text = words(Document(walker.blocks(part.element)))
            if text and text not in seen_texts:
                seen_texts.add(text)
                blocks.append(Furniture(name, text))
    # Word writes empty first-page and even-page parts into ordinary documents: only one with
    # text that no section shows is worth a notice.
    walker.unshown_furniture |= any(
        id(part) not in seen_parts and "".join(part.element.itertext()).strip() for part in unshown
    )
    return blocks


def _sections(body: etree._Element) -> Iterator[etree._Element]:
    """The body's section properties in order, not those a tracked change replaced
    (``w:sectPrChange``), which Word no longer applies."""
    for section in body.iter(_W + "sectPr"):
        parent = section.getparent()
        if parent is None or parent.tag != _W + "sectPrChange":
            yield section


def _chosen_branch(alternate: etree._Element) -> etree._Element | None:
    """The branch of ``mc:AlternateContent`` Word shows: the first ``mc:Choice`` whose
    ``Requires`` names only namespaces Word knows, else ``mc:Fallback``. Reading every
    Choice read text Word never shows, a Choice requiring a namespace it does not know."""
    for branch in alternate:
        if branch.tag == _MC + "Choice":
            required = (branch.get("Requires") or "").split()
            if required and all(branch.nsmap.get(prefix) in _KNOWN for prefix in required):
                return branch
        elif branch.tag == _MC + "Fallback":
            return branch
    return None


def _shown_furniture(document_part: XmlPart) -> frozenset[str]:
    """``{"even"}`` when the document's settings give even pages their own headers."""
    try:
        settings = _part_root(document_part.part_related_by(RELATIONSHIP_TYPE.SETTINGS))
    except KeyError:
        return frozenset()
    toggle = settings.find(_W + "evenAndOddHeaders")
    return frozenset({"even"}) if toggle is not None and _on(toggle) else frozenset()


def _on(toggle: etree._Element) -> bool:
    """A WordprocessingML on/off property: on unless its value says off."""
    return toggle.get(_W + "val", "true").lower() not in ("0", "false", "off")


@dataclass(frozen=True)
class _Vanish:
    """Where the document's styles set hidden text (``w:vanish``), a toggle property (ECMA-376
    Part 1, 17.7.3): the document defaults start it, a table style or a character style that
    sets it turns it around, a paragraph style sets it outright (as Word does, [MS-OI29500]
    2.1.258), and a run's own formatting decides over all of them. Reading a style as simply
    hidden hid the text of a hidden character style in a hidden paragraph, which Word shows.
    """

    #: The first value each style's ``w:basedOn`` chain sets, for the styles whose chain does.
    by_style: dict[str, bool]
    by_default: bool
    #: The default style of each type (``paragraph``, ``table``, ``character``): what an
    #: element naming none has.
    default_styles: dict[str, str]
    #: The ids of the styles of each type.
    styles_by_kind: dict[str, frozenset[str]] = field(default_factory=dict)
    #: The table styles whose conditional formatting hides text (:func:`_conditionally_hidden`),
    #: and the styles based on them: their tables are hidden whatever the toggles say, since a
    #: part that reaches some rows only, read as a toggle, turned hidden text in the others on.
    forced: frozenset[str] = frozenset()

    def paragraph_hidden(self, style_id: str | None, table_hides: bool) -> bool:
        """Whether a paragraph's runs are hidden before their own properties: its style's
        value (the default paragraph style's if it names none), else the defaults turned
        around by its table's style."""
        if style_id is None:
            style_id = self.default_styles.get("paragraph", "")
        own = self.by_style.get(style_id)
        return own if own is not None else self.by_default != table_hides

    def style_of(self, kind: str, style: etree._Element | None) -> str:
        """A table's or a run's style id: its ``w:tblStyle`` or ``w:rStyle`` when that names a
        style of its ``kind`` (``table``, ``character``), else the default one, which Word
        applies to one naming none: a hidden default character style hid runs whose text was
        read, and a run naming a style that does not exist names none (ECMA-376 17.3.2.29)."""
        named = None if style is None else style.get(_W + "val")
        if named is None or named not in self.styles_by_kind.get(kind, ()):
            named = self.default_styles.get(kind)
        return named or ""

    def toggles(self, style_id: str | None) -> bool:
        """Whether the style turns hidden text around; one setting it off leaves it as is."""
        return self.by_style.get(style_id or "", False)


def _vanish(styles: etree._Element | None) -> _Vanish:
    """The document's :class:`_Vanish`: each style's own ``w:vanish``, or the first one a style
    it is based on sets (followed at most :data:`_MAX_BASED_ON` deep, so a cycle ends)."""
    if styles is None:
        return _Vanish({}, by_default=False, default_styles={})
    defaults = styles.find(f"{_W}docDefaults/{_W}rPrDefault/{_W}rPr/{_W}vanish")
    own: dict[str, bool | None] = {}
    parent: dict[str, str] = {}
    default_styles: dict[str, str] = {}
    styles_by_kind: dict[str, set[str]] = {}
    conditional: set[str] = set()
    for style in styles.iterchildren(_W + "style"):
        style_id = style.get(_W + "styleId")
        if style_id is None:
            continue
        toggle = style.find(f"{_W}rPr/{_W}vanish")
        own[style_id] = None if toggle is None else _on(toggle)
        if style.get(_W + "type") == "table" and _conditionally_hidden(style):
            conditional.add(style_id)
        based_on = style.find(_W + "basedOn")
        if based_on is not None:
            parent[style_id] = based_on.get(_W + "val", "")
        kind = style.get(_W + "type", "paragraph")
        styles_by_kind.setdefault(kind, set()).add(style_id)
        if _on_attribute(style.get(_W + "default")):
            default_styles[kind] = style_id
    by_style: dict[str, bool] = {}
    forced: set[str] = set()
    for style_id in own:
        chain = _based_on_chain(style_id, parent)
        decided = next((own[link] for link in chain if own.get(link) is not None), None)
        if decided is not None:
            by_style[style_id] = decided
        if conditional.intersection(chain):
            forced.add(style_id)
    hidden_by_default = defaults is not None and _on(defaults)
    return _Vanish(
        by_style,
        hidden_by_default,
        default_styles,
        {kind: frozenset(ids) for kind, ids in styles_by_kind.items()},
        frozenset(forced),
    )


def _based_on_chain(style_id: str, parent: dict[str, str]) -> list[str]:
    """A style and those it is based on, nearest first, at most :data:`_MAX_BASED_ON` (so a
    cycle ends)."""
    chain: list[str] = []
    current: str | None = style_id
    while current is not None and len(chain) < _MAX_BASED_ON:
        chain.append(current)
        current = parent.get(current)
    return chain


def _conditionally_hidden(table_style: etree._Element) -> bool:
    """Whether a part of a table style's conditional formatting (``w:tblStylePr``: the whole
    table, the first row, a band, a corner cell) hides text. Which cells each part reaches
    (``w:tblLook``, band sizes, their precedence) is not worked out: the style is taken to
    hide all its table, since text hidden that way was read and no real document hides text
    with a table's banding."""
    return any(_on(toggle) for toggle in table_style.iterfind(f"{_W}tblStylePr/{_W}rPr/{_W}vanish"))


def _on_attribute(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "on")


def _definitions(document_part: XmlPart) -> tuple[etree._Element | None, etree._Element | None]:
    """The document's numbering definitions and its styles (which point paragraphs at
    numbering and headings).

    Read through the relationships, not python-docx's ``numbering_part``, which invents an
    empty part from its template file when the package has none.
    """
    roots: dict[str, etree._Element] = {}
    for relationship in document_part.rels.values():
        kinds = (RELATIONSHIP_TYPE.NUMBERING, RELATIONSHIP_TYPE.STYLES)
        if relationship.reltype in kinds and not relationship.is_external:
            roots.setdefault(relationship.reltype, _part_root(relationship.target_part))
    return roots.get(RELATIONSHIP_TYPE.NUMBERING), roots.get(RELATIONSHIP_TYPE.STYLES)


def _heading_levels(styles: etree._Element | None) -> dict[str, int]:
    """The heading level of each paragraph style that is a heading: Word's built-in "heading
    1" to "heading 9" and "Title" by their names (which stay English in every language's
    documents, where the style ids do not), any other style by its outline level."""
    levels: dict[str, int] = {}
    if styles is None:
        return levels
    for style in styles.iterchildren(_W + "style"):
        style_id = style.get(_W + "styleId")
        if style_id is None or style.get(_W + "type") not in (None, "paragraph"):
            continue
        name_element = style.find(_W + "name")
        name = "" if name_element is None else (name_element.get(_W + "val") or "").lower()
        match = _HEADING_NAME.fullmatch(name)
        properties = style.find(_W + "pPr")
        if match is not None:
            levels[style_id] = int(match.group(1))
        elif name == "title":
            levels[style_id] = 1
        elif properties is not None and (level := _outline_level(properties)) is not None:
            levels[style_id] = level
    return levels


def _outline_level(properties: etree._Element) -> int | None:
    """A heading level (1-9) from ``w:outlineLvl`` (0-8; 9 and anything else: body text)."""
    element = properties.find(_W + "outlineLvl")
    value = None if element is None else element.get(_W + "val")
    return int(value) + 1 if value is not None and value in _OUTLINE_LEVELS else None


def _notes(document_part: XmlPart, walker: _Walker) -> list[Block]:
    """The notes the text referenced, in reference order, each marked ``[n]`` as in the text.

    Notes nobody references are never shown by Word and are left out.
    """
    notes: dict[tuple[str, str], etree._Element] = {}
    for relationship in document_part.rels.values():
        kind = _NOTE_PARTS.get(relationship.reltype)
        if kind is None or relationship.is_external:
            continue
        for note in _part_root(relationship.target_part):
            if note.get(_W + "type") not in _SEPARATOR_NOTE_TYPES:
                notes[(kind, note.get(_W + "id", ""))] = note
    blocks: list[Block] = []
    for key, number in list(walker.note_numbers.items()):
        text = words(Document(walker.blocks(notes[key]))) if key in notes else ""
        if text:
            blocks.append(Paragraph(f"[{number}] {text.lstrip()}"))
    return blocks


def _part_root(part: Part) -> etree._Element:
    """The XML of a part python-docx keeps as bytes (notes), parsed with python-docx's parser."""
    if isinstance(part, XmlPart):
        return part.element
    return parse_xml(part.blob)
