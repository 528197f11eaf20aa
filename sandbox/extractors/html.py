"""Web pages (HTML and XHTML) read for what a browser shows, never as markup.

The page is parsed by lexbor (through selectolax), an HTML5 parser: it builds the tree a
browser builds, so text a browser hides (``<span hidden/>`` opens a span in HTML, and an
unclosed hidden ``<b>`` is re-opened inside the next block) is hidden here too. Tags with no
text of their own (script, style, template, head) are left out; content hidden by the hidden
attribute, aria-hidden or by an inline style or a stylesheet rule (none, zero size, off-screen,
transparent, the colour of its background) is left out and counted in a notice, because text
a person cannot see is how instructions are slipped to a model. Nesting is bounded before the
parser runs: the tree builder costs quadratic time in depth. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser, LexborNode

from sandbox import codes
from sandbox.document import (
    MAX_COLUMNS,
    Block,
    Document,
    Heading,
    ListItem,
    Notice,
    Paragraph,
    Table,
)
from sandbox.extractors.registry import Refusal, extractor
from sandbox.extractors.text import TextBudget, decode_text
from sandbox.limits import ParseLimits

HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_XHTML = "application/xhtml+xml"

#: Elements open at once, as counted before parsing. Chromium's parser stops nesting at 512;
#: lexbor's tree builder walks the open elements on many start tags, so 100,000 nested
#: ``<div>`` cost it 23 s of CPU, and 2,048 cost nothing measurable.
MAX_NESTING = 2048
#: Selectors of hiding stylesheet rules tried on the page, at most.
_MAX_HIDING_SELECTORS = 500
#: Linked stylesheets read for one page, at most.
_MAX_SHEETS = 16
_MAX_LIST_DEPTH = 8
_MAX_SPAN = 1000

#: Elements whose content is never shown as text: scripts, styles, the head, inert templates,
#: fallbacks a browser with scripts never shows, and embedded documents.
_NOT_SHOWN = frozenset(
    {
        "head",
        "title",
        "script",
        "style",
        "template",
        "noscript",
        "iframe",
        "object",
        "embed",
        "canvas",
        "audio",
        "video",
        "map",
        "datalist",
        "desc",
        "metadata",
    }
)
#: Elements whose content the pre-count skips, as the tokenizer does (raw text).
_RAW_TEXT = ("script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes")
#: Elements that never hold content, and those a sibling closes by itself: neither deepens
#: the tree for long, so neither is counted.
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
    | {"track", "wbr", "param", "keygen"}
)
_SELF_CLOSING = frozenset(
    {"p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "rb", "rt", "rp"}
    | {"thead", "tbody", "tfoot", "colgroup", "caption"}
)
_BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "center", "dd", "details", "dialog"}
    | {"div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header"}
    | {"hgroup", "hr", "legend", "main", "menu", "nav", "ol", "p", "section", "summary", "ul"}
    | {"caption", "html"}
)
_PRE = frozenset({"pre", "xmp", "listing", "textarea"})
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_LISTS = frozenset({"ul", "ol", "menu"})
_CELLS = frozenset({"td", "th"})

#: A tag's opening, up to its name: what follows is not matched, since a pattern that ran on
#: to the ">" would rescan the rest of the page for every "<a" left open.
_TAG = re.compile(r"<(/?)([A-Za-z][^\s/><]*)|<!--")
_COMMENT_END = "-->"
_SELF_CLOSED_XML = re.compile(
    r"""<([A-Za-z][\w:.-]*)((?:\s+[^\s=/>"'<]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)\s*/>"""
)
_DOCTYPE = re.compile(r"<!doctype", re.IGNORECASE)
_WHITESPACE = re.compile(r"[ \t\n\r\f]+")
#: A charset named in the first bytes, as a browser's pre-scan finds it.
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_PRESCAN_BYTES = 1024
#: Labels a browser reads as another encoding than Python's of that name (WHATWG Encoding).
_BROWSER_ENCODINGS = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "iso-8859-9": "cp1254",
    "latin5": "cp1254",
    "tis-620": "cp874",
    "utf-16": "utf-8",
    "utf-16le": "utf-8",
    "utf-16be": "utf-8",
}

_LENGTH = re.compile(r"^(-?\d*\.?\d+)(px|em|rem|pt|pc|ex|ch|vw|vh|%|cm|mm|in)?$")
_PX_PER_UNIT = {"px": 1.0, "em": 16.0, "rem": 16.0, "pt": 4 / 3, "pc": 16.0, "ex": 8.0}
_PX_PER_UNIT |= {"ch": 8.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "in": 96.0, "vw": 10.0, "vh": 10.0}
#: Text moved this far off the left or top edge is off-screen.
_OFF_SCREEN_PX = -500.0
_OFFSETS = ("left", "top", "right", "bottom", "margin-left", "margin-top", "text-indent")
_HEX = re.compile(r"^#([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$")
_CHANNEL = r"([\d.]+%?)"
_RGB = re.compile(
    rf"^rgba?\(\s*{_CHANNEL}[\s,]+{_CHANNEL}[\s,]+{_CHANNEL}(?:[\s,/]+{_CHANNEL})?\s*\)$"
)
_NAMED = {"white": "#ffffff", "black": "#000000", "transparent": "transparent"}
_ZERO_CLIP = re.compile(r"rect\(\s*0\D*0\D*0\D*0\D*\)")
_ZERO_SCALE = re.compile(r"scale\(\s*0(?:\.0*)?\s*\)")
#: The background of an element with a picture behind its text: never a text colour.
_PICTURE = "picture"
_PAGE_BACKGROUND = "#ffffff"
_TEXT_COLOUR = "#000000"


@extractor("html")
def extract_html(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    budget = TextBudget(limits)
    page = read_page(decoded(payload), budget, xhtml=media_type == _XHTML)
    return Document(page.blocks + hidden_notice(page.hidden))


@dataclass(frozen=True)
class Page:
    """A page as read: its blocks, and how many hidden elements were left out, by method."""

    blocks: list[Block]
    hidden: Counter[str]


def decoded(payload: bytes) -> str:
    """The page's text: a byte-order mark, else the charset its first bytes declare when the
    page decodes in it, else the plain-text decoder's reading (UTF-8, then detection)."""
    if not payload.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        declared = _META_CHARSET.search(payload[:_PRESCAN_BYTES])
        if declared is not None:
            label = declared.group(1).decode("ascii").lower()
            try:
                return payload.decode(_BROWSER_ENCODINGS.get(label, label))
            except (LookupError, UnicodeDecodeError):
                pass  # a page that lies about its charset is read as if it said none
    return decode_text(payload)


def read_page(
    markup: str,
    budget: TextBudget,
    *,
    xhtml: bool,
    stylesheets: Callable[[str], str] | None = None,
) -> Page:
    """Read ``markup`` (HTML, or XHTML when ``xhtml``: there ``<p/>`` is an empty element, as a
    reading system's XML parser sees it, not an open one) into blocks. ``stylesheets`` gives
    the text of a stylesheet the page links to by its href ("" when there is none); a web
    page's links are not followed."""
    if "\x00" in markup:
        raise Refusal(codes.UNREADABLE, "the page holds NUL characters: it is binary, not HTML")
    markup = _without_internal_subset(markup)
    if xhtml:
        markup = _SELF_CLOSED_XML.sub(_opened_and_closed, markup)
    _bound_nesting(markup)
    tree = LexborHTMLParser(markup)
    reader = _Reader(budget, _hidden_by_stylesheet(tree, stylesheets))
    if tree.root is not None:
        reader.read(tree.root)
    return Page(reader.blocks, reader.hidden)


def hidden_notice(hidden: Counter[str]) -> list[Block]:
    """The notice that says what hidden content was left out, when any was."""
    if not hidden:
        return []
    count = sum(hidden.values())
    how = ", ".join(method for method, _ in hidden.most_common())
    noun = "element" if count == 1 else "elements"
    return [Notice(f"[airlock: {count} hidden {noun} left out ({how})]")]


def _without_internal_subset(markup: str) -> str:
    """``markup`` without its DOCTYPE's internal subset, which declares entities: the HTML
    parser never expands them, but would show the declarations' tail ("]>") as text. Only the
    first DOCTYPE counts (a parser ignores any other), and it is found in one pass."""
    opening = _DOCTYPE.search(markup)
    if opening is None:
        return markup
    bracket = markup.find("[", opening.end())
    closing = markup.find(">", opening.end())
    if bracket < 0 or 0 <= closing < bracket:
        return markup
    end = markup.find("]", bracket)
    closing = -1 if end < 0 else markup.find(">", end)
    return markup[: opening.start()] + ("" if closing < 0 else markup[closing + 1 :])


def _opened_and_closed(match: re.Match[str]) -> str:
    name = match.group(1)
    if name.lower() in _VOID:
        return match.group(0)
    return f"<{name}{match.group(2)}></{name}>"


def _bound_nesting(markup: str) -> None:
    """Refuse a page whose elements nest deeper than :data:`MAX_NESTING`, counted by tags.

    The count over-estimates: an end tag only closes a start tag of its own name, and elements
    a sibling closes by itself (``<p>``, ``<li>``, ``<td>``) are not counted at all.
    """
    open_by_name: Counter[str] = Counter()
    depth = 0
    position = 0
    lowered = markup.lower()
    while (tag := _TAG.search(markup, position)) is not None:
        position = tag.end()
        if tag.group(0) == "<!--":
            end = markup.find(_COMMENT_END, position)
            position = len(markup) if end < 0 else end + len(_COMMENT_END)
            continue
        name = tag.group(2).lower()
        if tag.group(1):
            if open_by_name[name]:
                open_by_name[name] -= 1
                depth -= 1
            continue
        if name in _RAW_TEXT:
            end = lowered.find(f"</{name}", position)
            position = len(markup) if end < 0 else end
            continue
        if name in _VOID or name in _SELF_CLOSING:
            continue
        open_by_name[name] += 1
        depth += 1
        if depth > MAX_NESTING:
            raise Refusal(
                codes.CEILING,
                f"the page nests elements more than {MAX_NESTING} deep",
            )


def _hidden_by_stylesheet(
    tree: LexborHTMLParser, stylesheets: Callable[[str], str] | None
) -> set[int]:
    """The elements a rule of the page's ``<style>`` elements or linked stylesheets hides
    (rules inside @media and other at-rules are not judged: they apply to some screens only)."""
    sheets = [style.text(deep=True) for style in tree.css("style")]
    if stylesheets is not None:
        links = [
            link.attributes.get("href") or ""
            for link in tree.css("link")
            if "stylesheet" in (link.attributes.get("rel") or "").lower().split()
        ]
        sheets += [stylesheets(href) for href in links[:_MAX_SHEETS] if href]
    selectors: list[str] = []
    for sheet in sheets:
        for selector, declarations in _rules(sheet):
            if _hiding(_declarations(declarations)) is not None:
                selectors.append(selector)
    hidden: set[int] = set()
    for selector in selectors[:_MAX_HIDING_SELECTORS]:
        try:
            matches = tree.css(selector)
        except Exception:  # noqa: BLE001, S112 - a selector lexbor does not know is not applied
            continue
        hidden.update(node.mem_id for node in matches)
    return hidden


def _rules(sheet: str) -> Iterator[tuple[str, str]]:
    """The top-level ``selector { declarations }`` rules of a stylesheet."""
    sheet = _without_comments(sheet)
    position = 0
    while (opening := sheet.find("{", position)) >= 0:
        prelude = sheet[position:opening].strip()
        depth, cursor = 1, opening + 1
        while depth and cursor < len(sheet):
            character = sheet[cursor]
            depth += (character == "{") - (character == "}")
            cursor += 1
        if not prelude.startswith("@"):
            yield prelude, sheet[opening + 1 : cursor - 1]
        position = cursor


def _without_comments(sheet: str) -> str:
    """``sheet`` without its ``/* */`` comments, in one pass (a pattern would rescan the rest
    of the sheet for every unclosed ``/*``)."""
    kept: list[str] = []
    position = 0
    while (opening := sheet.find("/*", position)) >= 0:
        kept.append(sheet[position:opening])
        closing = sheet.find("*/", opening + 2)
        position = len(sheet) if closing < 0 else closing + 2
    kept.append(sheet[position:])
    return "".join(kept)


def _declarations(style: str) -> dict[str, str]:
    """A style's declarations, later ones winning, ``!important`` ignored."""
    found: dict[str, str] = {}
    for declaration in style.split(";"):
        name, colon, value = declaration.partition(":")
        if colon:
            value = value.lower().replace("!important", "").strip()
            found[name.strip().lower()] = value
    return found


def _hiding(style: dict[str, str]) -> str | None:
    """How ``style`` hides what it applies to, or None when it does not."""
    if style.get("display") == "none":
        return "display:none"
    if style.get("visibility") in ("hidden", "collapse"):
        return "visibility:hidden"
    if _at_most(style.get("opacity", "").rstrip("%"), 0):
        return "opacity:0"
    clipped = style.get("overflow") == "hidden" or "clip" in style
    tiny = any(_at_most(style.get(side, ""), 1) for side in ("width", "height"))
    if (
        _below(style.get("font-size", ""), 1)
        or (clipped and tiny)
        or _ZERO_CLIP.fullmatch(style.get("clip", ""))
        or _ZERO_SCALE.search(style.get("transform", ""))
    ):
        return "zero size"
    if any(_at_most(style.get(offset, ""), _OFF_SCREEN_PX) for offset in _OFFSETS):
        return "off-screen"
    if _colour(style.get("color", "")) == "transparent":
        return "transparent text"
    return None


def _below(value: str, limit: float) -> bool:
    """Whether ``value`` is a CSS length of less than ``limit`` pixels."""
    pixels = _px(value)
    return pixels is not None and pixels < limit


def _at_most(value: str, limit: float) -> bool:
    """Whether ``value`` is a CSS length of at most ``limit`` pixels."""
    pixels = _px(value)
    return pixels is not None and pixels <= limit


def _px(value: str) -> float | None:
    """A CSS length in pixels (an em as 16), or None when ``value`` is not one."""
    match = _LENGTH.match(value.strip())
    if match is None:
        return None
    number = float(match.group(1))
    unit = match.group(2)
    if unit == "%":
        return number if number <= 0 else None  # a percentage is judged only by its sign
    return number * _PX_PER_UNIT.get(unit or "px", 1.0)


def _colour(value: str) -> str | None:
    """A colour as ``#rrggbb`` (or "transparent", or its name), None when there is none."""
    value = value.strip().lower()
    if not value:
        return None
    if value in _NAMED:
        return _NAMED[value]
    if hex_digits := _HEX.match(value):
        digits = hex_digits.group(1)
        if len(digits) in (3, 4):
            digits = "".join(digit * 2 for digit in digits)
        if len(digits) == 8 and digits[6:] == "00":
            return "transparent"
        return "#" + digits[:6]
    if rgb := _RGB.match(value):
        alpha = rgb.group(4)
        if alpha is not None and float(alpha.rstrip("%")) == 0:
            return "transparent"
        channels = [
            round(float(part[:-1]) * 2.55) if part.endswith("%") else round(float(part))
            for part in rgb.groups()[:3]
        ]
        return "#" + "".join(f"{min(channel, 255):02x}" for channel in channels)
    return value if value.isascii() and value.isalpha() else None


def _background(style: dict[str, str], attributes: dict[str, str | None]) -> str | None:
    """The colour an element paints behind its text, :data:`_PICTURE` when a picture may be
    behind it (white text on a photo is shown), None when it sets none."""
    painted = [style.get("background-color", ""), style.get("background", "")]
    if any("url(" in value or "gradient(" in value for value in painted):
        return _PICTURE
    painted.append(style.get("background-image", ""))
    for value in painted:
        for token in value.split():
            if (colour := _colour(token)) is not None:
                return colour
    return _colour(attributes.get("bgcolor") or "")


@dataclass
class _Frame:
    """What an open element passes to its content; ``unseen``: its own text is the colour
    of what is behind it (a child may still set a colour that shows), and ``counted`` once
    such text was left out."""

    tag: str
    unseen: bool
    colour: str | None
    background: str | None
    pre: bool
    counted: bool = False


@dataclass
class _TableBuilder:
    """A table being read: its rows so far, the cell being read, and tables nested in it."""

    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""
    cell: list[str] | None = None
    nested: int = 0
    header_rows: int = 0
    first_row_all_th: bool = True


class _Reader:
    """Walks the tree once, in document order, turning elements into blocks."""

    def __init__(self, budget: TextBudget, hidden_by_sheet: set[int]) -> None:
        self.blocks: list[Block] = []
        self.hidden: Counter[str] = Counter()
        self._budget = budget
        self._hidden_by_sheet = hidden_by_sheet
        self._frames = [_Frame("", False, _TEXT_COLOUR, _PAGE_BACKGROUND, pre=False)]
        self._inline: list[str] = []
        self._heading: int | None = None
        # Per open list: its numbering type ("" for bullets) and its next number.
        self._lists: list[tuple[str, list[int]]] = []
        self._items: list[tuple[str, int]] = []  # per open list item: (marker, depth)
        self._tables: list[_TableBuilder] = []

    def read(self, root: LexborNode) -> None:
        todo: list[tuple[LexborNode, bool]] = [(root, True)]
        while todo:
            node, entering = todo.pop()
            if not entering:
                self._leave(node)
            elif self._enter(node):
                todo.append((node, False))
                children: list[LexborNode] = []
                child = node.child
                while child is not None:
                    children.append(child)
                    child = child.next
                todo.extend((child, True) for child in reversed(children))
        self._flush()

    # -- elements ---------------------------------------------------------------------------

    def _enter(self, node: LexborNode) -> bool:
        """Take in an element's start (or a text node); False when its content is not read."""
        tag = node.tag or ""
        if tag == "-text":
            self._text(node.text_content or "")
            return False
        if tag.startswith(("-", "_", "!")) or tag in _NOT_SHOWN:
            return False
        attributes = node.attributes
        style = _declarations(attributes.get("style") or "")
        parent = self._frames[-1]
        colour = _colour(style.get("color") or attributes.get("color") or "") or parent.colour
        background = _background(style, attributes) or parent.background
        method = self._hides(node, attributes, style)
        if method is not None:
            if node.text(deep=True, separator=" ").strip():
                self.hidden[method] += 1
            return False
        self._start(tag, attributes)
        unseen = colour is not None and colour == background
        self._frames.append(_Frame(tag, unseen, colour, background, parent.pre or tag in _PRE))
        return True

    def _hides(
        self, node: LexborNode, attributes: dict[str, str | None], style: dict[str, str]
    ) -> str | None:
        if "hidden" in attributes:
            return "hidden attribute"
        if (attributes.get("aria-hidden") or "").strip().lower() == "true":
            return "aria-hidden"
        if node.mem_id in self._hidden_by_sheet:
            return "a stylesheet rule"
        return _hiding(style)

    def _start(self, tag: str, attributes: dict[str, str | None]) -> None:
        table = self._tables[-1] if self._tables else None
        if table is not None and table.cell is not None:
            # Inside a cell everything is the cell's text, a nested table's cells included.
            table.nested += tag == "table"
            if tag in _BLOCKS or tag in _CELLS or tag in ("tr", "br"):
                table.cell.append(" ")
        elif tag == "table":
            self._flush()
            self._tables.append(_TableBuilder())
        elif table is not None and tag == "tr":
            table.rows.append([])
        elif table is not None and tag in _CELLS:
            if not table.rows:
                table.rows.append([])
            if tag == "td" and len(table.rows) == 1:
                table.first_row_all_th = False
            table.cell = []
        elif table is not None and tag == "caption":
            table.cell = []
        elif tag in _HEADINGS:
            self._flush()
            self._heading = _HEADINGS[tag]
        elif tag in _LISTS:
            self._flush()
            start = _whole_number(attributes.get("start"), default=1)
            style = (attributes.get("type") or "1").strip()
            self._lists.append((style, [start]) if tag == "ol" else ("", [0]))
        elif tag == "li":
            self._flush()
            self._items.append((self._marker(), max(len(self._lists) - 1, 0)))
        elif tag == "br":
            self._inline.append("\n")
        elif tag in _BLOCKS or tag in _PRE:
            self._flush()

    def _leave(self, node: LexborNode) -> None:
        tag = self._frames[-1].tag
        table = self._tables[-1] if self._tables else None
        if table is not None and table.nested:
            table.nested -= tag == "table"
        elif table is not None and table.cell is not None and tag in _CELLS:
            self._close_cell(table, node)
        elif table is not None and table.cell is not None and tag == "caption":
            table.caption = _WHITESPACE.sub(" ", "".join(table.cell)).strip()
            table.cell = None
        elif table is not None and table.cell is not None:
            pass
        elif table is not None and tag == "table":
            self._tables.pop()
            self._table(table)
        elif table is not None and tag == "thead":
            table.header_rows = len(table.rows)
        elif tag in _HEADINGS:
            self._flush()
            self._heading = None
        elif tag == "li":
            self._flush()
            if self._items:
                self._items.pop()
        elif tag in _LISTS:
            self._flush()
            if self._lists:
                self._lists.pop()
        elif tag in _BLOCKS or tag in _PRE:
            self._flush()
        self._frames.pop()

    def _marker(self) -> str:
        style, number = self._lists[-1] if self._lists else ("", [0])
        if not style:
            return "- "
        number[0] += 1
        return f"{_numeral(number[0] - 1, style)}. "

    def _close_cell(self, table: _TableBuilder, node: LexborNode) -> None:
        text = _WHITESPACE.sub(" ", "".join(table.cell or [])).strip()
        table.cell = None
        row = table.rows[-1]
        span = min(_whole_number(node.attributes.get("colspan"), default=1), _MAX_SPAN)
        row.append(self._budget.spend(text))
        row.extend([""] * (span - 1))
        self._budget.charge(max(span - 1, 0))
        if len(row) > MAX_COLUMNS:
            raise Refusal(
                codes.CEILING,
                f"a table row of more than {MAX_COLUMNS} cells exceeds the column ceiling",
            )

    def _table(self, table: _TableBuilder) -> None:
        if table.caption:
            self.blocks.append(Paragraph(self._budget.spend(table.caption)))
        rows = [row for row in table.rows if any(row)]
        if not rows:
            return
        marked = table.header_rows > 0 or (table.first_row_all_th and bool(table.rows[0]))
        self.blocks.append(Table(rows, header=marked and rows[0] is table.rows[0]))

    # -- text -------------------------------------------------------------------------------

    def _text(self, text: str) -> None:
        frame = self._frames[-1]
        if frame.unseen and text.strip():
            if not frame.counted:
                self.hidden["text the colour of its background"] += 1
                frame.counted = True
            return
        table = self._tables[-1] if self._tables else None
        if table is not None and table.cell is not None:
            table.cell.append(text)
        elif table is None:
            self._inline.append(text if frame.pre else _WHITESPACE.sub(" ", text))
        # else: text between a table's cells, which the parser has moved before the table

    def _flush(self) -> None:
        """End the run of text read so far as the block it belongs to."""
        raw = "".join(self._inline)
        self._inline = []
        text = raw.strip("\n") if self._frames[-1].pre else _tidy(raw)
        if not text.strip():
            return
        self._budget.spend(text)
        if self._heading is not None:
            self.blocks.append(Heading(self._heading, " ".join(text.split())))
        elif self._items:
            marker, depth = self._items[-1]
            self.blocks.append(ListItem(marker, min(depth, _MAX_LIST_DEPTH), text))
            # The item's later paragraphs stand under it without its marker.
            self._items[-1] = (" " * len(marker), depth)
        else:
            self.blocks.append(Paragraph(text))


_ROMAN = (
    (1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
    (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"),
)  # fmt: skip


def _numeral(number: int, style: str) -> str:
    """``number`` as an ``ol`` of ``type`` ``style`` draws it: 1, a, A, i or I (digits for
    what letters cannot spell: zero, or a roman numeral past 3,999)."""
    if style in ("a", "A") and number > 0:
        letters = ""
        while number:
            number, digit = divmod(number - 1, 26)
            letters = chr(ord("a") + digit) + letters
        return letters if style == "a" else letters.upper()
    if style in ("i", "I") and 0 < number < 4000:
        roman = ""
        for value, numeral in _ROMAN:
            count, number = divmod(number, value)
            roman += numeral * count
        return roman if style == "i" else roman.upper()
    return str(number)


def _tidy(text: str) -> str:
    """Collapsed text's lines without the spaces that open or close them."""
    return "\n".join(line.strip(" ") for line in text.split("\n")).strip()


def _whole_number(value: str | None, *, default: int) -> int:
    try:
        number = int((value or "").strip())
    except ValueError:
        return default
    return number if 0 <= number < 1_000_000 else default
