"""The CSS that decides whether a person sees text: declarations, colours and stylesheet rules,
read as a browser reads them where hiding is concerned.

A page hides instructions from its reader and shows them to a model by styling, so what a
declaration means must be what a browser makes of it: an invalid later value does not undo an
earlier valid one, comments and escapes do not break a property apart, ``var()`` is resolved,
and every colour form (names, hex, rgb, hsl, with alpha) is compared as red, green, blue and
alpha, near-equal counting as equal. The reader errs towards hiding: a rule inside ``@media``
is applied unless the query is for print or speech only. See docs/sandbox.md, "Parsers"
(html).
"""

from __future__ import annotations

import colorsys
import functools
import math
import re
import sys
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field

from PIL import ImageColor

#: Text this close to its background in every channel, or this transparent, is not seen.
_NEAR = 16
#: No value a hiding rule is judged by is longer (a colour, a length, a keyword).
_MAX_VALUE_CHARS = 4_096
_FAINT = 0.05
#: Text drawn smaller than this many pixels is not read by anyone.
SMALLEST_PX = 1.0
#: An ``inset()`` clip of this many percent of a box, or more, leaves nothing to read.
_CLIPPED_PERCENT = 99.9
#: The thinnest band a clip may leave and show a letter, in pixels and in percent of the box
#: (what an ``inset()`` of :data:`_CLIPPED_PERCENT` leaves).
_THINNEST = {"px": SMALLEST_PX, "%": 100 - _CLIPPED_PERCENT}
#: The browser's default font size, which ``rem`` and the keywords are measured by.
MEDIUM_PX = 16.0
#: Offsets past these are off-screen (the viewport is taken as 1,280 by 1,024).
_OFF_BEFORE_PX = -500.0
_OFF_AFTER_PX = 2_000.0
_VIEWPORT_PX = {"vw": 12.8, "vh": 10.24, "vmin": 10.24, "vmax": 12.8}
_PX_PER_UNIT = {"px": 1.0, "em": 16.0, "rem": 16.0, "pt": 4 / 3, "pc": 16.0, "ex": 8.0}
_PX_PER_UNIT |= {"ch": 8.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "q": 96 / 101.6, "in": 96.0}
_PX_PER_UNIT |= _VIEWPORT_PX
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?"
_LENGTH = re.compile(rf"^({_NUMBER})([a-z%]*)$")
#: The math functions worked out: a browser hides text by any (``opacity:abs(0)``).
_MATH_NAMES = "calc|min|max|clamp|abs|sign|round|mod|rem|exp|pow|sqrt|hypot|log"
#: A line break inside is white space (``opacity:calc(0\\n)`` is 0, not a value left unread).
_MATH = re.compile(rf"^({_MATH_NAMES})\((.*)\)$", re.DOTALL)
#: How deep a browser works math out, functions and brackets counted (Chromium 156: a hundred
#: nested ``min()`` are 0, a hundred and one reject the declaration and the earlier stands).
_MATH_DEPTH = 100
_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})(?:\r\n|[ \t\n\r\f])?|\\(.)", re.DOTALL)
#: A custom property's name as written: CSS's name code points (ASCII letters, digits, "-",
#: "_", and everything past ASCII) and escapes of any other character (``--a\ b``); ASCII
#: letters alone missed ``--\U0001f600``, and unescaped first, ``--a\ b`` was no name.
_CUSTOM_NAME = r"--(?:[\w-]|[^\x00-\x7f]|\\(?:[0-9a-fA-F]{1,6}[ \t\n\r\f]?|[^\n\r\f0-9a-fA-F]))+"
#: ``var()`` in any ASCII case, as CSS names functions (``VAR(--d)`` is one).
_VARIABLE = re.compile(rf"[vV][aA][rR]\(\s*({_CUSTOM_NAME})\s*(?:,\s*((?:[^()]|\([^()]*\))*))?\)")
#: Where a ``var()`` names a property, fallbacks' included.
_VARIABLE_NAME = re.compile(rf"[vV][aA][rR]\(\s*({_CUSTOM_NAME})")
#: Strings (whose braces, semicolons and comment marks are text) and braces.
_TOKENS = re.compile(r""""(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?|[{}]""")
_COMMENT_OR_STRING = re.compile(r""""(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?|/\*|<!--|-->""")
#: The flag that ends a value (not an escaped ``\\!``), and any other ``!`` outside strings,
#: which no value of the properties judged holds.
_LAST_BANG = re.compile(r"(?<!\\)!(?=[^!]*$)")
_BANG = re.compile(r"(?<!\\)!")
#: Strings and unquoted url()s, in which a "!" is no delimiter; one left open runs to the end
#: (closing quotes required, each of 20,000 quotes searched to the end: 8 s on 40 KB).
_STRINGS = re.compile(r""""(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?|url\([^)"']*\)?""", re.IGNORECASE)
_FUNCTION = re.compile(r"^(rgba?|hsla?|hwb|lab|lch|oklab|oklch|color|color-mix)\((.*)\)$")
_CALC_INSIDE = re.compile(r"calc\(([^()]*)\)")
#: CSS's white space between the tokens of a math function.
_SPACES = r"[ \t\n\r\f]*"
#: A math function's tokens: a function's or a group's opening bracket, a closing one, a
#: comma, an operator (``+`` and ``-`` only between spaces, as CSS writes them: ``1px -2px``
#: is two values), a number and its unit, or one of CSS's constants.
_MATH_TOKEN = re.compile(
    rf"{_SPACES}(?:(?P<open>(?:{_MATH_NAMES})?\()|(?P<close>\))|(?P<comma>,)"
    r"|(?P<operator>[*/]|(?<=[ \t\n\r\f])[+-](?=[ \t\n\r\f]))"
    rf"|(?P<number>{_NUMBER})(?P<unit>[a-z%]*)|(?P<constant>-?infinity|nan|pi|e)(?![\w-])"
    rf"|(?P<keyword>none|nearest|up|down|to-zero)(?![\w-])){_SPACES}"
)
#: ``round()``'s strategies, which may come first (``round(down, -9.5px, 1px)``).
_ROUNDINGS = frozenset({"nearest", "up", "down", "to-zero"})
#: The math functions of numbers alone, and how many arguments each takes.
_OF_NUMBERS = {"exp": (1,), "pow": (2,), "sqrt": (1,), "log": (1, 2)}
_ARITY = _OF_NUMBERS | {"abs": (1,), "sign": (1,), "round": (1, 2), "mod": (2,), "rem": (2,)}
_ARITY |= {"clamp": (3,)}
_CONSTANTS = {
    "infinity": math.inf,
    "-infinity": -math.inf,
    "nan": math.nan,
    "pi": math.pi,
    "e": math.e,
}
#: A worked-out value: its number and its kind, "" a number, "%" a percentage, "d" a
#: dimension in the units it was measured by.
_Typed = tuple[float, str]
#: An angle's units, in degrees.
_DEGREES_PER_UNIT = {"deg": 1.0, "grad": 0.9, "rad": 57.29577951308232, "turn": 360.0}
#: The functions a ``transform`` and a ``filter`` list may hold: a browser rejects a list
#: with any other (``transform:scale(0);transform:bogus(1)`` stays scaled to nothing).
_FUNCTIONS = {
    "transform": frozenset(
        {"matrix", "matrix3d", "perspective", "rotate", "rotatex", "rotatey", "rotatez"}
        | {"rotate3d", "scale", "scalex", "scaley", "scalez", "scale3d", "skew", "skewx"}
        | {"skewy", "translate", "translatex", "translatey", "translatez", "translate3d"}
    ),
    "filter": frozenset(
        {"blur", "brightness", "contrast", "drop-shadow", "grayscale", "hue-rotate", "invert"}
        | {"opacity", "saturate", "sepia", "url"}
    ),
}
_BRACKET_OR_STRING = re.compile(r""""(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?|[()]""")
#: CSS's white space (not Python's: a no-break space is part of a word to CSS).
_CSS_SPACE = " \t\n\r\f"
_FUNCTION_NAME = re.compile(r"[\s,]*+([a-z][\w-]*+)\(")
#: The system fonts ``font`` may name alone, at a size of the system's.
_SYSTEM_FONTS = frozenset({"caption", "icon", "menu", "message-box", "small-caption", "status-bar"})
#: Keywords a length, colour or display value may also be.
_WIDE = frozenset({"inherit", "initial", "unset", "revert", "revert-layer"})
_DISPLAY_WORDS = frozenset(
    {"none", "block", "inline", "inline-block", "flex", "inline-flex", "grid", "inline-grid"}
    | {"contents", "table", "inline-table", "table-row", "table-cell", "table-caption"}
    | {"table-row-group", "table-header-group", "table-footer-group", "table-column"}
    | {"table-column-group", "list-item", "flow", "flow-root", "run-in", "ruby", "math"}
    | {"ruby-base", "ruby-text", "-webkit-box", "-webkit-inline-box", "-ms-flexbox"}
)
_VISIBILITY = frozenset({"visible", "hidden", "collapse"})
_COLOUR_PROPERTIES = frozenset(
    {"color", "background-color", "-webkit-text-fill-color", "fill", "stroke"}
)
_LENGTH_PROPERTIES = frozenset(
    {"left", "top", "right", "bottom", "width", "height", "max-width", "max-height"}
    | {"text-indent", "margin-left", "margin-top", "font-size", "inset-inline-start"}
    | {"margin-inline-start", "block-size", "inline-size", "margin-block-start"}
    | {"inset-block-start", "max-block-size", "max-inline-size", "inset-inline-end"}
    | {"inset-block-end"}
)
#: Lengths with a percentage measured as a pixel: what a length property accepts, whatever
#: a percentage comes to (``calc(10px + 5%)`` is one).
_PERCENT_AS_PX = _PX_PER_UNIT | {"%": 1.0}
#: The absolute font-size keywords, in pixels (CSS Fonts' scale at a 16-pixel medium).
_FONT_SIZE_PX = {
    "xx-small": 9.0,
    "x-small": 10.0,
    "small": 13.0,
    "medium": 16.0,
    "large": 18.0,
    "x-large": 24.0,
    "xx-large": 32.0,
    "xxx-large": 48.0,
}
_FONT_SIZE_WORDS = frozenset(_FONT_SIZE_PX) | {"smaller", "larger", "math"}
#: Font sizes measured by the parent's: an ``ex`` and a ``ch`` taken as half an ``em``.
_PER_PARENT_EM = {"em": 1.0, "ex": 0.5, "ch": 0.5, "%": 0.01}
#: Properties whose effect multiplies down the tree (or, for ``font-size``, is measured by the
#: parent's): no one value hides, but several nested do, so each element's is carried to its
#: content rather than judged alone.
NESTING = frozenset({"opacity", "filter", "font-size", "transform", "rotate", "scale", "zoom"})
#: A transform's 4x4 matrix, row by row, acting on column vectors ``(x, y, z, 1)``.
_Matrix = tuple[float, ...]
_IDENTITY: _Matrix = tuple(float(row == column) for row in range(4) for column in range(4))
_ANGLE = re.compile(rf"{_NUMBER}(?:deg|grad|rad|turn)")
#: A magnification past this is taken as this, so that factors multiplied down a deep tree
#: stay finite (infinity times a zero scale is not a number).
_MOST_MAGNIFIED = 1e6
_BACKGROUNDS = ("background-color", "background", "background-image")
#: Logical properties, by the physical ones they are in left-to-right, horizontal text.
_LOGICAL = {
    "margin-inline-start": "margin-left",
    "margin-block-start": "margin-top",
    "inset-block-start": "top",
    "block-size": "height",
    "inline-size": "width",
    "max-block-size": "max-height",
    "max-inline-size": "max-width",
    "inset-inline-end": "right",
    "inset-block-end": "bottom",
    "padding-inline-start": "padding-left",
    "padding-block-start": "padding-top",
}
#: Logical shorthands, by the longhands their first and second values set (one sets both):
#: ``margin-inline:-9999px 0`` moves text off-screen as ``margin-left`` does.
_LOGICAL_PAIRS = {
    "margin-inline": ("margin-inline-start", "margin-inline-end"),
    "margin-block": ("margin-block-start", "margin-block-end"),
    "inset-inline": ("inset-inline-start", "inset-inline-end"),
    "inset-block": ("inset-block-start", "inset-block-end"),
    "padding-inline": ("padding-inline-start", "padding-inline-end"),
    "padding-block": ("padding-block-start", "padding-block-end"),
}
#: The paddings that bring a box's content back from a start offset: a full-bleed band
#: (``margin-inline:-9999px;padding-inline:9999px``) draws its text in place.
_PADDINGS = frozenset(
    {"padding", "padding-left", "padding-top", "padding-inline-start", "padding-block-start"}
    | {"padding-inline", "padding-block"}
)
#: Which of one to four values a box shorthand gives its top, right, bottom and left.
_SIDE_INDICES = {1: (0, 0, 0, 0), 2: (0, 1, 0, 1), 3: (0, 1, 2, 1), 4: (0, 1, 2, 3)}
#: The boxes a ``clip-path`` shape may be drawn in, before or after it: none makes an empty
#: shape show anything.
_REFERENCE_BOXES = frozenset(
    {"margin-box", "border-box", "padding-box", "content-box", "fill-box", "stroke-box"}
    | {"view-box"}
)
#: Media types a query may name that no screen shows.
_UNSEEN_MEDIA = frozenset({"print", "speech"})
#: Blend modes that paint black text white on the white page: those that lighten, and those
#: that keep a white backdrop white (``difference``: |white - black| is white).
_WHITENING_BLENDS = frozenset(
    {"screen", "lighten", "color-dodge", "plus-lighter", "difference", "exclusion"}
    | {"overlay", "soft-light", "color-burn"}
)


