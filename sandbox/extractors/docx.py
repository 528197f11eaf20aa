"""DOCX: headers, body text in document order, footnotes and endnotes, then footers.

Read from the WordprocessingML elements, text boxes and tracked insertions included; list
numbers from :mod:`sandbox.extractors.docx_numbering`; no XML entity is fetched or expanded.
See docs/sandbox.md, "Parsers" and "Notes by module".
"""

from __future__ import annotations

import colorsys
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
from sandbox.extractors import css
from sandbox.extractors.docx_numbering import Numbering
from sandbox.extractors.registry import Refusal, extractor
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_MATH = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
_W14 = "{http://schemas.microsoft.com/office/word/2010/wordml}"
_DRAWING = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_WP = "{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}"
_WPS = "{http://schemas.microsoft.com/office/word/2010/wordprocessingShape}"
_VML = "{urn:schemas-microsoft-com:vml}"

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
#: Effects drawn around a letter in its colour's stead or beside it: white text with a shadow,
#: an outline or an embossing shows.
_EFFECTS = (_W + "shadow", _W + "emboss", _W + "imprint", _W + "outline")
#: Word 2010's text effects that paint around the letters (a glow, a shadow, a reflection, 3-D
#: depth, an outline), unless they say they have no fill. Its other settings (ligatures,
#: number forms, stylistic sets) are typography: Word 365 sets ligatures in every document's
#: defaults, and taking them for an effect turned the white-text rule off everywhere.
_PAINTING_EFFECTS = tuple(
    _W14 + name for name in ("glow", "shadow", "reflection", "props3d", "textOutline")
)
#: Word 2010's fill of the letters, drawn in ``w:color``'s stead (kept for older readers).
_TEXT_FILL = _W14 + "textFill"
#: The run properties that decide whether a reader sees a run's text, ordinary properties
#: (the nearest setting wins): its colour and fill, its size (``w:szCs`` for complex-script
#: text, and all a run marked ``w:cs`` or ``w:rtl`` holds), and what is drawn behind or around
#: it. A fixed set: a style keeps at most these, whatever else it sets (each of thousands of
#: ``w14:`` settings, kept, was copied to every style based on it).
_INK = frozenset(
    {_W + name for name in ("color", "sz", "szCs", "cs", "rtl", "shd", "highlight")}
).union(_EFFECTS, _PAINTING_EFFECTS, {_TEXT_FILL})
#: Where a style's paragraph shading is kept among its run properties.
_PARAGRAPH_SHADING = "paragraph " + _W + "shd"
#: Highlights that paint nothing a white letter shows on.
_NO_HIGHLIGHT = frozenset({"none", "white"})
#: Pixels in a half-point (a point is 4/3 of a pixel, as CSS has it): a size of 1 (half a
#: point) is under the web page's one pixel (``css.SMALLEST_PX``), Word's smallest, 2, is not.
_PX_PER_HALF_POINT = 2 / 3
#: Scripts Word sizes by ``w:szCs``: Hebrew to Arabic's supplements, the Indic scripts, Thai,
#: Lao, Tibetan, Myanmar, Khmer, and the Hebrew and Arabic presentation forms.
_COMPLEX_SCRIPT = re.compile(
    "[\u0590-\u08ff\u0900-\u0dff\u0e00-\u0fff\u1000-\u109f\u1780-\u17ff\ufb1d-\ufdff\ufe70-\ufeff]"
)
#: The theme colour a ``w:themeColor`` names, by the settings' ``w:clrSchemeMapping``
#: attribute that maps it (Word's defaults beside), or directly.
_MAPPED_THEME_COLOURS = {
    "background1": ("bg1", "light1"),
    "text1": ("t1", "dark1"),
    "background2": ("bg2", "light2"),
    "text2": ("t2", "dark2"),
    **{name: (name, name) for name in (*(f"accent{n}" for n in range(1, 7)), "hyperlink")},
    "followedHyperlink": ("followedHyperlink", "followedHyperlink"),
}
#: The element of a theme's ``a:clrScheme`` holding each theme colour.
_SCHEME_ELEMENTS = {
    "dark1": "dk1", "light1": "lt1", "dark2": "dk2", "light2": "lt2",
    **{f"accent{n}": f"accent{n}" for n in range(1, 7)},
    "hyperlink": "hlink", "followedHyperlink": "folHlink",
}  # fmt: skip
#: DrawingML's names of the theme's colours (``a:schemeClr``, ``w14:schemeClr``), as the
#: ``w:themeColor`` names they stand for.
_SCHEME_NAMES = {
    "bg1": "background1", "tx1": "text1", "bg2": "background2", "tx2": "text2",
    "lt1": "light1", "dk1": "dark1", "lt2": "light2", "dk2": "dark2",
    **{f"accent{n}": f"accent{n}" for n in range(1, 7)},
    "hlink": "hyperlink", "folHlink": "followedHyperlink",
}  # fmt: skip
#: The system colours Word draws a theme's ``a:sysClr`` in by its name (the reader's window is
#: white, its text black), not by the ``lastClr`` the file keeps beside, which an attacker sets.
_SYSTEM_COLOURS = {"window": css.WHITE, "windowText": css.BLACK}
_PRESET_COLOURS = {"white": css.WHITE, "black": css.BLACK}
#: DrawingML colour modifiers at the values that change nothing.
_UNCHANGING = {"lumMod": "100000", "lumOff": "0", "alpha": "100000", "tint": "100000"}
#: DrawingML's fills of a shape; any but none or one colour shows what is not known.
_FILLS = frozenset(
    _DRAWING + name
    for name in ("noFill", "solidFill", "gradFill", "blipFill", "pattFill", "grpFill")
)
#: The VML elements that draw a shape (not ``v:shapetype``, a template for them).
_VML_SHAPES = tuple(
    _VML + name
    for name in ("shape", "rect", "roundrect", "oval", "polyline", "arc", "curve", "image")
)
#: A VML style's ``z-index`` below zero: the shape is drawn below the text's layer.
_BELOW_TEXT = re.compile(r"z-index\s*:\s*-", re.IGNORECASE)
#: The ids Word gives its watermarks (text and picture), which it draws behind the text.
_WATERMARKS = ("PowerPlusWaterMarkObject", "WordPictureWatermark")
_HEX_COLOUR = re.compile(r"[0-9A-Fa-f]{6}")
_HEX_BYTE = re.compile(r"[0-9A-Fa-f]{2}")
_Ink = dict[str, etree._Element]
# Every OOXML package has this member; an archive without it is some other kind of ZIP.
_CONTENT_TYPES = "[Content_Types].xml"


