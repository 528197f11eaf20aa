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
import re
from collections import ChainMap
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass

from PIL import ImageColor

#: Text this close to its background in every channel, or this transparent, is not seen.
_NEAR = 16
#: No value a hiding rule is judged by is longer (a colour, a length, a keyword).
_MAX_VALUE_CHARS = 4_096
_FAINT = 0.05
#: Offsets past these are off-screen (the viewport is taken as 1,280 by 1,024).
_OFF_BEFORE_PX = -500.0
_OFF_AFTER_PX = 2_000.0
_VIEWPORT_PX = {"vw": 12.8, "vh": 10.24, "vmin": 10.24, "vmax": 12.8}
_PX_PER_UNIT = {"px": 1.0, "em": 16.0, "rem": 16.0, "pt": 4 / 3, "pc": 16.0, "ex": 8.0}
_PX_PER_UNIT |= {"ch": 8.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "q": 96 / 101.6, "in": 96.0}
_PX_PER_UNIT |= _VIEWPORT_PX
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?"
_LENGTH = re.compile(rf"^({_NUMBER})([a-z%]*)$")
_CALC = re.compile(r"^(?:calc|min|max|clamp)\((.*)\)$")
_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})[ \t\n]?|\\(.)", re.DOTALL)
_VARIABLE = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,\s*([^()]*))?\)")
_FUNCTION = re.compile(r"^(rgba?|hsla?)\((.*)\)$")
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
)
_FONT_SIZE_WORDS = frozenset(
    {"xx-small", "x-small", "small", "medium", "large", "x-large", "xx-large", "xxx-large"}
    | {"smaller", "larger", "math"}
)
_BACKGROUNDS = ("background-color", "background", "background-image")
#: Media types a query may name that no screen shows.
_UNSEEN_MEDIA = frozenset({"print", "speech"})


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
        name = _unescaped(name).strip().lower()
        value = _unescaped(value).replace("!important", "").strip()
        if name.startswith("--"):
            known[name] = value
            found[name] = value
            continue
        value = _substituted(value.lower(), known)
        if _valid(name, value):
            found[name] = value
    _expand_shorthands(found)
    return found


def variables_of(style: Mapping[str, str]) -> dict[str, str]:
    """The custom properties a style defines, which its element's content inherits."""
    return {name: value for name, value in style.items() if name.startswith("--")}


