"""XHTML (an EPUB's chapters, ``application/xhtml+xml``) as a reading system reads it: XML.

A reading system parses a chapter as XML; the HTML reader parses markup as HTML5. The same
bytes can build two trees (``<p/>`` is empty in XML and open in HTML; a ``div`` inside a ``p``
stays there in XML and closes it in HTML), and text hidden in one would show in the other. So
the chapter is parsed as XML first (no DTD, HTML's named entities as characters, comments and
instructions dropped), refused where an HTML parser would rebuild it, and written back so
that the HTML parser builds the XML tree. See docs/sandbox.md, "Parsers" (html).
"""

from __future__ import annotations

import html as html_entities
import re
from dataclasses import dataclass

from lxml import etree

from sandbox import codes
from sandbox.extractors import package_parts
from sandbox.extractors.markup import FOREIGN, HEADINGS, RAW_TEXT, VOID, without_internal_subset
from sandbox.extractors.registry import Refusal

_SELF_CLOSED_XML = re.compile(
    r"""<([A-Za-z][\w:.-]*)((?:\s+[^\s=/>"'<]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)\s*/>"""
)
_NAMED_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
_XML_ENTITIES = frozenset({"lt", "gt", "amp", "quot", "apos"})
#: Where an HTML parser rebuilds a well-formed XHTML tree: a block in a paragraph closes it,
#: a heading in a heading, a list item in a list item, a link in a link; a table's stray
#: content is moved before it. An XHTML chapter built so is refused: its hidden parts would
#: be hidden in one tree and shown in the other.
_CLOSES_P = frozenset(
    {"address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div"}
    | {"dl", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "hr"}
    | {"main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "ul", "li"}
    | {"dd", "dt", "xmp", "listing", "plaintext", "h1", "h2", "h3", "h4", "h5", "h6"}
)
_SCOPE_ENDS = frozenset({"table", "td", "th", "caption", "button", "svg", "math", "template"})
#: The scope a button looks through for another button: every boundary but a button.
_SCOPE_ENDS_BUT_BUTTON = _SCOPE_ENDS - {"button"}
#: Elements HTML reads as text whose markup an XML reader shows (script and style show none).
_TEXT_TO_HTML = RAW_TEXT - {"script", "style"}
#: Elements an HTML parser closes when one of the named opens inside it (within scope).
_CLOSES = {
    **{name: frozenset({name}) for name in ("a", "button", "form", "nobr", "li", "option")},
    **{name: frozenset({"dd", "dt"}) for name in ("dd", "dt")},
    **{name: frozenset({"rt", "rp", "rb"}) for name in ("rt", "rp", "rb")},
    **{name: frozenset(HEADINGS) for name in HEADINGS},
    "tr": frozenset({"tr"}),
    "td": frozenset({"td", "th"}),
    "th": frozenset({"td", "th"}),
}
_TABLE_SECTIONS = frozenset({"thead", "tbody", "tfoot"})
_ROW_PARTS = frozenset({"script", "template", "style"})
#: What a table, its sections and its rows may hold without the parser moving it out.
_ALLOWED_CHILDREN = {
    "table": _ROW_PARTS | {"caption", "colgroup", "thead", "tbody", "tfoot", "tr"},
    **{section: _ROW_PARTS | {"tr"} for section in _TABLE_SECTIONS},
    "tr": _ROW_PARTS | {"td", "th"},
    "colgroup": frozenset({"col", "template"}),
}
_XHTML_NAMESPACE = "http://www.w3.org/1999/xhtml"
#: Elements an HTML parser builds the document from, moved or dropped anywhere else.
_DOCUMENT_ELEMENTS = frozenset({"html", "head", "body", "frameset", "frame"})
#: Where SVG and MathML hold HTML again.
_INTEGRATION_POINTS = frozenset({"foreignobject", "annotation-xml"})


def as_read(markup: str) -> str:
    """XHTML as a reading system's XML parser reads it, written so the HTML parser builds
    the same tree: parsed as XML (HTML's named entities as the characters they name, no DTD,
    comments and processing instructions dropped), refused where an HTML parser would
    rebuild it, and written back with every empty element closed (``<p/>`` is empty in XML,
    an open paragraph in HTML)."""
    markup = without_internal_subset(markup)
    markup = _NAMED_ENTITY.sub(_numeric_reference, markup)
    try:
        root = etree.fromstring(markup.encode("utf-8", "surrogatepass"), package_parts.xml_parser())
    except (etree.XMLSyntaxError, ValueError) as exc:
        raise Refusal(codes.UNREADABLE, f"the XHTML is not well-formed: {exc}") from exc
    _refuse_rebuilt(root)
    _unprefixed(root)
    written = etree.tostring(root, encoding="unicode", method="xml")
    return _SELF_CLOSED_XML.sub(_opened_and_closed, written)


def _numeric_reference(match: re.Match[str]) -> str:
    name = match.group(1)
    if name in _XML_ENTITIES:
        return match.group(0)
    character = html_entities.unescape(match.group(0))
    return match.group(0) if character == match.group(0) else f"&#{ord(character[0])};"


def _refuse_rebuilt(root: etree._Element) -> None:
    """Refuse an XHTML tree an HTML parser would build differently, in one walk that carries
    down which elements are open within the parser's scope (:data:`_CLOSES`)."""
    pending = [_Open(root, frozenset(), frozenset(), "", foreign=False)]
    while pending:
        node = pending.pop()
        element = node.element
        tag = _local(element)
        clash = _clash(tag, node, etree.QName(element).namespace)
        if clash is None and tag in _TEXT_TO_HTML and len(element):
            clash = f"markup inside {tag} (text to an HTML parser)"
        if clash is None and tag in _ALLOWED_CHILDREN and _holds_text(element):
            clash = f"text inside {tag} (an HTML parser moves it out of the table)"
        if clash is not None:
            raise Refusal(
                codes.UNREADABLE,
                f"the XHTML puts {clash}, which an HTML parser rebuilds as another tree (its "
                "hidden parts could show)",
            )
        # A scope's boundary is itself in scope (a cell sees the cell it is in), not beyond.
        within = frozenset({tag}) if tag in _SCOPE_ENDS else node.within | {tag}
        buttons = frozenset({tag}) if tag in _SCOPE_ENDS_BUT_BUTTON else node.buttons | {tag}
        foreign = (node.foreign or tag in FOREIGN) and tag not in _INTEGRATION_POINTS
        pending += [
            _Open(child, within, buttons, tag, foreign=foreign)
            for child in reversed(element)
            if isinstance(child.tag, str)
        ]


@dataclass(frozen=True)
class _Open:
    """An element of an XHTML tree being checked, with what is open above it: the element
    names within the parser's scope (``buttons``: the scope a button looks through), its
    parent's name, and whether it is inside SVG or MathML."""

    element: etree._Element
    within: frozenset[str]
    buttons: frozenset[str]
    parent: str
    foreign: bool


def _clash(tag: str, node: _Open, namespace: str | None) -> str | None:
    """What an element clashes with, as "x inside y", or None."""
    if node.foreign:
        return f"{tag} inside SVG or MathML" if namespace == _XHTML_NAMESPACE else None
    if tag in _DOCUMENT_ELEMENTS and node.parent not in ("", "html"):
        return f"{tag} inside {node.parent}"
    if tag in _CLOSES_P and "p" in node.within:
        return f"{tag} inside p"
    closed_by = _CLOSES.get(tag, frozenset()) & (node.buttons if tag == "button" else node.within)
    if closed_by:
        return f"{tag} inside {min(closed_by)}"
    allowed = _ALLOWED_CHILDREN.get(node.parent)
    if allowed is not None and tag not in allowed:
        return f"{tag} inside {node.parent}"
    return None


def _holds_text(element: etree._Element) -> bool:
    """Whether ``element`` holds text of its own, before or between its children."""
    return any((text or "").strip() for text in (element.text, *(c.tail for c in element)))


def _local(element: etree._Element) -> str:
    return str(etree.QName(element).localname).lower()


def _unprefixed(root: etree._Element) -> None:
    """Every element named by its local name alone: lexbor knows ``style``, not ``h:style``,
    and reads SVG and MathML by their names, not their namespaces."""
    for element in root.iter(etree.Element):
        element.tag = etree.QName(element).localname
    etree.cleanup_namespaces(root)


def _opened_and_closed(match: re.Match[str]) -> str:
    name = match.group(1)
    if name.lower() in VOID:
        return match.group(0)
    return f"<{name}{match.group(2)}></{name}>"