@extractor("docx")
def extract_docx(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    with _well_formed():
        document_part = _main_part(payload)
        numbering, styles = _definitions(document_part)
        settings = _settings(document_part)
        theme = _theme_colours(document_part, settings)
        walker = _Walker(
            TextBudget(limits),
            Numbering(numbering, styles),
            _heading_levels(styles),
            _vanish(styles, theme),
            _Page(
                coloured=_page_coloured(document_part.element, settings, theme)
                or _furniture_backdrop(document_part),
                theme=theme,
                lists_shaded=numbering is not None
                and any(
                    _painted(shading, theme)
                    for shading in numbering.iterfind(f".//{_W}lvl/{_W}pPr/{_W}shd")
                ),
            ),
        )
        # Walked in reading order, so list counters and note numbers advance as a reader's would.
        body = walker.part_blocks(document_part.element.body)
        shown = _shown_furniture(settings)
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
        page: _Page,
    ) -> None:
        self._budget = budget
        self._numbering = numbering
        self._heading_levels = heading_levels
        self._vanish = vanish
        self._page = page
        #: Whether the style of the table whose cell is being read turns hidden text around,
        #: and whether its conditional formatting hides it all (:func:`_conditionally_hidden`).
        self._table_hides = False
        self._table_forced = False
        #: The run properties of the style of the table whose cell is being read (None outside
        #: a table), and whether something coloured is behind the text read (the page, a
        #: shaded table or cell, a text box's shape): white text on it shows.
        self._table_ink: _Ink | None = None
        self._backed = page.coloured
        #: The run properties beneath a run's own and its character style's, in each order Word
        #: may apply them (:meth:`_ink_beneath`), for the paragraph being read, and whether
        #: something coloured is behind its text (its shading, or what is behind it all).
        self._beneath: list[tuple[_Ink, ...]] = [(vanish.default_ink,)]
        self._paragraph_backed = False
        #: Whether the part being read draws a floating shape that paints, which a text box
        #: without a fill of its own may stand on (:func:`_shapes_paint`).
        self._shapes_paint = False
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

    def part_blocks(self, root: etree._Element) -> list[Block]:
        """The blocks of a part (the body, a header, a footer, a note), with any shape it draws
        behind its text (:func:`_has_backdrop`) behind all of them."""
        outer = self._shapes_paint
        self._shapes_paint = _shapes_paint(root, self._page.theme)
        try:
            with self._behind(_has_backdrop(root)):
                return self.blocks(root)
        finally:
            self._shapes_paint = outer

    @contextmanager
    def _behind(self, painted: bool) -> Iterator[None]:
        """Reads with a colour behind the text if ``painted`` (or already), then as before."""
        outer = self._backed
        self._backed = outer or painted
        try:
            yield
        finally:
            self._backed = outer

    def _paragraph(self, paragraph: etree._Element) -> list[Block]:
        """The paragraph (a heading at its level, a list item after its number), then the
        paragraphs of any text boxes anchored in it."""
        number, depth = self._numbering.prefix(paragraph)
        pieces: list[str] = []
        boxes: list[etree._Element] = []
        style = paragraph.find(f"{_W}pPr/{_W}pStyle")
        style_id = None if style is None else style.get(_W + "val")
        hidden = self._vanish.paragraph_hidden(style_id, self._table_hides)
        self._ink_beneath(paragraph, style_id, numbered=bool(number))
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
            # not reach its text. Its shape may have a fill, or stand on another shape, which
            # white text may be drawn on.
            painted = self._shapes_paint or _box_painted(box, self._page.theme)
            with self._in_table(hides=False, forced=False, ink=None, backed=painted):
                blocks += self.blocks(box)
        return blocks

    @contextmanager
    def _in_table(
        self, *, hides: bool, forced: bool, ink: _Ink | None, backed: bool
    ) -> Iterator[None]:
        """Reads in a table whose style ``hides`` text (a toggle) or is ``forced`` to hide it
        all, or neither, sets the run properties ``ink``, and is ``backed`` by a colour, and
        then as before: a nested table's cells have their own table's style, not the outer
        one's (but the outer cell's shading is behind them)."""
        outer = self._table_hides, self._table_forced, self._table_ink, self._backed
        self._table_hides, self._table_forced, self._table_ink = hides, forced, ink
        self._backed = self._backed or backed
        try:
            yield
        finally:
            self._table_hides, self._table_forced, self._table_ink, self._backed = outer

    def _ink_beneath(
        self, paragraph: etree._Element, style_id: str | None, *, numbered: bool
    ) -> None:
        """Sets what the paragraph's runs' colour and size come from beneath their own and
        their character style's properties: its style's, its table style's, the defaults'.
        Whether Word puts a table style's properties over the default paragraph style's is not
        known: both orders are kept, and a run is taken as unseen only in both. Its shading is
        its own, else its list level's (any list's that shades, ``numbered``: which level's
        is not worked out), else its style's, else the defaults'."""
        if style_id is None or style_id not in self._vanish.styles_by_kind.get("paragraph", ()):
            style_id = self._vanish.default_styles.get("paragraph", "")
        ink = self._vanish.ink.get(style_id, {})
        table = self._table_ink
        defaults = self._vanish.default_ink
        self._beneath = [(ink, defaults) if table is None else (ink, table, defaults)]
        if table is not None and style_id == self._vanish.default_styles.get("paragraph"):
            self._beneath.append((table, ink, defaults))
        own = paragraph.find(f"{_W}pPr/{_W}shd")
        if own is None and numbered and self._page.lists_shaded:
            self._paragraph_backed = True
            return
        settings = (own, ink.get(_PARAGRAPH_SHADING), defaults.get(_PARAGRAPH_SHADING))
        shading = next((setting for setting in settings if setting is not None), None)
        self._paragraph_backed = self._backed or _painted(shading, self._page.theme)

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
        unseen: bool = False,
    ) -> None:
        """The text of ``element``'s runs into ``pieces``, its text boxes into ``boxes``;
        ``hidden``: whether its runs are hidden text unless their own properties say not.
        Hiddenness decides what a run shows, not what is walked: a hyperlink or an insertion
        inside a hidden paragraph may hold a run that shows itself again. ``unseen``: whether
        the text is drawn where no reader sees it (:meth:`_unseen`), which leaves out its
        letters only: its spaces, breaks, note marks and text boxes are drawn as ever."""
        for child in element:
            tag = child.tag
            if tag == _W + "r":
                run_hidden = self._run_hidden(child, hidden)
                self._inline(
                    child, pieces, boxes, run_hidden, not run_hidden and self._unseen(child)
                )
            elif tag == _MATH + "r":
                # An equation's run has its own run properties, colour and size among them.
                self._inline(child, pieces, boxes, hidden, not hidden and self._unseen(child))
            elif tag in (_W + "t", _MATH + "t") and (
                hidden or (unseen and not (child.text or "").isspace())
            ):
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
                    self._inline(branch, pieces, boxes, hidden, unseen)
            elif tag not in _SKIPPED_INLINE and self._compatibility.reading(child) != "nothing":
                self._inline(child, pieces, boxes, hidden, unseen)

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

    def _unseen(self, run: etree._Element) -> bool:
        """Whether Word draws the run's text where no reader sees it, in every order its
        properties may be applied in: white (or near it) with nothing coloured behind or around
        it, letters without a fill, or under a pixel high. The résumé's white text, planted
        for the model, was read."""
        properties = run.find(_W + "rPr")
        style = None if properties is None else properties.find(_W + "rStyle")
        own = _ink_of(properties)
        character = self._vanish.ink.get(self._vanish.style_of("character", style), {})
        orders = [(own, character, *beneath) for beneath in self._beneath]
        return all(
            self._tiny(levels, run) or self._white(levels) or _unfilled(levels) for levels in orders
        )

    def _white(self, levels: tuple[_Ink, ...]) -> bool:
        """Whether the run's colour is white to a reader's eye (within 16 in each channel, the
        web page's rule) and nothing but the white page is behind it: no shading (of the run,
        its paragraph, its cell or table, a text box's shape, the page), no highlight, no
        effect drawn around its letters."""
        colour = self._letters_colour(levels)
        if colour is None or not colour.unseen_on(css.WHITE) or self._paragraph_backed:
            return False
        shading = _nearest(levels, _W + "shd")
        highlight = _nearest(levels, _W + "highlight")
        return (
            not _painted(shading, self._page.theme)
            and (highlight is None or highlight.get(_W + "val") in _NO_HIGHLIGHT)
            and not _drawn_around(levels)
        )

    def _letters_colour(self, levels: tuple[_Ink, ...]) -> css.Colour | None:
        """The colour Word draws the letters in: their Word 2010 fill's when they have one (a
        solid one, else None: not known), else their ``w:color``'s (None when automatic, dark
        on the light page, or not known). A theme's colour is resolved (Word draws that, not
        the value kept beside it)."""
        fill = _nearest(levels, _TEXT_FILL)
        if fill is None:
            setting = _nearest(levels, _W + "color")
            return None if setting is None else _word_colour(setting, self._page.theme)
        solid = fill.find(_W14 + "solidFill")
        return None if solid is None else _drawing_colour(next(iter(solid), None), self._page.theme)

    @staticmethod
    def _tiny(levels: tuple[_Ink, ...], run: etree._Element) -> bool:
        """Whether the run's text is under a pixel high: all of a run marked complex-script or
        right-to-left at ``w:szCs``; else its complex-script letters (Arabic, Hebrew, Thai, the
        Indic scripts) at ``w:szCs`` and its other letters at ``w:sz``, each that it holds."""
        marked = (_nearest(levels, _W + tag) for tag in ("cs", "rtl"))
        complex_size = _too_small(_nearest(levels, _W + "szCs"))
        if any(mark is not None and _on(mark) for mark in marked):
            return complex_size
        text = "".join(text.text or "" for text in run.iterchildren(_W + "t", _MATH + "t"))
        if _COMPLEX_SCRIPT.search(text) and not complex_size:
            return False
        other = _COMPLEX_SCRIPT.sub("", text)
        return not other.strip() or _too_small(_nearest(levels, _W + "sz"))

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
            hides=self._vanish.toggles(style_id),
            forced=style_id in self._vanish.forced,
            ink=self._vanish.ink.get(style_id, {}),
            backed=style_id in self._vanish.painted_tables
            or _painted(table.find(f"{_W}tblPr/{_W}shd"), self._page.theme),
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
                    text = " ".join(words(Document(self._cell(row, cell))).split())
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

    def _cell(self, row: etree._Element, cell: etree._Element) -> list[Block]:
        """A cell's blocks, with its shading (``w:tcPr/w:shd``) or its row's (``w:tblPrEx``,
        the table's properties made different for the row) behind their text."""
        theme = self._page.theme
        with self._behind(
            _painted(cell.find(f"{_W}tcPr/{_W}shd"), theme)
            or _painted(row.find(f"{_W}tblPrEx/{_W}shd"), theme)
        ):
            return self.blocks(cell)


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
            text = words(Document(walker.part_blocks(part.element)))
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


