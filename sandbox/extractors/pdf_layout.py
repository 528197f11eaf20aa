"""Where each piece of a page's text sits, and edits to pypdf's text that the layout calls for.

Positions come from pypdf's own visitor, so every edit is an offset in the text it returns.
See docs/sandbox.md, "Parsers" and "Notes by module".
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass

from pypdf import PageObject
from pypdf.generic import DictionaryObject, PdfObject

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


def image_coverage(page: PageObject) -> float:
    """The largest share of the page's area that one image drawn by its content stream covers
    (an image placed by the page's own resources; 0.0 for a page without area).

    A scan whose page carries a few characters of real text (a Bates number, a stamp) has a
    text layer, but its content is in the picture.
    """
    box = page.cropbox
    page_area = abs(float(box.width) * float(box.height))
    xobjects = resolved_dictionary(resolved_dictionary(page).get("/Resources")).get("/XObject")
    xobjects = resolved_dictionary(xobjects)
    if not xobjects:
        return 0.0  # nothing to draw an image with: spare the page a second pass
    largest = 0.0

    def visit(operator: bytes, arguments: list[object], cm: list[float], *_: object) -> None:
        nonlocal largest
        if operator != b"Do" or not arguments or arguments[0] not in xobjects:
            return
        if resolved_dictionary(xobjects[arguments[0]]).get("/Subtype") == "/Image":
            largest = max(largest, abs(cm[0] * cm[3] - cm[1] * cm[2]))

    page.extract_text(visitor_operand_before=visit)
    return min(1.0, largest / page_area) if page_area > 0 else 0.0


def resolved_dictionary(value: object) -> DictionaryObject:
    """``value`` resolved if it is a dictionary, else an empty one: a hostile page may put any
    object where resources belong."""
    if isinstance(value, PdfObject):
        value = value.get_object()
    return value if isinstance(value, DictionaryObject) else DictionaryObject()


def may_have_numbered_lines(text: str) -> bool:
    """Whether ``text`` has enough lines that are only a number to be worth locating (the
    cheap check that spares every other page a second, positioned extraction)."""
    numbers = sum(1 for line in text.splitlines() if _LINE_NUMBER.fullmatch(line))
    return numbers >= _MIN_NUMBERED_LINES


class PageIndex:
    """Fragments found by baseline in time proportional to the answer, not to the page: a
    hostile page of a hundred thousand pieces must not make placing each one quadratic."""

    def __init__(self, fragments: list[Fragment]) -> None:
        self.fragments = fragments
        self._by_row: dict[int, list[Fragment]] = {}
        for piece in fragments:
            self._by_row.setdefault(math.floor(piece.y), []).append(piece)
        self._rows = sorted(self._by_row)
        # The lowest baseline among the first i fragments, negated so bisect sees it ascending.
        lowest, running = [], math.inf
        for piece in fragments:
            running = min(running, piece.y)
            lowest.append(-running)
        self._lowest = lowest

    def between(self, bottom: float, top: float) -> list[Fragment]:
        """The fragments whose baseline lies in [bottom, top], in text order."""
        if not (math.isfinite(bottom) and math.isfinite(top)):
            return []
        start = bisect.bisect_left(self._rows, math.floor(bottom))
        end = bisect.bisect_right(self._rows, math.floor(top))
        found = [
            piece
            for row in self._rows[start:end]
            for piece in self._by_row[row]
            if bottom <= piece.y <= top
        ]
        return sorted(found, key=lambda piece: piece.start)

    def first_below(self, y: float) -> Fragment | None:
        """The first fragment in text order whose baseline is below ``y``."""
        index = bisect.bisect_right(self._lowest, -y)
        return self.fragments[index] if index < len(self.fragments) else None


def line_number_edits(text: str, fragments: list[Fragment]) -> list[Edit]:
    """Move each margin line number to the start of the line on its baseline.

    A number counts when it stands alone on its line of pypdf's text, lies left of all other
    text, and a line of other text shares its baseline; a number without one stays where it is.
    """
    if not may_have_numbered_lines(text):
        return []  # the cheap check first: most pages have no line of a bare number
    numbers: list[Fragment] = []
    others: list[Fragment] = []
    for piece in fragments:
        is_number = _LINE_NUMBER.fullmatch(text[piece.start : piece.end])
        (numbers if is_number else others).append(piece)
    if len(numbers) < _MIN_NUMBERED_LINES or not others:
        return []
    margin = min(piece.x for piece in others)
    index = PageIndex(others)
    edits: list[Edit] = []
    for number in numbers:
        alone = number.start == 0 or text[number.start - 1] == "\n"
        if not alone or number.x >= margin:
            continue
        on_baseline = index.between(number.y - _BASELINE_SLACK, number.y + _BASELINE_SLACK)
        if not on_baseline:
            continue
        line_start = text.rfind("\n", 0, on_baseline[0].start) + 1
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
