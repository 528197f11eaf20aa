"""How deep a web page's elements nest, counted before the HTML parser builds them.

lexbor's tree builder walks its open elements on many start tags, so its cost grows with the
square of the depth: 100,000 nested ``<div>`` cost it 23 s of CPU, 2,048 nothing measurable.
The count reads the page as HTML's tokenizer does, and follows the tree builder as far as
SVG and MathML, where a self-closing ``<circle/>`` opens nothing (a chart draws thousands).
Where it cannot be sure what the tree builder does, it counts as if the elements stayed open:
a count under the real depth is a page that costs what the bound exists to stop.
See docs/sandbox.md, "Parsers" (web pages, *Bounds*).
"""

from __future__ import annotations

import enum
import functools
import re
import string
from collections import Counter
from dataclasses import dataclass

from sandbox import codes
from sandbox.extractors.markup import FOREIGN, RAW_TEXT, VOID
from sandbox.extractors.registry import Refusal

#: Elements open at once. Chromium's parser stops nesting at 512.
MAX_NESTING = 2048

#: Elements a sibling closes by itself, or that exist only in a table or a select: in HTML
#: they do not deepen the tree for long, so they go uncounted, as void elements do. In SVG and
#: MathML neither kind closes by itself. (List items a sibling does not close, ``<li><dt>``
#: repeated, nest all the same: counting them, and closing them by HTML's walk, let elements
#: the count kept after lexbor closed them hide depth; see docs/sandbox.md.)
_UNCOUNTED_IN_HTML = VOID | {"p", "li", "dt", "dd", "tr", "td", "th", "option"}
#: Start tags that end SVG or MathML: the tree builder closes the foreign elements above the
#: nearest HTML element or integration point and reads the tag as HTML. ``font`` ends it only
#: with an attribute named in :data:`_FONT_BREAKOUT`.
_BREAKOUT = frozenset(
    {"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em"}
    | {"embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing"}
    | {"menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong"}
    | {"strike", "sub", "sup", "table", "tt", "u", "ul", "var"}
)
_FONT_BREAKOUT = frozenset({"color", "face", "size"})
#: The one breakout tag lexbor does not break out on (checked against every one).
_KEPT_IN_FOREIGN_BY_LEXBOR = frozenset({"sup"})
#: End tags that end SVG or MathML as the start tags above do.
_END_BREAKOUT = frozenset({"br", "p"})
#: Where SVG and MathML hold HTML again: SVG's HTML integration points, and MathML's text
#: integration points (where ``mglyph`` and ``malignmark`` stay MathML). MathML's
#: ``annotation-xml`` holds HTML by its encoding attribute, which the count does not read.
_SVG_HOLDING_HTML = frozenset({"foreignobject", "desc", "title"})
_MATHML_HOLDING_TEXT = frozenset({"mi", "mo", "mn", "ms", "mtext"})
_MATHML_IN_TEXT = frozenset({"mglyph", "malignmark"})
_MATHML_MAY_HOLD_HTML = "annotation-xml"
#: An open frameset ignores raw-text start tags: what follows them is markup.
_FRAMESET = "frameset"