def _settings(document_part: XmlPart) -> etree._Element | None:
    """The document's settings part, None when it has none."""
    try:
        return _part_root(document_part.part_related_by(RELATIONSHIP_TYPE.SETTINGS))
    except KeyError:
        return None


def _shown_furniture(settings: etree._Element | None) -> frozenset[str]:
    """``{"even"}`` when the document's settings give even pages their own headers."""
    toggle = None if settings is None else settings.find(_W + "evenAndOddHeaders")
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

    The run properties that decide whether a reader sees text at all (its colour, its size,
    what is behind it) are resolved through the same ``w:basedOn`` chains, as ordinary
    properties: the nearest setting wins.
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
    #: The run properties that decide whether a reader sees text (:data:`_INK`) each style's
    #: ``w:basedOn`` chain sets, nearest first, and the defaults' (``w:rPrDefault``): resolved
    #: once per style, so a run costs a few look-ups, not a walk of its styles.
    ink: dict[str, _Ink] = field(default_factory=dict)
    default_ink: _Ink = field(default_factory=dict)
    #: The table styles that shade any part of their table, and the styles based on them:
    #: white text in their tables is read (a header row's white on blue is the common case,
    #: and which cells each part reaches is not worked out).
    painted_tables: frozenset[str] = frozenset()

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