def hiding(style: Mapping[str, str]) -> str | None:
    """How ``style`` hides what it applies to, or None when it does not."""
    if not style:
        return None  # most elements: no style at all
    if style.get("display") == "none":
        return "display:none"
    if (
        style.get("visibility") in ("hidden", "collapse")
        or style.get("content-visibility") == "hidden"
    ):
        return "visibility:hidden"
    if _faint(style.get("opacity", "")) or re.search(
        r"opacity\(\s*0*\.?0*%?\s*\)", style.get("filter", "")
    ):
        return "opacity:0"
    if _zero_size(style):
        return "zero size"
    if _off_screen(style):
        return "off-screen"
    for name in ("color", "-webkit-text-fill-color"):
        colour = parse_colour(style.get(name, ""))
        if colour is not None and colour.alpha < _FAINT:
            return "transparent text"
    if style.get("fill") in ("none", "transparent") and style.get("stroke") in (None, "none"):
        return "transparent text"
    return None


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
    and ``@scope`` blocks, and nested rules (``&`` standing for the parent's selector)."""
    yield from _rules(_without_comments(sheet), "")


def imports(sheet: str) -> list[str]:
    """The URLs a stylesheet imports with ``@import``."""
    return re.findall(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)""", _without_comments(sheet))


def _rules(sheet: str, parent: str) -> Iterator[tuple[str, str]]:
    for prelude, body in _blocks(sheet):
        if prelude.startswith("@"):
            keyword, _, condition = prelude[1:].partition(" ")
            keyword = keyword.lower()
            if keyword == "media" and _unseen_media(condition):
                continue
            if keyword in ("media", "supports", "layer", "container", "scope", "document"):
                yield from _rules(body, parent)
            continue
        selector = _nested(prelude, parent)
        own = ";".join(part for part in _split(body, ";") if "{" not in part)
        yield selector, own
        if "{" in body:
            yield from _rules(body, selector)


def _blocks(sheet: str) -> Iterator[tuple[str, str]]:
    """``prelude { body }`` pairs at the top level of ``sheet``, braces matched by one scan
    of the braces alone (a character loop over a 7 MB sheet cost seconds)."""
    depth, start, opening = 0, 0, 0
    for brace in re.finditer(r"[{}]", sheet):
        if brace.group() == "{":
            if depth == 0:
                opening = brace.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                prelude = sheet[start:opening]
                # A declaration before a nested rule belongs to the parent, not the prelude.
                prelude = prelude.rsplit(";", 1)[-1].rsplit("}", 1)[-1].strip()
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
    """``sheet`` without its ``/* */`` comments, in one pass (a pattern would rescan the rest
    of the sheet for every unclosed ``/*``)."""
    kept: list[str] = []
    position = 0
    while (opening := sheet.find("/*", position)) >= 0:
        kept.append(sheet[position:opening])
        closing = sheet.find("*/", opening + 2)
        position = len(sheet) if closing < 0 else closing + 2
    kept.append(sheet[position:])
    return " ".join(kept)


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
            return text.lower() if room >= 0 else ""

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
    if name == "opacity":
        return _number(value.rstrip("%")) is not None
    if name in _COLOUR_PROPERTIES:
        return value in ("currentcolor", "none") or parse_colour(value) is not None
    if name == "font-size" and value in _FONT_SIZE_WORDS:
        return True
    if name in _LENGTH_PROPERTIES:
        return value == "auto" or px(value) is not None
    return True


def _expand_shorthands(style: dict[str, str]) -> None:
    """The longhands this module judges, from the shorthands that set them: ``font``'s size,
    ``margin``'s left and top, ``overflow``'s axes, ``inset``."""
    if "font" in style:
        for token in style["font"].split():
            size = token.split("/")[0]
            if px(size) is not None:
                style.setdefault("font-size", size)
                break
    for shorthand, (first, fourth) in (("margin", ("margin-top", "margin-left")),):
        values = style.get(shorthand, "").split()
        if values:
            style.setdefault(first, values[0])
            style.setdefault(fourth, values[{1: 0, 2: 1, 3: 1}.get(len(values), 3)])
    for axis in ("overflow-x", "overflow-y"):
        if style.get(axis) in ("hidden", "clip"):
            style.setdefault("overflow", style[axis])
    if style.get("overflow", "").split()[:1] == ["clip"]:
        style["overflow"] = "hidden"


def _zero_size(style: Mapping[str, str]) -> bool:
    font_size = px(style.get("font-size", ""))
    if font_size is not None and font_size < 1:
        return True
    clipped = style.get("overflow", "").startswith("hidden") or "clip" in style
    sides = ("width", "height", "max-width", "max-height")
    if clipped and any(_at_most(style.get(side, ""), 1) for side in sides):
        return True
    if re.fullmatch(r"rect\(\s*0\D*0\D*0\D*0\D*\)", style.get("clip", "")):
        return True
    clip_path = style.get("clip-path", "")
    inset = re.match(r"inset\(\s*(\d+(?:\.\d+)?)%", clip_path)
    if (inset is not None and float(inset.group(1)) >= 50) or re.match(r"circle\(\s*0", clip_path):
        return True
    transform = style.get("transform", "") + " " + style.get("scale", "")
    if re.search(r"scale[xyz3d]*\(\s*0*\.?0+(?:\s*[,)]|\s)|^\s*0*\.?0+\s*(?:\s|$)", transform):
        return True
    zoom = _number(style.get("zoom", "").rstrip("%"))
    return zoom is not None and zoom < _FAINT


def _off_screen(style: Mapping[str, str]) -> bool:
    for name in ("left", "top", "margin-left", "margin-top", "text-indent", "inset-inline-start"):
        offset = px(style.get(name, ""))
        if offset is not None and (offset <= _OFF_BEFORE_PX or offset >= _OFF_AFTER_PX):
            return True
    for name in ("right", "bottom"):
        offset = px(style.get(name, ""))
        if offset is not None and abs(offset) >= _OFF_AFTER_PX:
            return True
    for shift in re.findall(r"translate[xy3d]*\(([^)]*)\)", style.get("transform", "")):
        for part in shift.split(","):
            offset = px(part)
            if offset is not None and (offset <= _OFF_BEFORE_PX or offset >= _OFF_AFTER_PX):
                return True
    return False


def _faint(value: str) -> bool:
    number = _number(value.rstrip("%"))
    if number is None:
        return False
    return (number / 100 if value.endswith("%") else number) < _FAINT


def _at_most(value: str, limit: float) -> bool:
    pixels = px(value)
    return pixels is not None and pixels <= limit


def px(value: str) -> float | None:
    """A CSS length in pixels (an em as 16, a vw as 1 % of a 1,280-pixel viewport), or None
    when ``value`` is not one; a ``calc()`` of one length is that length; a percentage is
    judged by its sign only (0 or less, else None)."""
    value = value.strip()
    calc = _CALC.match(value)
    if calc is not None:
        value = calc.group(1).strip()
    match = _LENGTH.match(value)
    if match is None:
        return None
    number, unit = float(match.group(1)), match.group(2)
    if unit == "%":
        return number if number <= 0 else None
    if not unit:
        return number if number == 0 or calc is None else None
    factor = _PX_PER_UNIT.get(unit)
    return None if factor is None else number * factor


def _number(value: str) -> float | None:
    return float(value) if re.fullmatch(_NUMBER, value.strip() or "x") else None


def _functional(name: str, arguments: str) -> Colour | None:
    parts = [part for part in re.split(r"[\s,/]+", arguments.strip()) if part]
    if len(parts) not in (3, 4):
        return None
    alpha = 1.0
    if len(parts) == 4:
        number = _number(parts[3].rstrip("%"))
        if number is None:
            return None
        alpha = number / 100 if parts[3].endswith("%") else number
    if name.startswith("rgb"):
        channels = []
        for part in parts[:3]:
            number = _number(part.rstrip("%"))
            if number is None:
                return None
            channels.append(round(number * 2.55 if part.endswith("%") else number))
        red, green, blue = (min(max(channel, 0), 255) for channel in channels)
        return Colour(red, green, blue, min(max(alpha, 0.0), 1.0))
    hue = _number(parts[0].removesuffix("deg"))
    saturation = _number(parts[1].rstrip("%"))
    lightness = _number(parts[2].rstrip("%"))
    if hue is None or saturation is None or lightness is None:
        return None
    red_f, green_f, blue_f = colorsys.hls_to_rgb(
        (hue % 360) / 360, min(max(lightness, 0), 100) / 100, min(max(saturation, 0), 100) / 100
    )
    return Colour(
        round(red_f * 255), round(green_f * 255), round(blue_f * 255), min(max(alpha, 0.0), 1.0)
    )