_SPACE = "\t\n\f\r "
#: What ``<`` opens: a start or end tag (an ASCII letter first; the name runs to white
#: space, ``/`` or ``>``, a ``<`` included), a comment, a CDATA section, or a bogus comment
#: (``<!``, ``<?``, ``</`` before anything but a letter) that ends at the first ``>``.
_OPENING = re.compile(
    r"<(?:(?P<end>/?)(?P<tag>[A-Za-z][^\t\n\f\r />]*+)|(?P<comment>!--)|(?P<cdata>!\[CDATA\[)"
    r"|(?P<bogus>[!?]|/(?![A-Za-z])))"
)
#: A tag's attributes to its ``>``, as the tokenizer reads them: a quote opens a value only
#: right after ``=`` (``<x a">`` ends at its ``>``), an unquoted value runs to white space or
#: ``>`` (``a=1/>`` is not self-closing, ``</div`` inside one closes nothing), and ``/``
#: before ``>`` makes the tag self-closing. None where a tag or a quoted value runs to the
#: end of the page (the tokenizer drops such a tag: nothing after it is markup).
_ATTRIBUTES = re.compile(
    rf"""(?:[{_SPACE}]++|/(?!>)
        |[^{_SPACE}/>][^{_SPACE}/>=]*+
         (?:[{_SPACE}]*+=[{_SPACE}]*+(?:"[^"]*+"|'[^']*+'|(?=>)|[^{_SPACE}>"'][^{_SPACE}>]*+)
           |(?![{_SPACE}]*+=))
    )*+(?P<closing>/?)>""",
    re.VERBOSE,
)
_END = "end"
_TAG = "tag"
_CLOSING = "closing"
_COMMENT_END = re.compile(r"--!?>")
_CDATA_END = re.compile(re.escape("]]>"))
_TAG_CLOSE = re.compile(">")
#: One attribute's name (and value, passed over), as :data:`_ATTRIBUTES` reads them.
_ATTRIBUTE_NAME = re.compile(
    rf"""[{_SPACE}/]*+([^{_SPACE}/>][^{_SPACE}/>=]*+)"""
    rf"""(?:[{_SPACE}]*+=[{_SPACE}]*+(?:"[^"]*+"|'[^']*+'|[^{_SPACE}>"'][^{_SPACE}>]*+)?)?"""
)
#: The steps a page's scripts may take through their comment escapes, in all.
_MOST_SCRIPT_STEPS = 100_000
_HTML = "html"
_SVG = "svg"
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def bound_nesting(markup: str, ceiling: int = MAX_NESTING) -> None:
    """Refuse a page whose elements nest deeper than ``ceiling`` (``CeilingExceeded``), in one
    pass over the markup."""
    scan = _Scan(markup, ceiling)
    while scan.step():
        pass


class _Holds(enum.Enum):
    """What an open element's content is read as."""

    HTML = "html"
    FOREIGN = "foreign"
    TEXT = "text"  # MathML's text integration points: HTML, but for mglyph and malignmark
    UNKNOWN = "unknown"  # annotation-xml, whose encoding decides


@dataclass(frozen=True, slots=True)
class _Element:
    name: str
    namespace: str
    holds: _Holds
    foreign: bool


@functools.lru_cache(maxsize=1024)
def _element(name: str, namespace: str) -> _Element:
    """An element of ``namespace``, holding what that namespace says it holds (one value for
    each kind: most of a page's elements are a few dozen kinds)."""
    if namespace == _HTML:
        holds = _Holds.HTML
    elif namespace == _SVG:
        holds = _Holds.HTML if name in _SVG_HOLDING_HTML else _Holds.FOREIGN
    elif name in _MATHML_HOLDING_TEXT:
        holds = _Holds.TEXT
    else:
        holds = _Holds.UNKNOWN if name == _MATHML_MAY_HOLD_HTML else _Holds.FOREIGN
    return _Element(name, namespace, holds, foreign=namespace != _HTML)