def _vanish(styles: etree._Element | None, theme: dict[str, css.Colour]) -> _Vanish:
    """The document's :class:`_Vanish`: each style's own ``w:vanish``, or the first one a style
    it is based on sets (followed at most :data:`_MAX_BASED_ON` deep, so a cycle ends); and
    likewise each of the run properties of :data:`_INK`, colours named by the ``theme``."""
    if styles is None:
        return _Vanish({}, by_default=False, default_styles={})
    defaults = styles.find(f"{_W}docDefaults/{_W}rPrDefault/{_W}rPr/{_W}vanish")
    own: dict[str, bool | None] = {}
    own_ink: dict[str, _Ink] = {}
    painted: set[str] = set()
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
        own_ink[style_id] = _style_ink(style)
        if style.get(_W + "type") == "table":
            if _conditionally_hidden(style):
                conditional.add(style_id)
            if any(_painted(shading, theme) for shading in style.iter(_W + "shd")):
                painted.add(style_id)
            if (colour := _conditional_colour(style, theme)) is not None:
                own_ink[style_id][_W + "color"] = colour
        based_on = style.find(_W + "basedOn")
        if based_on is not None:
            parent[style_id] = based_on.get(_W + "val", "")
        kind = style.get(_W + "type", "paragraph")
        styles_by_kind.setdefault(kind, set()).add(style_id)
        if _on_attribute(style.get(_W + "default")):
            default_styles[kind] = style_id
    by_style: dict[str, bool] = {}
    forced: set[str] = set()
    ink: dict[str, _Ink] = {}
    painted_tables: set[str] = set()
    for style_id in own:
        chain = _based_on_chain(style_id, parent)
        decided = next((own[link] for link in chain if own.get(link) is not None), None)
        if decided is not None:
            by_style[style_id] = decided
        if conditional.intersection(chain):
            forced.add(style_id)
        # Nearest last, so its settings are the ones kept.
        ink[style_id] = {
            tag: setting
            for link in reversed(chain)
            for tag, setting in own_ink.get(link, {}).items()
        }
        if painted.intersection(chain):
            painted_tables.add(style_id)
    hidden_by_default = defaults is not None and _on(defaults)
    return _Vanish(
        by_style,
        hidden_by_default,
        default_styles,
        {kind: frozenset(ids) for kind, ids in styles_by_kind.items()},
        frozenset(forced),
        ink,
        _default_ink(styles),
        frozenset(painted_tables),
    )


