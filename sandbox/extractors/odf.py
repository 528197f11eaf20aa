"""OpenDocument text (ODT) and presentations (ODP), read from their content.xml with lxml.

content.xml is parsed under the one XML policy (sandbox/extractors/package_parts.py; an
OpenDocument part never has a DOCTYPE). Repeated spaces, cells and rows, which cost a few bytes
for any count, are charged to the text budget before they are written out.
See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import math
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import NamedTuple

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
from sandbox.extractors import css, package_parts
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
_FO = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"
_XLINK = "{http://www.w3.org/1999/xlink}"
_CONTENT = "content.xml"
_STYLES = "styles.xml"
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
#: What is painted behind text, besides a colour: nothing (what is behind shows through), or
#: something whose colour is not known (a picture, a gradient, a shape): white text on it shows.
_CLEAR = "clear"
_UNKNOWN = "unknown"
#: A colour drawn dark or light against what is behind (``style:use-window-font-color``):
#: never unseen.
_AUTO = "auto"
#: The digits LibreOffice reads in ``#rrggbb``; any other character there counts as 0.
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
#: A font size as LibreOffice reads one: spaces around the number and unit, any case.
_FONT_SIZE = re.compile(r"\s*(-?(?:\d+(?:\.\d*)?|\.\d+))\s*(%|cm|mm|in|pt|pc|px)\s*", re.I)
#: A text's size for Western, Asian and complex-script letters, each with the attribute that
#: sets it relative to the parent's by an increment (not worked out: its text is read).
_SIZES = (
    (f"{_FO}font-size", f"{_STYLE}font-size-rel"),
    (f"{_STYLE}font-size-asian", f"{_STYLE}font-size-rel-asian"),
    (f"{_STYLE}font-size-complex", f"{_STYLE}font-size-rel-complex"),
)
#: LibreOffice's size when no style sets one, in points; pixels in a point, as CSS has it.
_DEFAULT_POINTS = 12.0
#: The least absolute size LibreOffice draws, in points (XMLCharHeightHdl, fdo#49876).
_LEAST_POINTS = 1.0
_PX_PER_POINT = 4 / 3
#: Effects drawn around a letter beside its colour: white text with a shadow, an outline or a
#: relief shows. Each is off at "none" (or "false").
_EFFECTS = (f"{_FO}text-shadow", f"{_STYLE}text-outline", f"{_STYLE}font-relief")
_EFFECTS_OFF = frozenset({None, "none", "false"})
#: The properties holding what a style of each family paints behind the text in it.
_PAINTED_BY = {
    "paragraph": f"{_STYLE}paragraph-properties",
    "table": f"{_STYLE}table-properties",
    "table-row": f"{_STYLE}table-row-properties",
    "table-cell": f"{_STYLE}table-cell-properties",
    "section": f"{_STYLE}section-properties",
}
#: Inline elements whose ``text:style-name`` is a text (character) style.
_CHARACTER_STYLED = frozenset({f"{_TEXT}span", f"{_TEXT}a", f"{_TEXT}ruby-text"})
#: The family of the style an element's ``text:style-name`` names, where it may hide text.
_FAMILY_OF = {f"{_TEXT}p": "paragraph", f"{_TEXT}h": "paragraph"} | dict.fromkeys(
    _CHARACTER_STYLED, "text"
)
#: Wraps that keep a drawing beside the text, never under it.
_BESIDE_TEXT = frozenset({"none", "left", "right", "parallel", "dynamic", "biggest"})
_BORDERS = tuple(
    f"{_FO}{side}"
    for side in ("border", "border-top", "border-bottom", "border-left", "border-right")
)
#: A drawing's graphic properties that say whether it may paint under the text: its wrap, its
#: line, its frame's borders, and where on the page it is placed.
_DRAWN = (
    f"{_STYLE}wrap",
    f"{_DRAW}stroke",
    *_BORDERS,
    f"{_STYLE}horizontal-pos",
    f"{_STYLE}vertical-pos",
)
#: What a drawing holds that paints: a picture, an object, a plug-in.
_PICTURES = frozenset(
    f"{_DRAW}{name}"
    for name in ("image", "object", "object-ole", "plugin", "applet", "floating-frame")
)
#: A drawing both of whose sides are under this many millimetres is not a background.
_LEAST_DRAWING_MM = 1.0
#: The widest and tallest page LibreOffice gives a layout that sets no size (Letter, A4).
_DEFAULT_PAGE_MM = (215.9, 297.0)
#: Shapes that never scale their text: a frame, its text box, a link around a drawing. Any
#: other shape may fit its text to itself (``draw:fit-to-size``), so its size is not known.
_UNSCALED = frozenset({f"{_DRAW}frame", f"{_DRAW}text-box", f"{_DRAW}a"})
#: Letters below this are Latin, Greek, Cyrillic or Armenian, drawn in the Western size.
_WESTERN_END = "\u0590"


def read_odt(payload: bytes, limits: ParseLimits) -> Document:
    """An OpenDocument text: headings, paragraphs, lists and tables in order, text boxes after
    the paragraph that anchors them, then footnotes and endnotes."""
    archive = package_parts.opened(payload, "OpenDocument file")
    content = _content(archive)
    body = content.find(f"{_OFFICE}body/{_OFFICE}text")
    if body is None:
        raise Refusal(codes.UNREADABLE, "the OpenDocument text has no office:text body")
    styles_part = _styles_part(archive)
    common = styles_part.find(f"{_OFFICE}styles")
    styles = _Styles(common, content.find(f"{_OFFICE}automatic-styles"), known=True)
    walker = _Walker(TextBudget(limits), styles, _Sight.of_text(content, styles_part, styles))
    blocks = walker.blocks(body, depth=0)
    return Document(blocks + [Paragraph(note) for note in walker.notes] + _hid_notice(walker))


def read_odp(payload: bytes, limits: ParseLimits) -> Document:
    """An OpenDocument presentation, slide by slide, as a PPTX is read (sandbox/extractors/
    slides.py): a page marker, the title, the shapes in reading order, the speaker notes."""
    content = _content(package_parts.opened(payload, "OpenDocument file"))
    slides = content.findall(f"{_OFFICE}body/{_OFFICE}presentation/{_DRAW}page")
    if len(slides) > limits.max_pages:
        raise Refusal(
            codes.CEILING,
            f"{len(slides)} slides exceeds the {limits.max_pages}-page ceiling "
            "(each slide counts as a page)",
        )
    hidden = _hidden_page_styles(content)
    automatic = content.find(f"{_OFFICE}automatic-styles")
    walker = _Walker(TextBudget(limits), _Styles(None, automatic, known=False))
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


def _content(archive: zipfile.ZipFile) -> etree._Element:
    """content.xml of the package, parsed under the one policy."""
    try:
        data = package_parts.member(archive, _CONTENT)
    except package_parts.MissingPart as exc:
        raise Refusal(codes.UNREADABLE, "the OpenDocument package has no content.xml") from exc
    return package_parts.xml_part(data, _CONTENT)


def _styles_part(archive: zipfile.ZipFile) -> etree._Element:
    """styles.xml (the common and default styles, the page layouts), parsed under the one
    policy; an empty one (LibreOffice's defaults, a white page) when the package has none, or
    one that cannot be read (encrypted, damaged) or that airlock refuses to parse (a DOCTYPE,
    broken XML): neither reader has its styles then, and taking them as unknown let the flag
    of encryption set on the part turn the colours off. Never the document refused: it was
    read without styles.xml before it was read for the colours."""
    none = etree.Element(f"{_OFFICE}document-styles")
    try:
        return package_parts.xml_part(package_parts.member(archive, _STYLES), _STYLES)
    except (package_parts.MissingPart, Refusal):
        return none


#: A text size: (points, False), or (a factor of the parent's size, True) for a percentage;
#: None where not set. A size not known is NaN points, never under a pixel: its text is read.
_Size = tuple[float, bool] | None
_NOT_KNOWN: _Size = (math.nan, False)


@dataclass(frozen=True)
class _Ink:
    """What decides whether a reader sees a style's text, each None where the style does not
    set it: its colour, its highlight, its effects, its sizes; the paint behind its paragraph
    (a cell, a section); a drawing's wrap. Ordinary inherited properties: the nearest wins."""

    colour: css.Colour | str | None = None
    highlight: css.Colour | str | None = None
    effects: tuple[str | None, ...] = (None,) * len(_EFFECTS)
    sizes: tuple[_Size, ...] = (None,) * len(_SIZES)
    paint: css.Colour | str | None = None
    drawn: tuple[str | None, ...] = (None,) * len(_DRAWN)
    display: str | None = None

    def over(self, beneath: _Ink) -> _Ink:
        """These properties where set, ``beneath``'s elsewhere; a percentage of its size."""
        return _Ink(
            beneath.colour if self.colour is None else self.colour,
            beneath.highlight if self.highlight is None else self.highlight,
            _nearest(self.effects, beneath.effects),
            tuple(map(_size_over, self.sizes, beneath.sizes)),
            beneath.paint if self.paint is None else self.paint,
            _nearest(self.drawn, beneath.drawn),
            beneath.display if self.display is None else self.display,
        )

    def draws(self, attribute: str) -> str | None:
        """A drawing's graphic property (one of :data:`_DRAWN`), None where no style sets it."""
        return self.drawn[_DRAWN.index(attribute)]


def _nearest(
    mine: tuple[str | None, ...], theirs: tuple[str | None, ...]
) -> tuple[str | None, ...]:
    return tuple(own if own is not None else other for own, other in zip(mine, theirs, strict=True))


#: An element naming further styles (``text:class-names``) whose order is not worked out:
#: its colour and size are not known, and its text is read.
_UNSURE = _Ink(colour=_AUTO, sizes=(_NOT_KNOWN,) * len(_SIZES))
#: A conditional style (``style:map``) is drawn as the style its condition picks where the
#: paragraph stands (a table's header, a footnote), not worked out: its colour, sizes and
#: paint are not known, and its text is read.
_CONDITIONAL = replace(_UNSURE, paint=_UNKNOWN)


def _size_over(mine: _Size, beneath: _Size) -> _Size:
    if mine is None or not mine[1]:
        return beneath if mine is None else mine
    if beneath is None:
        return mine
    return (mine[0] * beneath[0], beneath[1])


def _own_ink(style: etree._Element, family: str) -> _Ink:
    """The properties ``style`` sets itself (a later properties element over an earlier one,
    as LibreOffice reads them)."""
    ink = _Ink()
    for properties in style.iterchildren(f"{_STYLE}text-properties"):
        ink = _text_ink(properties).over(ink)
    for properties in style.iterchildren(_PAINTED_BY.get(family, f"{_STYLE}graphic-properties")):
        ink = replace(ink, paint=_paint(properties) or ink.paint)
        ink = replace(ink, drawn=_nearest(tuple(map(properties.get, _DRAWN)), ink.drawn))
    if style.find(f"{_STYLE}map") is not None:
        ink = _CONDITIONAL.over(ink)
    return ink


def _text_ink(properties: etree._Element) -> _Ink:
    colour: css.Colour | str | None = _AUTO
    if properties.get(f"{_STYLE}use-window-font-color") != "true":
        colour = _colour(properties.get(f"{_FO}color"))
    return _Ink(
        colour=colour,
        highlight=_fill(properties.get(f"{_FO}background-color")),
        effects=tuple(properties.get(name) for name in _EFFECTS),
        sizes=tuple(_size(properties, *names) for names in _SIZES),
        display=properties.get(f"{_TEXT}display"),
    )


def _size(properties: etree._Element, absolute: str, relative: str) -> _Size:
    """A ``fo:font-size``: a percentage of the parent's, or a length LibreOffice draws at 1 pt
    at least (so only a percentage goes under a pixel); one not read, or set by an increment,
    is not known."""
    value = properties.get(absolute)
    if properties.get(relative) is not None:
        return _NOT_KNOWN
    if value is None:
        return None
    found = _FONT_SIZE.fullmatch(value)
    if not found:
        return _NOT_KNOWN
    number, unit = float(found.group(1)), found.group(2).lower()
    if unit == "%":
        return (number / 100, True) if number > 0 else _NOT_KNOWN
    return (max(number * _UNITS[unit] / _UNITS["pt"], _LEAST_POINTS), False)


def _colour(value: str | None) -> css.Colour | None:
    """A colour as LibreOffice reads one (sax::Converter::convertColor): seven characters from
    a ``#``, a digit that is not hex read as 0 (``#fgfgfg`` is near white); None for anything
    else, which LibreOffice ignores, leaving the inherited colour."""
    if value is None or len(value) != 7 or not value.startswith("#"):
        return None
    return css.parse_colour("#" + "".join(c if c in _HEX_DIGITS else "0" for c in value[1:]))


def _fill(value: str | None) -> css.Colour | str | None:
    """A colour painted behind: as :func:`_colour`, clear for ``transparent``, not known for
    anything else; None where absent."""
    if value is None:
        return None
    if value == "transparent":
        return _CLEAR
    colour = _colour(value)
    return _UNKNOWN if colour is None else colour


def _paint(properties: etree._Element) -> css.Colour | str | None:
    """What a paragraph, cell, section or page paints behind its text: its area fill
    (``draw:fill``), its ``fo:background-color``, its background picture. When they disagree
    (LibreOffice writes the fill and the colour alike), which one is drawn is not known."""
    found: list[css.Colour | str | None] = []
    fill = properties.get(f"{_DRAW}fill")
    if fill is not None:
        found.append(
            _CLEAR if fill == "none" else _solid(properties) if fill == "solid" else _UNKNOWN
        )
    found.append(_fill(properties.get(f"{_FO}background-color")))
    picture = properties.find(f"{_STYLE}background-image")
    if picture is not None and (picture.get(f"{_XLINK}href") or len(picture)):
        found.append(_UNKNOWN)
    painted = [paint for paint in found if paint is not None]
    if not painted:
        return None
    return painted[0] if all(paint == painted[0] for paint in painted) else _UNKNOWN


def _solid(properties: etree._Element) -> css.Colour | str:
    """A solid fill's colour, not known when it is seen through or names none."""
    colour = _fill(properties.get(f"{_DRAW}fill-color"))
    seen_through = (
        properties.get(f"{_DRAW}opacity", "100%") != "100%"
        or properties.get(f"{_DRAW}transparency", "0%") != "0%"
    )
    return colour if isinstance(colour, css.Colour) and not seen_through else _UNKNOWN


class _Styles:
    """The styles an element may name, by family and name, each resolved once through its
    parents (``style:parent-style-name``) down to its family's default style: a document of
    100,000 spans over a few styles costs one look-up per span. An element's name is looked
    up among the automatic styles, then the common ones; a parent among the common ones only
    (an automatic style is never a parent, in ODF or in LibreOffice)."""

    def __init__(
        self, common: etree._Element | None, automatic: etree._Element | None, known: bool
    ) -> None:
        self._common = _named(common)
        self._automatic = _named(automatic)
        self._defaults: dict[str, _Ink] = {}
        for style in () if common is None else common.iterchildren(f"{_STYLE}default-style"):
            family = style.get(f"{_STYLE}family", "")
            if family != "text":
                # LibreOffice keeps no default text style: its character defaults are the
                # paragraphs', beneath the paragraph's own properties.
                self._defaults[family] = _own_ink(style, family)
        base = _Ink(sizes=((_DEFAULT_POINTS if known else math.nan, False),) * len(_SIZES))
        self._defaults["paragraph"] = self._defaults.get("paragraph", _Ink()).over(base)
        self._resolved: dict[tuple[str, str], _Ink] = {}
        self._named: dict[tuple[str, str], _Ink] = {}

    def ink(self, family: str, name: str) -> _Ink:
        """The properties of the style an element names, with its parents' and its family's
        defaults beneath. A paragraph naming none, a missing one, or an automatic one on no
        common style is in "Standard", as LibreOffice puts it."""
        key = (family, name)
        if key not in self._named:
            automatic = self._automatic.get(key)
            if automatic is not None:
                parent = (family, automatic.get(f"{_STYLE}parent-style-name", ""))
                if parent in self._common:
                    ink = _own_ink(automatic, family).over(self._common_ink(*parent))
                else:
                    ink = _own_ink(automatic, family).over(self._unstyled(family))
            elif key in self._common:
                ink = self._common_ink(family, name)
            else:
                ink = self._unstyled(family)
            self._named[key] = ink
        return self._named[key]

    def _unstyled(self, family: str) -> _Ink:
        if family == "paragraph" and ("paragraph", "Standard") in self._common:
            return self._common_ink("paragraph", "Standard")
        return self._defaults.get(family, _Ink())

    def _common_ink(self, family: str, name: str) -> _Ink:
        """A common style over its parents: a chain of 30,000 costs one pass (a dict, not a
        list, says which are in it; the list made it quadratic: 8 s)."""
        bottom = self._defaults.get(family, _Ink())
        chain: dict[tuple[str, str], None] = {}
        key = (family, name)
        while key in self._common and key not in self._resolved and key not in chain:
            chain[key] = None  # a loop of parents ends
            key = (family, self._common[key].get(f"{_STYLE}parent-style-name", ""))
        beneath = self._resolved.get(key, bottom)
        for named in reversed(chain):
            beneath = self._resolved[named] = _own_ink(self._common[named], family).over(beneath)
        return self._resolved.get((family, name), bottom)

    def hides(self, element: etree._Element) -> bool:
        """Whether a paragraph's or a span's style sets ``text:display="none"`` (its own, or
        the nearest of its parents' that sets one)."""
        family = _FAMILY_OF.get(element.tag)
        name = element.get(f"{_TEXT}style-name", "")
        return family is not None and self.ink(family, name).display == "none"


def _named(container: etree._Element | None) -> dict[tuple[str, str], etree._Element]:
    """The ``style:style`` elements of ``container`` by family and name."""
    if container is None:
        return {}
    return {
        (style.get(f"{_STYLE}family", ""), style.get(f"{_STYLE}name", "")): style
        for style in container.iterchildren(f"{_STYLE}style")
    }


class _Seen(NamedTuple):
    """What the text being read is drawn in: its properties, the paint behind it, and whether
    its colour is the one its properties say (a link is drawn in the link's colour)."""

    ink: _Ink
    behind: css.Colour | str
    coloured: bool


@dataclass
class _Sight:
    """Whether a reader sees the text being read, as LibreOffice draws it: white (or any
    colour) on the same colour behind it, or under a pixel high. The résumé's white text,
    planted for the model, was read. Without styles (a presentation, whose master pages draw
    white text on dark backgrounds) nothing is judged."""

    styles: _Styles | None = None
    #: The page, and the paint behind the block being read (a cell's, a section's, a frame's).
    page: css.Colour | str = _UNKNOWN
    behind: css.Colour | str = _UNKNOWN
    #: Whether a text colour is judged at all, and whether sizes are as the styles say.
    coloured: bool = False
    sized: bool = False
    seen: list[_Seen] = field(default_factory=list)

    @classmethod
    def of_text(cls, content: etree._Element, part: etree._Element, styles: _Styles) -> _Sight:
        """A text document's, in its ``styles``: the page the text is on, and its colours
        judged unless a drawing that may lie behind the text, or text inserted with changes
        tracked (drawn in its author's colour), is in it. ``part`` is styles.xml."""
        pages = _pages_in_use(content, part)
        page = _page(pages)
        overlaid = _drawn_behind(content.find(f"{_OFFICE}body"), styles, pages) or _drawn_behind(
            part.find(f"{_OFFICE}master-styles"),
            _Styles(part.find(f"{_OFFICE}styles"), part.find(f"{_OFFICE}automatic-styles"), True),
            pages,
        )
        return cls(styles, page, page, not (overlaid or _marked_insertion(content)), True)

    def paint(self, family: str, name: str | None) -> css.Colour | str | None:
        return None if self.styles is None or not name else self.styles.ink(family, name).paint

    @contextmanager
    def within(self, element: etree._Element) -> Iterator[None]:
        """Reads inside ``element`` with what it paints behind its blocks, then as before; in a
        shape, its sizes too are not known unless it is a frame (see :data:`_UNSCALED`)."""
        outer = self.behind, self.sized
        if element.tag.startswith(_DRAW):
            self.sized = self.sized and element.tag in _UNSCALED
        paint = self._painted_by(element)
        if paint is not None and paint != _CLEAR:
            self.behind = paint
        try:
            yield
        finally:
            self.behind, self.sized = outer

    def _painted_by(self, element: etree._Element) -> css.Colour | str | None:
        """A shape's fill (not known), a table's, row's, cell's or section's background, the
        page's behind a note (read at the foot of the page, not in its cell)."""
        tag = element.tag
        name = element.get(f"{_TABLE}style-name")
        if tag.startswith(_DRAW):
            return _UNKNOWN
        if tag == f"{_TABLE}table":
            return _UNKNOWN if _default_cells(element) else self.paint("table", name)
        if tag == f"{_TABLE}table-row":
            if element.get(f"{_TABLE}default-cell-style-name"):
                return _UNKNOWN
            return self.paint("table-row", name)
        if tag == f"{_TABLE}table-cell":
            return self.paint("table-cell", name)
        if tag == f"{_TEXT}note-body":
            return self.page
        return self.paint("section", element.get(f"{_TEXT}style-name"))

    @contextmanager
    def reading(self, element: etree._Element) -> Iterator[None]:
        """Reads ``element``'s text (a paragraph's, or a span's within one) in its properties,
        then as before."""
        top = self._seen_in(element)
        if top is not None:
            self.seen.append(top)
        try:
            yield
        finally:
            if top is not None:
                self.seen.pop()

    def _seen_in(self, element: etree._Element) -> _Seen | None:
        """A paragraph's properties over the defaults, with its paint over the block's; an
        inline element's over its parent's. None outside a paragraph or without styles."""
        tag = element.tag
        if self.styles is None or not (self.seen or tag in (f"{_TEXT}p", f"{_TEXT}h")):
            return None
        if tag in (f"{_TEXT}p", f"{_TEXT}h"):
            ink = self.styles.ink("paragraph", element.get(f"{_TEXT}style-name", ""))
            paint = ink.paint
            behind = self.behind if paint is None or paint == _CLEAR else paint
            top = _Seen(ink, behind, self.coloured)
        else:
            top = self.seen[-1]
            if tag in _CHARACTER_STYLED:
                style = self.styles.ink("text", element.get(f"{_TEXT}style-name", ""))
                top = _Seen(style.over(top.ink), top.behind, top.coloured and tag != f"{_TEXT}a")
        if element.get(f"{_TEXT}class-names"):
            top = top._replace(ink=_UNSURE.over(top.ink))
        return top

    def unseen(self, text: str) -> bool:
        """Whether no reader sees ``text`` (white space always parts words and lines)."""
        if not self.seen or text.isspace():
            return False
        ink, behind, coloured = self.seen[-1]
        return (self.sized and _tiny(ink.sizes, text)) or (coloured and _invisible(ink, behind))


def _hides(element: etree._Element, styles: _Styles) -> bool:
    """Whether a reader of the document does not see ``element``: see :meth:`_Walker.hidden`."""
    tag = element.tag
    return (
        (tag == f"{_TEXT}section" and element.get(f"{_TEXT}display") in ("none", "condition"))
        or (tag == f"{_TEXT}hidden-text" and element.get(f"{_TEXT}is-hidden") == "true")
        or (
            tag in (f"{_TEXT}p", f"{_TEXT}h")
            and any(
                field.get(f"{_TEXT}is-hidden") == "true"
                for field in element.iter(f"{_TEXT}hidden-paragraph")
            )
        )
        or styles.hides(element)
    )


def _default_cells(table: etree._Element) -> bool:
    """Whether a table's cells may take a style it does not name on them: a table template's,
    or a column's default cell style, whose paint behind a cell's text is not worked out."""
    if table.get(f"{_TABLE}template-name"):
        return True
    groups = (
        f"{_TABLE}table-columns",
        f"{_TABLE}table-header-columns",
        f"{_TABLE}table-column-group",
    )
    for child in _elements(table):
        columns = child.iter(f"{_TABLE}table-column") if child.tag in groups else (child,)
        if any(column.get(f"{_TABLE}default-cell-style-name") for column in columns):
            return True
    return False


#: A page the text may be on: its layout and its drawing-page style, each None where absent.
_Page = tuple[etree._Element | None, etree._Element | None]


def _pages_in_use(content: etree._Element, part: etree._Element) -> list[_Page]:
    """The pages of each master page the text may be on: "Standard" (the first page's), any
    a style switches to (``style:master-page-name``), and the ones each is followed by
    (``style:next-style-name``). An unused layout is no page: an attacker's dark one, taken
    for the page, made black text unseen and white text read."""
    masters = {master.get(f"{_STYLE}name"): master for master in part.iter(f"{_STYLE}master-page")}
    layouts = {layout.get(f"{_STYLE}name"): layout for layout in part.iter(f"{_STYLE}page-layout")}
    drawings = {
        style.get(f"{_STYLE}name"): style
        for style in part.iter(f"{_STYLE}style")
        if style.get(f"{_STYLE}family") == "drawing-page"
    }
    wanted = ["Standard"] + [
        name
        for root in (content, part)
        for style in root.iter(f"{_STYLE}style")
        if (name := style.get(f"{_STYLE}master-page-name"))
    ]
    used: set[str] = set()
    pages: list[_Page] = []
    while wanted:
        name = wanted.pop()
        if name in used:
            continue
        used.add(name)
        master = masters.get(name)
        if master is None:
            if name == "Standard":  # LibreOffice's own first page: white, of the default size
                pages.append((None, None))
            continue
        wanted.append(master.get(f"{_STYLE}next-style-name", ""))
        layout = layouts.get(master.get(f"{_STYLE}page-layout-name"))
        pages.append((layout, drawings.get(master.get(f"{_DRAW}style-name"))))
    return pages


def _page(pages: list[_Page]) -> css.Colour | str:
    """The colour of the pages in use: each layout's background (white where it paints none)
    or its drawing page's where that paints one; not known when they differ (which page
    shows which text is not worked out)."""
    paints: set[css.Colour | str] = set()
    for layout, drawing in pages:
        properties = _first(layout, f"{_STYLE}page-layout-properties")
        layout_paint = (None if properties is None else _paint(properties)) or _CLEAR
        paints.add(layout_paint)
        properties = _first(drawing, f"{_STYLE}drawing-page-properties")
        paints.add((None if properties is None else _paint(properties)) or layout_paint)
    paints = {css.WHITE if paint == _CLEAR else paint for paint in paints}
    return paints.pop() if len(paints) == 1 else _UNKNOWN


def _first(style: etree._Element | None, properties: str) -> etree._Element | None:
    return None if style is None else style.find(properties)


def _page_size(pages: list[_Page]) -> tuple[float, float]:
    """The widest and tallest of the pages in use, in millimetres; never under LibreOffice's
    default page (Letter's width, A4's height), so that a drawing called off the page is."""
    width, height = _DEFAULT_PAGE_MM
    for layout, _ in pages:
        properties = _first(layout, f"{_STYLE}page-layout-properties")
        if properties is not None:
            width = max(width, _millimetres(properties.get(f"{_FO}page-width")))
            height = max(height, _millimetres(properties.get(f"{_FO}page-height")))
    return width, height


def _drawn_behind(root: etree._Element | None, styles: _Styles, pages: list[_Page]) -> bool:
    """Whether a drawing may lie under the text (white text on a dark photo shows): one not in
    hidden or skipped content, anchored anywhere but as a character, not wrapped beside the
    text, that paints something, not under 1 mm both ways nor placed off the page. One 0.1 mm
    empty drawing anywhere had every white letter read."""
    page = _page_size(pages)
    return any(_may_lie_under(drawing, styles, page) for drawing in _drawings(root, styles))


def _drawings(root: etree._Element | None, styles: _Styles) -> Iterator[etree._Element]:
    """The drawings under ``root`` outside skipped and hidden content (shown nowhere, they
    cover nothing), each not inside another (a frame's picture or text box, a group's shape:
    the outer one decides), every element visited once."""
    stack = [] if root is None else [root]
    while stack:
        element = stack.pop()
        for child in _elements(element):
            if child.tag in _SKIPPED or _hides(child, styles):
                continue
            if child.tag.startswith(_DRAW) and not element.tag.startswith(_DRAW):
                yield child
            stack.append(child)


def _may_lie_under(drawing: etree._Element, styles: _Styles, page: tuple[float, float]) -> bool:
    if drawing.get(f"{_TEXT}anchor-type") == "as-char":
        return False
    ink = styles.ink("graphic", drawing.get(f"{_DRAW}style-name", ""))
    if ink.draws(f"{_STYLE}wrap") in _BESIDE_TEXT:
        return False
    return (
        _paints(drawing, ink) and not _tiny_drawing(drawing) and not _off_page(drawing, ink, page)
    )


def _paints(drawing: etree._Element, ink: _Ink) -> bool:
    """Whether a drawing paints anything: a fill, a line or a border (a shape's fill and line
    are drawn unless set to none, a frame's only where set), a picture or object, a group's
    or link's shapes, or text."""
    frame = drawing.tag == f"{_DRAW}frame"
    unset = (None, "none") if frame else ("none",)
    if ink.paint not in ((None, _CLEAR) if frame else (_CLEAR,)):
        return True
    if ink.draws(f"{_DRAW}stroke") not in unset or any(
        ink.draws(border) not in (None, "none") for border in _BORDERS
    ):
        return True
    if drawing.tag in (f"{_DRAW}g", f"{_DRAW}a") and len(drawing):
        return True
    return any(element.tag in _PICTURES for element in drawing.iter()) or any(
        text.strip() for text in drawing.itertext()
    )


def _tiny_drawing(drawing: etree._Element) -> bool:
    """Whether both sides of a drawing are under 1 mm, and nothing sizes it otherwise (a
    transform, a size relative to the page, a text box's least size)."""
    if drawing.get(f"{_DRAW}transform") is not None or drawing.find(f"{_DRAW}text-box") is not None:
        return False
    if drawing.get(f"{_STYLE}rel-width") or drawing.get(f"{_STYLE}rel-height"):
        return False
    sides = (drawing.get(f"{_SVG}width") or "", drawing.get(f"{_SVG}height") or "")
    return all(
        _LENGTH.fullmatch(side) and 0 <= _millimetres(side) < _LEAST_DRAWING_MM for side in sides
    )


def _off_page(drawing: etree._Element, ink: _Ink, page: tuple[float, float]) -> bool:
    """Whether a drawing anchored to the page and placed from its left or top (LibreOffice's
    default) starts past its right or bottom edge, where no page shows it."""
    if drawing.get(f"{_TEXT}anchor-type") != "page" or drawing.get(f"{_DRAW}transform"):
        return False
    width, height = page
    across = ink.draws(f"{_STYLE}horizontal-pos") in (None, "from-left") and (
        _millimetres(drawing.get(f"{_SVG}x")) >= width
    )
    down = ink.draws(f"{_STYLE}vertical-pos") in (None, "from-top") and (
        _millimetres(drawing.get(f"{_SVG}y")) >= height
    )
    return across or down


def _marked_insertion(content: etree._Element) -> bool:
    """Whether text inserted with changes tracked, which LibreOffice draws in its author's
    colour, is marked in the text: an insertion no change mark names colours nothing."""
    inserted = {
        region.get(f"{_TEXT}id")
        for region in content.iter(f"{_TEXT}changed-region")
        if region.find(f"{_TEXT}insertion") is not None
    }
    marks = content.iter(f"{_TEXT}change-start", f"{_TEXT}change", f"{_TEXT}change-end")
    return bool(inserted) and any(mark.get(f"{_TEXT}change-id") in inserted for mark in marks)


def _tiny(sizes: tuple[_Size, ...], text: str) -> bool:
    """Whether ``text`` is drawn under a pixel high (the web page's ``css.SMALLEST_PX``): in
    its Western size when all its letters are Western (digits and marks alone take their
    neighbours' script), else only when its Asian and complex-script sizes are too."""
    western, asian, complex_script = map(_under_a_pixel, sizes)
    if not western:
        return False
    if asian and complex_script:
        return True
    letters = [letter for letter in text if letter.isalpha()]
    return bool(letters) and max(letters) < _WESTERN_END


def _under_a_pixel(size: _Size) -> bool:
    return size is not None and not size[1] and size[0] * _PX_PER_POINT < css.SMALLEST_PX


def _invisible(ink: _Ink, behind: css.Colour | str) -> bool:
    """Whether the text's colour cannot be told from what is behind it (within 16 in each
    channel, the web page's rule): its highlight, else its paragraph's, cell's, section's
    or the page's paint. Automatic colour, effects, or a paint not known: seen."""
    colour = ink.colour
    if not isinstance(colour, css.Colour) or any(
        effect not in _EFFECTS_OFF for effect in ink.effects
    ):
        return False
    if ink.highlight is not None and ink.highlight != _CLEAR:
        behind = ink.highlight
    return isinstance(behind, css.Colour) and colour.unseen_on(behind)


@dataclass
class _Walker:
    """Blocks out of ODF body elements, every element visited once and every character
    charged where it is written; text the document hides is counted, not read."""

    budget: TextBudget
    styles: _Styles
    sight: _Sight = field(default_factory=_Sight)
    notes: list[str] = field(default_factory=list)
    hid_text: bool = False
    in_note: bool = False

    def hidden(self, element: etree._Element) -> bool:
        """Whether a reader of the document does not see ``element``: a section shown never
        or on a condition, a paragraph a hidden-paragraph field hides, hidden text, or a
        paragraph or span whose style sets ``text:display="none"``. Said once, in a notice."""
        hidden = _hides(element, self.styles)
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
            else:  # sections, index bodies, change spans, shapes: their contents
                with self.sight.within(child):
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
        with self.sight.reading(element):
            self._inline_into(element, pieces)
        return "".join(pieces)

    def _inline_into(self, element: etree._Element, pieces: list[str]) -> None:
        self._write(element.text, pieces)
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
                with self.sight.reading(child):
                    self._inline_into(child, pieces)
            self._write(child.tail, pieces)

    def _write(self, text: str | None, pieces: list[str]) -> None:
        """``text`` into ``pieces``, unless no reader sees it: then counted as hidden."""
        if not text:
            return
        if self.sight.unseen(text):
            self.hid_text = True
        else:
            pieces.append(self.budget.spend(text))

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
            text = ""
            if body is not None:
                with self.sight.within(body):
                    text = self.text_of(body)
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
        with self.sight.within(table):
            return self._table_rows(table)

    def _table_rows(self, table: etree._Element) -> list[Block]:
        rows: list[list[str]] = []
        header = False
        for row, in_header in _rows(table):
            with self.sight.within(row):
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
                with self.sight.within(cell):
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
    shape (a rectangle, a custom shape) the paragraphs it holds itself, its fill behind them."""
    if shape.tag in _SKIPPED:
        return []
    with walker.sight.within(shape):
        return _shape_blocks(shape, walker)


def _shape_blocks(shape: etree._Element, walker: _Walker) -> list[Block]:
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