class _Open:
    """The elements the count holds open, in order, as far as the count follows the tree builder.

    While ``exact``, the SVG and MathML elements open are the top of the tree builder's own
    stack (no HTML element is ever above one), each with its namespace, so self-closing tags
    there open nothing and end tags close what the tree builder closes. The first tag whose
    effect the count does not follow (HTML inside SVG, an end tag that reaches past the open
    foreign elements) ends that for the rest of the page: from then on any element may be
    foreign, and every one is held open until an end tag of its name.

    An end tag the count cannot place closes the latest element of its name, wherever it is
    (left as a gap in ``_stack``, so that every operation is amortised constant time).
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.exact = True
        self.depth = 0
        self.foreign_open = 0
        self._stack: list[_Element | None] = []
        self._positions: dict[str, list[int]] = {}
        self._foreign_names: Counter[str] = Counter()

    def top(self) -> _Element | None:
        while self._stack and self._stack[-1] is None:
            self._stack.pop()
        return self._stack[-1] if self._stack else None

    def namespace(self) -> str:
        top = self.top()
        return _HTML if top is None else top.namespace

    def count(self, name: str) -> int:
        return len(self._positions.get(name, ()))

    def foreign_may_be_open(self) -> bool:
        return self.count("svg") > 0 or self.count("math") > 0

    def in_foreign_content(self, name: str) -> bool:
        """Whether a start tag of ``name`` here is read as SVG or MathML."""
        top = self.top() if self.exact else None
        if top is None or not top.foreign:
            return False
        return top.holds is _Holds.FOREIGN or (top.holds is _Holds.TEXT and name in _MATHML_IN_TEXT)

    def push(self, element: _Element) -> None:
        self._positions.setdefault(element.name, []).append(len(self._stack))
        self._stack.append(element)
        self.foreign_open += element.foreign
        self._foreign_names[element.name] += element.foreign
        self.depth += 1
        if self.depth > self.ceiling:
            raise Refusal(codes.CEILING, f"the page nests elements more than {self.ceiling} deep")

    def pop(self) -> _Element:
        """Close the current element."""
        top = self.top()
        assert top is not None, "pop() of an empty stack"
        self._close_at(self._positions[top.name].pop())
        return top

    def close(self, name: str) -> None:
        """Close the latest open element of ``name``, if any."""
        positions = self._positions.get(name)
        if positions:
            self._close_at(positions.pop())

    def _close_at(self, index: int) -> None:
        element = self._stack[index]
        assert element is not None
        self._stack[index] = None
        self.foreign_open -= element.foreign
        self._foreign_names[element.name] -= element.foreign
        self.depth -= 1

    def foreign_named(self, name: str) -> int:
        return self._foreign_names[name]

    def give_up(self) -> None:
        self.exact = False


class _Scan:
    """One pass over a page's markup, each :meth:`step` reading what one ``<`` opens.

    Where the count cannot tell whether a span is markup (a CDATA section, or raw text, where
    it cannot tell whether SVG or a frameset is open), it reads the span as markup
    but takes none of its end tags: either way nothing is counted closed that the parser keeps
    open.
    """

    def __init__(self, markup: str, ceiling: int) -> None:
        self.markup = markup
        self.position = 0
        self.open = _Open(ceiling)
        #: End tags before here are not taken: the end of the span the count cannot tell.
        self.undecided_to = 0
        self._searched: dict[re.Pattern[str], tuple[int, re.Match[str] | None]] = {}
        self._script_steps = 0

    def step(self) -> bool:
        opening = _OPENING.search(self.markup, self.position)
        if opening is None:
            return False
        undecided = opening.start() < self.undecided_to
        self.position = opening.end()
        kind = opening.lastgroup
        if kind == "comment":
            self._advance(self._comment_end())
        elif kind == "cdata":
            self._cdata()
        elif kind == "bogus":
            self._advance(self._past(_TAG_CLOSE))
        else:
            attributes = _ATTRIBUTES.match(self.markup, self.position)
            if attributes is None and not undecided:
                return False  # the tag runs to the end: the tokenizer drops it, and the rest
            self._advance(len(self.markup) if attributes is None else attributes.end())
            name = _folded(opening[_TAG])
            if opening.start(_END) < opening.end(_END):
                if not undecided:
                    self._end_tag(name)
            elif attributes is not None:
                self._start_tag(name, attributes)
        return True

    def _advance(self, end: int) -> None:
        """Move past what ends at ``end``. Something that starts in an undecided span and ends
        beyond it may be text, so reading goes on from the span's end, taking no end tag up
        to ``end``."""
        if self.position < self.undecided_to:
            self.position = min(end, self.undecided_to)
            self.undecided_to = max(end, self.undecided_to)
        else:
            self.position = end

    def _undecided(self, end: int) -> None:
        self.undecided_to = max(self.undecided_to, end)

    def _search(self, pattern: re.Pattern[str], position: int) -> re.Match[str] | None:
        """``pattern``'s first match at or after ``position``, each pattern's last search kept:
        a span without one is searched once (a CDATA section never closed, searched for from
        each of 20,000 openings in an undecided span, cost the rest of the page each time)."""
        kept = self._searched.get(pattern)
        if kept is not None:
            searched_from, found = kept
            if searched_from <= position and (found is None or found.start() >= position):
                return found
        found = pattern.search(self.markup, position)
        self._searched[pattern] = (position, found)
        return found

    def _past(self, end: re.Pattern[str]) -> int:
        found = self._search(end, self.position)
        return len(self.markup) if found is None else found.end()

    def _comment_end(self) -> int:
        if self.markup.startswith((">", "->"), self.position):
            return self.position  # "<!-->" and "<!--->" end where they start
        return self._past(_COMMENT_END)

    def _cdata(self) -> None:
        """A CDATA section is text where the current element is SVG or MathML, and a bogus
        comment to the first ``>`` in HTML."""
        top = self.open.top()
        if not self.open.exact:
            self._undecided(self._past(_CDATA_END))
        elif top is not None and top.foreign:
            self._advance(self._past(_CDATA_END))
        else:
            self._advance(self._past(_TAG_CLOSE))

    def _start_tag(self, name: str, attributes: re.Match[str]) -> None:
        opened = self.open
        self_closing = attributes.start(_CLOSING) < attributes.end(_CLOSING)
        if opened.in_foreign_content(name):
            if not _breaks_out(name, attributes):
                if not self_closing:
                    # Of its parent's namespace: <math> in an SVG is SVG's.
                    opened.push(_element(name, opened.namespace()))
                return
            if name in _KEPT_IN_FOREIGN_BY_LEXBOR:
                # lexbor keeps <sup> in SVG, which the standard breaks out on: popped, the
                # foreign elements let it nest without a count.
                opened.give_up()
            while opened.in_foreign_content(""):
                opened.pop()
        # Read as HTML from here, where the count is exact and the current element is no
        # annotation-xml (whose content may be either).
        top = opened.top()
        known_html = opened.exact and (top is None or top.holds is not _Holds.UNKNOWN)
        if opened.exact and (opened.foreign_open or (name in FOREIGN and opened.count(_FRAMESET))):
            # HTML inside SVG or MathML, or SVG a frameset ignores: not followed.
            opened.give_up()
        if self_closing and (name in FOREIGN or name in _UNCOUNTED_IN_HTML):
            return  # closed at once, whether the tag is read as HTML or as SVG or MathML
        if name in RAW_TEXT:
            self._raw_text(name, known_html)
        elif name not in _UNCOUNTED_IN_HTML:
            self._open_html(name)
        elif not known_html and opened.foreign_may_be_open() and name not in _BREAKOUT:
            self._open_html(name)  # it may be SVG or MathML, where nothing closes by itself

    def _open_html(self, name: str) -> None:
        self.open.push(_element(name, name if name in FOREIGN else _HTML))

    def _end_tag(self, name: str) -> None:
        """In SVG and MathML an end tag closes the nearest foreign element of its name and all
        above it; one that reaches past them is HTML's, and closes the latest element of its
        name (the parser may ignore it: docs/sandbox.md names that gap)."""
        opened = self.open
        top = opened.top()
        if opened.exact and top is not None and top.foreign:
            if name not in _END_BREAKOUT and opened.foreign_named(name):
                while opened.pop().name != name:
                    pass
                return
            opened.give_up()
        opened.close(name)

    def _raw_text(self, name: str, known_html: bool) -> None:
        """Raw text (``script``, ``style``, ``textarea``...) as the tokenizer ends it: skipped
        where it is, and undecided where the start tag may be SVG's or MathML's, or ignored by
        an open frameset."""
        ignored = self.open.count(_FRAMESET) > 0
        decided = (known_html or not self.open.foreign_may_be_open()) and not ignored
        end = self._raw_text_end(name, budgeted=not decided)
        self._open_html(name)
        if decided:
            self._advance(end)
        else:
            self._undecided(end)

    def _raw_text_end(self, name: str, *, budgeted: bool) -> int:
        """Where raw text that starts here ends: at an end tag of its name followed by white
        space, ``/`` or ``>`` (``</scriptx>`` does not end a script); ``plaintext`` never ends;
        a script's ``<!--`` escapes hide a ``</script>`` inside ``<script>`` from it."""
        if name == "script":
            return self._script_end(budgeted)
        closing = _RAW_TEXT_ENDS.get(name)
        found = None if closing is None else self._search(closing, self.position)
        return len(self.markup) if found is None else found.start()

    def _script_end(self, budgeted: bool) -> int:
        """The end of script data through the tokenizer's escape states: after ``<!--`` a
        ``<script>`` starts a double escape, in which ``</script>`` only ends that escape;
        ``-->`` returns to plain script data. Scripts in an undecided span (``budgeted``) may
        take :data:`_MOST_SCRIPT_STEPS` steps through them in all: each walked the same
        escapes to the page's end, 25 s on 87 KB. Scripts read as HTML walk their own alone."""
        state, position = _SCRIPT_DATA, self.position
        while (found := self._search(state, position)) is not None:
            self._script_steps += budgeted
            if self._script_steps > _MOST_SCRIPT_STEPS:
                raise Refusal(
                    codes.CEILING,
                    f"the page's scripts take more than {_MOST_SCRIPT_STEPS:,} steps through "
                    "their comment escapes to find where they end",
                )
            marker = found.group(0).lower()
            if marker == "<!--":
                state = _SCRIPT_ESCAPED
                position = found.start() + 2  # "<!-->" is its own end
            elif marker == "-->":
                state, position = _SCRIPT_DATA, found.end()
            elif marker == "<script":
                state, position = _SCRIPT_DOUBLE_ESCAPED, found.end()
            elif state is _SCRIPT_DOUBLE_ESCAPED:
                state, position = _SCRIPT_ESCAPED, found.end()
            else:
                return found.start()
        return len(self.markup)


