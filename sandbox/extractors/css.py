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
import math
import re
import sys
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from PIL import ImageColor

#: Text this close to its background in every channel, or this transparent, is not seen.
_NEAR = 16
#: No value a hiding rule is judged by is longer (a colour, a length, a keyword).
_MAX_VALUE_CHARS = 4_096
_FAINT = 0.05
#: Text drawn smaller than this many pixels is not read by anyone.
_SMALLEST_PX = 1.0
#: An ``inset()`` clip of this many percent of a box, or more, leaves nothing to read.
_CLIPPED_PERCENT = 99.9
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
_MATH = re.compile(r"^(calc|min|max|clamp)\((.*)\)$")
_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})[ \t\n]?|\\(.)", re.DOTALL)
_VARIABLE = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,\s*((?:[^()]|\([^()]*\))*))?\)")
#: Strings (whose braces, semicolons and comment marks are text) and braces.
_TOKENS = re.compile(r""""(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?|[{}]""")
_COMMENT_OR_STRING = re.compile(r""""(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?|/\*|<!--|-->""")
_IMPORTANT = re.compile(r"!\s*important", re.IGNORECASE)
_FUNCTION = re.compile(r"^(rgba?|hsla?|hwb|lab|lch|oklab|oklch|color|color-mix)\((.*)\)$")
_CALC_INSIDE = re.compile(r"calc\(([^()]*)\)")
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
    | {"margin-inline-start", "block-size", "inline-size"}
)
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
NESTING = frozenset({"opacity", "filter", "font-size", "transform", "scale", "zoom"})
_IDENTITY = (1.0, 0.0, 0.0, 1.0)
_TRANSFORM_FUNCTION = re.compile(r"([a-z0-9]+)\(([^()]*)\)")
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
}
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


