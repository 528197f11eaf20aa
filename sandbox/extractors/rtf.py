"""RTF: the text of a Rich Text Format document from its control words, tables as tables.

One pass over the bytes with an explicit group stack (no recursion): a file of 100,000 nested
groups is refused by its depth, not by Python's stack. ``\\bin`` data is skipped by its count,
never decoded. Destinations that are not the document's text (font and colour tables, styles,
document information, pictures, embedded objects, field instructions, every ``\\*`` group) are
skipped, and text marked hidden (``\\v``) is left out with a notice, as hidden PDF layers are,
and so is text drawn where no reader sees it (white on the white page, half a point high); so is
a shape's text box (``\\shptxt``), whose characters a notice counts.
See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import codecs
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sandbox import codes
from sandbox.document import MAX_COLUMNS, Block, Document, Notice, Paragraph, Table
from sandbox.extractors.css import WHITE, Colour
from sandbox.extractors.registry import Refusal, extractor
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

SIGNATURE = b"{\\rtf"
#: Groups nested deeper than this are refused: Word writes a few dozen levels at most.
MAX_DEPTH = 1_000
_TOKEN = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?"  # a control word and its parameter
    rb"|\\'([0-9a-fA-F]{2})"  # a byte in the current code page
    rb"|\\([^a-zA-Z'])"  # a control symbol
    rb"|([{}])"
    rb"|[\r\n]+"  # line ends in the file are not text
    rb"|([^\\{}\r\n]+)"
    rb"|\\",  # a lone backslash at the very end
)
#: Destinations whose contents are not the document's text.
_SKIPPED = frozenset(
    {
        b"stylesheet", b"info", b"pict", b"object", b"fldinst",
        b"listtable", b"listoverridetable", b"revtbl", b"rsidtbl", b"generator", b"filetbl",
        b"themedata", b"colorschememapping", b"datastore", b"latentstyles", b"xmlnstbl",
        b"pgdsctbl", b"nonshppict",
    }
)  # fmt: skip
_SYMBOLS = {
    b"par": "\n", b"sect": "\n", b"page": "\n", b"line": "\n", b"tab": "\t",
    b"emdash": "\u2014", b"endash": "\u2013", b"bullet": "\u2022", b"lquote": "\u2018",
    b"rquote": "\u2019", b"ldblquote": "\u201c", b"rdblquote": "\u201d", b"emspace": "\u2003",
    b"enspace": "\u2002", b"qmspace": "\u2005",
}  # fmt: skip
_CONTROL_SYMBOLS = {b"~": "\u00a0", b"_": "\u2011", b"\\": "\\", b"{": "{", b"}": "}"}
#: Windows code pages by \fcharset (a font's character set), for \'hh bytes in that font.
_CHARSETS = {
    0: "cp1252", 128: "cp932", 129: "cp949", 130: "johab", 134: "gbk", 136: "big5",
    161: "cp1253", 162: "cp1254", 163: "cp1258", 177: "cp1255", 178: "cp1256",
    186: "cp1257", 204: "cp1251", 222: "cp874", 238: "cp1250",
}  # fmt: skip
_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n)+")
#: A \ucN above this is a forgery: N characters of stand-in follow each \u.
_MAX_UNICODE_SKIP = 8
#: Word's size of text no \fs sets, in half-points.
_DEFAULT_SIZE = 24
#: Text of this many half-points or fewer is drawn under a pixel high, where no reader sees it
#: (the web page's rule, ``css.SMALLEST_PX``). ``\fs0`` is no size: read at the default.
_UNSEEN_SIZE = 1
#: The control words that name the colour behind a run's text (its highlight, its shading, its
#: background: Word writes ``\\chcbpat``, WordPad ``\\cb``) and behind a paragraph's.
_HIGHLIGHT = b"highlight"
_RUN_BACKGROUNDS = frozenset({b"chcbpat", b"cb"})
_PARAGRAPH_BACKGROUND = b"cbpat"
#: A shading percentage mixes two colours behind the text: what shows through is not judged.
_RUN_PATTERN = b"chshdng"
_PARAGRAPH_PATTERN = b"shading"
#: More colours than this refuse the document (Word keeps a few dozen): a table of millions
#: of empty entries held a list of that length.
MAX_COLOURS = 65_536
#: The most characters of the page background's shape properties kept to read its fill.
_BACKGROUND_CHARS = 4_096
#: A colour's components, in the order :class:`Colour` takes them.
_COMPONENTS = (b"red", b"green", b"blue")


@dataclass(frozen=True)
class _Group:
    """What a group inherits from its parent and may change for itself."""

    skip: bool = False
    hidden: bool = False
    #: The index of the text's colour in the colour table (None: automatic), and its size.
    colour: int | None = None
    size: int = _DEFAULT_SIZE
    #: The colours behind the text, nearest first, as colour-table indexes (0: none): the
    #: run's highlight and shading, the paragraph's shading (which ``\\pard`` ends). A
    #: shading percentage makes what lies behind unknown.
    highlight: int = 0
    run_background: int = 0
    paragraph_background: int = 0
    run_shading: int = 0
    paragraph_shading: int = 0
    #: A text box a skipped destination holds (a shape's ``\\shptxt``): its text is counted,
    #: not read.
    box: bool = False
    font: int | None = None
    unicode_skip: int = 1


@dataclass
class _Reader:
    """Text and tables as the control words build them."""

    budget: TextBudget
    codepage: str = "cp1252"
    fonts: dict[int, str] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    pending: bytearray = field(default_factory=bytearray)  # \'hh bytes not yet decoded
    pending_codepage: str = "cp1252"
    cell: list[str] = field(default_factory=list)
    row: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    in_table: bool = False  # between a table's first \intbl and the first paragraph without
    paragraph_in_table: bool = False
    hidden_characters: int = 0
    box_characters: int = 0
    #: The colour table; None for an entry that sets no colour (automatic).
    colours: list[Colour | None] = field(default_factory=list)
    #: The shading of each cell of the table row being defined (``\\clcbpat`` before its
    #: ``\\cellx``; None where a shading percentage makes it unknown), and of the next cell
    #: to define.
    cell_backgrounds: list[int | None] = field(default_factory=list)
    next_cell_background: int | None = 0
    #: The page's colour; None when it is a picture, a gradient or a pattern. Word shows a
    #: background only under ``\\viewbksp1``.
    page: Colour | None = WHITE
    background_shown: bool = False
    colour_table_read: bool = False
    #: The row's own shading (``\\trcbpat``), behind every cell that sets none.
    row_background: int = 0
    #: The character formatting ``\\plain`` restores: the defaults, with what the document's
    #: ``{\\*\\defchp}`` sets.
    plain: dict[str, Any] = field(default_factory=lambda: dict(_PLAIN))

    def unseen(self, group: _Group) -> bool:
        """Whether the group's text is drawn where no reader sees it: hidden, half a point
        high, or in the colour of what lies behind it (white on the white page, white on a
        white highlight). Text in the automatic colour is always seen: Word draws it in
        black or white against what is behind it."""
        if group.hidden or 0 < group.size <= _UNSEEN_SIZE:
            return True
        colour = self._colour(group.colour)
        return colour is not None and colour.unseen_on(self._behind(group))

    def _behind(self, group: _Group) -> Colour | None:
        """The colour behind the group's text, None where it is not known."""
        if group.run_shading or group.paragraph_shading:
            return None
        shading = 0
        if self.paragraph_in_table:  # the first paragraph after a table is not in its cell
            cell = len(self.row)
            own = self.cell_backgrounds[cell] if cell < len(self.cell_backgrounds) else 0
            if own is None:
                return None
            shading = own or self.row_background
        for index in (group.highlight, group.run_background, group.paragraph_background, shading):
            if index:
                return self._colour(index)
        return self.page

    def _colour(self, index: int | None) -> Colour | None:
        """The colour at ``index``; None for an automatic one: text that names no colour, an
        entry without components (Word's first), an index the table lacks."""
        if index is None:
            return None
        return self.colours[index] if 0 <= index < len(self.colours) else None

    def write(self, text: str, group: _Group) -> None:
        self.flush_bytes()
        if group.skip or not text:
            return
        if group.box:
            self.box_characters += len(text)
            return
        if group.hidden or (not text.isspace() and self.unseen(group)):
            # Spaces, tabs and breaks in an unseen colour or size still part words and lines.
            self.hidden_characters += len(text)
            return
        self._target().append(self.budget.spend(text))

    def byte(self, value: int, group: _Group) -> None:
        if group.skip:
            return
        if group.box:
            self.box_characters += 1
            return
        if self.unseen(group):
            self.hidden_characters += 1
            return
        codepage = self.codepage_of(group)
        if self.pending and codepage != self.pending_codepage:
            self.flush_bytes()
        self.pending_codepage = codepage
        self.pending.append(value)

    @staticmethod
    def joined(parts: list[str]) -> str:
        """``parts`` as one string, a \\u surrogate pair written as two words joined into its
        character (a lone half becomes U+FFFD)."""
        return "".join(parts).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")

    def flush_bytes(self) -> None:
        """Bytes decode together: a double-byte code page spells a character in two."""
        if self.pending:
            decoded = bytes(self.pending).decode(self.pending_codepage, errors="replace")
            self.pending.clear()
            self._target().append(self.budget.spend(decoded))

    def codepage_of(self, group: _Group) -> str:
        return (
            self.fonts.get(group.font, self.codepage) if group.font is not None else self.codepage
        )

    def _target(self) -> list[str]:
        if self.in_table and not self.paragraph_in_table:
            self.end_table()  # a paragraph without \intbl: the table has ended
        return self.cell if self.in_table else self.text

    def end_cell(self) -> None:
        self.flush_bytes()
        self.in_table = self.paragraph_in_table = True
        self.row.append(" ".join(self.joined(self.cell).split()))
        self.cell.clear()
        if len(self.row) > MAX_COLUMNS:
            raise Refusal(codes.CEILING, f"a table row has more than {MAX_COLUMNS} cells")

    def end_row(self) -> None:
        self.flush_bytes()
        if any(self.row):
            self.budget.charge(len(self.row))
            self.rows.append(self.row)
        self.row = []
        self.cell.clear()

    def end_table(self) -> None:
        self.in_table = False
        if self.rows:
            self.end_paragraphs()
            self.blocks.append(Table(self.rows, header=False))
            self.rows = []

    def end_paragraphs(self) -> None:
        self.flush_bytes()
        # A run of empty paragraphs is one blank line: RTF spaces paragraphs with them.
        text = _BLANK_LINES.sub("\n\n", self.joined(self.text)).strip("\n")
        if text.strip():
            self.blocks.append(Paragraph(text))
        self.text.clear()


