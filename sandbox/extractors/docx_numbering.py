"""DOCX list and heading numbers as the reader sees them, computed from numbering.xml.

Word draws these rather than storing them, so the counters are replayed in document order;
every value from the package is bounded where it is read.
See docs/sandbox.md, "Parsers" and "Notes by module".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from lxml import etree

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_VAL = _W + "val"
_LEVELS = 9
_MAX_NUMBER_DIGITS = 6
# basedOn chains in real templates are a few styles deep; a loop must not hang the walk.
_MAX_STYLE_DEPTH = 16
# Beyond this count letters (aa, bbb, ...) and roman numerals grow without bound; decimal does not.
_MAX_LETTER_VALUE = 26 * 10
_MAX_ROMAN_VALUE = 3999
_PLACEHOLDER = re.compile(r"%([1-9])")
_ROMAN = (
    (1000, "m"),
    (900, "cm"),
    (500, "d"),
    (400, "cd"),
    (100, "c"),
    (90, "xc"),
    (50, "l"),
    (40, "xl"),
    (10, "x"),
    (9, "ix"),
    (5, "v"),
    (4, "iv"),
    (1, "i"),
)
# Bullets are glyphs of symbol fonts, stored at private-use code points (U+F0B7 is the Symbol
# font's bullet) that mean nothing without the font; these are the ones Word's gallery offers.
_SYMBOL_BULLETS = {
    "\uf0b7": "•",
    "\u00b7": "•",  # the same bullet where the Symbol font is addressed by its Latin-1 code
    "\uf0a7": "▪",
    "\uf0d8": "➢",
    "\uf076": "❖",
    "\uf0fc": "✓",
    "\uf0a8": "□",
    "o": "◦",  # Courier New's "o" is Word's hollow second-level bullet
}
_DEFAULT_BULLET = "•"
_SUFFIXES = {"tab": " ", "space": " ", "nothing": ""}


@dataclass(frozen=True)
class _Level:
    number_format: str
    template: str
    start: int
    #: lvlRestart: 0 never restarts; n restarts after a paragraph at level < n; None is
    #: Word's default (after any shallower level).
    restart: int | None
    legal: bool
    suffix: str


@dataclass(frozen=True)
class _Instance:
    """One w:num: its levels (overrides applied) and the counter set it advances."""

    key: str
    levels: dict[int, _Level]
    style_levels: dict[str, int]


def _number(element: etree._Element | None, default: int) -> int:
    value = element.get(_VAL) if element is not None else None
    if value is None or not value.isascii() or not value.isdigit():
        return default
    return int(value) if len(value) <= _MAX_NUMBER_DIGITS else default


def _level(element: etree._Element) -> _Level:
    number_format = element.find(_W + "numFmt")
    template = element.find(_W + "lvlText")
    restart = element.find(_W + "lvlRestart")
    suffix = element.find(_W + "suff")
    legal = element.find(_W + "isLgl")
    return _Level(
        number_format=(number_format.get(_VAL) if number_format is not None else None) or "decimal",
        template=(template.get(_VAL) if template is not None else None) or "",
        start=_number(element.find(_W + "start"), 0),
        restart=_restart(restart),
        legal=legal is not None and legal.get(_VAL, "true") not in ("0", "false", "off"),
        suffix=_SUFFIXES.get(suffix.get(_VAL, "tab") if suffix is not None else "tab", " "),
    )


def _restart(element: etree._Element | None) -> int | None:
    value = _number(element, -1)
    return None if value < 0 else value


def _levels(parent: etree._Element) -> dict[int, _Level]:
    levels = {}
    for element in parent.iterchildren(_W + "lvl"):
        index = _number_attribute(element, _W + "ilvl")
        if index is not None:
            levels[index] = _level(element)
    return levels


def _number_attribute(element: etree._Element, name: str) -> int | None:
    value = element.get(name)
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 1:
        return None
    return int(value) if int(value) < _LEVELS else None


def _formatted(value: int, number_format: str) -> str:
    """``value`` in one of Word's number formats; formats this module does not know (the East
    Asian counting systems, ordinals in words) fall back to decimal, which reads the same."""
    if number_format in ("lowerLetter", "upperLetter") and 1 <= value <= _MAX_LETTER_VALUE:
        letter = chr(ord("a") + (value - 1) % 26) * ((value - 1) // 26 + 1)
        return letter.upper() if number_format == "upperLetter" else letter
    if number_format in ("lowerRoman", "upperRoman") and 1 <= value <= _MAX_ROMAN_VALUE:
        digits = []
        for amount, numeral in _ROMAN:
            count, value = divmod(value, amount)
            digits.append(numeral * count)
        roman = "".join(digits)
        return roman.upper() if number_format == "upperRoman" else roman
    if number_format == "decimalZero":
        return f"{value:02d}"
    if number_format == "none":
        return ""
    return str(value)


class Numbering:
    """The numbering definitions of one document and the counters Word would keep for them."""

    def __init__(self, numbering: etree._Element | None, styles: etree._Element | None) -> None:
        self._styles: dict[str, etree._Element] = {}
        self._default_style: str | None = None
        if styles is not None:
            for style in styles.iterchildren(_W + "style"):
                # Paragraph styles give paragraphs their numbering; numbering styles are what
                # a w:numStyleLink names. Word keeps both in one id space.
                style_id = style.get(_W + "styleId")
                if style_id is None:
                    continue
                self._styles.setdefault(style_id, style)
                paragraph_style = style.get(_W + "type", "paragraph") == "paragraph"
                if paragraph_style and style.get(_W + "default") in ("1", "true", "on"):
                    self._default_style = style_id
        self._abstracts: dict[str, etree._Element] = {}
        self._nums: dict[str, etree._Element] = {}
        if numbering is not None:
            for abstract in numbering.iterchildren(_W + "abstractNum"):
                self._abstracts.setdefault(abstract.get(_W + "abstractNumId", ""), abstract)
            for num in numbering.iterchildren(_W + "num"):
                self._nums.setdefault(num.get(_W + "numId", ""), num)
        self._instances: dict[str, _Instance | None] = {}
        self._style_numberings: dict[str | None, tuple[str | None, int | None]] = {}
        self._counters: dict[str, list[int | None]] = {}

    def prefix(self, paragraph: etree._Element) -> tuple[str, int]:
        """The number or bullet Word draws before ``paragraph`` and its list level.

        Called once per paragraph in document order, numbered or not, empty or not: Word
        counts an empty numbered paragraph too. Returns ``("", 0)`` for an unnumbered one.
        """
        properties = paragraph.find(_W + "pPr")
        own = properties.find(_W + "numPr") if properties is not None else None
        style_id = self._style_of(properties)
        if style_id not in self._style_numberings:
            self._style_numberings[style_id] = self._style_numbering(style_id)
        num_id, level_index = self._style_numberings[style_id]
        if own is not None:
            own_id = own.find(_W + "numId")
            if own_id is not None:
                num_id = own_id.get(_VAL)
            own_level = own.find(_W + "ilvl")
            if own_level is not None:
                level_index = _number_attribute(own_level, _VAL)
                if level_index is None:  # a level Word does not have: nothing is drawn
                    return "", 0
        if num_id is None or num_id == "0":  # numId 0 switches the style's numbering off
            return "", 0
        instance = self._instance(num_id)
        if instance is None:
            return "", 0
        if level_index is None:
            level_index = instance.style_levels.get(style_id or "", 0)
        level = instance.levels.get(level_index)
        if level is None:
            return "", 0
        counters = self._advance(instance, level_index)
        return self._render(instance, level, counters), level_index

    def _style_of(self, properties: etree._Element | None) -> str | None:
        style = properties.find(_W + "pStyle") if properties is not None else None
        return style.get(_VAL) if style is not None else self._default_style

    def _style_numbering(self, style_id: str | None) -> tuple[str | None, int | None]:
        """numId and ilvl a paragraph style (or a style it is based on) gives its paragraphs."""
        num_id: str | None = None
        level: int | None = None
        for _ in range(_MAX_STYLE_DEPTH):
            style = self._styles.get(style_id or "")
            if style is None:
                break
            numbering = style.find(f"{_W}pPr/{_W}numPr")
            if numbering is not None:
                found_id = numbering.find(_W + "numId")
                found_level = numbering.find(_W + "ilvl")
                if num_id is None and found_id is not None:
                    num_id = found_id.get(_VAL)
                if level is None and found_level is not None:
                    level = _number_attribute(found_level, _VAL)
            based_on = style.find(_W + "basedOn")
            style_id = based_on.get(_VAL) if based_on is not None else None
        return num_id, level

    def _instance(self, num_id: str) -> _Instance | None:
        if num_id not in self._instances:
            self._instances[num_id] = self._load_instance(num_id)
        return self._instances[num_id]

    def _load_instance(self, num_id: str) -> _Instance | None:
        num = self._nums.get(num_id)
        abstract = self._abstract(num)
        if num is None or abstract is None:
            return None
        levels = _levels(abstract)
        style_levels: dict[str, int] = {}
        for element in abstract.iterchildren(_W + "lvl"):
            index = _number_attribute(element, _W + "ilvl")
            style = element.find(_W + "pStyle")
            if index is not None and style is not None and style.get(_VAL):
                style_levels.setdefault(style.get(_VAL, ""), index)
        overridden = False
        for override in num.iterchildren(_W + "lvlOverride"):
            index = _number_attribute(override, _W + "ilvl")
            if index is None:
                continue
            replacement = override.find(_W + "lvl")
            if replacement is not None:
                levels[index] = _level(replacement)
                overridden = True
            start = override.find(_W + "startOverride")
            if start is not None and index in levels:
                levels[index] = replace(levels[index], start=_number(start, 0))
                overridden = True
        # Instances of one abstract definition continue each other's numbering, as in Word;
        # an instance that overrides a level (the "restart numbering" command) counts alone.
        key = f"num:{num_id}" if overridden else f"abstract:{id(abstract)}"
        return _Instance(key, levels, style_levels)

    def _abstract(self, num: etree._Element | None) -> etree._Element | None:
        """The abstract definition of ``num``, through one numbering-style link.

        A list style's definition says only "see style X" (w:numStyleLink); X's numId names
        the instance that holds the levels. One hop: a link to a link is not followed.
        """
        reference = num.find(_W + "abstractNumId") if num is not None else None
        abstract = self._abstracts.get(reference.get(_VAL, "")) if reference is not None else None
        link = abstract.find(_W + "numStyleLink") if abstract is not None else None
        if link is None:
            return abstract
        style = self._styles.get(link.get(_VAL, ""))
        linked_id = style.find(f"{_W}pPr/{_W}numPr/{_W}numId") if style is not None else None
        linked_num = self._nums.get(linked_id.get(_VAL, "")) if linked_id is not None else None
        reference = linked_num.find(_W + "abstractNumId") if linked_num is not None else None
        target = self._abstracts.get(reference.get(_VAL, "")) if reference is not None else None
        if target is None or target.find(_W + "numStyleLink") is not None:
            return None
        return target

    def _advance(self, instance: _Instance, index: int) -> list[int | None]:
        counters = self._counters.setdefault(instance.key, [None] * _LEVELS)
        # A level skipped on the way down ("1." straight to "1.1.1.") shows its start value,
        # and counts as used, so the next paragraph at that level continues from it.
        for shallower in range(index):
            if counters[shallower] is None:
                counters[shallower] = _start(instance, shallower)
        current = counters[index]
        counters[index] = _start(instance, index) if current is None else current + 1
        for deeper in range(index + 1, _LEVELS):
            level = instance.levels.get(deeper)
            restart = level.restart if level is not None else None
            if restart is None or (restart != 0 and index < restart):
                counters[deeper] = None
        return counters

    def _render(self, instance: _Instance, level: _Level, counters: list[int | None]) -> str:
        if level.number_format == "bullet":
            glyph = level.template[:1]
            if not glyph:
                return ""
            bullet = _SYMBOL_BULLETS.get(glyph, glyph)
            if not bullet.isprintable() or 0xE000 <= ord(bullet) <= 0xF8FF:
                bullet = _DEFAULT_BULLET
            return bullet + level.suffix

        def placeholder(match: re.Match[str]) -> str:
            index = int(match.group(1)) - 1
            referenced = instance.levels.get(index)
            value = counters[index]
            if value is None:
                value = referenced.start if referenced is not None else 0
            number_format = referenced.number_format if referenced is not None else "decimal"
            return _formatted(value, "decimal" if level.legal else number_format)

        text = _PLACEHOLDER.sub(placeholder, level.template).strip()
        return text + level.suffix if text else ""


def _start(instance: _Instance, index: int) -> int:
    level = instance.levels.get(index)
    return level.start if level is not None else 0
