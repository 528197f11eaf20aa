"""Printed page labels ("iii", "A-2") from a PDF's ``/PageLabels`` number tree.

Read here rather than through pypdf's ``page_labels``, which turns a range's start value into a
roman numeral of that many "M"s: a label range starting at 10^12 is a memory bomb there. The
tree is walked with a bound on its nodes and depth, a numeral past :data:`MAX_NUMERAL` is not
drawn in letters, and a label a reader could not take for one (too long, a control character,
a quote or a bracket that could close the page marker it is printed in, anything admission
would remove or change) is left out: labels
only decorate pages, so a damaged tree never fails the document.
See docs/sandbox.md, "The typed document".
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator

from pypdf.errors import PyPdfError
from pypdf.generic import ArrayObject, DictionaryObject, PdfObject

from sandbox.document import LABEL_PATTERN, MAX_LABEL_CHARS

#: Nodes of the number tree read at most, and (start, style) pairs; real documents have one
#: node (a /Nums array) of a few pairs. Nodes and arrays are each read once, however many
#: nodes share them, so a tree cannot multiply one array into a million ranges.
MAX_NODES = 1024
MAX_PAIRS = 4096
MAX_DEPTH = 16
#: The largest number drawn as a roman numeral or in letters (4999 is MMMMCMXCIX).
MAX_NUMERAL = 4999
_ROMAN = (
    (1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
    (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"),
)  # fmt: skip
_PRINTABLE = re.compile(LABEL_PATTERN)


def page_labels(root: DictionaryObject, page_count: int) -> list[str | None]:
    """Each page's label where the document gives one other than its page number; none at
    all when the tree is damaged past reading (an object pypdf refuses, a nesting too deep)."""
    try:
        return _labels(root, page_count)
    except (PyPdfError, ArithmeticError, LookupError, TypeError, ValueError, RecursionError):
        return [None] * page_count


def _labels(root: DictionaryObject, page_count: int) -> list[str | None]:
    tree = root.get("/PageLabels")
    found = itertools.islice(_ranges(tree.get_object()), MAX_PAIRS) if tree is not None else ()
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
    pending: list[tuple[PdfObject | None, int]] = [(tree, 0)]
    seen: set[int] = set()
    nodes = 0
    while pending and nodes < MAX_NODES:
        node, depth = pending.pop()
        if not isinstance(node, DictionaryObject) or id(node) in seen or depth > MAX_DEPTH:
            continue
        seen.add(id(node))
        nodes += 1
        numbers = _unseen_array(node.get("/Nums"), seen)
        pairs = numbers[: 2 * MAX_PAIRS]
        for key, value in zip(pairs[::2], pairs[1::2], strict=False):
            style = value.get_object()
            if isinstance(key, int) and key >= 0 and isinstance(style, DictionaryObject):
                yield int(key), style
        kids = _unseen_array(node.get("/Kids"), seen)
        pending += [(kid.get_object(), depth + 1) for kid in kids[: MAX_NODES - nodes]]


def _unseen_array(entry: PdfObject | None, seen: set[int]) -> list[PdfObject]:
    """The array ``entry`` refers to, or nothing when it is none or was read already."""
    array = entry.get_object() if entry is not None else None
    if not isinstance(array, ArrayObject) or id(array) in seen:
        return []
    seen.add(id(array))
    return list(array)


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