class _Table(Protocol):
    """A destination read for what it defines rather than as text: it ends with the group
    it opens at ``depth``, and takes every control word and run inside it."""

    depth: int

    def word(self, reader: _Reader, word: bytes, number: int | None) -> None: ...

    def text(self, reader: _Reader, run: bytes) -> None: ...

    def end(self, reader: _Reader) -> dict[str, Any]:
        """What the group the destination ends in takes from it."""
        ...


@dataclass
class _FontTable:
    """The fonts' character sets, which decode the ``\\'hh`` bytes written in each font."""

    depth: int
    reader: _Reader
    defining: int | None = None

    def word(self, reader: _Reader, word: bytes, number: int | None) -> None:
        if word == b"f":
            self.defining = number
        elif word == b"fcharset" and number in _CHARSETS and self.defining is not None:
            reader.fonts[self.defining] = _CHARSETS[number]

    def text(self, reader: _Reader, run: bytes) -> None:
        pass  # font names

    def end(self, reader: _Reader) -> dict[str, Any]:
        return {}


@dataclass
class _ColourTable:
    """The colours ``\\cf`` and the backgrounds name by index: each ``;`` ends one, and one
    without components is automatic (Word's first)."""

    depth: int
    reader: _Reader
    components: dict[bytes, int] = field(default_factory=dict)
    #: False for a second colour table, which defines nothing.
    first: bool = True

    def __post_init__(self) -> None:
        self.first = not self.reader.colour_table_read
        self.reader.colour_table_read = True

    def word(self, reader: _Reader, word: bytes, number: int | None) -> None:
        if word in _COMPONENTS:
            self.components[word] = min(max(number or 0, 0), 255)

    def text(self, reader: _Reader, run: bytes) -> None:
        for _ in range(run.count(b";") if self.first else 0):
            if len(reader.colours) >= MAX_COLOURS:
                raise Refusal(codes.CEILING, f"the colour table has over {MAX_COLOURS} colours")
            reader.colours.append(
                Colour(*(self.components.get(name, 0) for name in _COMPONENTS))
                if self.components
                else None
            )
            self.components = {}

    def end(self, reader: _Reader) -> dict[str, Any]:
        return {}