def _default_ink(styles: etree._Element) -> _Ink:
    """The document defaults' run properties of :data:`_INK` and their paragraph shading."""
    ink = _ink_of(styles.find(f"{_W}docDefaults/{_W}rPrDefault/{_W}rPr"))
    shading = styles.find(f"{_W}docDefaults/{_W}pPrDefault/{_W}pPr/{_W}shd")
    if shading is not None:
        ink[_PARAGRAPH_SHADING] = shading
    return ink


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


def _conditional_colour(
    table_style: etree._Element, theme: dict[str, css.Colour]
) -> etree._Element | None:
    """A text colour not white (or automatic, or not known) that a part of a table style's
    conditional formatting sets: which cells each part reaches is not worked out, so it stands
    for the style's colour, and the style's white hides nothing (a header row Word draws black
    over a white base was dropped)."""
    for setting in table_style.iterfind(f"{_W}tblStylePr/{_W}rPr/{_W}color"):
        colour = _word_colour(setting, theme)
        if colour is None or not colour.unseen_on(css.WHITE):
            return setting
    return None


def _style_ink(style: etree._Element) -> _Ink:
    """A style's own run properties of :data:`_INK`, and its paragraph shading."""
    ink = _ink_of(style.find(_W + "rPr"))
    shading = style.find(f"{_W}pPr/{_W}shd")
    if shading is not None:
        ink[_PARAGRAPH_SHADING] = shading
    return ink


def _ink_of(properties: etree._Element | None) -> _Ink:
    """The properties of :data:`_INK` a ``w:rPr`` sets."""
    if properties is None:
        return {}
    return {child.tag: child for child in properties if child.tag in _INK}


def _nearest(levels: tuple[_Ink, ...], tag: str) -> etree._Element | None:
    """The setting of ``tag`` at the nearest level that has one."""
    return next((level[tag] for level in levels if tag in level), None)


