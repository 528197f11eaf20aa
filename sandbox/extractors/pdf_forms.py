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
# Fields looked at to learn whether a form holds any value; a form larger than this is taken
# to hold some, and its pages are searched as before.
_MAX_FIELDS = 10_000


@dataclass(frozen=True)
class FieldValue:
    text: str
    left: float
    bottom: float
    top: float


def form_has_values(catalog: DictionaryObject) -> bool:
    """Whether the document's form (``/AcroForm``) has a text or choice field with a value.

    Asked once per document: searching every page's annotations for values took a quarter of
    a 15-page register's job whose form was empty. A field's ``/FT`` and ``/V`` are inherited
    down its ``/Kids`` as on a page. Malformed trees (cycles, non-dictionaries) are walked
    with a bound; a form too large to walk counts as holding values.
    """
    form = catalog.get("/AcroForm")
    form = form.get_object() if form is not None else None
    fields = form.get("/Fields") if isinstance(form, DictionaryObject) else None
    fields = fields.get_object() if fields is not None else None
    if not isinstance(fields, ArrayObject):
        return False
    stack: list[tuple[object, object, object]] = [(entry, None, None) for entry in fields]
    seen: set[int] = set()
    while stack:
        if len(seen) >= _MAX_FIELDS:
            return True
        entry, field_type, value = stack.pop()
        node = entry.get_object() if hasattr(entry, "get_object") else entry
        if not isinstance(node, DictionaryObject) or id(node) in seen:
            continue
        seen.add(id(node))
        field_type = node["/FT"].get_object() if "/FT" in node else field_type
        value = node["/V"].get_object() if "/V" in node else value
        if field_type in _TEXT_FIELD_TYPES and _value_text(value):
            return True
        kids = node.get("/Kids")
        kids = kids.get_object() if kids is not None else None
        if isinstance(kids, ArrayObject):
            stack.extend((kid, field_type, value) for kid in kids)
    return False


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
