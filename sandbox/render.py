"""The text a model reads of a typed document: page markers, Markdown headings and tables.

Rendered in the parent, from an answer decoded strictly, so every page marker, heading mark
and table line is the renderer's: a cell cannot break out of its row, and a line of the
document that reads as a page marker is quoted, so a file cannot forge the page a citation
names. Linear in the answer: only a table's header and separator rows are as wide as its
widest row. See docs/sandbox.md, "The typed document".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import get_args

from sandbox.document import (
    INVISIBLE,
    LINE_BREAK,
    Block,
    Document,
    Furniture,
    FurnitureRole,
    Heading,
    ListItem,
    Notice,
    PageBreak,
    Table,
    block_text,
)
from sandbox.render_folds import FOLDS

#: Put before a document line that reads as a page marker: a quote mark, as the selection
#: quotes a line that reads as a block heading (bridge/knowledge/markers.py).
QUOTE = ">"
# What a document's line is judged by: its first characters as a reader takes them, each
# folded by Unicode's confusables as the bridge's marker judge folds (``render_folds``, made
# by the bridge's generator), every opening bracket read as "[" and every closing one as "]",
# a modifier as a space, marks and what draws nothing removed. A hand-made table of 17
# look-alikes let through 62 single-character disguises of "[page 3]" ("[pɑge 3]", "[page З]",
# "⁅page 5⁆") and over 200 of each notice ("[airIock: ...]"), which an attacker's review
# printed in airlock's voice.

# Spaces, quote marks and Markdown's emphasis a line may open with before what is judged, as
# it reads folded (a full-width "＞" decomposes to ">", a spacing accent to a space and its
# mark): "**[page 3]**" and "“[page 3]”" read as the marker in bold or in quotes.
_LEADING = re.compile(r"[\s>*_~#\"'“”‘’«»]+")
# The words a page is named by in a page marker ("[page 3", "[Pages 3", "[p. 3", "[pg 3"); a
# caption such as "[Table 1]" or "[표 1]" is left as it is.
_PAGE_WORDS = ("pages", "page", "pgs", "pg", "pp", "p")
#: Brackets prose opens asides with: "(Polish)", "(P1)", "{p1}" read as an aside, not as one of
#: airlock's lines, which open with "[".
_PROSE_BRACKETS = frozenset("({")
# What else Unicode names a square bracket, a piece of one or a corner, by its side: "⎡page 3⎤"
# (the corners a typeset bracket is drawn with, Unicode's Sm), "⌜page 3⌝" and "⸂page 3⸃" read
# as airlock's marker though none is an opening bracket (Ps). Typeset parentheses and braces
# ("⎛", "⎧") are left to read as the prose brackets they draw.
_NAMED_BRACKET = re.compile(
    r"(?:(?:TOP|BOTTOM|UPPER|LOWER) )?(LEFT|RIGHT) (?:(?!CURLY|PARENTHESIS)[A-Z]+ )*?"
    r"(?:BRACKET|CORNER)\b"
)
# The categories those are of (math and other symbols, initial and final quotes): the names of
# the rest are not read: reading every name doubled the cost of importing this module.
_NAMED_CATEGORIES = ("Sm", "So", "Pi", "Pf")
# Modifiers (Unicode's Sk and Lm): an accent or tone mark that stands on no letter. "´" decomposes
# to a space and its accent, and "ˋ[page 3]" reads as the marker after a stray accent as much as
# "´[page 3]" does: each reads as a space unless the confusables read it as a character of a
# marker (the raised colon "˸"). ASCII's "^" and "`" are typed and shown as themselves: a line
# that opens with the Markdown code span "`[page 3]`" speaks of a marker.
_MODIFIERS = ("Sk", "Lm")
# The categories of the characters read as a bracket or a modifier.
_READ_CATEGORIES = frozenset(("Ps", "Pe", *_NAMED_CATEGORIES, *_MODIFIERS))
#: Categories of what a reader does not see in a line: marks that take no space of their own,
#: and code points that show no character (the bridge's marker judge reads through the same).
#: A spacing mark shows: Telugu's "ం" is read as the "o" it looks like.
_SHOWN_AS_NOTHING = ("Mn", "Me", "Cn", "Co", "Cs")
_ESCAPED_RANGE = re.compile(r"\\[uU]([0-9a-f]{4,8})(?:-\\[uU]([0-9a-f]{4,8}))?")


def _fold_map() -> dict[int, str]:
    """Each code point ``render_folds`` lists, every bracket and every modifier, to what a reader
    takes it for."""
    folds = {
        code: folded
        for folded, body in FOLDS.items()
        for low, high in _ESCAPED_RANGE.findall(body)
        for code in range(int(low, 16), int(high or low, 16) + 1)
    }
    for code in range(0x10000):
        category = unicodedata.category(chr(code))
        if category not in _READ_CATEGORIES:
            continue
        read_as = _read_as(chr(code), category)
        # A modifier the confusables read as a marker's character ("˸" as ":") keeps that fold.
        if read_as and (read_as != " " or code not in folds):
            folds[code] = read_as
    return folds


def _read_as(char: str, category: str) -> str | None:
    """What a bracket ("[" or "]") or a modifier (a space) is read as; None for the rest."""
    if category in ("Ps", "Pe"):
        return None if char in _PROSE_BRACKETS else ("[" if category == "Ps" else "]")
    if category in _MODIFIERS:
        return None if char.isascii() else " "
    named = _NAMED_BRACKET.match(unicodedata.name(char, ""))
    if named:
        return "[" if named.group(1) == "LEFT" else "]"
    return None


_FOLDED = _fold_map()


def _spelled(word: str) -> str:
    """A pattern for ``word`` in the folded text, each letter as its capital's fold or its
    small form's ("I" folds to "l", and "AIRLOCK" is airlock), any run of spaces for one."""
    return "".join(
        r"\s+"
        if char == " "
        else "(?:"
        + "|".join(sorted({re.escape(_folded_char(case)) for case in (char.lower(), char.upper())}))
        + ")"
        for char in word
    )