@dataclass(frozen=True)
class Colour:
    """A colour as a browser paints it: red, green and blue in 0..255, alpha in 0..1."""

    red: int
    green: int
    blue: int
    alpha: float = 1.0

    def unseen_on(self, background: Colour | None) -> bool:
        """Whether text of this colour cannot be told from ``background`` (None: unknown, a
        picture, which may show any colour)."""
        if self.alpha < _FAINT:
            return True
        if background is None or background.alpha < 1:
            return False
        return all(
            abs(mine - theirs) <= _NEAR
            for mine, theirs in zip(
                (self.red, self.green, self.blue),
                (background.red, background.green, background.blue),
                strict=True,
            )
        )


WHITE = Colour(255, 255, 255)
BLACK = Colour(0, 0, 0)
#: System colours a page may name: the page's background and text.
_SYSTEM = {"canvas": WHITE, "window": WHITE, "canvastext": BLACK, "windowtext": BLACK}


def declarations(
    style: str,
    variables: MutableMapping[str, str] | None = None,
    *,
    open_variables: bool = False,
    own_computed: bool = False,
) -> dict[str, str]:
    """A style's declarations as a browser keeps them: comments and escapes read, ``;``
    inside quotes and brackets not a separator, custom properties and ``var()`` resolved
    (``variables``: those the element inherits), a value that is not valid for its property
    ignored, so the earlier valid one stands, and shorthands expanded where they stand (a
    later ``font:0/0 a`` resets an earlier ``font-size:16px``). An ``!important`` that ends
    a value is dropped once weighed: a later declaration without it does not undo one with it
    (``display:none !important; display:block`` hides); a ``!`` anywhere else (a second
    ``!important``, ``bl!importantock``) makes the declaration invalid, and ``\\!important``
    is no flag at all. ``own_computed``: ``variables`` hold the style's own custom
    properties already worked out (see :func:`computed`), not to be taken again as
    written."""
    found: dict[str, str] = {}
    if not style or style.isspace():
        return found
    # A new map in front of the inherited ones: nothing is copied, whatever the depth.
    known = ChainMap({}) if variables is None else ChainMap({}, variables)
    important: set[str] = set()
    for declaration in _split(_without_comments(style), ";"):
        name, colon, value = declaration.partition(":")
        if not colon:
            continue
        value, weighty = _flagged(value)
        if _BANG.search(_STRINGS.sub("", value)):
            continue
        name = _unescaped(name).strip()
        value = value.strip()
        if name.startswith("--"):  # custom property names are case-sensitive
            # Kept as written, escapes read where it is substituted: a name in its var()s
            # may hold an escaped space or bracket, which unescaped ends the name.
            set_here = {name: value}
        else:
            name = name.lower()
            # In a rule, a font's family may be a property the element inherits: a var() of it
            # is kept as a word (dropped, "font:14px var(--ff)" lost its family and its size).
            # Inline, every property it inherits is known, and an unknown one invalidates.
            family = "var" if name == "font" and open_variables else ""
            value = _substituted(value, known, family).strip().lower()
            set_here = _longhands(name, value) if _valid(name, value) else {}
        for longhand, setting in set_here.items():
            if weighty or longhand not in important:
                found[longhand] = setting
                if weighty:
                    important.add(longhand)
        if name in found and name.startswith("--") and not own_computed:
            known[name] = found[name]
    # A logical property sets its physical one where none is set, and is judged as itself
    # too: which side it is depends on the writing mode, which is not read.
    for logical, physical in _LOGICAL.items():
        if logical in found:
            found.setdefault(physical, found[logical])
    return found


def _flagged(value: str) -> tuple[str, bool]:
    """A declaration's value without its ``!important``, and whether it had one: the word
    after the last ``!`` that no backslash escapes, escapes read (``!\\69mportant`` is the
    flag; ``\\!important`` is not), in ASCII case alone (``!\u0131mportant`` is not)."""
    bang = _LAST_BANG.search(value)
    if bang is None:
        return value, False
    word = _unescaped(value[bang.end() :]).strip(_CSS_SPACE)
    if word.isascii() and word.lower() == "important":
        return value[: bang.start()], True
    return value, False


def conditioned(sheet: str) -> frozenset[tuple[str, str]]:
    """The rules of ``sheet``, as :func:`rules` gives them, under an ``@media`` query other
    than a screen's type alone, an ``@supports`` or an ``@container`` condition, which a
    reader's screen may not meet, or an ``@scope`` or ``@document`` whose root or page may not
    be this one: the custom properties they set are judged both set and not
    (``@media (max-width:10px){.x{--d:block}}`` overruled ``.x{--d:none}``)."""
    found: set[tuple[str, str]] = set()
    todo = [_without_comments(sheet)]
    while todo:
        for prelude, body in _blocks(todo.pop()):
            keyword, _, condition = prelude[1:].partition(" ")
            keyword = keyword.lower() if prelude.startswith("@") else ""
            if keyword in ("supports", "container", "scope", "document") or (
                keyword == "media" and not _SCREEN_MEDIA.fullmatch(condition.strip().lower())
            ):
                found.update(rules(body))
            elif keyword in ("media", "layer"):
                todo.append(body)
    return frozenset(found)


#: A media query every screen meets.
_SCREEN_MEDIA = re.compile(r"(?:only\s+)?(?:screen|all)|")


def important_names(style: str) -> frozenset[str]:
    """The custom properties ``style`` sets ``!important``: they outweigh a style attribute's
    and a more specific rule's (``.x{--d:none !important}`` hides ``<p class=x
    style="--d:block">`` under ``p{display:var(--d)}``, which was read)."""
    if "!" not in style:
        return frozenset()
    important = set()
    for declaration in _split(_without_comments(style), ";"):
        name, colon, value = declaration.partition(":")
        name = _unescaped(name).strip()
        if colon and name.startswith("--") and _flagged(value)[1]:
            important.add(name)
    return frozenset(important)


def variables_of(style: Mapping[str, str]) -> dict[str, str]:
    """The custom properties a style defines, which its element's content inherits."""
    return {name: value for name, value in style.items() if name.startswith("--")}


@functools.lru_cache(maxsize=4_096)
def named(text: str) -> frozenset[str]:
    """The custom properties the ``var()``s of ``text`` name, in fallbacks too, escapes read
    (once per text: an element's inherited values are read for every rule naming them)."""
    found = _VARIABLE_NAME.finditer(_names_read(text))
    return frozenset(_unescaped(match.group(1)) for match in found)


def written_names(text: str) -> frozenset[str]:
    """Every custom property name written in ``text``, defined or named by a ``var()``."""
    return frozenset(map(_unescaped, re.findall(_CUSTOM_NAME, _names_read(text))))


#: The properties :func:`hiding` and :func:`shrinking` read, and the shorthands setting them:
#: a ``var()`` anywhere else changes nothing judged, so it does not make a rule read per
#: element (Bootstrap's hundreds of ``var()`` paddings and borders made pages 6x slower).
JUDGED = frozenset(
    {"display", "visibility", "content-visibility", "contain", "clip", "clip-path"}
    | {"overflow", "overflow-x", "overflow-y", "mix-blend-mode", "translate"}
    | {"color", "-webkit-text-fill-color", "fill", "stroke", "fill-opacity", *_BACKGROUNDS}
    | {"margin", "inset", "font", *_LENGTH_PROPERTIES, *_LOGICAL, *_LOGICAL_PAIRS}
    | NESTING
)


def used_names(body: str) -> frozenset[str]:
    """The custom properties a rule's own declarations of :data:`JUDGED` properties name
    (those of its custom properties' values are read where they are substituted)."""
    used: set[str] = set()
    for declaration in _split(_without_comments(body), ";"):
        name, colon, value = declaration.partition(":")
        if colon and _unescaped(name).strip().lower() in JUDGED:
            used |= named(value)
    return frozenset(used)