def declarations(style: str, variables: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """A style's declarations as a browser keeps them: comments and escapes read, ``;``
    inside quotes and brackets not a separator, custom properties and ``var()`` resolved
    (``variables``: those the element inherits), ``!important`` dropped, and a value that is
    not valid for its property ignored, so the earlier valid one stands."""
    found: dict[str, str] = {}
    if not style or style.isspace():
        return found
    # A new map in front of the inherited ones: nothing is copied, whatever the depth.
    known = ChainMap({}) if variables is None else ChainMap({}, variables)
    for declaration in _split(_without_comments(style), ";"):
        name, colon, value = declaration.partition(":")
        if not colon:
            continue
        name = _unescaped(name).strip()
        value = _IMPORTANT.sub("", _unescaped(value)).strip()
        if name.startswith("--"):  # custom property names are case-sensitive
            known[name] = value
            found[name] = value
            continue
        name = name.lower()
        value = _substituted(value, known).lower()
        if _valid(name, value):
            found[name] = value
    _expand_shorthands(found)
    return found


def variables_of(style: Mapping[str, str]) -> dict[str, str]:
    """The custom properties a style defines, which its element's content inherits."""
    return {name: value for name, value in style.items() if name.startswith("--")}


def hiding(style: Mapping[str, str]) -> str | None:
    """How ``style`` hides what it applies to by itself, or None when it does not; what hides
    only once nested (opacity, scaling, font size) is :func:`diminished` and
    :func:`too_small`."""
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
    if _whitened(style):
        return "a filter or blend that whitens text"
    return None


def opacity(style: Mapping[str, str]) -> float:
    """How opaque ``style`` paints its element, 0 to 1: its ``opacity`` times its
    ``filter:opacity()``. Nested elements multiply theirs, so three at 0.2 paint text at 0.008,
    which no one reads, though none is faint alone."""
    return _fraction(style.get("opacity", "")) * _fraction(_filter(style, "opacity") or "")


def magnification(style: Mapping[str, str]) -> float:
    """How much ``style`` enlarges what it draws in the direction it shrinks it most: the
    smaller stretch of its ``transform`` (``scale(0.1, 1)`` and a singular ``matrix()`` leave
    text a sliver, though neither scales it to nothing everywhere), times ``scale`` and
    ``zoom``. Nested elements multiply theirs, as :func:`opacity`."""
    factors = [_least_stretch(style.get("transform", ""))]
    # The smaller of its two axes, as a transform's: "scale: 0.001 1000" is a sliver. A
    # negative scale mirrors the text, at the same size.
    axes = [abs(_factor(part, 1.0)) for part in style.get("scale", "").split()[:2]]
    factors.append(min(axes, default=1.0))
    # A zoom of 0 (or an invalid negative one) is 1 to a browser.
    zoom = _factor(style.get("zoom", ""), 1.0)
    factors.append(zoom if zoom > 0 else 1.0)
    return nested(1.0, *factors)


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
    return _together(styles, opacity, ("opacity", "filter"))


def magnified(styles: Sequence[Mapping[str, str]]) -> float:
    """How much the declarations ``styles`` magnify their element together: see
    :func:`_together`."""
    return _together(styles, magnification, ("transform", "scale", "zoom"))


def _together(
    styles: Sequence[Mapping[str, str]],
    measure: Callable[[Mapping[str, str]], float],
    properties: tuple[str, ...],
) -> float:
    """Each property at the most diminishing value any of ``styles`` gives it (which one the
    cascade picks is not worked out: the judge leans to hiding), the properties multiplied: a
    rule's ``scale(0.1)`` and an inline ``zoom:0.1`` draw at a hundredth, though each source
    alone draws at a tenth."""
    return nested(
        *(
            min((measure({name: style[name]}) for style in styles if name in style), default=1.0)
            for name in properties
        )
    )


def font_size(style: Mapping[str, str], parent_px: float, root_px: float = MEDIUM_PX) -> float:
    """The size ``style`` draws its text at, in pixels, given its parent's and the root's:
    ``em``, ``%``, ``ex``, ``ch`` and ``smaller`` are the parent's size scaled, so ten nested
    ``font-size:50%`` draw text at a sixty-fourth of a pixel, though none is small alone."""
    value = style.get("font-size", "")
    if value in _FONT_SIZE_PX:
        return _FONT_SIZE_PX[value]
    if value in ("smaller", "larger"):
        return parent_px / 1.2 if value == "smaller" else parent_px * 1.2
    size: float | None = None
    length = _LENGTH.match(_without_calc(value))
    if length is not None and length.group(2) in (*_PER_PARENT_EM, "rem"):
        number, unit = _finite(float(length.group(1))), length.group(2)
        size = number * (root_px if unit == "rem" else parent_px * _PER_PARENT_EM[unit])
    elif value:
        size = px(value)
    # A negative size is invalid, so the parent's stands.
    return parent_px if size is None or size < 0 else min(size, sys.float_info.max)


def faded_out(opacity: float) -> bool:
    """Whether an element whose own and ancestors' opacity multiply to ``opacity`` paints too
    faintly to read. Not a number is taken as nothing: no value an attacker reaches may pass
    every comparison."""
    return not opacity >= _FAINT


def too_small(font_px: float, magnification: float) -> bool:
    """Whether text of this size, drawn at this magnification, is too small to read. Judged
    for each piece of text, not for an element: a child that sets its own size shows again,
    and a drawing of large coordinates shrunk by its ``viewBox`` holds text as large."""
    return not font_px * magnification >= _SMALLEST_PX


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


def _substituted(value: str, known: Mapping[str, str]) -> str:
    """``value`` with ``var()`` replaced, a few levels deep; "" (no valid value) when the
    result would pass :data:`_MAX_VALUE_CHARS`, since variables of variables grow a value
    exponentially."""
    for _ in range(4):
        if "var(" not in value:
            break
        room = _MAX_VALUE_CHARS

        def replacement(match: re.Match[str]) -> str:
            nonlocal room
            text = known.get(match.group(1), match.group(2) or "")
            room -= len(text)
            return text if room >= 0 else ""

        value = _VARIABLE.sub(replacement, value)
        if room < 0:
            return ""
    return value


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
        return _number(_without_calc(value).rstrip("%")) is not None
    if name in _COLOUR_PROPERTIES:
        return value in ("currentcolor", "none") or parse_colour(value) is not None
    if name == "font-size":
        return _is_font_size(value)
    if name in _LENGTH_PROPERTIES:
        return value == "auto" or px(value) is not None
    return True


def _is_font_size(value: str) -> bool:
    """A keyword, a length or a percentage (of the parent's size, which ``px`` cannot
    judge)."""
    percentage = value.endswith("%") and _factor(value, -1.0) >= 0
    return value in _FONT_SIZE_WORDS or px(value) is not None or percentage


def _expand_shorthands(style: dict[str, str]) -> None:
    """The longhands this module judges, from the shorthands that set them: ``font``'s size,
    ``margin``'s left and top, ``overflow``'s axes, ``inset``."""
    if "font" in style:
        for token in style["font"].split():
            size = token.split("/")[0]
            if _is_font_size(size):
                style.setdefault("font-size", size)
                break
    for shorthand, (first, fourth) in (
        ("margin", ("margin-top", "margin-left")),
        ("inset", ("top", "left")),
    ):
        values = style.get(shorthand, "").split()
        if values:
            style.setdefault(first, values[0])
            style.setdefault(fourth, values[{1: 0, 2: 1, 3: 1}.get(len(values), 3)])
    for logical, physical in _LOGICAL.items():
        if logical in style:
            style.setdefault(physical, style[logical])
    for axis in ("overflow-x", "overflow-y"):
        if style.get(axis) in ("hidden", "clip"):
            style.setdefault("overflow", style[axis])
    if style.get("overflow", "").split()[:1] == ["clip"]:
        style["overflow"] = "hidden"


def _zero_size(style: Mapping[str, str]) -> bool:
    clipped = style.get("overflow", "").startswith("hidden") or "clip" in style
    sides = ("width", "height", "max-width", "max-height")
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
    parts = [] if rectangle is None else re.split(r"[\s,]+", rectangle.group(1).strip())
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
    ellipse of a radius under a pixel, a polygon whose points lie on one line."""
    shape = re.match(r"(inset|circle|ellipse|polygon)\(([^)]*)\)", clip_path)
    if shape is None:
        return False
    name, arguments = shape.groups()
    if name == "inset":
        parts = [_percent(part) for part in arguments.split()[:4]]
        if not parts:
            return False  # "inset()" is invalid, and clips nothing
        top, right, bottom, left = (parts * 4)[:1] + (parts * 4)[1:2] + _sides(parts)
        # What a clip of 99.9 % leaves is under a pixel of all but a thousand-pixel box.
        return top + bottom >= _CLIPPED_PERCENT or left + right >= _CLIPPED_PERCENT
    if name == "polygon":
        return _flat_polygon(arguments)
    radii = arguments.split(" at ")[0].split()
    return any(_at_most(radius, _SMALLEST_PX / 2) for radius in radii)


def _flat_polygon(arguments: str) -> bool:
    """Whether a ``polygon()``'s points (in one unit, ``0`` fitting any) enclose no area."""
    points = [point.split() for point in _split(arguments, ",")]
    if points and points[0][:1] in (["nonzero"], ["evenodd"]):
        points[0] = points[0][1:]
    coordinates = [_LENGTH.match(coordinate) for point in points for coordinate in point]
    if any(len(point) != 2 for point in points) or None in coordinates:
        return False
    found = [match for match in coordinates if match is not None]
    # Points on one horizontal or vertical line enclose nothing in any units ("0 0, 100% 0,
    # 50px 0" gave up on its two units).
    for axis in (found[0::2], found[1::2]):
        if len({(float(match.group(1)), match.group(2) or "px") for match in axis}) == 1:
            return True
    units = {match.group(2) or "px" for match in found if float(match.group(1)) != 0}
    if len(units) > 1:
        return False
    numbers = [_finite(float(match.group(1))) for match in found]
    xs, ys = numbers[0::2], numbers[1::2]
    area = sum(xs[index] * ys[index - 1] - xs[index - 1] * ys[index] for index in range(len(xs)))
    # Under a square pixel shows no letter ("1000px 0, 1000px 0.0000001px"); in another
    # unit the box's size is not known, and only no area at all is judged.
    return abs(area) / 2 < (1 if units <= {"px"} else 1e-9)


def _sides(parts: list[float]) -> list[float]:
    """``inset()``'s bottom and left from its one to four values."""
    if len(parts) == 1:
        return [parts[0], parts[0]]
    if len(parts) == 2:
        return [parts[0], parts[1]]
    if len(parts) == 3:
        return [parts[2], parts[1]]
    return [parts[2], parts[3]]


def _percent(value: str) -> float:
    number = _number(value.rstrip("%"))
    return 0.0 if number is None else number


def _least_stretch(transform: str) -> float:
    """How much a transform list scales the text in the direction it squashes it most: the
    smaller singular value of its two-dimensional linear part (translation and perspective
    left out). Matrices are the columns ``(a, b)`` and ``(c, d)``, as in CSS's ``matrix()``."""
    a, b, c, d = _IDENTITY
    for name, arguments in _TRANSFORM_FUNCTION.findall(_CALC_INSIDE.sub(r"\1", transform)):
        parts = [part for part in re.split(r"[\s,]+", arguments) if part]
        e, f, g, h = (_bounded(entry) for entry in _linear(name, parts))
        a, b, c, d = (
            _bounded(entry)
            for entry in (a * e + c * f, b * e + d * f, a * g + c * h, b * g + d * h)
        )
    squares = a * a + b * b + c * c + d * d
    spread = math.hypot(a * a + b * b - c * c - d * d, 2 * (a * c + b * d))
    largest = math.sqrt((squares + spread) / 2)
    # The two singular values multiply to the determinant.
    return 0.0 if largest == 0 else abs(a * d - b * c) / largest


def _linear(name: str, arguments: list[str]) -> tuple[float, float, float, float]:
    """One transform function's linear part, ``(a, b, c, d)``; the identity for a function
    that does not scale, skew or turn the plane (a translation), or that cannot be read."""
    if name.startswith(("matrix", "scale")):
        numbers = [_factor(argument, math.nan) for argument in arguments]
        if not numbers or any(map(math.isnan, numbers)):
            return _IDENTITY
        if name == "matrix" and len(numbers) == 6:
            return numbers[0], numbers[1], numbers[2], numbers[3]
        if name == "matrix3d" and len(numbers) == 16:
            # The last entry divides every point drawn (its homogeneous w): 1000 there draws
            # the text at a thousandth; 0 sends it to infinity, where nothing is drawn.
            w = numbers[15]
            if not w:
                return 0.0, 0.0, 0.0, 0.0
            return numbers[0] / w, numbers[1] / w, numbers[4] / w, numbers[5] / w
        x, y = numbers[0], numbers[1] if len(numbers) > 1 else numbers[0]
        x, y = {"scalex": (x, 1.0), "scaley": (1.0, x), "scalez": (1.0, 1.0)}.get(name, (x, y))
        return (x, 0.0, 0.0, y) if name.startswith("scale") else _IDENTITY
    if name == "rotate3d":
        return _turned(arguments)
    angles = [_degrees(argument) for argument in arguments]
    if not angles or None in angles:
        return _IDENTITY
    first, second = (math.radians(angle or 0.0) for angle in [*angles, 0.0][:2])
    if name in ("rotate", "rotatez"):
        return math.cos(first), math.sin(first), -math.sin(first), math.cos(first)
    if name == "rotatex":  # turned about the horizontal axis: its height foreshortened
        return 1.0, 0.0, 0.0, math.cos(first)
    if name == "rotatey":
        return math.cos(first), 0.0, 0.0, 1.0
    if name == "skewx":
        return 1.0, 0.0, math.tan(first), 1.0
    if name == "skewy":
        return 1.0, math.tan(first), 0.0, 1.0
    if name == "skew":
        return 1.0, math.tan(second), math.tan(first), 1.0
    return _IDENTITY


def _turned(arguments: list[str]) -> tuple[float, float, float, float]:
    """The plane's part of ``rotate3d(x, y, z, angle)`` (Rodrigues' rotation about the axis):
    turned a right angle about the horizontal axis, text is seen edge-on."""
    axis = [_number(argument) for argument in arguments[:3]]
    angle = _degrees(arguments[3]) if len(arguments) == 4 else None
    if angle is None or len(axis) != 3 or None in axis:
        return _IDENTITY
    x, y, z = (_finite(value or 0.0) for value in axis)
    length = math.hypot(x, y, z)
    if not 0 < length < math.inf:
        return _IDENTITY
    x, y, z = x / length, y / length, z / length
    cosine, sine = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    turn = 1 - cosine
    return (
        cosine + x * x * turn,
        y * x * turn + z * sine,
        x * y * turn - z * sine,
        cosine + y * y * turn,
    )


def _bounded(number: float) -> float:
    """A matrix entry within :data:`_MOST_MAGNIFIED` either way."""
    return min(max(number, -_MOST_MAGNIFIED), _MOST_MAGNIFIED)


def _factor(value: str, default: float) -> float:
    """A scale factor, a number or a percentage; ``default`` when ``value`` is neither."""
    value = _without_calc(value.strip())
    number = _number(value.removesuffix("%"))
    if number is None:
        return default
    return number / 100 if value.endswith("%") else number


def _whitened(style: Mapping[str, str]) -> bool:
    """A filter or blend mode that turns dark text white on the white page."""
    brightness = _number(_filter(style, "brightness") or "")
    invert = _number((_filter(style, "invert") or "").rstrip("%"))
    painted = any(style.get(name) for name in _BACKGROUNDS)
    return (
        (brightness is not None and brightness >= 5)
        or (
            invert is not None
            and invert >= (90 if "%" in (_filter(style, "invert") or "") else 0.9)
            and not painted
        )
        or style.get("mix-blend-mode") in _WHITENING_BLENDS
    )


def _filter(style: Mapping[str, str], function: str) -> str | None:
    found = re.search(rf"{function}\(([^)]*)\)", style.get("filter", ""))
    return None if found is None else found.group(1).strip()


def _off_screen(style: Mapping[str, str]) -> bool:
    before = ("left", "top", "margin-left", "margin-top", "text-indent", "inset-inline-start")
    for name in before:
        value = style.get(name, "")
        offset = px(value)
        if offset is not None and (offset <= _OFF_BEFORE_PX or offset >= _OFF_AFTER_PX):
            return True
        if value.endswith("%") and _percent(value) <= -100:
            return True
    for name in ("right", "bottom"):
        offset = px(style.get(name, ""))
        if offset is not None and abs(offset) >= _OFF_AFTER_PX:
            return True
    shifts = re.findall(r"translate[xy3d]*\(([^)]*)\)", style.get("transform", ""))
    shifts.append(style.get("translate", ""))
    for shift in shifts:
        for part in re.split(r"[\s,]+", shift.strip()):
            offset = px(part)
            if offset is not None and (offset <= _OFF_BEFORE_PX or offset >= _OFF_AFTER_PX):
                return True
    return False


def _fraction(value: str) -> float:
    """An opacity (a number or a percentage) from 0 to 1; 1 when ``value`` is none."""
    return min(max(_factor(value, 1.0), 0.0), 1.0)


def _at_most(value: str, limit: float) -> bool:
    pixels = px(value)
    return pixels is not None and pixels <= limit


def px(value: str) -> float | None:
    """A CSS length in pixels (an em as 16, a vw as 1 % of a 1,280-pixel viewport), or None
    when ``value`` is not one; ``calc()`` of one length is that length, ``min()``, ``max()``
    and ``clamp()`` of lengths what they choose; a percentage is judged by its sign only (0
    or less, else None)."""
    value = value.strip()
    function = _MATH.match(value)
    if function is not None:
        name, inner = function.group(1), function.group(2)
        lengths = [px(part) for part in _split(inner, ",")]
        if None in lengths or not lengths:
            return None
        known = [length or 0.0 for length in lengths]
        if name == "min":
            return min(known)
        if name == "max":
            return max(known)
        if name == "clamp" and len(known) == 3:
            return max(known[0], min(known[1], known[2]))
        return known[0] if len(known) == 1 else None
    match = _LENGTH.match(value)
    if match is None:
        return None
    number, unit = _finite(float(match.group(1))), match.group(2)
    if unit == "%":
        return number if number <= 0 else None
    if not unit:
        return number if number == 0 else None
    factor = _PX_PER_UNIT.get(unit)
    return None if factor is None else number * factor


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
    for unit, factor in (("deg", 1.0), ("grad", 0.9), ("rad", 57.29577951308232), ("turn", 360.0)):
        if value.endswith(unit):
            number = _number(value.removesuffix(unit))
            # Turned into a whole turn first: the largest number of turns in degrees is
            # infinite, and its remainder not a number.
            return None if number is None else (number % (360 / factor)) * factor
    number = _number(value)
    return None if number is None else number % 360