def _folded_char(char: str) -> str:
    return char.translate(_FOLDED).casefold()


# An opening bracket, or more than one ("„[page 3]" folds to "[[page 3]"), and spaces.
_OPENED = r"\[[\s\[]*"
# The dashes a reader takes for a hyphen, which the confusables do not all fold to one.
_DASHES = "\\-\u2010-\u2015\u2212"
# A bracket, a word a page is named by and a number reads as a page marker, whatever dot,
# colon, number sign or dash sits between them ("[p. 3]", "[page: 3]", "[page #3]",
# "[page-3]", any dash folded to "-"), and whatever names the number ("[page No. 3]",
# "[page № 3]", which decomposes to "No", "[page n° 3]"). 0 and 1 fold to
# "o" and "l": a run of them is a number when a digit ends it, or a closing bracket, comma or
# hyphen follows it ("[page 10]", "[page 1]"), so "[Page One" and "[Pole]" stay prose.
_SEPARATED = r"[\s.:#" + _DASHES + r"]*"
_NUMBER_WORDS = ("number", "num", "nr", "no", "n\u00b0")
_READS_AS_PAGE_MARKER = re.compile(
    _OPENED
    + r"(?:"
    + "|".join(map(_spelled, _PAGE_WORDS))
    + r")"
    + _SEPARATED
    + r"(?:(?:"
    + "|".join(map(_spelled, _NUMBER_WORDS))
    + r")"
    + _SEPARATED
    + r")?(?:[ol]*\d|[ol]+[\],\-])"
)
# A document line that opens like airlock's own remarks ("[airlock: sheet ... left out]", a
# quality warning) would speak with airlock's voice: only a notice block may.
_READS_AS_NOTICE = re.compile(_OPENED + _spelled("airlock") + r"\s*:")
# The line that opens a file's section in a container's text, written only on the trusted
# side (bridge/knowledge/sections.py, which this package may not import): no notice a child
# writes may read as one, whatever else a notice may say.
_READS_AS_SECTION = re.compile(
    _OPENED + _spelled("airlock") + r"\s*:\s*" + _spelled("enclosed") + r"(?![^\W\d_])"
)
# The labels of furniture ("[speaker notes]", "[footer]"), which only the renderer writes.
_READS_AS_FURNITURE = re.compile(
    _OPENED + r"(?:" + "|".join(_spelled(role) for role in get_args(FurnitureRole)) + r")\s*\]"
)
# How much of a line's start, after its leading spaces and quote marks, is folded to judge it:
# the patterns never look further.
_JUDGED_CHARS = 40
# A line is judged as admission leaves it: without the characters it removes, the braille
# blank a space. None can hide a marker from this check and be stripped away after it.
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
# Characters that draw nothing but that admission keeps (a soft hyphen, a combining grapheme
# joiner, format characters): a line opening with one is judged without it.
_DRAWS_NOTHING = re.compile("[\u00ad\u034f\u061c\u115f\u17b4\u17b5\u180e\U0001d173-\U0001d17a]")
_BRAILLE_BLANK = "\u2800"
_CELL_BREAKS = re.compile(r"\s+")


def page_marker(number: int, label: str | None) -> str:
    """The line that opens page ``number``, naming the label it is printed with, if any."""
    if label is None:
        return f"[page {number}]"
    return f'[page {number}, printed "{label}"]'


