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

from docx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE
from docx.opc.part import Part, XmlPart
from docx.oxml.parser import parse_xml
from docx.package import Package
from lxml import etree

from sandbox import codes
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
_NOTE_REFERENCES = {_W + "footnoteReference": "footnote", _W + "endnoteReference": "endnote"}
_NOTE_PARTS = {RELATIONSHIP_TYPE.FOOTNOTES: "footnote", RELATIONSHIP_TYPE.ENDNOTES: "endnote"}
# Separator "notes" hold the line drawn above the notes, not text.
_SEPARATOR_NOTE_TYPES = frozenset({"separator", "continuationSeparator", "continuationNotice"})
# In the order a reader meets them: the first page's, then every page's, then even pages'.
_HEADER_FOOTER_TYPES = {"first": "first-page ", "default": "", "even": "even-page "}
# Every OOXML package has this member; an archive without it is some other kind of ZIP.
_CONTENT_TYPES = "[Content_Types].xml"
_MAX_MEDIA_TYPE = 100
_ENCRYPTED = 0x1  # general-purpose flag bit 0
_MEDIA_TYPE = re.compile(rb"[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*")


@extractor("docx")
def extract_docx(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    document_part = _main_part(payload)
    walker = _Walker(TextBudget(limits), _numbering(document_part))
    # Walked in reading order, so list counters and note numbers advance as a reader's would.
    body = walker.blocks(document_part.element.body)
    headers = _header_footer_lines(document_part, walker, "header")
    footers = _header_footer_lines(document_part, walker, "footer")
    notes = _note_lines(document_part, walker)
    return "\n".join(headers + body + notes + footers)


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
            f"the payload is {_archive_kind(archive)}, not a DOCX package "
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


def _archive_kind(archive: zipfile.ZipFile) -> str:
    """Name a ZIP that is not an Office package by the media type OpenDocument and EPUB files
    store, uncompressed, in their "mimetype" member; an upload labelled .docx is often one."""
    try:
        info = archive.getinfo("mimetype")
    except KeyError:
        return "a ZIP archive"
    if (
        info.compress_type != zipfile.ZIP_STORED
        or info.flag_bits & _ENCRYPTED
        or max(info.file_size, info.compress_size) > _MAX_MEDIA_TYPE
    ):
        return "a ZIP archive"
    try:
        declared = archive.read(info)
    except (zipfile.BadZipFile, EOFError, ValueError):  # headers that disagree or point outside
        return "a ZIP archive"
    if not _MEDIA_TYPE.fullmatch(declared):
        return "a ZIP archive"
    if declared.startswith(b"application/vnd.oasis.opendocument."):
        return f"an OpenDocument file ({declared.decode()})"
    return f"a ZIP archive of type {declared.decode()}"


class _Walker:
    """Reads paragraphs and tables into lines: one line per paragraph, one per table row.

    Every character is counted against the text budget where it enters the output: once where
    the XML holds it, and once more for each copy a vertically merged cell makes, which is the
    one way a DOCX can produce more text than its XML contains.
    """

    def __init__(self, budget: TextBudget, numbering: Numbering) -> None:
        self._budget = budget
        self._numbering = numbering
        self.note_numbers: dict[tuple[str, str], int] = {}

    def blocks(self, container: etree._Element) -> list[str]:
        """Lines of the paragraphs and tables directly inside ``container``, in order."""
        lines: list[str] = []
        for child in container:
            if child.tag == _W + "p":
                lines += self._paragraph(child)
            elif child.tag == _W + "tbl":
                lines += self._table(child)
            elif child.tag in _BLOCK_WRAPPERS:
                lines += self.blocks(child)
        return lines

    def _paragraph(self, paragraph: etree._Element) -> list[str]:
        """The paragraph's own text after its list number, then the paragraphs of any text
        boxes anchored in it. A nested list item is indented two spaces per level."""
        number, level = self._numbering.prefix(paragraph)
        pieces: list[str] = []
        boxes: list[etree._Element] = []
        self._inline(paragraph, pieces, boxes)
        text = "".join(pieces)
        if number and text.strip():
            text = self._budget.spend("  " * level + number) + text.lstrip()
        lines = text.split("\n") if text.strip() else []
        for box in boxes:
            lines += self.blocks(box)
        return [line for line in lines if line.strip()]

    def _inline(
        self, element: etree._Element, pieces: list[str], boxes: list[etree._Element]
    ) -> None:
        for child in element:
            tag = child.tag
            if tag in (_W + "t", _MATH + "t"):
                pieces.append(self._budget.spend(child.text or ""))
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
            elif tag not in _SKIPPED_INLINE:
                self._inline(child, pieces, boxes)

    def _note_mark(self, kind: str, note_id: str) -> str:
        """Number notes in order of first reference, footnotes and endnotes together."""
        number = self.note_numbers.setdefault((kind, note_id), len(self.note_numbers) + 1)
        return f"[{number}]"

    def _table(self, table: etree._Element) -> list[str]:
        """One line per row, cells separated by a tab.

        A horizontally merged cell is one w:tc, so it appears once. A vertically merged cell
        repeats its text on every row it spans, as Word shows it; it is resolved by grid
        column in one pass, where python-docx walks up the rows for every continued cell.
        """
        lines = []
        merged_above: dict[int, str] = {}
        for row in _wrapped_children(table, _W + "tr"):
            column = _grid_value(row.find(f"{_W}trPr/{_W}gridBefore"), 0)
            # A row that starts late keeps its cells under their columns.
            cells = [""] * column
            for cell in _wrapped_children(row, _W + "tc"):
                merge = cell.find(f"{_W}tcPr/{_W}vMerge")
                if merge is not None and merge.get(_W + "val") != "restart":
                    text = self._budget.spend(merged_above.get(column, ""))
                else:
                    text = " ".join(" ".join(self.blocks(cell)).split())
                    merged_above[column] = text
                cells.append(text)
                column += _grid_value(cell.find(f"{_W}tcPr/{_W}gridSpan"), 1)
            if any(cells):
                lines.append("\t".join(cells))
        return lines


def _wrapped_children(parent: etree._Element, tag: str) -> Iterator[etree._Element]:
    """Children of ``parent`` with ``tag``, also inside content controls wrapping them (a form's
    repeating section wraps whole rows in a w:sdt)."""
    for child in parent:
        if child.tag == tag:
            yield child
        elif child.tag in _BLOCK_WRAPPERS:
            yield from _wrapped_children(child, tag)


def _grid_value(element: etree._Element | None, default: int) -> int:
    """A small non-negative grid count from w:gridBefore or w:gridSpan, ``default`` if absent."""
    value = element.get(_W + "val") if element is not None else None
    return int(value) if value is not None and value.isdigit() else default


def _header_footer_lines(document_part: XmlPart, walker: _Walker, role: str) -> list[str]:
    """Each section's headers (or footers), first-page, then default, then even-page, each
    part once and under a marker line naming which it is, e.g. ``[first-page header]``.

    A section that links to the previous one's header has no reference of its own; sections
    that reference the same part, or parts with identical text, contribute it once.
    """
    lines: list[str] = []
    seen_parts: set[int] = set()
    seen_texts: set[str] = set()
    for section in document_part.element.body.iter(_W + "sectPr"):
        references = {
            reference.get(_W + "type"): reference.get(_R + "id")
            for reference in section.iterchildren(f"{_W}{role}Reference")
        }
        for kind, name in _HEADER_FOOTER_TYPES.items():
            part = document_part.related_parts.get(references.get(kind))
            if not isinstance(part, XmlPart) or id(part) in seen_parts:
                continue
            seen_parts.add(id(part))
            block = walker.blocks(part.element)
            if block and "\n".join(block) not in seen_texts:
                seen_texts.add("\n".join(block))
                lines += [f"[{name}{role}]", *block]
    return lines


def _numbering(document_part: XmlPart) -> Numbering:
    """The document's numbering definitions and the styles that point paragraphs at them.

    Read through the relationships, not python-docx's ``numbering_part``, which invents an
    empty part from its template file when the package has none.
    """
    roots: dict[str, etree._Element] = {}
    for relationship in document_part.rels.values():
        kinds = (RELATIONSHIP_TYPE.NUMBERING, RELATIONSHIP_TYPE.STYLES)
        if relationship.reltype in kinds and not relationship.is_external:
            roots.setdefault(relationship.reltype, _part_root(relationship.target_part))
    return Numbering(roots.get(RELATIONSHIP_TYPE.NUMBERING), roots.get(RELATIONSHIP_TYPE.STYLES))


def _note_lines(document_part: XmlPart, walker: _Walker) -> list[str]:
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
    lines: list[str] = []
    for key, number in list(walker.note_numbers.items()):
        note_lines = walker.blocks(notes[key]) if key in notes else []
        if note_lines:
            lines += [f"[{number}] {note_lines[0].lstrip()}", *note_lines[1:]]
    return lines


def _part_root(part: Part) -> etree._Element:
    """The XML of a part python-docx keeps as bytes (notes), parsed with python-docx's parser."""
    if isinstance(part, XmlPart):
        return part.element
    return parse_xml(part.blob)