def _drawn_around(levels: tuple[_Ink, ...]) -> bool:
    """Whether an effect is drawn around the letters (a shadow, an outline, an embossing, a
    Word 2010 effect that paints: :data:`_PAINTING_EFFECTS`), which shows white text."""
    effects = (_nearest(levels, tag) for tag in _EFFECTS)
    if any(effect is not None and _on(effect) for effect in effects):
        return True
    painting = (_nearest(levels, tag) for tag in _PAINTING_EFFECTS)
    return any(effect is not None and effect.find(_W14 + "noFill") is None for effect in painting)


def _unfilled(levels: tuple[_Ink, ...]) -> bool:
    """Whether the letters have no fill (``w14:noFill``: drawn in no colour, whatever
    ``w:color`` says) and nothing is drawn around them."""
    fill = _nearest(levels, _TEXT_FILL)
    return fill is not None and fill.find(_W14 + "noFill") is not None and not _drawn_around(levels)


def _painted(shading: etree._Element | None, theme: dict[str, css.Colour]) -> bool:
    """Whether a ``w:shd`` paints a colour not white behind text: its fill (none when
    automatic), and its pattern (any but ``clear``; ``solid`` covers the fill) drawn over it in
    ``w:color`` (black when automatic). A white fill named by the theme, or a white pattern,
    paints nothing a white letter shows on."""
    if shading is None or shading.get(_W + "val") == "nil":
        return False
    pattern = shading.get(_W + "val")
    fill = _shading_paints(shading, theme, "fill", "themeFill", automatic=False)
    if pattern == "clear":
        return fill
    colour = _shading_paints(shading, theme, "color", "themeColor", automatic=True)
    return colour or (pattern != "solid" and fill)


def _shading_paints(
    shading: etree._Element,
    theme: dict[str, css.Colour],
    value: str,
    themed: str,
    *,
    automatic: bool,
) -> bool:
    """Whether one of a shading's colours (its ``value`` attribute, or the theme's colour its
    ``themed`` one names) is not white: ``automatic`` when it is automatic; a theme colour not
    known paints."""
    if shading.get(_W + themed) is None and shading.get(_W + value, "auto") == "auto":
        return automatic
    colour = _word_colour(shading, theme, value, themed)
    return colour is None or not colour.unseen_on(css.WHITE)


def _word_colour(
    setting: etree._Element,
    theme: dict[str, css.Colour],
    value: str = "val",
    themed: str = "themeColor",
) -> css.Colour | None:
    """A WordprocessingML colour: the theme's colour its ``themed`` attribute names (Word
    draws that, not the ``value`` kept beside it), tinted or shaded as it says; else its
    ``value``, RRGGBB. None when automatic or not known."""
    name = setting.get(_W + themed)
    if name is None:
        return _hex_colour(setting.get(_W + value))
    colour = theme.get(name)
    return None if colour is None else _tinted(colour, setting, themed.removesuffix("Color"))


def _too_small(size: etree._Element | None) -> bool:
    """Whether a ``w:sz`` or ``w:szCs`` (half-points) draws text under the web page's one
    pixel (``css.SMALLEST_PX``): half a point is, Word's smallest, one point, is not. A size
    of 0, like RTF's ``\\fs0``, is no size, and a value not a count is not known: read."""
    value = "" if size is None else size.get(_W + "val", "")
    digits = value.lstrip("0")
    if not value.isascii() or not value.isdigit() or not digits or len(digits) > 4:
        return False
    return int(digits) * _PX_PER_HALF_POINT < css.SMALLEST_PX


def _hex_colour(value: str | None) -> css.Colour | None:
    """An ``RRGGBB`` value's colour; None for ``auto`` or anything else."""
    if value is None or _HEX_COLOUR.fullmatch(value) is None:
        return None
    return css.parse_colour("#" + value)


def _tinted(colour: css.Colour, setting: etree._Element, prefix: str) -> css.Colour:
    """A theme colour with its ``w:themeShade`` and ``w:themeTint`` (``w:themeFillShade`` and
    ``w:themeFillTint`` for a shading's fill, by ``prefix``: hexadecimal fractions of 255)
    applied to its luminance, as ECMA-376 Part 1, 17.3.2.6 says: a shade darkens toward black,
    a tint lightens toward white."""
    hue, lightness, saturation = colorsys.rgb_to_hls(
        colour.red / 255, colour.green / 255, colour.blue / 255
    )
    shade = setting.get(f"{_W}{prefix}Shade") or ""
    tint = setting.get(f"{_W}{prefix}Tint") or ""
    if _HEX_BYTE.fullmatch(shade):
        lightness *= int(shade, 16) / 255
    if _HEX_BYTE.fullmatch(tint):
        lightness = lightness * int(tint, 16) / 255 + 1 - int(tint, 16) / 255
    red, green, blue = colorsys.hls_to_rgb(hue, lightness, saturation)
    return css.Colour(round(red * 255), round(green * 255), round(blue * 255))