@dataclass
class _PageBackground:
    """The page's colour (``{\\*\\background}``), from its shape's properties (``{\\sn
    name}{\\sv value}`` pairs): white unless Word shows the background (``\\viewbksp1``)
    with a fill of a colour; unknown for a picture, a gradient or a pattern, or a fill not
    fully opaque."""

    depth: int
    reader: _Reader
    properties: dict[str, str] = field(default_factory=dict)
    #: The property being read: its name, and whether its value is being read.
    name: list[str] = field(default_factory=list)
    value: list[str] = field(default_factory=list)
    in_value: bool = False
    kept: int = 0

    def word(self, reader: _Reader, word: bytes, number: int | None) -> None:
        if word == b"sn":
            self._close()
            self.in_value = False
        elif word == b"sv":
            self.in_value = True

    def text(self, reader: _Reader, run: bytes) -> None:
        if self.kept < _BACKGROUND_CHARS:
            piece = run[: _BACKGROUND_CHARS - self.kept].decode("latin-1")
            (self.value if self.in_value else self.name).append(piece)
            self.kept += len(piece)

    def _close(self) -> None:
        if self.name:
            self.properties["".join(self.name).strip()] = "".join(self.value).strip()
        self.name, self.value = [], []

    def end(self, reader: _Reader) -> dict[str, Any]:
        self._close()
        if reader.background_shown:
            reader.page = self._colour()
        return {}

    def _colour(self) -> Colour | None:
        if self.properties.get("fFilled") == "0" or self.properties.get("fillOpacity") == "0":
            return WHITE  # no fill
        solid = {"fillType": "0", "fillOpacity": "65536"}
        if any(self.properties.get(name, default) != default for name, default in solid.items()):
            return None  # a picture, a gradient, a pattern, or a fill seen through
        fill = self.properties.get("fillColor", "")
        if not fill:
            return WHITE
        if fill.isascii() and fill.isdigit() and int(fill) < 1 << 24:
            bgr = int(fill)
            return Colour(bgr & 0xFF, bgr >> 8 & 0xFF, bgr >> 16 & 0xFF)
        return None  # a system or scheme colour, not known here


