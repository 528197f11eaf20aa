"""Web pages (HTML and XHTML) read for what a browser shows, never as markup.

The page is parsed by lexbor (through selectolax), an HTML5 parser: it builds the tree a
browser builds, so text a browser hides (``<span hidden/>`` opens a span in HTML, and an
unclosed hidden ``<b>`` is re-opened inside the next block) is hidden here too; ``noscript``
is read as a browser running scripts reads it, as nothing. XHTML (an EPUB's chapters) is read
as the XML a reading system parses, and refused where an HTML parser would build another tree
from it. Elements no browser draws (scripts, styles, templates, fallbacks, SVG definitions,
closed dialogs) are left out; content hidden by an attribute, an inline style or a stylesheet
rule (sandbox/extractors/css.py) is left out and counted in a notice, because text a person
cannot see is how instructions are slipped to a model. Nesting is bounded before the parser
runs, and matching stylesheet rules is bounded in time: lexbor's tree builder is quadratic in
depth and its selector matching combinatorial. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import base64
import codecs
import functools
import math
import re
import time
import urllib.parse
from collections import ChainMap, Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

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
from sandbox.extractors import css
from sandbox.extractors import xhtml as xhtml_reading
from sandbox.extractors.markup import FOREIGN, HEADINGS, without_internal_subset
from sandbox.extractors.nesting import bound_nesting
from sandbox.extractors.registry import Refusal, extractor
from sandbox.extractors.text import TextBudget, decode_text
from sandbox.limits import ParseLimits

_XHTML = "application/xhtml+xml"
_K = TypeVar("_K", bound=Hashable)

#: Selectors of hiding stylesheet rules a page may carry; past this it is refused, since a
#: rule left unapplied is text shown that a browser hides.
MAX_HIDING_SELECTORS = 5_000
#: CPU seconds matching a page's hiding selectors may take: lexbor's matching of descendant
#: selectors is combinatorial in depth (``span div div div`` over 400 nested divs took 5 s).
MAX_MATCHING_SECONDS = 3.0
#: Selectors of rules that set only a font size, matched to undo or apply a shrunk size.
MAX_SIZING_SELECTORS = 20_000
#: Distinct declaration blocks that fade, shrink or size: a query over the page each.
MAX_SHRINKING_BLOCKS = 2_000
#: CPU seconds reading rules per element with the custom properties it inherits may take:
#: each distinct set of the values a rule names is a reading of the rule.
MAX_RESOLVING_SECONDS = 3.0
#: The declarations of a rule that only sizes its text.
_SIZE_ONLY = frozenset({"font-size"})
_SELECTORS_PER_QUERY = 64
#: The classes and ids a selector requires, once its attribute selectors are taken out.
_CLASS_OR_ID = re.compile(r"[.#]((?:[\w-]|[^\x00-\x7f])+)")
_ATTRIBUTE_SELECTOR = re.compile(r"\[[^\]]*\]")
_FUNCTION = re.compile(r":[\w-]+\(")
_CLASS_SEPARATOR = re.compile(r"[ \t\n\r\f]+")
_COUNTING = re.compile(r":nth-", re.IGNORECASE)
#: Selectors whose custom properties every element of the page inherits.
_PAGE_SELECTORS = frozenset({":root", "html", "body", "*"})
#: Pseudo-classes lexbor matches where a browser does not (``p:enabled``).
_MISMATCHED = re.compile(r":enabled\b", re.IGNORECASE)
_PSEUDO_ELEMENT = re.compile(r"::|:(?:before|after|first-line|first-letter)\b", re.IGNORECASE)
#: Attribute selectors and strings, whose text is no pseudo-element (``[title="::"]``).
_QUOTED = re.compile(r"""\[(?:[^\]"']|"[^"]*"|'[^']*')*\]?|"[^"]*"?|'[^']*'?""")
_BRACKET = re.compile(r"[()]")
#: Of those, the ones setting custom properties on one element, whose content inherits
#: them: ``*`` sets them on every element, each in order with the other rules matching it
#: (``*{--d:none} .x{--d:block}`` leaves the paragraphs of ``.x`` at ``none``).
_ROOT_SELECTORS = frozenset({":root", "html", "body"})
_PSEUDO = re.compile(r"::?[A-Za-z-]+(?:\([^()]*\))?")
_MAX_LIST_DEPTH = 8
_MAX_SPAN = 1000

#: Elements whose content is never shown as text: scripts, styles, the head, inert templates,
#: fallbacks a browser never shows, embedded documents, ruby's fallback parentheses, SVG's
#: definitions and MathML's invisible parts.
_NOT_SHOWN = frozenset(
    {"head", "title", "script", "style", "template", "noscript", "noembed", "noframes"}
    | {"iframe", "object", "embed", "canvas", "audio", "video", "map", "datalist", "rp"}
    | {"progress", "meter", "desc", "metadata", "defs", "symbol", "clippath", "mask"}
    | {"pattern", "marker", "lineargradient", "radialgradient", "filter", "mphantom"}
    | {"annotation", "annotation-xml"}
)
_BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "center", "dd", "details", "dialog"}
    | {"div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header"}
    | {"hgroup", "hr", "legend", "main", "menu", "nav", "ol", "p", "section", "summary", "ul"}
    | {"caption", "html"}
)
_PRE = frozenset({"pre", "xmp", "listing", "textarea"})
_DIRECTIONS = frozenset({"ltr", "rtl"})
_LISTS = frozenset({"ul", "ol", "menu"})
_CELLS = frozenset({"td", "th"})
#: SVG's presentation attributes, read as the style declarations they are.
_PRESENTATION = (
    "display",
    "visibility",
    "opacity",
    "fill",
    "fill-opacity",
    "stroke",
    "font-size",
    "color",
    "transform",
)
#: The attributes that make a ``<switch>``'s child conditional: the first child without them
#: is the one a browser draws, whatever the reader's language.
_CONDITIONS = ("systemLanguage", "requiredExtensions", "requiredFeatures")
#: The only ``requiredExtensions`` a browser supports (HTML and MathML inside SVG): an element
#: that requires another is never drawn.
_EXTENSIONS = frozenset({"http://www.w3.org/1999/xhtml", "http://www.w3.org/1998/Math/MathML"})
#: SVG elements of a width and height that clip what they hold.
_VIEWPORTS = frozenset({"svg", "foreignObject"})
#: The widest an SVG without a width of its own is drawn: the viewport (as css.py takes it).
_VIEWPORT_WIDTH = 1_280.0
#: Attributes that set an element's text colour the old way: ``<font color>``, MathML's
#: ``mathcolor``, ``<body text>``.
_COLOUR_ATTRIBUTES = ("color", "mathcolor", "text")

_WHITESPACE = re.compile(r"[ \t\n\r\f]+")
#: A charset named in the first bytes, as a browser's pre-scan finds it.
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_PRESCAN_BYTES = 1024
#: The WHATWG Encoding Standard's labels, by the Python codec that decodes them; a label
#: outside it (utf-7, unicode_escape, punycode) is one a browser ignores.
_ENCODINGS = {
    "utf-8": ("utf-8", "utf8", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8"),
    "cp1252": (
        *("windows-1252", "iso-8859-1", "iso8859-1", "latin1", "l1", "ascii", "us-ascii"),
        *("cp1252", "cp819", "ibm819", "iso-ir-100", "x-cp1252", "ansi_x3.4-1968"),
    ),
    "cp1250": ("windows-1250", "cp1250", "x-cp1250"),
    "cp1251": ("windows-1251", "cp1251", "x-cp1251"),
    "cp1253": ("windows-1253", "cp1253", "x-cp1253"),
    "cp1254": ("windows-1254", "cp1254", "iso-8859-9", "latin5", "x-cp1254"),
    "cp1255": ("windows-1255", "cp1255", "x-cp1255"),
    "cp1256": ("windows-1256", "cp1256", "x-cp1256"),
    "cp1257": ("windows-1257", "cp1257", "x-cp1257"),
    "cp1258": ("windows-1258", "cp1258", "x-cp1258"),
    "cp874": ("windows-874", "tis-620", "iso-8859-11", "dos-874"),
    "iso-8859-2": ("iso-8859-2", "latin2", "l2"),
    "iso-8859-3": ("iso-8859-3", "latin3"),
    "iso-8859-4": ("iso-8859-4", "latin4"),
    "iso-8859-5": ("iso-8859-5", "cyrillic"),
    "iso-8859-6": ("iso-8859-6", "arabic"),
    "iso-8859-7": ("iso-8859-7", "greek"),
    "iso-8859-8": ("iso-8859-8", "hebrew", "iso-8859-8-i"),
    "iso-8859-10": ("iso-8859-10", "latin6"),
    "iso-8859-13": ("iso-8859-13",),
    "iso-8859-14": ("iso-8859-14",),
    "iso-8859-15": ("iso-8859-15", "latin9", "l9"),
    "iso-8859-16": ("iso-8859-16",),
    "koi8-r": ("koi8-r", "koi8", "koi"),
    "koi8-u": ("koi8-u", "koi8-ru"),
    "mac-roman": ("macintosh", "mac", "x-mac-roman", "csmacintosh"),
    "cp866": ("ibm866", "866", "cp866"),
    "gb18030": ("gbk", "gb2312", "gb18030", "x-gbk", "chinese", "csgb2312"),
    "big5hkscs": ("big5", "big5-hkscs", "x-x-big5", "cn-big5"),
    "euc-jp": ("euc-jp", "x-euc-jp"),
    "iso-2022-jp": ("iso-2022-jp", "csiso2022jp"),
    "cp932": ("shift_jis", "shift-jis", "sjis", "ms_kanji", "windows-31j", "x-sjis"),
    "cp949": ("euc-kr", "ks_c_5601-1987", "windows-949", "korean"),
}
#: Each WHATWG label a browser decodes, and the codec that decodes it: the only charset names
#: airlock trusts, here and in a mail's headers (Python also takes punycode, idna or
#: unicode_escape for a charset, which raise what no decoder expects, punycode in quadratic
#: time).
BROWSER_CODECS = {label: codec for codec, labels in _ENCODINGS.items() for label in labels} | {
    "utf-16": "utf-16",
    "utf-16le": "utf-16-le",
    "utf-16be": "utf-16-be",
}
# A <meta> naming UTF-16 is read as UTF-8: the bytes it is in were readable as ASCII.
_META_CODECS = BROWSER_CODECS | {"utf-16": "utf-8", "utf-16le": "utf-8", "utf-16be": "utf-8"}
#: Labels a browser decodes as one replacement character: the page shows nothing.
_REPLACEMENT = frozenset(
    {"iso-2022-kr", "csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext", "replacement"}
)


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
    """The page's text: a byte-order mark, else the charset its first bytes declare (a label
    of the Encoding Standard only, as a browser reads it) when the page decodes in it, else
    the plain-text decoder's reading (UTF-8, then detection)."""
    if not payload.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        declared = _META_CHARSET.search(payload[:_PRESCAN_BYTES])
        if declared is not None:
            label = declared.group(1).decode("ascii").lower()
            if label in _REPLACEMENT:
                raise Refusal(
                    codes.UNREADABLE,
                    f"the page declares the charset {label}, which a browser shows as nothing",
                )
            if label in _META_CODECS:
                try:
                    return payload.decode(_META_CODECS[label])
                except UnicodeError:
                    pass  # a page that lies about its charset is read as if it said none
    return decode_text(payload)


def read_page(
    markup: str,
    budget: TextBudget,
    *,
    xhtml: bool,
    stylesheets: Callable[[str], str] | None = None,
) -> Page:
    """Read ``markup`` (HTML, or XHTML when ``xhtml``) into blocks. ``stylesheets`` gives the
    text of a stylesheet the page links to by its href ("" when there is none); a web page's
    links are not followed."""
    if "\x00" in markup:
        raise Refusal(codes.UNREADABLE, "the page holds NUL characters: it is binary, not HTML")
    markup = xhtml_reading.as_read(markup) if xhtml else without_internal_subset(markup)
    bound_nesting(markup)
    # Parsed as a browser running scripts parses it: ``noscript`` is raw text, shown as
    # nothing. With scripts off its content is markup, and a ``</div>`` inside would close it
    # and show what follows.
    tree = LexborHTMLParser(markup, scripting=True)
    reader = _Reader(budget, _styling(tree, stylesheets))
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


#: The bodies of the rules read with an element's custom properties, each with the names
#: its judged declarations read.
_Bodies = tuple[tuple[str, frozenset[str]], ...]


@dataclass(frozen=True)
class _Setting:
    """Custom properties a rule sets on the elements it matches, those of them set
    ``!important``, and the rule's rank: its selector's specificity, then its place;
    ``uncertain``: the rule may not apply where it is matched (a pseudo-class lexbor cannot
    match, taken out to match, as ``:focus-within`` or ``:lang()``, or matches where a
    browser does not, as ``:enabled`` on a paragraph, or stands under a condition a screen
    may not meet), so elements are
    judged both with it and without it (``.x:focus-within{--d:block}`` overruled
    ``.x{--d:none}``, and ``.x:lang(fr){--d:none}`` would not hide if dropped)."""

    read: tuple[tuple[str, str], ...]
    important: frozenset[str]
    rank: tuple[tuple[int, int, int], tuple[int, int]]
    uncertain: bool = False


#: The custom properties the rules matching an element set, rule by rule.
_Defined = tuple[_Setting, ...]
_Variables = ChainMap[str, str]


@dataclass(frozen=True)
class _Styling:
    """What a page's stylesheets decide: the elements their rules hide, the fading and
    shrinking declarations of the rules that match each element (judged with its ancestors'),
    the custom properties they set on the whole page (``:root``, ``html``, ``body``, ``*``),
    and per element, the custom properties rules set on it and the bodies of the rules to
    read with the properties it inherits (their ``var()`` names one an element defines)."""

    hidden: set[int]
    shrunk: dict[int, list[dict[str, str]]]
    variables: dict[str, str]
    defined: dict[int, _Defined] = field(default_factory=dict)
    resolving: dict[int, tuple[_Bodies, ...]] = field(default_factory=dict)


def _styling(tree: LexborHTMLParser, stylesheets: Callable[[str], str] | None) -> _Styling:
    """The elements a rule of the page's ``<style>`` elements or linked stylesheets hides
    (``data:`` stylesheets read in place, in links and imports alike)."""
    sheets = [style.text(deep=True) for style in tree.css("style")]
    links = [
        link.attributes.get("href") or ""
        for link in tree.css("link")
        if "stylesheet" in (link.attributes.get("rel") or "").lower().split()
    ]
    for href in dict.fromkeys(links):
        if (inline := _data_stylesheet(href)) is not None:
            sheets.append(inline)
        elif stylesheets is not None and href:
            sheets.append(stylesheets(href))
    sheets += [
        inline
        for sheet in list(sheets)
        for url in css.imports(sheet)
        if (inline := _data_stylesheet(url)) is not None
    ]
    try:
        # Every sheet's page-wide custom properties before any rule is judged: a rule's
        # var() may name one another sheet sets.
        variables = dict(pair for sheet in sheets for pair in _page_variables(sheet))
        page_variables = _PageVariables(tuple(sorted(variables.items())))
        decided = [_decided(sheet, page_variables) for sheet in sheets]
    except css.TooComplex as exc:
        raise Refusal(
            codes.CEILING, f"the page's stylesheet is too complex to judge: {exc}"
        ) from exc
    written, named = _names_in_play(tree, decided, variables)
    probe = LexborHTMLParser("<p>")
    defining = _grouped(
        (
            _Setting(
                read,
                important.intersection(dict(read)),
                (_specificity(selector), (place, rule)),
                uncertain=conditional
                or broader != selector
                or not _parses(probe, broader)
                or bool(_MISMATCHED.search(selector)),
            ),
            broader,
        )
        for place, sheet in enumerate(decided)
        for selector, defined, important, rule, conditional in sheet.defining
        if (read := tuple((name, value) for name, value in defined if name in named))
        for broader in (_without_counting(selector),)
    )
    # Matching rules per element has a budget of its own: after that of many hiding rules, a
    # page of Bootstrap's was refused. Past it, the rules are judged per sheet, as they were
    # before they were read per element: refusing an honest page is worse than that.
    matched_each = _MatchedEach(tree, time.process_time())
    try:
        defined = matched_each(defining)
        local = _local(written, defined, variables)
        selectors, shrinking, resolving = _judged(decided, local)
        _bound_shrinking(len(selectors), shrinking, [*resolving.values(), *defining.values()])
        resolved = matched_each(resolving)
    except _OutOfTime:
        defined, resolved = {}, {}
        selectors, shrinking, _ = _judged(decided, frozenset())
        _bound_shrinking(len(selectors), shrinking, [])
    started = time.process_time()
    hidden = _matched(tree, selectors, started)
    shrunk: dict[int, list[dict[str, str]]] = {}
    for readings, group in shrinking.items():
        for mem_id in _matched(tree, group, started):
            shrunk.setdefault(mem_id, []).extend(dict(declared) for declared in readings)
    return _Styling(hidden, shrunk, variables, defined, resolved)


def _judged(
    decided: list[_Decided], local: frozenset[str]
) -> tuple[list[str], dict[_Readings, list[str]], dict[_Bodies, list[str]]]:
    """The selectors of the rules that hide, those grouped by how they shrink, and those read
    per element grouped by their bodies, when ``local`` are the properties an element may
    hold a value of its own of."""
    selectors = list(dict.fromkeys(selector for sheet in decided for selector in sheet.hiding))
    selectors += [rule.selector for rule in _variable(decided, local) if rule.hides]
    shrinking = _by_declarations(
        [*(sheet.shrinking for sheet in decided), _shrinking_variable(decided, local)]
    )
    # Grouped by selector, then by the bodies a selector brings: 1,900 rules of "p" are one
    # query, not 1,900 (which rule wins does not matter here: any that hides, hides).
    bodies_of: dict[str, dict[tuple[str, frozenset[str]], None]] = {}
    for rule in _variable(decided, local, per_element=True):
        bodies_of.setdefault(rule.selector, {})[rule.body, rule.names] = None
    resolving = _grouped((tuple(bodies), selector) for selector, bodies in bodies_of.items())
    return selectors, shrinking, resolving


def _names_in_play(
    tree: LexborHTMLParser, decided: list[_Decided], variables: dict[str, str]
) -> tuple[set[str], frozenset[str]]:
    """The custom properties style attributes write, and those a judged value may come to
    depend on (see :func:`_reached`): a rule setting none of these is not matched. The
    style attributes are not scanned on a page whose rules neither name nor set one."""
    defined = [properties for sheet in decided for _, properties, *_ in sheet.defining]
    rules = [rule for sheet in decided for rule in sheet.variable]
    if not defined and not rules:
        return set(), frozenset()
    written: set[str] = set()
    for node in tree.css("[style]"):
        written |= css.written_names(node.attributes.get("style") or "")
    pairs = [*variables.items(), *(pair for one in defined for pair in one)]
    return written, _reached(written.union(*(rule.names for rule in rules)), pairs)


def _local(
    written: set[str],
    defined: dict[int, _Defined],
    variables: dict[str, str],
) -> frozenset[str]:
    """The custom properties an element may hold a value of other than the page's: those a
    style attribute or a rule matching an element sets, and the page's whose values name one
    of them. A rule naming none is judged per sheet: Bootstrap sets all of its page's
    properties again under ``[data-bs-theme=light]``, which most pages never match."""
    local = written | {name for keys in defined.values() for key in keys for name, _ in key.read}
    for _ in range(css.SUBSTITUTION_DEPTH):
        local |= {name for name, value in variables.items() if css.named(value) & local}
    return frozenset(local)


def _reached(names: set[str], pairs: Iterable[tuple[str, str]]) -> frozenset[str]:
    """``names`` and those the values set for them name, at any depth: the only custom
    properties a judged value can come to depend on (Bootstrap's components set hundreds
    that only paddings and borders read, each group of them a query over the page)."""
    following: dict[str, set[str]] = {}
    for name, value in pairs:
        following.setdefault(name, set()).update(css.named(value))
    reached, todo = set(names), list(names)
    while todo:
        fresh = following.get(todo.pop(), set()) - reached
        reached |= fresh
        todo += fresh
    return frozenset(reached)


def _variable(
    decided: list[_Decided], local: frozenset[str], *, per_element: bool = False
) -> Iterator[_Variable]:
    """The rules whose ``var()`` names a property an element may hold a value of its own of
    (``per_element``: read with each element's), or names none (judged per sheet). A
    pseudo-element's rule is judged per sheet: read per element, ``p::before{display:
    var(--d)}`` hid the paragraph itself."""
    for sheet in decided:
        for rule in sheet.variable:
            own = bool(rule.names & local) and not _pseudo_element(rule.selector)
            if own == per_element:
                yield rule


def _pseudo_element(selector: str) -> bool:
    """Whether ``selector`` selects a pseudo-element, its strings and attribute selectors
    not read (``p[title="::"]{--d:none}`` was dropped as one, and its paragraph read)."""
    return bool(_PSEUDO_ELEMENT.search(_QUOTED.sub("", selector)))


def _shrinking_variable(decided: list[_Decided], local: frozenset[str]) -> _Declaring:
    return tuple(
        (rule.selector, rule.shrinks) for rule in _variable(decided, local) if rule.shrinks
    )


def _grouped(pairs: Iterable[tuple[_K, str]]) -> dict[_K, list[str]]:
    """Selectors grouped by what they share (a body, the properties they set), one query
    per group, a selector repeated in a group once."""
    grouped: dict[_K, dict[str, None]] = {}
    for key, selector in pairs:
        grouped.setdefault(key, {})[selector] = None
    return {key: list(selectors) for key, selectors in grouped.items()}


class _MatchedEach:
    """Matches groups of selectors to what each element's groups share (ordered later, see
    :func:`_cascaded`). A selector naming a class or id no element has is not matched:
    lexbor's cost is per selector, whether queried alone or in a list, and most of
    Bootstrap's 552 groups name components a page does not use (a 6,000-row table was
    refused past :data:`MAX_MATCHING_SECONDS`); selectors both setting and reading custom
    properties are matched once."""

    def __init__(self, tree: LexborHTMLParser, started: float) -> None:
        self._tree = tree
        self._started = started
        self._present: frozenset[str] | None = None
        self._seen: dict[tuple[str, ...], set[int]] = {}

    def __call__(self, groups: dict[_K, list[str]]) -> dict[int, tuple[_K, ...]]:
        found: dict[int, list[_K]] = {}
        for key, group in groups.items():
            for mem_id in self._matched(group):
                found.setdefault(mem_id, []).append(key)
        # Elements matched alike share one tuple: a reader keys its readings on it.
        shared: dict[tuple[_K, ...], tuple[_K, ...]] = {}
        return {
            mem_id: shared.setdefault(tuple(keys), tuple(keys)) for mem_id, keys in found.items()
        }

    def _matched(self, group: list[str]) -> set[int]:
        if self._present is None:
            self._present = _names_present(self._tree)
        present = self._present
        kept = tuple(selector for selector in group if _may_match(selector, present))
        if kept not in self._seen:
            try:
                matched = _matched(self._tree, list(kept), self._started) if kept else set()
            except Refusal as exc:
                raise _OutOfTime from exc
            self._seen[kept] = matched
        return self._seen[kept]


class _OutOfTime(Exception):
    """Matching rules per element ran past :data:`MAX_MATCHING_SECONDS`."""


def _names_present(tree: LexborHTMLParser) -> frozenset[str]:
    """The classes and ids of a page's elements, in lower case (in quirks mode a class
    matches in any case)."""
    present: set[str] = set()
    for node in tree.css("[class]"):
        # Split on ASCII whitespace only: "x\u00a0y" is one class, not "x" and "y".
        present.update(_CLASS_SEPARATOR.split((node.attributes.get("class") or "").lower()))
    present.update((node.attributes.get("id") or "").lower() for node in tree.css("[id]"))
    return frozenset(present)


def _may_match(selector: str, present: frozenset[str]) -> bool:
    """Whether ``selector`` may match on a page with the classes and ids ``present``: not
    when it requires one the page lacks, outside its functions (``:not(.x)`` requires none;
    Bootstrap's ``.table-striped-columns > :not(caption) > tr`` was matched on every page).
    A selector with an escape or a quote is always matched, its classes not read."""
    if any(mark in selector for mark in "\\\"'"):
        return True
    bare = _ATTRIBUTE_SELECTOR.sub("", selector)
    outside = "".join(bare[start:end] for start, end in _outside_functions(bare))
    return all(name.lower() in present for name in _CLASS_OR_ID.findall(outside))


def _outside_functions(selector: str) -> Iterator[tuple[int, int]]:
    """The spans of ``selector`` outside its outermost pseudo-class functions."""
    position = 0
    for found in _FUNCTION.finditer(selector):
        if found.start() < position:
            continue  # nested in the function before
        yield position, found.start()
        position = _closing_bracket(selector, found.end()) + 1
    yield position, len(selector)


def _without_counting(selector: str) -> str:
    """``selector`` without the functions that count siblings (``:nth-of-type(odd)``, or one
    inside ``:not()``), which match more, never less: lexbor counts each element's siblings
    anew, and a striped table of 11,000 rows was refused."""
    if "nth-" not in selector.lower():
        return selector
    kept, position = [], 0
    for start, end in _outside_functions(selector):
        kept.append(selector[position:start])  # a function, dropped when it counts
        if _COUNTING.search(kept[-1]):
            kept[-1] = "*" if not position or selector[position - 1] in " \t\n\r\f>+~," else ""
        kept.append(selector[start:end])
        position = end
    return "".join(kept)


def _bound_shrinking(
    hiding: int, shrinking: dict[_Readings, list[str]], per_element: list[list[str]]
) -> None:
    """Refuse a page with more rules to match than the judge matches in its time. Rules that
    set only a font size are counted apart, under a ceiling of their own: counted with those
    that hide, 3,000 rules of ``1rem`` refused a real page. Each distinct declaration block
    costs a query over the page: 60,000 distinct sizes cost a chapter 10 CPU-s. Rules read
    per element, and those setting the custom properties they read, count as hiding ones,
    one query per distinct body."""
    hiding += sum(map(len, per_element))
    sizing = sum(
        len(group)
        for readings, group in shrinking.items()
        if all(_SIZE_ONLY.issuperset(dict(declared)) for declared in readings)
    )
    if hiding + sum(map(len, shrinking.values())) - sizing > MAX_HIDING_SELECTORS:
        raise Refusal(
            codes.CEILING,
            f"the page has more than {MAX_HIDING_SELECTORS} stylesheet rules that hide or "
            "shrink text",
        )
    if sizing > MAX_SIZING_SELECTORS or len(shrinking) + len(per_element) > MAX_SHRINKING_BLOCKS:
        raise Refusal(
            codes.CEILING,
            f"the page's stylesheet rules set more than {MAX_SIZING_SELECTORS} font sizes, or "
            f"more than {MAX_SHRINKING_BLOCKS} distinct sizes, fades and scales",
        )


def _by_declarations(rules: Iterable[_Declaring]) -> dict[_Readings, list[str]]:
    """Selectors grouped by the declarations they share: rules that shrink alike are matched
    together, one query per declaration block."""
    grouped: dict[_Readings, dict[str, None]] = {}
    for sheet in rules:
        for selector, readings in sheet:
            grouped.setdefault(readings, {})[selector] = None  # a rule repeated is one query
    return {readings: list(selectors) for readings, selectors in grouped.items()}


def _matched(tree: LexborHTMLParser, selectors: list[str], started: float) -> set[int]:
    """The elements ``selectors`` match, within :data:`MAX_MATCHING_SECONDS` of CPU since
    ``started``."""
    found: set[int] = set()
    for first in range(0, len(selectors), _SELECTORS_PER_QUERY):
        group = selectors[first : first + _SELECTORS_PER_QUERY]
        for query in _queries(group):
            found.update(node.mem_id for node in tree.css(query))
            if time.process_time() - started > MAX_MATCHING_SECONDS:
                raise Refusal(
                    codes.CEILING,
                    f"matching the page's hiding stylesheet rules took over "
                    f"{MAX_MATCHING_SECONDS:g} s of CPU",
                )
    return found


#: The readings of a rule's declarations (one, or two where its var() is read resolved and
#: not), each as the sorted declarations it is matched for: one query, one rule counted.
_Readings = tuple[tuple[tuple[str, str], ...], ...]
#: Selectors of a sheet's rules, each with the readings of its declarations.
_Declaring = tuple[tuple[str, _Readings], ...]


@dataclass(frozen=True)
class _Variable:
    """A rule whose declarations name custom properties: its selector and body, the names,
    and how it is judged per sheet (see :func:`_decided`) when no element may change them."""

    selector: str
    body: str
    names: frozenset[str]
    hides: bool
    shrinks: _Readings


#: A rule setting custom properties: a selector, the properties, those set ``!important``,
#: the rule's place in its sheet, and whether it stands under a condition a screen may not
#: meet (see :func:`css.conditioned`).
_Defining = tuple[str, tuple[tuple[str, str], ...], frozenset[str], int, bool]


@dataclass(frozen=True)
class _Decided:
    """What one stylesheet decides: the selectors of its rules that hide, and those that fade,
    shrink or set a font size (each with those declarations), its rules that name custom
    properties, and the custom properties its rules other than page-wide ones set."""

    hiding: tuple[str, ...]
    shrinking: _Declaring
    variable: tuple[_Variable, ...]
    defining: tuple[_Defining, ...]


@functools.lru_cache(maxsize=64)
def _page_variables(sheet: str) -> tuple[tuple[str, str], ...]:
    """The custom properties ``sheet`` sets on the whole page (``:root``, ``html``, ``body``,
    ``*``), in order, once per sheet."""
    variables: dict[str, str] = {}
    for selector, body in css.rules(sheet):
        if selector in _PAGE_SELECTORS:
            variables |= css.variables_of(css.declarations(body))
    return tuple(variables.items())


class _PageVariables:
    """A page's custom properties, hashed once: a judgement kept per sheet and the properties
    it reads was keyed on a tuple hashed anew for every sheet (4,000 sheets of one property
    each, 8.5 s), and keyed on the few a sheet names, it missed escaped and commented names
    and could be cut short."""

    def __init__(self, items: tuple[tuple[str, str], ...]) -> None:
        self.items = items
        self.known = dict(items)  # built once: copied for each sheet, 3,000 sheets cost 2 s
        self._hash = hash(items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, _PageVariables)
            and self._hash == other._hash
            and self.items == other.items
        )


@functools.lru_cache(maxsize=64)
def _decided(sheet: str, variables: _PageVariables) -> _Decided:
    """``sheet``'s :class:`_Decided`, worked out once per sheet and page properties (every
    chapter of a book links the same ones). A rule's ``var()`` is read both as
    the page's custom properties resolve it and as no value (an element may set its own,
    which is not known here), and the more hiding reading is judged: unresolved,
    ``display:var(--h)`` under ``:root{--h:none}`` was no value, and the text read; resolved
    only, an element's own ``--d:none`` was overruled by the page's ``block``. A rule whose
    ``var()`` names a property an element or a rule sets is instead read for each element it
    matches with the properties that element inherits (see :func:`_styling`)."""
    hiding: list[str] = []
    shrinking: list[tuple[str, _Readings]] = []
    variable: list[_Variable] = []
    defining: list[_Defining] = []
    known = variables.known
    rule, last = 0, ""
    conditioned = css.conditioned(sheet) if "@" in sheet else frozenset()
    for selector, body in css.rules(sheet):
        rule += body is not last  # the selectors of one list are one rule
        last = body
        readings = [css.declarations(body, open_variables=True)]
        defined = css.variables_of(readings[0])
        # A pseudo-element's properties are its own: "p::before{--d:none}" hid the
        # paragraph's shown text.
        if defined and selector not in _ROOT_SELECTORS and not _pseudo_element(selector):
            important = css.important_names(body)
            conditional = (selector, body) in conditioned
            defining.append((selector, tuple(defined.items()), important, rule, conditional))
        names = css.used_names(body) if "var(" in body.lower() or "\\" in body else frozenset()
        if known and names:
            readings.append(css.declarations(body, known, open_variables=True))
        hides = any(css.hiding(declared) for declared in readings)
        shrunk = {
            tuple(sorted(shrinks.items())) for one in readings if (shrinks := css.shrinking(one))
        }
        if names:
            variable.append(_Variable(selector, body, names, hides, tuple(sorted(shrunk))))
        elif hides:
            hiding.append(selector)
        elif shrunk:
            shrinking.append((selector, tuple(sorted(shrunk))))
    return _Decided(tuple(hiding), tuple(shrinking), tuple(variable), tuple(defining))


#: A hex escape first, with the one space that ends it: ``.\31 23`` is one class.
_IDENTIFIER = r"(?:[\w-]|\\[0-9a-fA-F]{1,6}[ \t\n\r\f]?|\\.|[^\x00-\x7f])+"
_SELECTOR_TOKEN = re.compile(
    rf"""::?{_IDENTIFIER}\(?|#{_IDENTIFIER}|\.{_IDENTIFIER}|{_IDENTIFIER}"""
    r"""|\[(?:[^\]"']|"[^"]*"|'[^']*')*\]?|"[^"]*"?|'[^']*'?|[^\s>+~,*|]""",
    re.DOTALL,
)
#: Pseudo-classes as specific as the most specific selector of their argument.
_AS_ARGUMENT = frozenset({"is", "not", "has", "matches", "-webkit-any", "-moz-any"})
_LEGACY_PSEUDO_ELEMENTS = frozenset({":before", ":after", ":first-line", ":first-letter"})
#: Arguments nested deeper than this add nothing to a selector's specificity.
_MAX_SPECIFICITY_DEPTH = 32


@functools.lru_cache(maxsize=4_096)
def _specificity(selector: str, depth: int = 0) -> tuple[int, int, int]:
    """A selector's specificity (ids, classes and the like, types), which orders the rules
    setting an element's custom properties; ``:where()`` adds nothing, ``:is()``, ``:not()``
    and ``:has()`` their most specific argument, other functions a class."""
    ids = classes = types = 0
    position = 0
    while (match := _SELECTOR_TOKEN.search(selector, position)) is not None:
        token, position = match.group(), match.end()
        if token.startswith(":") and token.endswith("("):
            end = _closing_bracket(selector, position)
            inner, position = selector[position:end], end + 1
            name = token.strip(":(").lower()
            if token.startswith("::"):
                types += 1
            elif name in _AS_ARGUMENT and depth < _MAX_SPECIFICITY_DEPTH:
                most = max(_specificity(one, depth + 1) for one in _top_level(inner))
                ids, classes, types = ids + most[0], classes + most[1], types + most[2]
            elif name != "where":
                classes += 1
        elif token.startswith("::") or token.lower() in _LEGACY_PSEUDO_ELEMENTS:
            types += 1
        elif token.startswith("#"):
            ids += 1
        elif token[0] in ":.[":
            classes += 1
        elif token[0] not in "\"'":
            types += 1
    return ids, classes, types


def _closing_bracket(text: str, start: int) -> int:
    """Where the bracket open before ``start`` closes (the end when it does not)."""
    depth = 1
    for found in _BRACKET.finditer(text, start):  # a copy of the rest per bracket was quadratic
        depth += 1 if found.group() == "(" else -1
        if depth == 0:
            return found.start()
    return len(text)


def _top_level(selectors: str) -> list[str]:
    """A selector list split at its commas outside brackets."""
    parts, depth, start = [], 0, 0
    for found in re.finditer(r"[(),]", selectors):
        mark = found.group()
        depth += {"(": 1, ")": -1}.get(mark, 0)
        if mark == "," and depth == 0:
            parts.append(selectors[start : found.start()])
            start = found.end()
    return [*parts, selectors[start:]]


def _data_stylesheet(url: str) -> str | None:
    """The text of a ``data:text/css`` URL, None for any other URL."""
    head, comma, data = url.strip().partition(",")
    if not comma or not head.lower().startswith("data:text/css"):
        return None
    if head.lower().endswith(";base64"):
        try:
            return base64.b64decode(data, validate=False).decode("utf-8", "replace")
        except ValueError:
            return ""
    return urllib.parse.unquote(data)


def _queries(selectors: list[str]) -> list[str]:
    """``selectors`` as one selector list, or one by one (one bad selector fails the whole
    list), each tried on an empty page; a selector lexbor cannot parse is tried without its
    pseudo-classes (``:lang()``, ``::first-line``), which matches more, never less."""
    probe = LexborHTMLParser("<p>")
    joined = ", ".join(selectors)
    if _parses(probe, joined):
        return [joined]
    parsed = []
    for selector in selectors:
        broader = selector if _parses(probe, selector) else _PSEUDO.sub("", selector).strip()
        if broader and _parses(probe, broader):
            parsed.append(broader)
    return parsed


def _parses(probe: LexborHTMLParser, selector: str) -> bool:
    try:
        probe.css_first(selector)
    except Exception:  # noqa: BLE001 - lexbor's parse error has no type of its own
        return False
    return True


@dataclass(frozen=True)
class _Ruling:
    """What the rules read with an element's custom properties decide: whether one hides it,
    and the declarations of those that fade, shrink or size it."""

    hides: bool
    shrinks: tuple[dict[str, str], ...]


_NO_RULING = _Ruling(hides=False, shrinks=())


@dataclass
class _Frame:
    """What an open element passes to its content: its text colour, the colour
    ``-webkit-text-fill-color`` paints text in instead (None: the text colour), the background
    behind it (True: a picture), the custom properties it defines, whether it is preformatted
    or SVG or MathML, how opaque it and its ancestors paint, how much they magnify, its font
    size in pixels; ``unseen``: how its own text is hidden, when it is, though a child may
    still show its own (by a colour or a font size of its own), and ``counted`` once such
    text was left out; ``chosen``: a ``<switch>`` has met the child it draws; ``draws_text``:
    its own text is drawn at all (in SVG, only inside a ``<text>``); ``direction``: ``ltr`` or
    ``rtl``, inherited, which decides whether a right offset wins; ``without``: the custom
    properties it holds without the rules that may not apply, when they differ."""

    tag: str
    colour: css.Colour | None
    text_fill: css.Colour | None
    background: css.Colour | bool | None
    variables: ChainMap[str, str]
    pre: bool
    foreign: bool
    opacity: float = 1.0
    magnification: float = 1.0
    font_px: float = css.MEDIUM_PX
    unseen: str | None = None
    counted: bool = False
    chosen: bool = False
    draws_text: bool = True
    direction: str = "ltr"
    without: ChainMap[str, str] | None = None


@dataclass
class _TableBuilder:
    """A table being read: its rows so far, the cell being read, and tables nested in it."""

    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""
    cell: list[str] | None = None
    collector: int | None = None  # the element whose end closes the cell or caption
    nested: int = 0
    header_rows: int = 0
    first_row_all_th: bool = True


class _Reader:
    """Walks the tree once, in document order, turning elements into blocks."""

    def __init__(self, budget: TextBudget, styling: _Styling) -> None:
        self.blocks: list[Block] = []
        self.hidden: Counter[str] = Counter()
        self._budget = budget
        self._hidden_by_sheet = styling.hidden
        self._shrunk_by_sheet = styling.shrunk
        self._defined_by_sheet = styling.defined
        self._resolving = styling.resolving
        # What rules decide per the rules and the values they name: 20,000 elements each
        # with its own "--d:block" are one reading.
        self._rulings: dict[tuple[tuple[_Bodies, ...], tuple[tuple[str, str], ...]], _Ruling] = {}
        # Keyed by the ids of the rules' shared tuples (see :class:`_MatchedEach`, held in
        # ``_resolving``) and the maps', each kept alive with its value so no id is reused.
        self._names_of: dict[int, frozenset[str]] = {}
        self._children: dict[
            tuple[int, _Defined, tuple[tuple[str, str], ...], frozenset[str]],
            tuple[_Variables, _Variables],
        ] = {}
        self._ruled_by_map: dict[tuple[int, int], tuple[_Variables, _Ruling]] = {}
        self._held_by_maps: dict[
            tuple[int, int, int],
            tuple[_Variables, _Variables | None, _Variables, _Variables | None],
        ] = {}
        self._resolving_seconds = 0.0
        self._link_colour: css.Colour | None = None
        page = ChainMap(css.computed(styling.variables, {}))
        self._frames = [_Frame("", css.BLACK, None, css.WHITE, page, pre=False, foreign=False)]
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
        if tag.startswith(("-", "_", "!")):
            return False
        attributes = node.attributes
        parent = self._frames[-1]
        if parent.tag == "switch" and parent.foreign and self._unchosen(attributes):
            return self._left_out(node, "a switch's unchosen child")
        if tag in _NOT_SHOWN:
            return False
        foreign = parent.foreign or tag in FOREIGN
        timed = node.mem_id in self._defined_by_sheet or node.mem_id in self._resolving
        started = time.process_time() if timed else 0.0
        written = _style_of(attributes, foreign=foreign)
        # Its own custom properties first: its other declarations read them worked out.
        own = (
            css.variables_of(css.declarations(written))
            if "--" in written or "\\" in written
            else {}
        )
        important = css.important_names(written) if own else frozenset()
        variables, without = self._variables(node, parent, own, important)
        style = css.declarations(written, variables, own_computed=True)
        ruling = self._ruled(node, variables)
        if without is not None and (other := self._ruled(node, without)) is not ruling:
            ruling = _Ruling(ruling.hides or other.hides, ruling.shrinks + other.shrinks)
        if timed:
            self._resolved(started)
        opacity, magnification, font_px = self._diminishing(
            node, tag, attributes, style, ruling.shrinks
        )
        colour = (
            css.parse_colour(style.get("color", ""))
            or (css.parse_colour(style.get("fill", "")) if foreign else None)
            or self._legacy_colour(tag, attributes)
            or parent.colour
        )
        # The fill colour paints the text whatever its colour says, and is inherited.
        text_fill = css.parse_colour(style.get("-webkit-text-fill-color", "")) or parent.text_fill
        direction = _direction(style, attributes, parent.direction)
        judged = _with_direction(style, direction)
        method = self._hides(node, tag, attributes, judged, text_fill or colour)
        if method is None and ruling.hides:
            method = "a stylesheet rule"
        if method is None and css.faded_out(opacity):
            method = "opacity:0"
        if method is not None:
            return self._left_out(node, method)
        painted = css.background_of(style, attributes.get("bgcolor"))
        background = parent.background if painted is None else painted
        self._start(tag, attributes)
        frame = _Frame(
            tag,
            colour,
            text_fill,
            background,
            variables,
            parent.pre or tag in _PRE,
            foreign,
            opacity,
            magnification,
            font_px,
            direction=direction,
            without=without,
        )
        seen_against = background if isinstance(background, css.Colour) else None
        text_colour = text_fill or colour
        frame.draws_text = _draws_text(tag, parent)
        if not frame.draws_text:
            frame.unseen = "text SVG does not draw"
        elif css.too_small(font_px, magnification):
            frame.unseen = "zero size"
        elif text_colour is not None and text_colour.unseen_on(seen_against):
            frame.unseen = "text the colour of its background"
        if tag in _CELLS or tag == "caption":
            self._open_collector(node, tag)
        self._frames.append(frame)
        return True

    def _variables(
        self, node: LexborNode, parent: _Frame, own: dict[str, str], important: frozenset[str]
    ) -> tuple[_Variables, _Variables | None]:
        """The custom properties an element holds: its parent's, under those the rules
        matching it and its style attribute set (``own``, ``important`` those it sets
        ``!important``), in the cascade's order (see :func:`_cascaded`), all worked out
        here (see :func:`css.computed`); and, where a rule that may not apply (see
        :class:`_Setting`) sets one here or above, those it holds without such rules (else
        None), so that either way, the more hiding reading is judged."""
        defined = self._defined_by_sheet.get(node.mem_id, ())
        if own or not defined:
            return self._held(parent, defined, own, important)
        # The cells of a striped table share their rules' tuple (see :class:`_MatchedEach`)
        # and their parents' maps: worked out once, not once a cell.
        key = (id(parent.variables), id(parent.without), id(defined))
        if (kept := self._held_by_maps.get(key)) is None:
            held = self._held(parent, defined, own, important)
            kept = self._held_by_maps[key] = (parent.variables, parent.without, *held)
        return kept[2], kept[3]

    def _held(
        self, parent: _Frame, defined: _Defined, own: dict[str, str], important: frozenset[str]
    ) -> tuple[_Variables, _Variables | None]:
        held = self._child(parent.variables, defined, own, important)
        if parent.without is None and not any(setting.uncertain for setting in defined):
            return held, None
        certain = tuple(setting for setting in defined if not setting.uncertain)
        return held, self._child(parent.without or parent.variables, certain, own, important)

    def _child(
        self, parent: _Variables, defined: _Defined, own: dict[str, str], important: frozenset[str]
    ) -> _Variables:
        if not defined and not own:
            return parent
        # Siblings the same rules match share one map, so their readings are looked up by
        # it: a table's 24,000 cells each under ".table>*>*" looked up their values anew.
        key = (id(parent), defined, tuple(own.items()), important)
        if (shared := self._children.get(key)) is None:
            merged = _cascaded(defined, own, important)
            child = parent.new_child(css.computed(merged, parent))
            shared = self._children[key] = (parent, child)
        return shared[1]

    def _ruled(self, node: LexborNode, variables: ChainMap[str, str]) -> _Ruling:
        """What the rules matching an element whose ``var()`` names a property an element may
        set decide, read with the properties this one holds: once per set of rules and the
        values they name (1,900 rules over each of 600 paragraphs, each rule's reading judged
        anew per element, cost 32 s)."""
        groups = self._resolving.get(node.mem_id)
        if not groups:
            return _NO_RULING
        names = self._names_of.get(id(groups))
        if names is None:
            every = (one for bodies in groups for _, one in bodies)
            names = self._names_of[id(groups)] = frozenset().union(*every)
        if (seen := self._ruled_by_map.get((id(groups), id(variables)))) is not None:
            return seen[1]
        key = (groups, css.bearing(names, variables))
        if (ruling := self._rulings.get(key)) is None:
            known = dict(key[1])
            read = [css.declarations(body, known) for bodies in groups for body, _ in bodies]
            shrinks = tuple(shrunk for one in read if (shrunk := css.shrinking(one)))
            ruling = self._rulings[key] = _Ruling(any(map(css.hiding, read)), shrinks)
        self._ruled_by_map[id(groups), id(variables)] = (variables, ruling)
        return ruling

    def _resolved(self, started: float) -> None:
        """Count an element's reading with its custom properties under
        :data:`MAX_RESOLVING_SECONDS` of CPU, past which the page is refused rather than read
        with a rule unapplied."""
        self._resolving_seconds += time.process_time() - started
        if self._resolving_seconds > MAX_RESOLVING_SECONDS:
            raise Refusal(
                codes.CEILING,
                f"reading the page's stylesheet rules with each element's custom properties "
                f"took over {MAX_RESOLVING_SECONDS:g} s of CPU",
            )

    def _left_out(self, node: LexborNode, method: str) -> bool:
        """Leave out a hidden element, counted by ``method`` when it holds text."""
        if node.text(deep=True, separator=" ").strip():
            self.hidden[method] += 1
        return False

    def _diminishing(
        self,
        node: LexborNode,
        tag: str,
        attributes: dict[str, str | None],
        style: dict[str, str],
        ruled: tuple[dict[str, str], ...],
    ) -> tuple[float, float, float]:
        """An element's opacity and magnification (its ancestors' included, and an SVG's
        ``viewBox`` scale) and font size in pixels, from its style attribute and the stylesheet
        rules that fade, shrink or size it (``ruled``: those read with its custom properties,
        their shrinking declarations).
        When two set one property, the more diminishing is taken (an ``!important`` rule
        outweighs the attribute); different properties multiply."""
        parent = self._frames[-1]
        styles = [style, *self._shrunk_by_sheet.get(node.mem_id, ())]
        styles += ruled
        drawn = _view_box_scale(attributes, style) if tag == "svg" else 1.0
        if not any(styles) and drawn == 1.0:  # most elements: all as their parent's
            return parent.opacity, parent.magnification, parent.font_px
        root_px = self._frames[1].font_px if len(self._frames) > 1 else css.MEDIUM_PX
        sizes = [
            css.font_size(one, parent.font_px, root_px) for one in styles if "font-size" in one
        ]
        return (
            parent.opacity * css.faded(styles),
            css.nested(parent.magnification, css.magnified(styles), drawn),
            min(sizes, default=parent.font_px),
        )

    def _hides(
        self,
        node: LexborNode,
        tag: str,
        attributes: dict[str, str | None],
        style: dict[str, str],
        drawn: css.Colour | None,
    ) -> str | None:
        if "hidden" in attributes:
            return "hidden attribute"
        if (attributes.get("aria-hidden") or "").strip().lower() == "true":
            return "aria-hidden"
        if "popover" in attributes:
            return "a popover"
        if tag == "dialog" and "open" not in attributes:
            return "a closed dialog"
        if tag in _VIEWPORTS and _empty_viewport(attributes, style):
            return "zero size"
        if _unmet(attributes):
            return "an SVG condition no browser meets"
        if any(
            child.tag == "template" and "shadowrootmode" in child.attributes
            for child in node.iter()
        ):
            # What a declarative shadow root shows of the element's own children depends on
            # its slots; neither is read.
            return "a declarative shadow root"
        if node.mem_id in self._hidden_by_sheet:
            return "a stylesheet rule"
        return css.hiding(style, drawn)

    def _unchosen(self, attributes: dict[str, str | None]) -> bool:
        """Whether a ``<switch>``'s child comes after the first child a browser draws whatever
        its language and extensions (one without conditions, even one that draws nothing, a
        ``<desc>``): no later child is drawn."""
        switch = self._frames[-1]
        if switch.chosen:
            return True
        switch.chosen = not any(name in attributes for name in _CONDITIONS)
        return False

    def _legacy_colour(self, tag: str, attributes: dict[str, str | None]) -> css.Colour | None:
        """A colour an HTML attribute gives: ``color``, ``mathcolor``, ``<body text>``, and a
        link's colour from ``<body link>``."""
        if tag == "body":
            self._link_colour = css.parse_colour(attributes.get("link") or "", legacy=True)
        if tag == "a" and "href" in attributes and self._link_colour is not None:
            return self._link_colour
        for name in _COLOUR_ATTRIBUTES:
            if name != "text" or tag == "body":
                colour = css.parse_colour(attributes.get(name) or "", legacy=True)
                if colour is not None:
                    return colour
        return None

    def _open_collector(self, node: LexborNode, tag: str) -> None:
        """Start reading a cell's or a caption's text, unless one is being read already."""
        table = self._tables[-1] if self._tables else None
        if table is None or table.cell is not None or table.nested:
            return
        if tag in _CELLS:
            if not table.rows:
                table.rows.append([])
            if tag == "td" and len(table.rows) == 1:
                table.first_row_all_th = False
        table.cell = []
        table.collector = node.mem_id

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
        elif table is not None and (tag in _CELLS or tag == "caption"):
            pass  # the collector opens once the element's frame is known (_open_collector)
        elif tag in HEADINGS:
            self._flush()
            self._heading = HEADINGS[tag]
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
        elif table is not None and table.collector == node.mem_id and tag == "caption":
            table.caption = _WHITESPACE.sub(" ", "".join(table.cell or [])).strip()
            table.cell, table.collector = None, None
        elif table is not None and table.collector == node.mem_id:
            self._close_cell(table, node)
        elif table is not None and table.cell is not None:
            pass
        elif table is not None and tag == "table":
            self._tables.pop()
            self._table(table)
        elif table is not None and tag == "thead":
            table.header_rows = len(table.rows)
        elif tag in HEADINGS:
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
        table.cell, table.collector = None, None
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
                self.hidden[frame.unseen] += 1
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


def _cascaded(defined: _Defined, own: dict[str, str], important: frozenset[str]) -> dict[str, str]:
    """The custom properties the rules matching an element and its style attribute set, as
    the cascade orders them: rules by specificity, then place; the attribute over them; an
    ``!important`` rule over the attribute, unless the attribute's is ``!important`` too
    (``#i{--d:none} .x{--d:block}`` left the later, weaker ``.x`` winning)."""
    ranked = sorted(defined, key=lambda setting: setting.rank)
    merged: dict[str, str] = {}
    for setting in ranked:
        merged.update(setting.read)
    merged.update(own)
    for setting in ranked:
        merged.update(
            (name, value)
            for name, value in setting.read
            if name in setting.important and name not in important
        )
    merged.update((name, own[name]) for name in important if name in own)
    return merged


def _direction(style: dict[str, str], attributes: dict[str, str | None], inherited: str) -> str:
    """An element's direction: its ``direction`` declaration, else its ``dir`` attribute, else
    its parent's. ``dir=auto`` is taken as ``rtl``: a browser picks the direction of the
    first strong letter, and in rtl a far right offset carries the text off the page's left
    edge; taken as ``ltr``, Hebrew text under it was read."""
    declared = style.get("direction")
    if declared in _DIRECTIONS:
        return declared
    written = (attributes.get("dir") or "").strip().lower()
    if written == "auto":
        return "rtl"
    return written if written in _DIRECTIONS else inherited


def _with_direction(style: dict[str, str], direction: str) -> dict[str, str]:
    """``style`` with an inherited rtl direction set, which the judge reads from the style
    (an offset it did not know the page's ``<html dir=rtl>`` made win was read); only where
    the element has a style, since none holds no offset."""
    if direction == "rtl" and style and style.get("direction") != "rtl":
        return {**style, "direction": "rtl"}
    return style


def _unmet(attributes: dict[str, str | None]) -> bool:
    """Whether an SVG condition no browser meets: ``requiredExtensions`` naming other than
    HTML or MathML, or it or ``systemLanguage`` given empty, which SVG says is false."""
    if any(
        not (attributes.get(name) or "").strip() for name in _CONDITIONS[:2] if name in attributes
    ):
        return True
    extensions = (attributes.get("requiredExtensions") or "").split()
    return any(extension not in _EXTENSIONS for extension in extensions)


def _draws_text(tag: str, parent: _Frame) -> bool:
    """Whether an element's own text is drawn: SVG draws text only inside a ``<text>`` (or
    the HTML of a ``<foreignObject>``); words anywhere else in an ``<svg>`` are data no one
    sees."""
    if tag == "svg":
        return False
    if parent.foreign and tag in ("text", "foreignObject"):
        return True
    return parent.draws_text


def _empty_viewport(attributes: dict[str, str | None], style: dict[str, str]) -> bool:
    """An ``<svg>`` or ``<foreignObject>`` under a pixel wide or high, which clips what it
    holds (by the user agent's ``overflow: hidden``), or an ``<svg>`` whose ``viewBox`` has no
    width or height, which SVG says disables its rendering."""
    if any(size is not None and not size >= 1 for size in _viewport_size(attributes, style)):
        return True
    box = _view_box(attributes)
    return box is not None and 0 in box


def _view_box_scale(attributes: dict[str, str | None], style: dict[str, str]) -> float:
    """How much an ``<svg>`` draws its ``viewBox`` at, fitted whole into its box (SVG's
    default ``xMidYMid meet``): a width it does not state is taken as the viewport's 1,280
    pixels, the widest it can be, so ``viewBox="0 0 100000000 100000000"`` draws its text at
    a hundred-thousandth with no width at all. Multiplied down the tree with the rest, and
    judged against each text's font size, not as a cut-off for the whole drawing: a map's
    large coordinates hold text as large."""
    box = _view_box(attributes)
    if box is None or 0 in box:
        return 1.0
    width, height = _viewport_size(attributes, style)
    scales = [(width or _VIEWPORT_WIDTH) / box[0]]
    if height is not None:
        scales.append(height / box[1])
    return min(scales)


def _viewport_size(
    attributes: dict[str, str | None], style: dict[str, str]
) -> tuple[float | None, float | None]:
    """An SVG viewport's width and height in pixels, by style, else attribute; None where
    neither gives a length (``100%``, ``auto``)."""
    width, height = (
        _user_units(style.get(side) or attributes.get(side) or "") for side in ("width", "height")
    )
    return width, height


def _view_box(attributes: dict[str, str | None]) -> tuple[float, float] | None:
    """A ``viewBox``'s width and height, or None when there is none or it is invalid (four
    numbers, none negative, as SVG requires: an invalid one is ignored)."""
    parts = re.split(r"[\s,]+", (attributes.get("viewBox") or "").strip())
    try:
        numbers = [float(part) for part in parts]
    except ValueError:
        return None
    if len(numbers) != 4 or not all(0 <= number < math.inf for number in numbers[2:]):
        return None
    return numbers[2], numbers[3]


def _user_units(value: str) -> float | None:
    """An SVG length in pixels: a bare number is in user units, which are pixels outside a
    ``viewBox``."""
    value = value.strip()
    if not value:
        return None
    length = css.px(value)
    return length if length is not None else css.px(f"{value}px")


def _style_of(attributes: dict[str, str | None], *, foreign: bool) -> str:
    """An element's style declarations, SVG's and MathML's presentation attributes first
    (the style attribute overrides them, as in a browser)."""
    own = attributes.get("style") or ""
    if not foreign:
        return own
    presented = [
        f"{name}:{_presented(name, value)}"
        for name in _PRESENTATION
        if (value := attributes.get(name))
    ]
    return ";".join([*presented, own])


def _presented(name: str, value: str) -> str:
    """A presentation attribute's value as CSS reads it: SVG's ``font-size="12"`` is in user
    units, pixels, where CSS takes no bare number (it was read as the parent's size)."""
    if name == "font-size" and re.fullmatch(r"\s*[+]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*", value):
        return f"{value.strip()}px"
    return value


def _tidy(text: str) -> str:
    """Collapsed text's lines without the spaces that open or close them."""
    return "\n".join(line.strip(" ") for line in text.split("\n")).strip()


def _whole_number(value: str | None, *, default: int) -> int:
    try:
        number = int((value or "").strip())
    except ValueError:
        return default
    return number if 0 <= number < 1_000_000 else default