@dataclass(frozen=True)
class _Page:
    """What is behind all the document's text: whether the page is coloured (a page colour
    Word displays, :func:`_page_coloured`, or a shape a header or footer draws behind the
    text), the theme's colours, which a ``w:themeColor`` names in place of its ``w:val``, and
    whether any list level shades its paragraphs."""

    coloured: bool
    theme: dict[str, css.Colour]
    lists_shaded: bool = False


def _theme_colours(
    document_part: XmlPart, settings: etree._Element | None
) -> dict[str, css.Colour]:
    """Each ``w:themeColor`` name's colour, from the theme's colour scheme through the
    settings' ``w:clrSchemeMapping`` (``background1`` is ``light1`` unless it says otherwise).
    A colour the scheme gives other than as RGB or a system colour's last value, or with
    modifiers, is not known, and text in it is read; so is all of a theme that is missing or
    not well-formed XML (it only decides what is left out: it never refuses the document)."""
    try:
        theme = _part_root(document_part.part_related_by(RELATIONSHIP_TYPE.THEME))
    except (KeyError, etree.XMLSyntaxError):
        return {}
    scheme = theme.find(f"{_DRAWING}themeElements/{_DRAWING}clrScheme")
    if scheme is None:
        return {}
    colours: dict[str, css.Colour] = {}
    for name, tag in _SCHEME_ELEMENTS.items():
        colour = _scheme_colour(scheme.find(_DRAWING + tag))
        if colour is not None:
            colours[name] = colour
    mapping = None if settings is None else settings.find(_W + "clrSchemeMapping")
    mapped: dict[str, css.Colour] = {}
    for name, (attribute, default) in _MAPPED_THEME_COLOURS.items():
        target = default if mapping is None else mapping.get(_W + attribute, default)
        if target in colours:
            mapped[name] = colours[target]
    # A mapped name is what its mapping says, never the scheme's entry of the same name.
    unmapped = {
        name: colour for name, colour in colours.items() if name not in _MAPPED_THEME_COLOURS
    }
    return unmapped | mapped


def _scheme_colour(element: etree._Element | None) -> css.Colour | None:
    """A colour scheme entry's colour (:func:`_drawing_colour`)."""
    return None if element is None else _drawing_colour(next(iter(element), None), {})


def _drawing_colour(
    element: etree._Element | None, theme: dict[str, css.Colour]
) -> css.Colour | None:
    """A DrawingML colour (``a:`` in a theme or a shape, ``w14:`` in a text effect): RGB, the
    theme's by its DrawingML name, a system colour by its name (:data:`_SYSTEM_COLOURS`), white
    or black by preset. None when not known, or changed by a modifier (:data:`_UNCHANGING`
    ones change nothing)."""
    if element is None or not isinstance(element.tag, str):
        return None
    for modifier in element:
        name = etree.QName(modifier).localname
        if _UNCHANGING.get(name) != _drawing_value(modifier):
            return None
    kind, value = etree.QName(element).localname, _drawing_value(element)
    if kind == "srgbClr":
        return _hex_colour(value)
    if kind == "schemeClr":
        return theme.get(_SCHEME_NAMES.get(value or "", ""))
    if kind == "sysClr":
        return _SYSTEM_COLOURS.get(value or "")
    return _PRESET_COLOURS.get(value or "") if kind == "prstClr" else None


def _drawing_value(element: etree._Element) -> str | None:
    """A DrawingML element's ``val`` (``w14:val`` in Word 2010's text effects)."""
    value: str | None = element.get("val", element.get(_W14 + "val"))
    return value


def _page_coloured(
    document: etree._Element, settings: etree._Element | None, theme: dict[str, css.Colour]
) -> bool:
    """Whether Word displays a page colour white text shows on: only when the settings say to
    (``w:displayBackgroundShape``; ECMA-376 Part 1, 17.15.1.26: else it is not shown), and a
    colour not white (a theme's, tinted or shaded as it says; one not known counts) or a
    picture or fill (``w:background``'s content: what it shows is not known)."""
    background = document.find(_W + "background")
    shown = None if settings is None else settings.find(_W + "displayBackgroundShape")
    if background is None or shown is None or not _on(shown):
        return False
    if len(background):
        return True
    if (
        background.get(_W + "themeColor") is None
        and _hex_colour(background.get(_W + "color")) is None
    ):
        return False  # no colour, or automatic: the white page
    colour = _word_colour(background, theme, "color")
    return colour is None or not colour.unseen_on(css.WHITE)


def _furniture_backdrop(document_part: XmlPart) -> bool:
    """Whether a header or footer draws a shape behind the text (:func:`_has_backdrop`): it is
    drawn on every page, and where it reaches (a banner, a watermark) is not worked out, so it
    is taken as behind all the document's text."""
    kinds = (RELATIONSHIP_TYPE.HEADER, RELATIONSHIP_TYPE.FOOTER)
    return any(
        _has_backdrop(_part_root(relationship.target_part))
        for relationship in document_part.rels.values()
        if relationship.reltype in kinds and not relationship.is_external
    )


