"""Printed page labels ("iii", "A-2") from a PDF's ``/PageLabels`` number tree.

Read here rather than through pypdf's ``page_labels``, which turns a range's start value into a
roman numeral of that many "M"s: a label range starting at 10^12 is a memory bomb there. The
tree is walked with a bound on its nodes and depth, a numeral past :data:`MAX_NUMERAL` is not
drawn in letters, and a label a reader could not take for one (too long, a control character,
a quote or a bracket that could close the page marker it is printed in) is left out: labels
only decorate pages, so a damaged tree never fails the document.
See docs/sandbox.md, "The typed document".
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from pypdf.generic import ArrayObject, DictionaryObject, PdfObject

from sandbox.document import LABEL_PATTERN, MAX_LABEL_CHARS

#: Nodes of the number tree read at most; real documents have one (a /Nums array).
MAX_NODES = 1024
MAX_DEPTH = 16
#: The largest number drawn as a roman numeral or in letters (4999 is MMMMCMXCIX).
MAX_NUMERAL = 4999
_ROMAN = (
    (1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
    (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"),
)  # fmt: skip
_PRINTABLE = re.compile(LABEL_PATTERN)


def page_labels(root: DictionaryObject, page_count: int) -> list[str | None]:
    """Each page's label where the document gives one other than its page number."""
    tree = root.get("/PageLabels")
    found = _ranges(tree.get_object()) if tree is not None else iter(())
    ranges = sorted(found, key=lambda pair: pair[0])
    starts = [start for start, _ in ranges]
    labels: list[str | None] = []
    for index in range(page_count):
        position = bisect.bisect_right(starts, index) - 1
        label = None if position < 0 else _label(ranges[position][1], index - starts[position])
        shown = label is not None and label != str(index + 1) and len(label) <= MAX_LABEL_CHARS
        labels.append(label if shown and _PRINTABLE.match(label or "") else None)
    return labels


def _ranges(tree: PdfObject) -> Iterator[tuple[int, DictionaryObject]]:
    """The (first page index, style) pairs of the number tree, each node read once."""
    pending: list[tuple[PdfObject, int]] = [(tree, 0)]
    seen: set[int] = set()
    while pending and len(seen) < MAX_NODES:
        node, depth = pending.pop()
        if not isinstance(node, DictionaryObject) or id(node) in seen or depth > MAX_DEPTH:
            continue
        seen.add(id(node))
        numbers = node.get("/Nums")
        numbers = numbers.get_object() if numbers is not None else None
        if isinstance(numbers, ArrayObject):
            for key, value in zip(numbers[::2], numbers[1::2], strict=False):
                style = value.get_object()
                if isinstance(key, int) and key >= 0 and isinstance(style, DictionaryObject):
                    yield int(key), style
        kids = node.get("/Kids")
        kids = kids.get_object() if kids is not None else None
        if isinstance(kids, ArrayObject):
            pending += [(kid.get_object(), depth + 1) for kid in kids[:MAX_NODES]]


def _label(style: DictionaryObject, offset: int) -> str | None:
    """The label of the page ``offset`` pages into a range of this style."""
    prefix = style.get("/P")
    prefix = prefix.get_object() if prefix is not None else ""
    start = style.get("/St")
    start = start.get_object() if start is not None else 1
    if not isinstance(prefix, str) or not isinstance(start, int) or start < 1:
        return None
    number = start + offset
    kind = style.get("/S")
    kind = kind.get_object() if kind is not None else None
    if kind is None:
        return prefix or None  # a range of prefixes alone
    if kind == "/D":
        digits = str(number) if number < 10**MAX_LABEL_CHARS else None
        return None if digits is None else prefix + digits
    if number > MAX_NUMERAL:
        return None
    if kind in ("/R", "/r"):
        roman = _roman(number)
        return prefix + (roman.upper() if kind == "/R" else roman)
    if kind in ("/A", "/a"):
        # A to Z, then AA to ZZ, AAA to ZZZ...: the letter repeated once more each round.
        letter = chr(ord("a") + (number - 1) % 26) * ((number - 1) // 26 + 1)
        return prefix + (letter.upper() if kind == "/A" else letter)
    return None


def _roman(number: int) -> str:
    digits = []
    for value, numeral in _ROMAN:
        count, number = divmod(number, value)
        digits.append(numeral * count)
    return "".join(digits)