def _breaks_out(name: str, attributes: re.Match[str]) -> bool:
    """Whether a start tag ends SVG or MathML: ``font`` by an attribute named so, the names
    read as the tokenizer reads them (``a=""color`` names one; ``a=" color "`` does not)."""
    if name == "font":
        names = {found.group(1).lower() for found in _ATTRIBUTE_NAME.finditer(attributes[0])}
        return bool(names & _FONT_BREAKOUT)
    return name in _BREAKOUT


def _folded(name: str) -> str:
    """A tag name as the tokenizer folds it, ASCII letters only: str.lower() also folds U+212A
    (KELVIN SIGN) to "k", which read ``<lin&#x212A;>`` as a void ``<link>`` where the parser
    nests it."""
    return name.lower() if name.isascii() else name.translate(_ASCII_LOWER)


def _ascii_insensitive(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE | re.ASCII)


#: The end tag of each raw-text element (``plaintext`` has none), matched case-insensitively
#: in ASCII alone, as the tokenizer does.
_RAW_TEXT_ENDS = {
    name: _ascii_insensitive(rf"</{name}(?=[{_SPACE}/>])") for name in RAW_TEXT - {"plaintext"}
}
_SCRIPT_DATA = _ascii_insensitive(rf"</script(?=[{_SPACE}/>])|<!--")
_SCRIPT_ESCAPED = _ascii_insensitive(rf"</script(?=[{_SPACE}/>])|<script(?=[{_SPACE}/>])|-->")
_SCRIPT_DOUBLE_ESCAPED = _ascii_insensitive(rf"</script(?=[{_SPACE}/>])|-->")