def _has_backdrop(root: etree._Element) -> bool:
    """Whether a part draws a shape behind its text: an anchored drawing placed behind it
    (``behindDoc``), a VML shape below the text's layer (a negative ``z-index``) with a fill or
    a picture, a watermark. Where it reaches is not worked out: white text anywhere in the part
    is taken as drawn on it (a résumé's white name on a navy banner was dropped)."""
    if any(_on_attribute(anchor.get("behindDoc")) for anchor in root.iter(_WP + "anchor")):
        return True
    return any(map(_vml_backdrop, root.iter(_VML + "*")))


def _shapes_paint(root: etree._Element, theme: dict[str, css.Colour]) -> bool:
    """Whether a part draws a floating shape that paints: an anchored drawing other than
    shapes without a fill (a picture, a chart, a filled shape), a VML shape filled or holding a
    picture. Where shapes stand is not worked out: a text box without a fill of its own on a
    navy sidebar shape is taken as standing on it."""
    for anchor in root.iter(_WP + "anchor"):
        shapes = list(anchor.iter(_WPS + "wsp"))
        if not shapes or any(_shape_painted(shape, theme) for shape in shapes):
            return True
    return any(
        shape.tag == _VML + "image"
        or _vml_painted(shape)
        or shape.find(_VML + "imagedata") is not None
        for shape in root.iter(*_VML_SHAPES)
    )


def _vml_backdrop(shape: etree._Element) -> bool:
    """Whether a VML element is a watermark, or a shape below the text that paints."""
    if (shape.get("id") or "").startswith(_WATERMARKS):
        return True
    if not _BELOW_TEXT.search(shape.get("style") or ""):
        return False
    return _vml_painted(shape) or shape.find(_VML + "imagedata") is not None


def _vml_painted(shape: etree._Element) -> bool:
    """Whether a VML shape paints a colour not white: filled (unless ``filled="f"``) in its
    ``fillcolor`` (white when it names none, VML's default; one not known counts, and any
    ``v:fill``: a gradient, a picture)."""
    if (shape.get("filled") or "t").lower() in ("f", "false"):
        return False
    if shape.find(_VML + "fill") is not None:
        return True
    # Word writes a palette index after the colour: "#1f3864 [3204]".
    colour = css.parse_colour((shape.get("fillcolor") or "white").split("[")[0].strip())
    return colour is None or not colour.unseen_on(css.WHITE)


def _box_painted(box: etree._Element, theme: dict[str, css.Colour]) -> bool:
    """Whether a text box's shape paints a colour not white behind its text: a DrawingML
    shape's fill (:func:`_shape_painted`), a VML shape's (:func:`_vml_painted`). A box in a
    group or a canvas (drawn with other shapes, where they are not worked out), or one whose
    shape is not found, is taken as painted."""
    holder = box.getparent()
    shape = None if holder is None else holder.getparent()
    container = None if shape is None else shape.getparent()
    if shape is None or container is None:
        return True
    if shape.tag == _WPS + "wsp" and container.tag == _DRAWING + "graphicData":
        return _shape_painted(shape, theme)
    if isinstance(shape.tag, str) and shape.tag.startswith(_VML) and container.tag == _W + "pict":
        return _vml_painted(shape)
    return True


def _shape_painted(shape: etree._Element, theme: dict[str, css.Colour]) -> bool:
    """Whether a DrawingML shape's fill paints a colour not white: none (``a:noFill``), one
    colour, or what its style's fill reference gives (not known, unless index 0: none); no
    fill and no style is none. A gradient, a picture or a pattern counts."""
    fill = next((child for child in shape.iterfind(f"{_WPS}spPr/*") if child.tag in _FILLS), None)
    if fill is None:
        reference = shape.find(f"{_WPS}style/{_DRAWING}fillRef")
        return reference is not None and reference.get("idx") != "0"
    if fill.tag == _DRAWING + "noFill":
        return False
    if fill.tag != _DRAWING + "solidFill":
        return True
    colour = _drawing_colour(next(iter(fill), None), theme)
    return colour is None or not colour.unseen_on(css.WHITE)


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
        text = words(Document(walker.part_blocks(notes[key]))) if key in notes else ""
        if text:
            blocks.append(Paragraph(f"[{number}] {text.lstrip()}"))
    return blocks


def _part_root(part: Part) -> etree._Element:
    """The XML of a part python-docx keeps as bytes (notes), parsed with python-docx's parser."""
    if isinstance(part, XmlPart):
        return part.element
    return parse_xml(part.blob)
