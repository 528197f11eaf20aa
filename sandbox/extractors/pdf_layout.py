"""Where each piece of a page's text sits, and edits to pypdf's text that the layout calls for.

pypdf emits text in content-stream order. A court transcript draws its margin line numbers in
one block before the lines they number, so the text reads "1 2 3 ... 25" and then 25 unnumbered
lines, and a reference to "page 4, line 12" cannot be followed. Positions come from pypdf's own
visitor, whose pieces add up to the text it returns, so every edit is an offset in that text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pypdf import PageObject

# A piece that is only a line number: a transcript numbers up to a few dozen lines a page.
_LINE_NUMBER = re.compile(r"\s*(\d{1,3})\s*")
# Fewer numbered lines than this are a page number or a list, not a numbered margin.
_MIN_NUMBERED_LINES = 3
# Points of slack when matching a number's baseline to its line's.
_BASELINE_SLACK = 2.0


@dataclass(frozen=True)
class Fragment:
    """A piece of pypdf's page text: its offsets in that text and where it starts on the page."""

    start: int
    end: int
    x: float
    y: float


@dataclass(frozen=True)
class Edit:
    """Replace ``text[offset:offset + remove]`` by ``insert``."""

    offset: int
    remove: int
    insert: str


def positioned_text(page: PageObject) -> tuple[str, list[Fragment]]:
    """pypdf's text of ``page`` and its non-blank pieces with their positions; no pieces when
    the visitor's pieces do not add up to the text (their offsets would then be wrong)."""
    fragments: list[Fragment] = []
    offset = 0

    def visit(piece: str, cm: list[float], tm: list[float], *_: object) -> None:
        nonlocal offset
        if piece.strip():
            x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
            y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
            fragments.append(Fragment(offset, offset + len(piece), x, y))
        offset += len(piece)

    text = page.extract_text(visitor_text=visit)
    return text, fragments if offset == len(text) else []


def may_have_numbered_lines(text: str) -> bool:
    """Whether ``text`` has enough lines that are only a number to be worth locating (the
    cheap check that spares every other page a second, positioned extraction)."""
    numbers = sum(1 for line in text.splitlines() if _LINE_NUMBER.fullmatch(line))
    return numbers >= _MIN_NUMBERED_LINES


def line_number_edits(text: str, fragments: list[Fragment]) -> list[Edit]:
    """Move each margin line number to the start of the line on its baseline.

    A number counts when it stands alone on its line of pypdf's text, lies left of all other
    text, and a line of other text shares its baseline; a number without one stays where it is.
    """
    numbers = [
        piece for piece in fragments if _LINE_NUMBER.fullmatch(text[piece.start : piece.end])
    ]
    others = [piece for piece in fragments if piece not in numbers]
    if len(numbers) < _MIN_NUMBERED_LINES or not others:
        return []
    margin = min(piece.x for piece in others)
    edits: list[Edit] = []
    for number in numbers:
        alone = number.start == 0 or text[number.start - 1] == "\n"
        line = next((piece for piece in others if abs(piece.y - number.y) <= _BASELINE_SLACK), None)
        if not alone or number.x >= margin or line is None:
            continue
        line_start = text.rfind("\n", 0, line.start) + 1
        if line_start == number.start:
            continue  # pypdf already put the number at the start of its line
        end = number.end
        if not text[number.start : end].endswith("\n") and text[end : end + 1] == "\n":
            end += 1  # the number's line break goes with it
        label = text[number.start : number.end].strip()
        edits.append(Edit(number.start, end - number.start, ""))
        edits.append(Edit(line_start, 0, f"{label} "))
    return edits if len(edits) // 2 >= _MIN_NUMBERED_LINES else []


def apply(text: str, edits: list[Edit]) -> str:
    """``text`` with ``edits`` made; edits at one offset are made in the order given."""
    ordered = sorted(enumerate(edits), key=lambda item: (item[1].offset, item[0]), reverse=True)
    for _, edit in ordered:
        text = text[: edit.offset] + edit.insert + text[edit.offset + edit.remove :]
    return text