def bearing(names: Iterable[str], variables: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The custom properties of ``variables`` that ``names`` reach through the ``var()``s of
    their values, as deep as they are substituted: all that a reading naming ``names`` with
    ``variables`` depends on, so readings are kept per these and not per element."""
    reached: dict[str, str] = {}
    todo, seen = list(names), set(names)
    for _ in range(SUBSTITUTION_DEPTH):
        following = []
        for name in todo:
            if (value := variables.get(name)) is not None:
                reached[name] = value
                following += [one for one in named(value) if one not in seen]
                seen.update(following)
        todo = following
    return tuple(reached.items())


def hiding(style: Mapping[str, str], drawn: Colour | None = None) -> str | None:
    """How ``style`` hides what it applies to by itself, or None when it does not; what hides
    only once nested (opacity, scaling, font size) is :func:`diminished` and
    :func:`too_small`. ``drawn``: the colour the element paints its text in, its own or
    inherited (None where it is not known, as for a stylesheet rule judged once per sheet)."""
    if not style:
        return None  # most elements: no style at all
    if style.get("display") == "none":
        return "display:none"
    if (
        style.get("visibility") in ("hidden", "collapse")
        or style.get("content-visibility") == "hidden"
    ):
        return "visibility:hidden"
    if _zero_size(style):
        return "zero size"
    if _off_screen(style):
        return "off-screen"
    for name in ("color", "-webkit-text-fill-color"):
        colour = parse_colour(style.get(name, ""))
        if colour is not None and colour.alpha < _FAINT:
            return "transparent text"
    if (
        style.get("fill") in ("none", "transparent") and style.get("stroke") in (None, "none")
    ) or _fraction(style.get("fill-opacity", "")) < _FAINT:
        return "transparent text"
    if _whitened(style, drawn):
        return "a filter or blend that whitens text"
    return None


def opacity(style: Mapping[str, str]) -> float:
    """How opaque ``style`` paints its element, 0 to 1: its ``opacity`` times its
    ``filter:opacity()``. Nested elements multiply theirs, so three at 0.2 paint text at 0.008,
    which no one reads, though none is faint alone."""
    return _fraction(style.get("opacity", "")) * _fraction(_filter(style, "opacity") or "")


def magnification(style: Mapping[str, str]) -> float:
    """How much ``style`` enlarges what it draws in the direction it shrinks it most: the
    smaller stretch of its ``rotate``, ``scale`` and ``transform`` composed in that order, as
    the screen composes them (``scale(0.1, 1)`` and a singular ``matrix()`` leave text a
    sliver; ``rotate: x 60deg`` with ``rotateX(30deg)`` shows it edge-on, though neither
    alone does), times ``zoom``. Nested elements multiply theirs, as :func:`opacity`."""
    composed = (_rotation(style.get("rotate", "")), _scaled(style.get("scale", "")))
    stretch = _least_stretch(" ".join((*composed, style.get("transform", ""))))
    # A zoom of 0 (or an invalid negative one) is 1 to a browser.
    zoom = _factor(style.get("zoom", ""), 1.0)
    return nested(stretch, zoom if zoom > 0 else 1.0)


def _scaled(value: str) -> str:
    """The ``scale`` property as the ``scale3d()`` it stands for ("" for ``none`` and a value
    that is not one): one factor scales both axes of the plane (a negative one mirrors the
    text, at the same size)."""
    factors = _words(value)
    if not 0 < len(factors) <= 3 or value == "none":
        return ""
    x = factors[0]
    y = factors[1] if len(factors) > 1 else x
    z = factors[2] if len(factors) > 2 else "1"
    return f"scale3d({x},{y},{z})"


def nested(*factors: float) -> float:
    """Factors multiplied down a tree, each and the product held to :data:`_MOST_MAGNIFIED`:
    fifty-two nested ``zoom:1000000`` made infinity, and a ``scale(0)`` inside them not a
    number, which no ceiling compares below."""
    product = 1.0
    for factor in factors:
        product = min(product * min(factor, _MOST_MAGNIFIED), _MOST_MAGNIFIED)
    return product


def faded(styles: Sequence[Mapping[str, str]]) -> float:
    """How opaque the declarations ``styles`` (an element's style attribute and the rules
    matching it) paint it together: see :func:`_together`."""
    return _together(styles, opacity, (("opacity",), ("filter",)))


def magnified(styles: Sequence[Mapping[str, str]]) -> float:
    """How much the declarations ``styles`` magnify their element together: see
    :func:`_together`. ``rotate``, ``scale`` and ``transform`` compose, so are judged as one
    group."""
    return _together(styles, magnification, (("rotate", "scale", "transform"), ("zoom",)))


def _together(
    styles: Sequence[Mapping[str, str]],
    measure: Callable[[Mapping[str, str]], float],
    groups: tuple[tuple[str, ...], ...],
) -> float:
    """Each group of properties at the most diminishing reading of :func:`_readings` (which
    value the cascade picks is not worked out: the judge leans to hiding), the groups
    multiplied: a rule's ``scale(0.1)`` and an inline ``zoom:0.1`` draw at a hundredth, though
    each source alone draws at a tenth."""
    return nested(*(min(map(measure, _readings(styles, group)), default=1.0) for group in groups))


def _readings(styles: Sequence[Mapping[str, str]], group: tuple[str, ...]) -> list[dict[str, str]]:
    """What each of ``styles`` sets of ``group``, and, where several set some, all of it
    together, the first source's value of a property set twice winning: a rule's ``rotate:y
    45deg`` and an inline ``rotateY(45deg)`` show text edge-on only together."""
    readings = [
        reading
        for style in styles
        if (reading := {name: style[name] for name in group if name in style})
    ]
    if len(readings) > 1:
        readings.append(dict(ChainMap(*readings)))
    return readings


def font_size(style: Mapping[str, str], parent_px: float, root_px: float = MEDIUM_PX) -> float:
    """The size ``style`` draws its text at, in pixels, given its parent's and the root's:
    ``em``, ``%``, ``ex``, ``ch`` and ``smaller`` are the parent's size scaled, so ten nested
    ``font-size:50%`` draw text at a sixty-fourth of a pixel, though none is small alone."""
    value = style.get("font-size", "")
    if value in _FONT_SIZE_PX:
        return _FONT_SIZE_PX[value]
    if value == "initial":  # medium, not the parent's size: it restores a zeroed row
        return MEDIUM_PX
    if value in ("smaller", "larger"):
        return parent_px / 1.2 if value == "smaller" else parent_px * 1.2
    # Measured by the parent inside min(), max() and clamp() too: min(1em, 20px) under a
    # 1-pixel parent is a pixel, not the 16 an em is elsewhere.
    relative = {unit: parent_px * share for unit, share in _PER_PARENT_EM.items()}
    size = px(value, _PX_PER_UNIT | relative | {"rem": root_px}) if value else None
    # Only a function's size is negative here (a negative length is invalid): drawn at 0.
    return parent_px if size is None else min(max(size, 0.0), sys.float_info.max)


def faded_out(opacity: float) -> bool:
    """Whether an element whose own and ancestors' opacity multiply to ``opacity`` paints too
    faintly to read. Not a number is taken as nothing: no value an attacker reaches may pass
    every comparison."""
    return not opacity >= _FAINT


def too_small(font_px: float, magnification: float) -> bool:
    """Whether text of this size, drawn at this magnification, is too small to read. Judged
    for each piece of text, not for an element: a child that sets its own size shows again,
    and a drawing of large coordinates shrunk by its ``viewBox`` holds text as large."""
    return not font_px * magnification >= SMALLEST_PX


def shrinking(style: Mapping[str, str]) -> dict[str, str]:
    """The declarations of :data:`NESTING` properties in ``style`` when it fades or shrinks
    its element or sets a font size (else none): the stylesheet rules of this kind that need
    matching to elements. Any font size: ``html{font-size:1px}`` shrinks every ``rem`` and a
    ``1px`` parent every ``em`` under it, and a child's ``20px`` undoes its row's ``0``."""
    if opacity(style) < 1 or magnification(style) < 1 or "font-size" in style:
        return {name: value for name, value in style.items() if name in NESTING}
    return {}


def parse_colour(value: str, *, legacy: bool = False) -> Colour | None:
    """A CSS colour (a name, a system colour, ``#rgb[a]``, ``#rrggbb[aa]``, ``rgb()``,
    ``rgba()``, ``hsl()``, ``hsla()``), or an HTML attribute's legacy ``ffffff`` when
    ``legacy``; None when ``value`` is none of them."""
    value = value.strip().lower()
    if not value:
        return None
    if value == "transparent":
        return Colour(0, 0, 0, 0.0)
    if value in _SYSTEM:
        return _SYSTEM[value]
    if legacy and re.fullmatch(r"[0-9a-f]{6}", value):
        value = "#" + value
    if value.startswith("#") or value in ImageColor.colormap:
        try:
            channels = ImageColor.getrgb(value)
        except ValueError:
            return None
        alpha = channels[3] / 255 if len(channels) == 4 else 1.0
        return Colour(channels[0], channels[1], channels[2], alpha)
    function = _FUNCTION.match(value)
    return None if function is None else _functional(function.group(1), function.group(2))


def background_of(style: Mapping[str, str], bgcolor: str | None) -> Colour | bool | None:
    """The colour an element paints behind its text; True when a picture or gradient may be
    behind it (white text on a photo is shown); None when it sets none."""
    painted = [style.get(name, "") for name in _BACKGROUNDS]
    if not any(painted):
        return parse_colour(bgcolor or "", legacy=True)
    if any("url(" in value or "gradient(" in value for value in painted):
        return True
    for value in painted:
        for token in _split(value, " "):
            if (colour := parse_colour(token)) is not None:
                return colour
    return parse_colour(bgcolor or "", legacy=True)


def rules(sheet: str) -> Iterator[tuple[str, str]]:
    """Every ``selector { declarations }`` rule a screen applies: top-level rules, rules in
    ``@media`` (unless for print or speech only), ``@supports``, ``@layer``, ``@container``
    and ``@scope`` blocks, and nested rules (``&`` standing for the parent's selector), one
    selector of a list at a time. Raises :class:`TooComplex` for rules nested past
    :data:`MAX_RULE_DEPTH` or a nested selector past :data:`MAX_SELECTOR_CHARS` (a list of two
    nested 22 deep is four million selectors)."""
    for selector, body in _rules(_without_comments(sheet), "", 0):
        for one in _split(selector, ","):
            if one.strip():
                yield one.strip(), body


class TooComplex(ValueError):
    """A stylesheet nests rules too deep, or a nested selector grows too long, to judge."""


#: Rules nested in rules, and the longest selector nesting may build.
MAX_RULE_DEPTH = 32
MAX_SELECTOR_CHARS = 8_192


def imports(sheet: str) -> list[str]:
    """The URLs a stylesheet imports with ``@import``."""
    return re.findall(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)""", _without_comments(sheet))


def _rules(sheet: str, parent: str, depth: int) -> Iterator[tuple[str, str]]:
    if depth > MAX_RULE_DEPTH:
        raise TooComplex(f"rules nested more than {MAX_RULE_DEPTH} deep")
    for prelude, body in _blocks(sheet):
        if prelude.startswith("@"):
            keyword, _, condition = prelude[1:].partition(" ")
            keyword = keyword.lower()
            if keyword == "media" and _unseen_media(condition):
                continue
            if keyword in ("media", "supports", "layer", "container", "scope", "document"):
                if parent:  # a condition inside a rule holds the rule's own declarations
                    yield parent, _own_declarations(body)
                yield from _rules(body, parent, depth + 1)
            continue
        selector = _nested(prelude, parent)
        if len(selector) > MAX_SELECTOR_CHARS:
            raise TooComplex(f"a nested selector longer than {MAX_SELECTOR_CHARS} characters")
        yield selector, _own_declarations(body)
        if "{" in body:
            yield from _rules(body, selector, depth + 1)


def _own_declarations(body: str) -> str:
    """A rule body's declarations, without the rules nested in it."""
    kept, depth, start = [], 0, 0
    for token in _TOKENS.finditer(body):
        brace = token.group()
        if brace == "{":
            if depth == 0:  # declarations before a nested rule end at its prelude's ";"
                kept.append(";".join(_split(body[start : token.start()], ";")[:-1]))
            depth += 1
        elif brace == "}" and depth:
            depth -= 1
            if depth == 0:
                start = token.end()
    if depth == 0:
        kept.append(body[start:])
    return ";".join(kept)


def _blocks(sheet: str) -> Iterator[tuple[str, str]]:
    """``prelude { body }`` pairs at the top level of ``sheet``, braces matched by one scan
    of the braces alone (a character loop over a 7 MB sheet cost seconds)."""
    depth, start, opening = 0, 0, 0
    for brace in _TOKENS.finditer(sheet):
        if brace.group() not in "{}":
            continue  # a string: its braces are text
        if brace.group() == "{":
            if depth == 0:
                opening = brace.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                # A declaration before a nested rule belongs to the parent, not the prelude.
                prelude = _split(sheet[start:opening], ";")[-1].strip().lstrip("}").strip()
                yield prelude, sheet[opening + 1 : brace.start()]
                start = brace.end()


def _nested(selector: str, parent: str) -> str:
    if not parent:
        return selector
    parts = []
    for raw in _split(selector, ","):
        part = raw.strip()
        parts.append(
            part.replace("&", f":is({parent})") if "&" in part else f":is({parent}) {part}"
        )
    return ", ".join(parts)


def _unseen_media(query: str) -> bool:
    media = [
        {word for word in re.findall(r"[a-z-]+", part.lower()) if word not in ("only", "and")}
        for part in query.split(",")
    ]
    return all(words and words & _UNSEEN_MEDIA for words in media) and not any(
        "not" in words for words in media
    )


def _split(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside quotes and brackets, in one pass."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for match in re.finditer(r"""\\.|["'()\[\]]|""" + re.escape(separator), text, re.DOTALL):
        found = match.group()
        if found.startswith("\\"):
            continue
        if quote:
            quote = "" if found == quote else quote
        elif found in "\"'":
            quote = found
        elif found in "([":
            depth += 1
        elif found in ")]":
            depth = max(depth - 1, 0)
        elif depth == 0:
            parts.append(text[start : match.start()])
            start = match.end()
    parts.append(text[start:])
    return parts


def _without_comments(sheet: str) -> str:
    """``sheet`` without its ``/* */`` comments and the ``<!--``/``-->`` marks CSS ignores,
    strings kept whole (a ``/*`` inside one is text), in one pass (a pattern would rescan the
    rest of the sheet for every unclosed ``/*``)."""
    kept: list[str] = []
    position = 0
    while (token := _COMMENT_OR_STRING.search(sheet, position)) is not None:
        found = token.group()
        if found == "/*":
            kept += [sheet[position : token.start()], " "]
            closing = sheet.find("*/", token.end())
            position = len(sheet) if closing < 0 else closing + 2
        elif found in ("<!--", "-->"):
            kept += [sheet[position : token.start()], " "]
            position = token.end()
        else:
            kept.append(sheet[position : token.end()])
            position = token.end()
    kept.append(sheet[position:])
    return "".join(kept)


def _unescaped(text: str) -> str:
    def character(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            code = int(match.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
        return match.group(2)

    return _ESCAPE.sub(character, text) if "\\" in text else text


#: How many times ``var()`` is substituted into a value (what a substitution brings in may
#: hold more).
SUBSTITUTION_DEPTH = 4


def _substituted(value: str, known: Mapping[str, str], unknown: str = "") -> str:
    """``value`` (as written) with ``var()`` replaced, a few levels deep, one unknown and
    without a fallback by ``unknown``, and its escapes read; "" (no valid value) when the
    result would pass :data:`_MAX_VALUE_CHARS`, since variables of variables grow a value
    exponentially."""
    for _ in range(SUBSTITUTION_DEPTH):
        value = _names_read(value)
        if "var(" not in value.lower():
            break
        room = _MAX_VALUE_CHARS

        def replacement(match: re.Match[str]) -> str:
            nonlocal room
            text = known.get(_unescaped(match.group(1)), INVALID)
            if text == INVALID:
                text = match.group(2) or unknown
            room -= len(text)
            return text if room >= 0 else ""

        value = _VARIABLE.sub(replacement, value)
        if room < 0:
            return ""
    return _unescaped(value)


#: A custom property's value when CSS holds it guaranteed-invalid (``initial``, a ``var()`` of
#: an undefined one without a fallback, a cycle): it hides an inherited value, and a
#: ``var()`` of it takes its fallback (``p{display:var(--d,none)}`` hides
#: ``<p style="--d:initial">``, and was read).
INVALID = "\x00"
#: Keywords that give a custom property its parent's value.
_INHERITING = frozenset({"inherit", "unset", "revert", "revert-layer"})


def computed(own: Mapping[str, str], inherited: Mapping[str, str]) -> dict[str, str]:
    """The custom properties an element declares (``own``, as written), as its content
    inherits them: their ``var()``s substituted where they are declared, with this element's
    properties (a child's own ``--e`` does not change its parent's ``--d:var(--e)``), the
    keywords that inherit taken as the parent's, and what CSS holds guaranteed-invalid
    :data:`INVALID`. Each name is worked out once, so a value naming another twice is not
    worked out twice at every level."""
    done: dict[str, str | None] = {}

    def value_of(name: str) -> str | None:
        if name not in own:
            return inherited.get(name)
        if name not in done:
            done[name] = INVALID  # a cycle back to it finds it invalid
            done[name] = _declared(own[name], name, inherited, value_of)
        return done[name]

    found = {name: value_of(name) for name in own}
    return {name: value for name, value in found.items() if value is not None}


def _declared(
    value: str, name: str, inherited: Mapping[str, str], value_of: Callable[[str], str | None]
) -> str | None:
    """One custom property's value worked out (see :func:`computed`); None: the parent's,
    when it has none."""
    keyword = _unescaped(value).strip(_CSS_SPACE).lower()
    if keyword in _INHERITING:
        return inherited.get(name)
    if keyword == "initial":
        return INVALID
    invalid = False
    for _ in range(SUBSTITUTION_DEPTH):
        value = _names_read(value)
        if "var(" not in value.lower():
            return value if len(value) <= _MAX_VALUE_CHARS else INVALID

        def replacement(match: re.Match[str]) -> str:
            nonlocal invalid
            found = value_of(_unescaped(match.group(1)))
            if found is None or found == INVALID:
                if match.group(2) is None:
                    invalid = True
                return match.group(2) or ""
            return found

        value = _VARIABLE.sub(replacement, value)
        if invalid or len(value) > _MAX_VALUE_CHARS:
            return INVALID
    return value if "var(" not in value.lower() else INVALID


def _names_read(text: str) -> str:
    """``text`` with the escapes of name code points read (``v\\61r(`` is ``var(``, as a
    browser reads a function's name), the others kept, so a name holding an escaped space or
    bracket is still one name."""

    def character(match: re.Match[str]) -> str:
        read = _unescaped(match.group())
        named = not read.isascii() or read.isalnum() or read in ("-", "_")
        return read if named else match.group()

    return _ESCAPE.sub(character, text) if "\\" in text else text


def _valid(name: str, value: str) -> bool:
    """Whether ``value`` is one a browser accepts for ``name`` (properties this module does
    not judge accept anything)."""
    if value in _WIDE:
        return True
    if name == "display":
        return all(word in _DISPLAY_WORDS for word in value.split()) and bool(value)
    if name == "visibility":
        return value in _VISIBILITY
    if name in ("opacity", "fill-opacity"):
        return not math.isnan(_factor(value, math.nan))
    if name in _COLOUR_PROPERTIES:
        return value in ("currentcolor", "none") or parse_colour(value) is not None
    if name == "font-size":
        return _is_font_size(value)
    if name == "font":
        return value in _SYSTEM_FONTS or _font_shorthand_size(value) is not None
    if name in ("margin", "inset"):
        return _box_sides(value, 4)
    if name in _PADDINGS:
        return _paddings(value, 4 if name == "padding" else 2 if name in _LOGICAL_PAIRS else 1)
    if name in _LOGICAL_PAIRS:
        return _box_sides(value, 2)
    if name == "rotate":
        return value == "none" or bool(_rotation(value))
    if name in ("transform", "filter"):
        return value == "none" or _function_list(value, _FUNCTIONS[name])
    if name == "scale":
        parts = _words(value)
        factors = [_factor(part, math.nan) for part in parts]
        return value == "none" or (0 < len(parts) <= 3 and not any(map(math.isnan, factors)))
    if name == "zoom":
        return value in ("normal", "reset") or _factor(value, -1.0) >= 0
    if name in _LENGTH_PROPERTIES:
        return value == "auto" or px(value, _PERCENT_AS_PX) is not None
    return True


def _is_font_size(value: str) -> bool:
    """A keyword, or a length or percentage (of the parent's size: a pixel a percent, for its
    sign) that is not negative; ``calc()``, ``min()``, ``max()`` and ``clamp()`` may be, and
    are drawn at 0 (a negative ``min(-1px, 1em)`` left the parent's size standing)."""
    if value in _FONT_SIZE_WORDS:
        return True
    size = px(value, _PX_PER_UNIT | {"%": 1.0})
    return size is not None and (size >= 0 or _MATH.match(value) is not None)


def _function_list(value: str, names: frozenset[str]) -> bool:
    """Whether ``value`` is a list of those functions, each closing its own brackets at any
    depth (``translate(calc(1px + (2px)))``) and none in a string (``url('#f)')``), commas
    between them as SVG's ``transform`` attribute allows."""
    functions, end = _functions(value)
    return (
        bool(functions)
        and all(name in names and not _too_deep(found) for name, found in functions)
        and not value[end:].strip(" \t\n\r\f,")
    )


def _too_deep(arguments: str) -> bool:
    """Whether brackets in a function's arguments nest past :data:`_MATH_DEPTH`, which makes
    a browser reject the whole list (``transform:scale(0);transform:scale(calc(((…1…))))``
    a hundred deep stays scaled to nothing)."""
    if arguments.count("(") <= _MATH_DEPTH:
        return False
    depth = 0
    for bracket in re.finditer(r"[()]", arguments):
        depth = max(depth + (1 if bracket.group() == "(" else -1), 0)
        if depth > _MATH_DEPTH:
            return True
    return False


def _functions(value: str) -> tuple[list[tuple[str, str]], int]:
    """The functions a list holds (``scale(calc(1 * 0)) rotate(45deg)``), each by its name
    and arguments, brackets matched at any depth, and where the list ends: before the first
    thing that is not a whole function."""
    functions, position = [], 0
    while (function := _FUNCTION_NAME.match(value, position)) is not None:
        end = _closed(value, function.end())
        if end < 0:
            break
        functions.append((function.group(1), value[function.end() : end - 1]))
        position = end
    return functions, position


def _arguments(text: str) -> list[str]:
    """A function's arguments, split at commas and white space outside brackets
    (``translate(calc(1px + 2px), 0)``; SVG separates them by spaces too)."""
    return [word for piece in _split(text, ",") for word in _words(piece)]


def _words(value: str) -> list[str]:
    """``value``'s words, split at CSS's white space outside brackets: ``calc(1px + 2px) 0``
    is two."""
    return [word for word in _split(re.sub(r"[ \t\n\r\f]+", " ", value), " ") if word]


def _closed(value: str, position: int) -> int:
    """Where the bracket opened before ``position`` closes, or -1 when it does not."""
    depth = 1
    while depth:
        found = _BRACKET_OR_STRING.search(value, position)
        if found is None:
            return -1
        position = found.end()
        bracket = found.group(0)
        depth += (bracket == "(") - (bracket == ")")
    return position


_FONT_TOKEN = re.compile(r""""[^"]*"?|'[^']*'?|[^"']+""")


def _font_shorthand_size(value: str) -> str | None:
    """The size a ``font`` shorthand sets: its first size, which a family must follow (a
    browser rejects ``font:16px`` and ``font:16px/``, and the earlier size stands)."""
    # Split at spaces outside brackets ("calc(0px + 0px)" is one size), then at quotes (a
    # family may follow a size with no space: 0/0"a").
    tokens = [
        piece for part in _split(value, " ") if part for piece in _FONT_TOKEN.findall(part.strip())
    ]
    for index, token in enumerate(tokens):
        size = token.split("/")[0]
        if not _is_font_size(size):
            continue
        rest = tokens[index + 1 :]
        if token.endswith("/") or rest[:1] == ["/"]:  # a line height follows: "16px/ 1.5"
            rest = rest[1 + (rest[:1] == ["/"]) :]
        elif rest and rest[0].startswith("/"):  # "16px /1.5"
            rest = rest[1:]
        return size if rest else None
    return None


def _box_sides(value: str, most: int) -> bool:
    """Whether ``value`` is one to ``most`` lengths, percentages or ``auto``, as ``margin``,
    ``inset`` and their logical halves take (``margin:0 foo`` is rejected whole, and the
    earlier margin stands)."""
    sides = _words(value)
    return 0 < len(sides) <= most and all(
        side == "auto" or px(side, _PERCENT_AS_PX) is not None for side in sides
    )


def _paddings(value: str, most: int) -> bool:
    """Whether ``value`` is one to ``most`` paddings: lengths or percentages, none negative
    (a browser rejects ``padding-left:-1px``, and the earlier padding stands)."""
    sides = _words(value)
    return 0 < len(sides) <= most and all(
        (found := px(side, _PERCENT_AS_PX)) is not None and found >= 0 for side in sides
    )


def _longhands(name: str, value: str) -> dict[str, str]:
    """What one valid declaration sets among the properties this module judges: itself, and
    the longhands of a shorthand (``font``'s size, ``margin``'s and ``inset``'s four sides,
    the logical ones' start and end, ``overflow`` from either axis's, its ``clip`` read as
    ``hidden``)."""
    found = {name: value}
    if name == "font" and (size := _font_shorthand_size(value)) is not None:
        found["font-size"] = size
    values = _words(value)
    if name in ("margin", "inset", "padding") and values:
        sides = ("top", "right", "bottom", "left")
        for side, index in zip(sides, _SIDE_INDICES[len(values)], strict=True):
            found[side if name == "inset" else f"{name}-{side}"] = values[index]
    if name in _LOGICAL_PAIRS and values:
        start, end = _LOGICAL_PAIRS[name]
        found[start], found[end] = values[0], values[-1]
    clipping = value.split()[:1] in (["hidden"], ["clip"])
    if name == "overflow" or (name in ("overflow-x", "overflow-y") and clipping):
        found["overflow"] = "hidden" if clipping else value
    return found


def _zero_size(style: Mapping[str, str]) -> bool:
    clipped = style.get("overflow", "").startswith("hidden") or "clip" in style
    sides = (
        *("width", "height", "max-width", "max-height"),
        *("inline-size", "block-size", "max-inline-size", "max-block-size"),
    )
    if clipped and any(_at_most(style.get(side, ""), 1) for side in sides):
        return True
    if style.get("contain", "").split()[:1] in (["strict"], ["size"]):
        return True  # size containment without a size is a box of nothing
    return _clipped_away(style)


def _clipped_away(style: Mapping[str, str]) -> bool:
    """A ``clip`` rectangle or ``clip-path`` shape that leaves nothing to see."""
    return _empty_rectangle(style.get("clip", "")) or _empty_shape(style.get("clip-path", ""))


def _empty_rectangle(clip: str) -> bool:
    """``clip: rect()`` of no area; ``auto`` is the box's own edge: 0 for the top and left,
    the far edge (taken as unbounded) for the bottom and right, so ``rect(0 auto 0 auto)``
    is a line."""
    rectangle = re.fullmatch(r"rect\((.*)\)", clip)
    parts = [] if rectangle is None else _arguments(rectangle.group(1))
    if len(parts) != 4:
        return False
    far = (False, True, True, False)
    edges = [
        (math.inf if is_far else 0.0) if part == "auto" else px(part)
        for part, is_far in zip(parts, far, strict=True)
    ]
    known = [edge for edge in edges if edge is not None]
    if len(known) != 4:
        return False
    top, right, bottom, left = known
    return bottom <= top or right <= left


def _empty_shape(clip_path: str) -> bool:
    """A ``clip-path`` basic shape of no area: an inset that meets itself, a circle or an
    ellipse of a radius under a pixel, a polygon whose points lie on one line; a reference
    box before or after it (``border-box inset(50%)``) does not change what it leaves."""
    words = _words(clip_path)
    shapes = [word for word in words if word not in _REFERENCE_BOXES]
    one = len(shapes) == 1 and len(words) <= 2  # a shape, and a box or none
    functions, end = _functions(shapes[0]) if one else ([], 0)
    if len(functions) != 1 or end != len(shapes[0]):
        return False
    name, arguments = functions[0]
    if name == "inset":
        sizes = _words(arguments)
        # Only the corners' radii follow "round": "inset(50% round 5px)" is a 50 % inset.
        sizes = sizes[: sizes.index("round")] if "round" in sizes else sizes
        parts = [_percent(part) for part in sizes]
        if not 0 < len(parts) <= 4:
            return False  # "inset()" is invalid, and clips nothing
        top, right, bottom, left = (parts[index] for index in _SIDE_INDICES[len(parts)])
        # What a clip of 99.9 % leaves is under a pixel of all but a thousand-pixel box.
        return top + bottom >= _CLIPPED_PERCENT or left + right >= _CLIPPED_PERCENT
    if name == "polygon":
        return _thin_polygon(arguments)
    if name not in ("circle", "ellipse"):
        return False
    radii = _words(arguments.split(" at ")[0])
    return any(_at_most(radius, SMALLEST_PX / 2) for radius in radii)


def _thin_polygon(arguments: str) -> bool:
    """Whether a ``polygon()`` leaves too thin a band to read a letter through: its points
    span under :data:`_THINNEST` across, in either axis (in that axis's one unit, ``0``
    fitting any: ``0 0, 100% 0, 100% 0.5px, 0 0.5px``), or, all in one unit, enclose too
    little area for their extent (the area over the bounding box's diagonal, about a band's
    thickness at any slant). Exactly flat polygons enclosed nothing; a band of 0.01 % of the
    box, of some area, showed nothing either."""
    spaced = " ".join(arguments.split())  # a newline or a tab separates as a space does
    points = [[part for part in _split(point, " ") if part] for point in _split(spaced, ",")]
    if points[0][:1] in (["nonzero"], ["evenodd"]):
        points[0] = points[0][1:]
    if not points[0]:  # the fill rule has a comma of its own
        points = points[1:]
    if not points or any(len(point) != 2 for point in points):
        return False
    # Points on one line, or all in one unit enclosing no area, enclose nothing in any unit,
    # one this module cannot measure too ("0 1cqw, 100% 1.0cqw, 50% 01cqw", a diagonal in dvh).
    if _flat(points):
        return True
    coordinates = [_coordinate(part) for point in points for part in point]
    if None in coordinates:
        return False
    found = [coordinate for coordinate in coordinates if coordinate is not None]
    extents = [_extent(axis) for axis in (found[0::2], found[1::2])]
    if any(extent is not None and extent[0] < _THINNEST[extent[1]] for extent in extents):
        return True
    units = {unit for _, unit in found if unit}
    if len(units) > 1 or None in extents:
        return False
    unit = units.pop() if units else "px"
    xs, ys = [number for number, _ in found[0::2]], [number for number, _ in found[1::2]]
    diagonal = math.hypot(*(extent[0] for extent in extents if extent is not None))
    return abs(_shoelace(xs, ys)) / 2 < _THINNEST[unit] * diagonal


def _flat(points: list[list[str]]) -> bool:
    """Whether points of numbers and units enclose no area: one axis all one value, or all in
    one unit (``0`` fitting any) and of no area."""
    parsed = [[_LENGTH.match(_without_calc(part)) for part in point] for point in points]
    if any(match is None for point in parsed for match in point):
        return False
    found = [
        (_finite(float(match.group(1))), match.group(2) or "")
        for point in parsed
        for match in point
        if match is not None
    ]
    axes = (found[0::2], found[1::2])
    if any(len({(number, unit if number else "") for number, unit in axis}) == 1 for axis in axes):
        return True
    if len({unit for number, unit in found if number}) > 1:
        return False
    xs, ys = [number for number, _ in axes[0]], [number for number, _ in axes[1]]
    return _shoelace(xs, ys) == 0


def _shoelace(xs: list[float], ys: list[float]) -> float:
    """Twice the signed area a polygon of these corners encloses (the shoelace formula)."""
    return sum(xs[index] * ys[index - 1] - xs[index - 1] * ys[index] for index in range(len(xs)))


def _coordinate(value: str) -> tuple[float, str] | None:
    """A polygon's coordinate as pixels (``px``) or a percentage of the box (``%``); ``0``
    (unit "") fits either; None when it is neither."""
    match = _LENGTH.match(_without_calc(value))
    if match is None:
        return None
    number = _finite(float(match.group(1)))
    if number == 0:
        return 0.0, ""
    if match.group(2) == "%":
        return number, "%"
    pixels = px(value)
    return None if pixels is None else (pixels, "px")


def _extent(axis: list[tuple[float, str]]) -> tuple[float, str] | None:
    """How far one axis's coordinates span, and in what unit; None when they mix units."""
    units = {unit for _, unit in axis if unit}
    if len(units) > 1:
        return None
    numbers = [number for number, _ in axis]
    return max(numbers) - min(numbers), units.pop() if units else "px"


def _percent(value: str) -> float:
    """A percentage's number, a math function worked out (``inset(calc(25% + 25%))``); 0
    when ``value`` is not one."""
    # Worked out as written: wrapped in calc(), a function a hundred deep went one too deep.
    found = _calculated(value if _MATH.match(value) else f"calc({value})", {})
    return found[0] if found is not None and found[1] == "%" else 0.0


# Kept per transform: a page repeats its few transforms over thousands of elements, and the
# 4x4 products cost a page of 20,000 styled elements 1.4-1.7x its time before them.
@functools.lru_cache(maxsize=4096)
def _least_stretch(transform: str) -> float:
    """How much a transform list scales the text in the direction it squashes it most, as the
    screen shows it: the smaller singular value, at the element's centre (its transform
    origin), of the list's 4x4 matrix projected onto the screen. The projection divides by the
    homogeneous w, so ``perspective(100px) translateZ(-1e5px)`` draws at a thousandth; where w
    is not positive the text is behind the viewer, and nothing is drawn."""
    matrix = _IDENTITY
    # Math functions are worked out where a number, a length or an angle goes; a function one
    # cannot be (env(), a length where a number goes) leaves its function out, as no
    # transform: judged as drawing nothing, every min() in a transform hid text.
    functions, _ = _functions(transform)
    for name, arguments in functions:
        matrix = _product(matrix, tuple(map(_bounded, _matrix(name, _arguments(arguments)))))
    return _projected_stretch(matrix)


def _product(left: _Matrix, right: _Matrix) -> _Matrix:
    """``left`` times ``right``, each entry held within :data:`_MOST_MAGNIFIED`."""
    rows = (left[0:4], left[4:8], left[8:12], left[12:16])
    columns = (right[0::4], right[1::4], right[2::4], right[3::4])
    return tuple(
        _bounded(r0 * c0 + r1 * c1 + r2 * c2 + r3 * c3)
        for r0, r1, r2, r3 in rows
        for c0, c1, c2, c3 in columns
    )


def _projected_stretch(matrix: _Matrix) -> float:
    """The smaller singular value of the screen's derivative of ``matrix`` at the origin:
    ``(x, y) -> (x', y') / w'``, whose derivative is ``(A w - t p) / w^2`` (``A`` the plane's
    part, ``t`` the translation, ``p`` the perspective row)."""
    w = matrix[15]
    if not w > 0:
        return 0.0
    a, c, tx = matrix[0], matrix[1], matrix[3]
    b, d, ty = matrix[4], matrix[5], matrix[7]
    p, q = matrix[12], matrix[13]
    # Divided by w twice: w * w of a tiny w (1e-200) is 0, and the page failed on it.
    a, b, c, d = (
        _bounded(entry / w / w)
        for entry in (a * w - tx * p, b * w - ty * p, c * w - tx * q, d * w - ty * q)
    )
    # Columns (a, b) and (c, d); the two singular values multiply to the determinant.
    squares = a * a + b * b + c * c + d * d
    spread = math.hypot(a * a + b * b - c * c - d * d, 2 * (a * c + b * d))
    largest = math.sqrt((squares + spread) / 2)
    return 0.0 if largest == 0 else abs(a * d - b * c) / largest


def _matrix(name: str, arguments: list[str]) -> _Matrix:
    """One transform function's 4x4 matrix (rows of the column-vector form); the identity for
    one that cannot be read."""
    if name.startswith(("matrix", "scale")):
        return _scaling(name, [_factor(argument, math.nan) for argument in arguments])
    if name.startswith(("translate", "perspective")):
        return _moving(name, arguments)
    if name == "rotate3d":
        return _turned(arguments)
    angles = [_angle(argument) for argument in arguments]
    if not angles or None in angles:
        return _IDENTITY
    first, second = (math.radians(angle or 0.0) for angle in [*angles, 0.0][:2])
    cosine, sine = math.cos(first), math.sin(first)
    if name in ("rotate", "rotatez"):
        return _linear3(cosine, -sine, 0.0, sine, cosine, 0.0, 0.0, 0.0, 1.0)
    if name == "rotatex":  # turned about the horizontal axis: its height foreshortened
        return _linear3(1.0, 0.0, 0.0, 0.0, cosine, -sine, 0.0, sine, cosine)
    if name == "rotatey":
        return _linear3(cosine, 0.0, sine, 0.0, 1.0, 0.0, -sine, 0.0, cosine)
    skews = {"skewx": (first, 0.0), "skewy": (0.0, first), "skew": (first, second)}
    if name in skews:
        x, y = (math.tan(angle) for angle in skews[name])
        return _linear3(1.0, x, 0.0, y, 1.0, 0.0, 0.0, 0.0, 1.0)
    return _IDENTITY


def _scaling(name: str, numbers: list[float]) -> _Matrix:
    """A ``matrix()``, ``matrix3d()`` or ``scale*()`` function's matrix. ``matrix3d()`` lists
    its columns: its last entry, the homogeneous w, divides every point drawn (1000 draws text
    at a thousandth; 0 or less, behind the viewer, draws nothing)."""
    if not numbers or any(map(math.isnan, numbers)):
        return _IDENTITY
    if name == "matrix" and len(numbers) == 6:
        a, b, c, d, e, f = numbers
        return (a, c, 0.0, e, b, d, 0.0, f, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    if name == "matrix3d" and len(numbers) == 16:
        return tuple(numbers[column * 4 + row] for row in range(4) for column in range(4))
    x = numbers[0]
    y = numbers[1] if len(numbers) > 1 else x
    z = numbers[2] if len(numbers) > 2 else 1.0
    axes = {
        "scale": (x, y, 1.0),
        "scale3d": (x, y, z),
        "scalex": (x, 1.0, 1.0),
        "scaley": (1.0, x, 1.0),
        "scalez": (1.0, 1.0, x),
    }
    if name not in axes:
        return _IDENTITY
    x, y, z = axes[name]
    return _linear3(x, 0.0, 0.0, 0.0, y, 0.0, 0.0, 0.0, z)


def _moving(name: str, arguments: list[str]) -> _Matrix:
    """A translation's matrix, or ``perspective(d)``'s, which divides by ``1 - z / d``: moved
    towards the viewer past ``d`` the text is behind them, moved far away it is a dot. A
    percentage of the box is taken as no move: only a perspective makes a move shrink text,
    and it is by its depth, which takes no percentage."""
    offsets = [
        0.0 if argument.endswith("%") else px(argument) for argument in arguments if argument
    ]
    if not offsets or None in offsets:
        return _IDENTITY
    known = [offset or 0.0 for offset in offsets]
    if name == "perspective":
        # A depth under a pixel is drawn as one (CSS Transforms 2); a negative one is invalid.
        depth = known[0]
        if depth < 0:
            return _IDENTITY
        return (*_IDENTITY[:14], -1 / max(depth, 1.0), 1.0)
    axes = {"translatex": (0,), "translatey": (1,), "translatez": (2,)}.get(name, (0, 1, 2))
    move = [0.0, 0.0, 0.0]
    for axis, offset in zip(axes, known, strict=False):
        move[axis] = offset
    return (1.0, 0.0, 0.0, move[0], 0.0, 1.0, 0.0, move[1], 0.0, 0.0, 1.0, move[2], *_IDENTITY[12:])


def _linear3(*entries: float) -> _Matrix:
    """The 4x4 matrix of a 3x3 linear map given by rows."""
    m = entries
    return (m[0], m[1], m[2], 0.0, m[3], m[4], m[5], 0.0, m[6], m[7], m[8], 0.0, *_IDENTITY[12:])


def _turned(arguments: list[str]) -> _Matrix:
    """``rotate3d(x, y, z, angle)``'s matrix (Rodrigues' rotation about the axis): turned a
    right angle about the horizontal axis, text is seen edge-on."""
    axis = [_number(argument) for argument in arguments[:3]]
    angle = _angle(arguments[3]) if len(arguments) == 4 else None
    if angle is None or len(axis) != 3 or None in axis:
        return _IDENTITY
    x, y, z = (_finite(value or 0.0) for value in axis)
    length = math.hypot(x, y, z)
    if not 0 < length < math.inf:
        return _IDENTITY
    x, y, z = x / length, y / length, z / length
    cosine, sine = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    turn = 1 - cosine
    return _linear3(
        *(cosine + x * x * turn, x * y * turn - z * sine, x * z * turn + y * sine),
        *(y * x * turn + z * sine, cosine + y * y * turn, y * z * turn - x * sine),
        *(z * x * turn - y * sine, z * y * turn + x * sine, cosine + z * z * turn),
    )


def _rotation(value: str) -> str:
    """The ``rotate`` property as the transform function it stands for (its angle first or
    last: ``x 90deg`` is ``rotatex(90deg)``, ``1 0 0 90deg`` ``rotate3d(1,0,0,90deg)``); ""
    for ``none`` and a value that is not one."""
    words = _words(value)
    if not words:
        return ""
    angle = words.pop(0 if _is_angle(words[0]) else -1)
    if not _is_angle(angle):
        return ""
    if words in ([], ["z"]):
        return f"rotate({angle})"
    if words in (["x"], ["y"]):
        return f"rotate{words[0]}({angle})"
    if len(words) == 3 and None not in map(_number, words):
        return f"rotate3d({','.join(words)},{angle})"
    return ""


def _is_angle(value: str) -> bool:
    """Whether ``value`` is an angle with its unit, or a math function that comes to one."""
    if not _MATH.match(value):
        return _ANGLE.fullmatch(value) is not None
    found = _calculated(value, _DEGREES_PER_UNIT)
    return found is not None and found[1] == "d"


def _angle(value: str) -> float | None:
    """An angle in degrees, a math function worked out (``rotateX(calc(45deg + 45deg))``
    shows text edge-on); None when ``value`` is not one."""
    if not _MATH.match(value):
        return _degrees(value)
    found = _calculated(value, _DEGREES_PER_UNIT)
    return None if found is None or found[1] == "%" else found[0] % 360


def _bounded(number: float) -> float:
    """A matrix entry within :data:`_MOST_MAGNIFIED` either way."""
    return min(max(number, -_MOST_MAGNIFIED), _MOST_MAGNIFIED)


def _factor(value: str, default: float) -> float:
    """A scale factor or an opacity, a number or a percentage, a math function worked out
    (``opacity:min(0,1)`` is 0); ``default`` when ``value`` is neither."""
    value = value.strip()
    if _MATH.match(value):
        # Measured in pixels, so that a length divided by a length is the number it is.
        found = _calculated(value, _PX_PER_UNIT)
        number, kind = (None, "") if found is None or found[1] == "d" else found
    else:
        number, kind = _number(value.removesuffix("%")), "%" if value.endswith("%") else ""
    if number is None:
        return default
    return number / 100 if kind == "%" else number


def _whitened(style: Mapping[str, str], drawn: Colour | None) -> bool:
    """A filter or blend mode that turns dark text white on the white page."""
    invert = _factor(_filter(style, "invert") or "", 0.0)
    painted = any(style.get(name) for name in _BACKGROUNDS)
    return (
        _brightened(_factor(_filter(style, "brightness") or "", 0.0), drawn)
        or (invert >= 0.9 and not painted)
        or style.get("mix-blend-mode") in _WHITENING_BLENDS
    )


def _brightened(factor: float, drawn: Colour | None) -> bool:
    """Whether ``brightness(factor)`` turns text of colour ``drawn`` white: it multiplies each
    channel, so black stays black at any factor (black text under ``brightness(500%)`` was
    left out) and ``#333`` five times over is white. A colour not known is taken as a grey
    that five times whitens, as before."""
    if drawn is None:
        return factor >= 5
    return all(channel * factor >= 255 - _NEAR for channel in (drawn.red, drawn.green, drawn.blue))


def _filter(style: Mapping[str, str], function: str) -> str | None:
    """The arguments of the first ``function`` of the element's filter list, brackets matched
    at any depth (``opacity(min(0, 1))``)."""
    functions, _ = _functions(style.get("filter", ""))
    return next((found.strip() for name, found in functions if name == function), None)


def _off_screen(style: Mapping[str, str]) -> bool:
    # A logical offset is judged as itself too: which side it is depends on the writing mode,
    # which is not read ("margin-left:0;margin-inline-start:-9999px" is off-screen in ltr).
    before = (
        *("left", "top", "margin-left", "margin-top", "text-indent", "inset-inline-start"),
        *("margin-inline-start", "margin-block-start", "inset-block-start"),
    )
    for name in before:
        value = style.get(name, "")
        if value and _far_before(value, style.get(_PADDING_OF[name], "0")):
            return True
    # An end offset moves the box only where its start is auto: with both set, the start
    # places it in left-to-right text ("left:0;right:9999px" is drawn at the left edge); in
    # right-to-left text the end does, and the text runs out past the start.
    for name, *opposites in _END_OFFSETS:
        value = style.get(name, "")
        placed = any(style.get(opposite, "auto") != "auto" for opposite in opposites)
        if _right_to_left(style, name) or not placed:
            far = [px(value, units) for units in _PERCENT_READINGS] if value else [None]
            if all(offset is not None and abs(offset) >= _OFF_AFTER_PX for offset in far):
                return True
    return any(_far(px(shift)) for shift in _shifts(style))


#: The end offsets, and the start offsets that place a box instead where both are set: a
#: logical end is judged as itself too, so a later ``inset-inline-end`` beats a ``right``.
_END_OFFSETS = (
    ("right", "left", "inset-inline-start"),
    ("bottom", "top", "inset-block-start"),
    ("inset-inline-end", "left", "inset-inline-start"),
    ("inset-block-end", "top", "inset-block-start"),
)
#: A length read with a percentage at the least and the most it may come to (of no box, of
#: one as wide as the viewport): ``calc(-99999px + 0%)`` is far in both.
_PERCENT_READINGS = (_PX_PER_UNIT | {"%": 0.0}, _PX_PER_UNIT | {"%": _VIEWPORT_PX["vw"]})


#: The padding that moves a start offset's content back in, by the offset's axis (a logical
#: padding sets the physical one where none is set).
_PADDING_OF = {
    **dict.fromkeys(("left", "margin-left", "text-indent"), "padding-left"),
    **dict.fromkeys(("inset-inline-start", "margin-inline-start"), "padding-left"),
    **dict.fromkeys(("top", "margin-top", "inset-block-start"), "padding-top"),
    **dict.fromkeys(("margin-block-start",), "padding-top"),
}


def _far_before(offset: str, padding: str) -> bool:
    """Whether a start offset, its box's start padding added, puts the content past the
    page's edges however large a percentage in them comes to, or at -100 % or less of the box:
    a full-bleed band (``margin-left:-100vw;padding-left:100vw``) draws its text in place. A
    padding that is no length (``inherit``) is taken as none."""
    readings = [(px(offset, units), px(padding, units) or 0.0) for units in _PERCENT_READINGS]
    if all(moved is not None and _far(moved + back) for moved, back in readings):
        return True
    return _percent(offset) + _percent(padding) <= -100


def _right_to_left(style: Mapping[str, str], end: str) -> bool:
    """Whether an element's own direction makes its end offset win along ``end``'s axis:
    inline ends in right-to-left text, block ends never (the direction the element
    inherits is not known here)."""
    return style.get("direction") == "rtl" and end in ("right", "inset-inline-end")


def _far(offset: float | None) -> bool:
    """Whether an offset in pixels puts text past the page's edges."""
    return offset is not None and (offset <= _OFF_BEFORE_PX or offset >= _OFF_AFTER_PX)


def _shifts(style: Mapping[str, str]) -> list[str]:
    """The moves across the screen ``translate`` and a transform's translations make: a move
    along z (``translate3d(0,0,-9999px)``) is towards or away from the viewer, and without a
    perspective draws the text where it was (it was taken as off-screen)."""
    shifts = _words(style.get("translate", ""))[:2]
    functions, _ = _functions(style.get("transform", ""))
    for name, arguments in functions:
        if name in ("translate", "translate3d", "translatex", "translatey"):
            shifts += _arguments(arguments)[: 1 if name[-1] in "xy" else 2]
    return shifts


def _fraction(value: str) -> float:
    """An opacity (a number or a percentage) from 0 to 1; 1 when ``value`` is none."""
    return min(max(_factor(value, 1.0), 0.0), 1.0)


def _at_most(value: str, limit: float) -> bool:
    pixels = px(value)
    return pixels is not None and pixels <= limit


def px(value: str, units: Mapping[str, float] = _PX_PER_UNIT) -> float | None:
    """A CSS length in pixels (by ``units``: an em as 16, a vw as 1 % of a 1,280-pixel
    viewport), or None when ``value`` is not one; a math function worked out, where it comes
    to a length (``calc(0)`` is a number, which a browser rejects as a length: only a literal
    ``0`` is one); a percentage, unless ``units`` measures it, is judged by its sign only (0
    or less, else None)."""
    value = value.strip()
    if _MATH.match(value):
        found = _calculated(value, units)
        if found is None:
            return None
        number, kind = found
        return number if kind == "d" or (kind == "%" and number <= 0) else None
    match = _LENGTH.match(value)
    if match is None:
        return None
    number, unit = _finite(float(match.group(1))), match.group(2)
    if unit == "%" and unit not in units:
        return number if number <= 0 else None
    if not unit:
        return number if number == 0 else None
    factor = units.get(unit)
    return None if factor is None else number * factor


@dataclass
class _Open:
    """A math function or a bracket being worked out: its arguments so far, and the operands
    and operators of the one being read."""

    name: str
    arguments: list[_Typed] = field(default_factory=list)
    operands: list[_Typed] = field(default_factory=list)
    operators: list[str] = field(default_factory=list)

    def operand(self, value: _Typed) -> bool:
        """Take an operand; False where one cannot stand (after another)."""
        if len(self.operands) != len(self.operators):
            return False
        self.operands.append(value)
        return True

    def operator(self, sign: str) -> bool:
        """Take an operator; False where one cannot stand (first, or after another)."""
        if len(self.operands) != len(self.operators) + 1:
            return False
        self.operators.append(sign)
        return True

    def argument(self) -> bool:
        """Work out the argument read so far; False when it is not one."""
        value = _reduced(self.operands, self.operators)
        self.operands, self.operators = [], []
        if value is not None:
            self.arguments.append(value)
        return value is not None


def _calculated(value: str, units: Mapping[str, float]) -> _Typed | None:
    """A math function worked out, dimensions measured by ``units``: see
    :func:`_worked_out`."""
    return _worked_out(value, tuple(units.items()))


# Kept per value and unit table: a stylesheet rule's value is judged for every element it
# matches (a 10,000-term calc() on 500 elements took 8.5 s, worked out afresh each time).
@functools.lru_cache(maxsize=4_096)
def _worked_out(value: str, units: tuple[tuple[str, float], ...]) -> _Typed | None:
    """A math function (those of :data:`_MATH_NAMES`, nested, with ``+``, ``-``, ``*``,
    ``/``, brackets and CSS's constants) worked out as CSS works it out; None when ``value``
    is not one, holds anything else (``env()``, ``sin()``, a unit not in ``units``), which
    callers read as before, or nests past :data:`_MATH_DEPTH`, which a browser rejects. One
    pass over the tokens, open brackets on a stack: recursing, a few hundred nested ``min()``
    failed the page. A NaN comes to 0 and an infinity to the largest double, as CSS has them."""
    table = dict(units)
    stack: list[_Open] = []
    position, found = 0, None
    while position < len(value):
        token = _MATH_TOKEN.match(value, position)
        if token is None or found is not None or not (stack or token["open"]):
            return None
        position = token.end()
        if token["open"]:
            stack.append(_Open(token["open"][:-1]))
            if len(stack) > _MATH_DEPTH:
                return None
        elif token["operator"]:
            if not stack[-1].operator(token["operator"]):
                return None
        elif token["comma"] or token["close"]:
            if not stack[-1].argument():
                return None
            if token["close"]:
                closed = _applied(stack.pop())
                if closed is None or (stack and not stack[-1].operand(closed)):
                    return None
                found = None if stack else closed
        elif (leaf := _leaf(token, table)) is None or not stack[-1].operand(leaf):
            return None
    if found is None or found[1] in _ROUNDINGS:
        return None
    return (0.0 if math.isnan(found[0]) else _finite(found[0])), found[1]


def _leaf(token: re.Match[str], units: Mapping[str, float]) -> _Typed | None:
    """A number, a constant, a dimension in ``units``, a percentage, or a keyword (its kind:
    ``none``, a rounding); None for another unit."""
    if token["keyword"]:
        return math.nan, token["keyword"]
    if token["constant"]:
        return _CONSTANTS[token["constant"]], ""
    number, unit = _finite(float(token["number"])), token["unit"]
    if not unit:
        return number, ""
    if unit in units:
        return number * units[unit], "d"
    return (number, "%") if unit == "%" else None


def _reduced(operands: list[_Typed], operators: list[str]) -> _Typed | None:
    """One argument's operands and operators worked out, products before sums; None when
    they do not make one (an operator last, a length added to a number, a keyword in
    arithmetic)."""
    if len(operands) != len(operators) + 1:
        return None
    if operators and any(kind not in ("", "%", "d") for _, kind in operands):
        return None
    terms = [operands[0]]
    for operator, operand in zip(operators, operands[1:], strict=True):
        if operator in "*/":
            product = _multiplied(terms[-1], operator, operand)
            if product is None:
                return None
            terms[-1] = product
        else:
            terms.append(operand if operator == "+" else (-operand[0], operand[1]))
    if len({kind for _, kind in terms}) > 1:
        return None  # a length and a percentage: what it comes to depends on the box
    return sum(number for number, _ in terms), terms[0][1]


def _multiplied(left: _Typed, operator: str, right: _Typed) -> _Typed | None:
    """A product or a quotient, of which one side must be a number, or a length divided by a
    length, which is a number (``opacity:calc(0px / 1px)`` is 0); a division by zero is
    infinite, or NaN for zero by zero, as in CSS."""
    if operator == "/":
        if right[1] and not right[1] == left[1] == "d":
            return None
        kind = "" if right[1] else left[1]
        if right[0] == 0:
            infinite = math.copysign(math.inf, left[0]) * math.copysign(1.0, right[0])
            return (math.nan if left[0] == 0 or math.isnan(left[0]) else infinite), kind
        return left[0] / right[0], kind
    if left[1] and right[1]:
        return None
    return left[0] * right[0], left[1] or right[1]


def _applied(opened: _Open) -> _Typed | None:
    """A closed bracket's value: ``calc()``'s or a group's one argument, or the function's
    result, of arguments of one kind (NaN if any is)."""
    arguments = list(opened.arguments)
    name = opened.name
    if name in ("", "calc"):
        return arguments[0] if len(arguments) == 1 else None
    strategy = "nearest"
    if name == "round" and arguments and arguments[0][1] in _ROUNDINGS:
        strategy = arguments.pop(0)[1]
    if name == "clamp" and len(arguments) == 3:
        arguments = _unbounded(arguments)
    kind = _kind(name, arguments)
    if kind is None or len(arguments) not in _ARITY.get(name, range(1, len(arguments) + 1)):
        return None
    if name == "round" and len(arguments) == 1 and kind:
        return None  # a step may be left out only for a number
    numbers = [number for number, _ in arguments]
    kind = "" if name in _OF_NUMBERS or name == "sign" else kind
    if any(map(math.isnan, numbers)):
        return math.nan, kind
    return _result(name, numbers, strategy), kind


def _unbounded(arguments: list[_Typed]) -> list[_Typed]:
    """``clamp()``'s arguments, a bound of ``none`` as no bound (``clamp(none, 0, 1)`` is
    0)."""
    lowest, value, highest = arguments
    return [
        (-math.inf, value[1]) if lowest[1] == "none" else lowest,
        value,
        (math.inf, value[1]) if highest[1] == "none" else highest,
    ]


def _kind(name: str, arguments: list[_Typed]) -> str | None:
    """The one kind a function's arguments share, or None when they do not (a keyword where
    no keyword goes, a dimension where a number goes)."""
    kinds = {kind for _, kind in arguments}
    if kinds == {"d", "%"} and name in ("min", "max", "clamp"):
        # As a lone percentage is judged, by its sign: one of 0 or less counts as that many
        # pixels (min(-5%, 10px) is no more than 0), a positive one as unknown.
        if any(kind == "%" and number > 0 for number, kind in arguments):
            return None
        kinds = {"d"}
    if len(kinds) != 1 or not kinds <= {"", "%", "d"}:
        return None
    kind = kinds.pop()
    return None if kind and name in _OF_NUMBERS else kind


def _result(name: str, numbers: list[float], strategy: str) -> float:
    """What a math function makes of its numbers, as CSS Values 4 has it: an infinity where a
    result overflows, NaN where none is defined."""
    first = numbers[0]
    try:
        if name in ("min", "max"):
            return min(numbers) if name == "min" else max(numbers)
        if name == "clamp":
            return max(first, min(numbers[1], numbers[2]))
        if name in ("abs", "hypot"):
            return math.hypot(*numbers)
        if name == "sign":
            return math.copysign(1.0, first) if first else first
        if name == "exp":
            return math.exp(first)
        if name == "pow":
            return math.pow(first, numbers[1])
        if name == "sqrt":
            return math.sqrt(first)
        if name == "log":
            return _logarithm(first, numbers[1] if len(numbers) > 1 else math.e)
        if name == "round":
            return _rounded(strategy, first, numbers[1] if len(numbers) > 1 else 1.0)
        return _remainder(name, first, numbers[1])
    except OverflowError:
        return math.inf
    except (ValueError, ZeroDivisionError):
        return math.nan


def _logarithm(number: float, base: float) -> float:
    """``log()``: of 0, minus infinity; of a negative number, NaN."""
    if number == 0:
        return -math.inf
    return math.log(number) / math.log(base)


def _remainder(name: str, dividend: float, divisor: float) -> float:
    """``rem()``, which takes the dividend's sign, and ``mod()``, the divisor's."""
    remainder = math.fmod(dividend, divisor)
    if name == "mod" and remainder and (remainder < 0) != (divisor < 0):
        remainder += divisor
    return remainder


def _rounded(strategy: str, number: float, step: float) -> float:
    """``round()`` of ``number`` to a multiple of ``step`` by ``strategy`` (``nearest``
    rounding a half up)."""
    step = abs(step)
    if step == 0 or (math.isinf(number) and math.isinf(step)):
        return math.nan
    if math.isinf(number):
        return number
    if math.isinf(step):
        if strategy == "up" and number > 0:
            return math.inf
        if strategy == "down" and number < 0:
            return -math.inf
        return math.copysign(0.0, number)
    ways: dict[str, Callable[[float], int]] = {"up": math.ceil, "down": math.floor}
    ways |= {"nearest": lambda quotient: math.floor(quotient + 0.5), "to-zero": math.trunc}
    return ways[strategy](number / step) * step


def _without_calc(value: str) -> str:
    """``calc(x)`` as ``x``, any other value as it is."""
    function = _MATH.match(value)
    return function.group(2).strip() if function and function.group(1) == "calc" else value


def _number(value: str) -> float | None:
    return _finite(float(value)) if re.fullmatch(_NUMBER, value.strip() or "x") else None


def _finite(number: float) -> float:
    """``number`` within a double's range: ``1e999`` is the largest double, the closest value
    an implementation supports, as CSS Values says (a browser paints ``rgb(1e999 1e999
    1e999)`` white). Infinity failed the whole page where a channel was rounded."""
    return min(max(number, -sys.float_info.max), sys.float_info.max)


def _functional(name: str, arguments: str) -> Colour | None:
    """A colour function's colour: rgb() and hsl() exactly, hwb() and color(srgb ...)
    likewise, color-mix() as the even mix of its two colours, and the perceptual spaces
    (lab, lch, oklab, oklch) as the grey of their lightness when their chroma is small
    (else None: a saturated colour is not judged against a background it may differ from
    only in hue)."""
    if name == "color-mix":
        mixed = [parse_colour(part) for part in _split(arguments, ",")[1:3]]
        if len(mixed) != 2 or None in mixed:
            return None
        one, other = (colour or WHITE for colour in mixed)
        return Colour(
            (one.red + other.red) // 2,
            (one.green + other.green) // 2,
            (one.blue + other.blue) // 2,
            (one.alpha + other.alpha) / 2,
        )
    parts = [
        _without_calc(part)
        for part in re.split(r"[\s,/]+", _CALC_INSIDE.sub(r"\1", arguments.strip()))
        if part
    ]
    if name == "color":
        if not parts or parts[0] not in ("srgb", "srgb-linear", "display-p3"):
            return None
        parts = parts[1:]
        name = "rgb"
        parts = [
            f"{_finite((_number(part) or 0) * 100)}%" if "%" not in part else part
            for part in parts[:3]
        ] + parts[3:]
    if len(parts) not in (3, 4):
        return None
    alpha = 1.0
    if len(parts) == 4:
        number = _number(parts[3].rstrip("%"))
        if number is None:
            return None
        alpha = min(max(number / 100 if parts[3].endswith("%") else number, 0.0), 1.0)
    if name.startswith("rgb"):
        channels = []
        for part in parts[:3]:
            number = _number(part.rstrip("%"))
            if number is None:
                return None
            channels.append(min(max(number * 2.55 if part.endswith("%") else number, 0), 255))
        red, green, blue = (round(channel) for channel in channels)
        return Colour(red, green, blue, alpha)
    if name in ("lab", "lch", "oklab", "oklch"):
        return _perceptual(name, parts[:3], alpha)
    hue = _degrees(parts[0])
    second, third = _number(parts[1].rstrip("%")), _number(parts[2].rstrip("%"))
    if hue is None or second is None or third is None:
        return None
    if name == "hwb":
        white, black = min(max(second, 0), 100) / 100, min(max(third, 0), 100) / 100
        if white + black >= 1:
            grey = round(white / (white + black) * 255)
            return Colour(grey, grey, grey, alpha)
        red_f, green_f, blue_f = colorsys.hls_to_rgb(hue / 360, 0.5, 1.0)
        red_f, green_f, blue_f = (
            channel * (1 - white - black) + white for channel in (red_f, green_f, blue_f)
        )
    else:
        red_f, green_f, blue_f = colorsys.hls_to_rgb(
            hue / 360, min(max(third, 0), 100) / 100, min(max(second, 0), 100) / 100
        )
    return Colour(round(red_f * 255), round(green_f * 255), round(blue_f * 255), alpha)


def _perceptual(name: str, parts: list[str], alpha: float) -> Colour | None:
    lightness = _number(parts[0].rstrip("%"))
    first, second = _number(parts[1].rstrip("%")), _number(parts[2].rstrip("%"))
    if lightness is None or first is None or second is None:
        return None
    scale = 1.0 if name.startswith("ok") and not parts[0].endswith("%") else 100.0
    chroma = first if name.endswith("ch") else math.hypot(first, second)
    if chroma > (0.02 if name.startswith("ok") else 5):
        return None
    grey = round(min(max(lightness / scale, 0.0), 1.0) * 255)
    return Colour(grey, grey, grey, alpha)


def _degrees(value: str) -> float | None:
    for unit, factor in _DEGREES_PER_UNIT.items():
        if value.endswith(unit):
            number = _number(value.removesuffix(unit))
            # Turned into a whole turn first: the largest number of turns in degrees is
            # infinite, and its remainder not a number.
            return None if number is None else (number % (360 / factor)) * factor
    number = _number(value)
    return None if number is None else number % 360