@dataclass
class _CharacterDefaults:
    """The document's default character formatting (``{\\*\\defchp}``): what text that
    sets none is drawn in, and what ``\\plain`` restores (``{\\*\\defchp\\fs1}`` drew
    every plain word half a point high, and it was read)."""

    depth: int
    reader: _Reader
    settings: dict[str, Any] = field(default_factory=dict)

    def word(self, reader: _Reader, word: bytes, number: int | None) -> None:
        if (setting := _character_setting(word, number)) is not None:
            self.settings[setting[0]] = setting[1]

    def text(self, reader: _Reader, run: bytes) -> None:
        pass

    def end(self, reader: _Reader) -> dict[str, Any]:
        reader.plain = {**_PLAIN, **self.settings}
        return self.settings


#: The destinations read as tables, by the control word that opens each.
_TABLES: dict[bytes, Callable[[int, _Reader], _Table]] = {
    b"fonttbl": _FontTable,
    b"colortbl": _ColourTable,
    b"background": _PageBackground,
    b"defchp": _CharacterDefaults,
}


@extractor("rtf")
def extract_rtf(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    if not payload.startswith(SIGNATURE):
        raise Refusal(
            codes.UNREADABLE, "the payload is not an RTF document: it does not open with {\\rtf"
        )
    reader = _Reader(TextBudget(limits))
    stack: list[_Group] = []
    group = _Group()
    position, end = 0, len(payload)
    fallback = 0  # characters of a \uN's stand-in still to drop
    table: _Table | None = None  # the font or colour table or page background being read
    while position < end:
        token = _TOKEN.match(payload, position)
        assert token is not None  # the last alternative matches any byte left
        position = token.end()
        word, parameter, hex_byte, symbol, brace, run = token.groups()
        if brace is not None:
            if brace == b"{":
                if len(stack) >= MAX_DEPTH:
                    raise Refusal(codes.CEILING, f"groups nest more than {MAX_DEPTH} deep")
                stack.append(group)
            else:
                taken: dict[str, Any] = {}
                if table is not None and len(stack) <= table.depth:
                    taken = table.end(reader)
                    table = None
                group = stack.pop() if stack else group
                if taken:
                    group = replace(group, **taken)
            fallback = 0
            continue
        if fallback and (run or hex_byte or symbol):
            if run:
                dropped = min(fallback, len(run))
                fallback, run = fallback - dropped, run[dropped:]
                if not run:
                    continue
            else:
                fallback -= 1
                continue
        if word is not None:
            number = int(parameter) if parameter is not None else None
            if word == b"bin":  # raw bytes of the stated length, never text
                position = min(end, position + max(number or 0, 0))
            elif table is not None:
                table.word(reader, word, number)
            elif word in _TABLES and not (stack and stack[-1].skip):
                # A table inside a destination no reader reads defines nothing ("{\*\x
                # {\colortbl...}}" made white text black), and the first colour table is the
                # document's. Its own group may be one (``{\*\background``).
                table = _TABLES[word](len(stack), reader)
                group = replace(group, skip=True)
            elif word in _SKIPPED:
                group = replace(group, skip=True)
            else:
                group, fallback = _control(reader, group, word, number)
        elif hex_byte is not None:
            reader.byte(int(hex_byte, 16), group)
        elif symbol is not None:
            if symbol == b"*":  # a destination a reader skips unless it knows it
                group = replace(group, skip=True)
            else:
                reader.write(_CONTROL_SYMBOLS.get(symbol, ""), group)
        elif run is not None:
            if table is not None:
                table.text(reader, run)
            else:
                reader.write(run.decode(reader.codepage_of(group), errors="replace"), group)
    if reader.in_table:
        reader.end_table()
    reader.end_paragraphs()
    return Document(reader.blocks + _notices(reader))


def _notices(reader: _Reader) -> list[Block]:
    """What was left out, said: hidden text is where a planted instruction sits, and a text
    box's words are the document's own, which a reader of the file sees."""
    notices: list[Block] = []
    if reader.hidden_characters:
        notices.append(
            Notice(f"[airlock: {reader.hidden_characters} characters of hidden text left out]")
        )
    if reader.box_characters:
        notices.append(
            Notice(f"[airlock: {reader.box_characters} characters in text boxes left out]")
        )
    return notices


#: The control words that lay out paragraphs and tables, which only text that is read obeys.
#: A cell's shading colour (LibreOffice reads the raw form as the other), and the shading
#: percentages that make what lies behind a cell or row unknown.
_CELL_BACKGROUNDS = frozenset({b"clcbpat", b"clcbpatraw"})
_CELL_SHADINGS = frozenset({b"clshdng", b"clshdngraw", b"trshdng"})
_TABLE_WORDS = frozenset(
    {b"pard", b"intbl", b"cell", b"row", b"trowd", b"cellx", b"trcbpat"}
    | _CELL_BACKGROUNDS
    | _CELL_SHADINGS
)
#: The control words that set how text is drawn, each with the field of :class:`_Group` it
#: sets and the value it sets without a parameter: the colour of the text or of what lies
#: behind it (a colour-table index), its size, and a shading percentage.
_INK: dict[bytes, tuple[str, int]] = {
    b"cf": ("colour", 0),
    b"fs": ("size", _DEFAULT_SIZE),
    _HIGHLIGHT: ("highlight", 0),
    **dict.fromkeys(_RUN_BACKGROUNDS, ("run_background", 0)),
    _PARAGRAPH_BACKGROUND: ("paragraph_background", 0),
    _RUN_PATTERN: ("run_shading", 0),
    _PARAGRAPH_PATTERN: ("paragraph_shading", 0),
}
#: What ``\\plain`` restores: the default character formatting.
_PLAIN: dict[str, Any] = {
    "hidden": False,
    "colour": None,
    "size": _DEFAULT_SIZE,
    "highlight": 0,
    "run_background": 0,
    "run_shading": 0,
}


def _control(reader: _Reader, group: _Group, word: bytes, number: int | None) -> tuple[_Group, int]:
    """One control word's effect on the text: the group after it, and how many characters of
    a Unicode character's stand-in follow it."""
    if word == b"ansicpg" and number is not None:
        with contextlib.suppress(LookupError):  # a code page Python lacks: keep the default
            reader.codepage = codecs.lookup(f"cp{number}").name
    elif word == b"f":
        group = replace(group, font=number)
    elif word == b"uc":
        group = replace(group, unicode_skip=max(0, min(number or 0, _MAX_UNICODE_SKIP)))
    elif word == b"u" and number is not None:
        reader.write(_character(number % 65536 if number < 0 else number), group)
        return group, group.unicode_skip
    elif (setting := _character_setting(word, number)) is not None:
        if getattr(group, setting[0]) != setting[1]:  # most are repeats: a copy costs
            group = replace(group, **dict([setting]))
    elif word == b"shptxt" and group.skip:
        # Word writes a shape's text box inside the shape's \*\shpinst, which is skipped with
        # its properties: the box is not read (a shape its properties hide draws no text, and
        # they are not read to tell), but what it holds is counted for a notice, not lost unsaid.
        group = replace(group, skip=False, box=True)
    elif word in _TABLE_WORDS and (group.skip or group.box):
        # What is not read lays out nothing: "{\*\foo\intbl}" made the visible paragraphs
        # after it cells of a table never ended, and they were lost without a word.
        pass
    elif word == b"pard":
        reader.paragraph_in_table = False
        group = replace(group, paragraph_background=0, paragraph_shading=0)
    elif word == b"viewbksp":
        reader.background_shown = number == 1
    elif word == b"trowd":
        reader.cell_backgrounds.clear()
        reader.next_cell_background = reader.row_background = 0
    elif word == b"trcbpat":
        reader.row_background = number or 0
    elif word in _CELL_BACKGROUNDS:
        if reader.next_cell_background is not None:
            reader.next_cell_background = number or 0
    elif word in _CELL_SHADINGS and number:
        reader.next_cell_background = None
    elif word == b"cellx":
        if len(reader.cell_backgrounds) < MAX_COLUMNS:  # a wider row is refused by its cells
            reader.cell_backgrounds.append(reader.next_cell_background)
        reader.next_cell_background = 0
    elif word == b"plain":
        group = replace(group, **reader.plain)
    elif word == b"intbl":
        reader.in_table = reader.paragraph_in_table = True
    elif word == b"cell":
        reader.end_cell()
    elif word == b"row":
        reader.end_row()
    elif word in _SYMBOLS:
        reader.write(_SYMBOLS[word], group)
    return group, 0


def _character_setting(word: bytes, number: int | None) -> tuple[str, Any] | None:
    """The field of :class:`_Group` a character formatting word sets, and its value."""
    if word == b"v":
        return "hidden", number != 0
    if word in _INK:
        name, default = _INK[word]
        return name, default if number is None else number
    return None


def _character(number: int) -> str:
    return chr(number) if number < 0x110000 else "\ufffd"
