"""The values of a page's filled form fields, placed in its text where a reader sees them.

Each value goes after its label, above the text below it, or at the page's end, never nowhere.
See docs/sandbox.md, "Parsers" and "Notes by module".
"""

from __future__ import annotations

from dataclasses import dataclass

from pypdf import PageObject
from pypdf.generic import ArrayObject, DictionaryObject

from sandbox.extractors.pdf_layout import Edit, Fragment, PageIndex

# Field types whose /V is text a person typed or chose (buttons hold state names like /Off).
_TEXT_FIELD_TYPES = ("/Tx", "/Ch")
# Points of slack when matching a label's baseline to a field's box: labels sit a little below
# or above the box they name.
_SLACK = 3.0
# A field's parent chain is followed this far for its inherited /FT and /V (the spec's
# inheritance); a cycle in /Parent must not loop.
_MAX_PARENTS = 16


@dataclass(frozen=True)
class FieldValue:
    text: str
    left: float
    bottom: float
    top: float


def field_values(page: PageObject) -> list[FieldValue]:
    """The non-empty values of the text and choice fields whose widgets are on ``page``."""
    annotations = page.get("/Annots")
    annotations = annotations.get_object() if annotations is not None else None
    if not isinstance(annotations, ArrayObject):
        return []
    values = []
    for entry in annotations:
        widget = entry.get_object()
        if not isinstance(widget, DictionaryObject) or widget.get("/Subtype") != "/Widget":
            continue
        field_type, value = _inherited(widget, "/FT"), _inherited(widget, "/V")
        text = _value_text(value)
        box = widget.get("/Rect")
        if field_type not in _TEXT_FIELD_TYPES or not text or not isinstance(box, ArrayObject):
            continue
        try:
            left, bottom, right, top = (float(number) for number in box)
        except (TypeError, ValueError):
            continue
        values.append(FieldValue(text, min(left, right), min(bottom, top), max(bottom, top)))
    return values


def _inherited(field: DictionaryObject, key: str) -> object:
    node: object = field
    for _ in range(_MAX_PARENTS):
        if not isinstance(node, DictionaryObject):
            return None
        if key in node:
            return node[key].get_object()
        node = node.get("/Parent")
        node = node.get_object() if node is not None else None
    return None


def _value_text(value: object) -> str:
    """A value as text: a string, or a choice field's list of strings."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, ArrayObject):
        return ", ".join(" ".join(str(item).split()) for item in value if isinstance(item, str))
    return ""


def value_edits(text: str, fragments: list[Fragment], values: list[FieldValue]) -> list[Edit]:
    """Insertions placing each value at its reading position (see the module docstring)."""
    index = PageIndex(fragments)
    edits: list[Edit] = []
    for value in values:
        label = _label_left_of(index, value)
        if label is not None:
            end = label.end
            while end > label.start and text[end - 1].isspace():
                end -= 1  # after the label's words, before the break that ends its line
            edits.append(Edit(end, 0, " " + value.text))
            continue
        below = index.first_below(value.bottom - _SLACK)
        if below is None:
            edits.append(Edit(len(text), 0, "\n" + value.text))
        else:
            edits.append(Edit(text.rfind("\n", 0, below.start) + 1, 0, value.text + "\n"))
    return edits


def _label_left_of(index: PageIndex, value: FieldValue) -> Fragment | None:
    """The last text on the field's line that starts left of the field."""
    on_line = index.between(value.bottom - _SLACK, value.top + _SLACK)
    left = [piece for piece in on_line if piece.x < value.left]
    return max(left, key=lambda piece: piece.x, default=None)
