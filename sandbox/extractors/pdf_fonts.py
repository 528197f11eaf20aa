"""Whether PDFium's text of a page can hold every glyph the page draws.

PDFium leaves out of its text a glyph it cannot map to a character, where pypdf writes the
glyph's code and the page's broken share (``pdf_text.unmapped_share``) shows it: a vertical
Japanese poem set in CID-keyed fonts without a ToUnicode map, read by PDFium alone, lost two
thirds of its glyphs without a word. A page drawing with such a font is read by pypdf first,
as before PDFium read text. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

from pypdf import PageObject
from pypdf.generic import PdfObject

from sandbox.extractors.pdf_decoders import resolved
from sandbox.extractors.pdf_layout import resolved_dictionary

#: The fonts whose codes name no character by themselves (CIDs, Type 3 glyph procedures):
#: without a ToUnicode map their glyphs map only by what the font program holds, if at all.
_UNNAMED_CODES = frozenset({"/Type0", "/Type3"})
#: How deep forms drawn inside forms are followed, and how many resource dictionaries are read
#: at most: past either, the page is taken to draw with such a font.
_FORM_DEPTH = 16
_MAX_RESOURCES = 1_000


def may_drop_glyphs(page: PageObject) -> bool:
    """Whether the page, or a form it draws, uses a Type 0 or Type 3 font without a ToUnicode
    map, or holds more forms than are looked at."""
    stack = [(resolved_dictionary(page.get("/Resources")), 0)]
    seen: set[int] = set()
    while stack:
        resources, depth = stack.pop()
        if id(resources) in seen:
            continue
        seen.add(id(resources))
        if len(seen) > _MAX_RESOURCES or depth > _FORM_DEPTH:
            return True
        for entry in resolved_dictionary(resources.get("/Font")).values():
            font = resolved_dictionary(entry)
            if _name(font.get("/Subtype")) in _UNNAMED_CODES and "/ToUnicode" not in font:
                return True
        for entry in resolved_dictionary(resources.get("/XObject")).values():
            xobject = resolved_dictionary(entry)
            if _name(xobject.get("/Subtype")) == "/Form":
                stack.append((resolved_dictionary(xobject.get("/Resources")), depth + 1))
    return False


def _name(value: PdfObject | None) -> str | None:
    value = resolved(value)
    return str(value) if value is not None else None