def render(document: Document) -> str:
    """The document as lines: blocks in order, a blank line before each page marker and
    around each table (Markdown needs a table to stand apart), none under airlock's notices,
    which speak of what follows them."""
    lines: list[str] = []
    apart = False  # the next block must follow a blank line
    previous: Block | None = None
    for block in document.blocks:
        apart = apart or isinstance(block, PageBreak | Table)
        if apart and lines and lines[-1] and not isinstance(previous, Notice):
            lines.append("")
        apart, previous = isinstance(block, Table), block
        if isinstance(block, PageBreak):
            lines.append(page_marker(block.number, block.label))
        elif isinstance(block, Table):
            lines += _table(block)
        elif isinstance(block, Heading):
            title = " ".join(block.text.split())
            if title:
                lines.append(f"{'#' * block.level} {_quoted(title)}")
        elif isinstance(block, ListItem):
            lines += _quoted_lines(block_text(block) or "")
        elif isinstance(block, Furniture):
            lines += [f"[{block.role}]", *_quoted_lines(block.text)]
        elif isinstance(block, Notice):
            # One line, whatever it holds: a notice quotes names from the document (a
            # chapter's path, an attachment's name), and a line break in one would let the
            # rest speak as another notice. A child writes notices too: no page marker either.
            lines.append(_quoted(" ".join(LINE_BREAK.split(block.text)), notice=True))
        else:
            lines += _quoted_lines(block.text)
    return "\n".join(lines)


def _quoted_lines(text: str) -> list[str]:
    return [_quoted(line) for line in LINE_BREAK.split(text)]


def _visible_format(line: str) -> Iterator[str]:
    """``line``'s characters without the format characters (Unicode's Cf) nobody sees."""
    for character in line:
        if unicodedata.category(character) != "Cf":
            yield character


def _quoted(line: str, *, notice: bool = False) -> str:
    """``line``, with one more quote mark when it reads as a page marker, or as one of
    airlock's notices unless it is one (reversible, as the selection's own quoting: a line
    that already has quote marks gets one more)."""
    folded = _folded(line)
    if _READS_AS_PAGE_MARKER.match(folded):
        return QUOTE + line
    if _READS_AS_SECTION.match(folded):
        return QUOTE + line
    if not notice and (_READS_AS_NOTICE.match(folded) or _READS_AS_FURNITURE.match(folded)):
        return QUOTE + line
    return line


def _folded(line: str) -> str:
    """The first :data:`_JUDGED_CHARS` characters a reader sees of ``line`` (as admission
    leaves it, :func:`_admitted`) after the spaces and quote marks it opens with: decomposed,
    without the marks that take no space (1,700 combining marks put first on a line hid it
    from the judge) and the code points that show no character (unassigned, private use,
    surrogates), each by its fold, then case folded (a capital's fold is its letter's: Greek
    "Ε" is "e", its small "ε" is not). Counted after what shows nothing and what opens the
    line are dropped, however long: 40 marks, 45 spaces or 60 spacing accents before
    "[page 3]" pushed it past a window cut first. Linear in what precedes the window, whatever
    follows it."""
    shown = ""
    for start in range(0, len(line), _JUDGED_CHARS):
        # A chunk at a time, each character on its own: a 1,000-character line was cleaned
        # whole (119 us) to judge its first 40.
        chunk = _admitted(line[start : start + _JUDGED_CHARS])
        if not chunk.isascii():  # ASCII decomposes to itself and holds no mark: most lines
            chunk = "".join(
                char
                for char in unicodedata.normalize("NFKD", chunk)
                if not unicodedata.category(char).startswith(_SHOWN_AS_NOTHING)
            )
        judged = chunk.translate(_FOLDED).casefold()
        shown += judged if shown else _opened(judged)
        if len(shown) >= _JUDGED_CHARS:
            break
    return shown[:_JUDGED_CHARS]


def _admitted(text: str) -> str:
    """``text`` as admission leaves it and without what draws nothing (each character judged
    on its own)."""
    admitted = _INVISIBLE.sub("", text.replace(_BRAILLE_BLANK, " "))
    return _DRAWS_NOTHING.sub("", "".join(_visible_format(admitted)))


def _opened(judged: str) -> str:
    """``judged`` after the spaces and quote marks it opens with."""
    lead = _LEADING.match(judged)
    return judged[lead.end() :] if lead else judged


def _table(table: Table) -> list[str]:
    """GitHub-flavoured Markdown. Without a header row marked in the document, the header is
    left blank rather than promoting a data row to it."""
    if not table.rows:
        return []
    width = max(len(row) for row in table.rows) or 1
    header = table.rows[0] if table.header else []
    body = table.rows[1:] if table.header else table.rows
    lines = [_row(header + [""] * (width - len(header))), _row(["---"] * width)]
    lines += [_row(row) for row in body]
    return lines


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(map(_cell, cells)) + " |"


def _cell(text: str) -> str:
    """A cell on one line, its backslashes and pipes escaped: neither a line break nor a ``|``
    (nor a ``\\`` that would turn the escape of the next ``|`` into a backslash) can end its
    row or open another."""
    one_line = _CELL_BREAKS.sub(" ", text).strip()
    return one_line.replace("\\", "\\\\").replace("|", "\\|")
