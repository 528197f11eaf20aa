"""What HTML's elements are, as its tokenizer and tree builder treat them, for the readers of
web pages and XHTML (sandbox/extractors/html.py, sandbox/extractors/xhtml.py).
"""

from __future__ import annotations

import re

#: Elements whose content the tokenizer reads as raw text: the pre-count skips it.
RAW_TEXT = frozenset(
    {"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript"}
    | {"plaintext"}
)
#: The elements that open foreign content, where HTML's rules give way to SVG's and MathML's.
FOREIGN = frozenset({"svg", "math"})
#: Elements that never hold content.
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
    | {"track", "wbr", "param", "keygen"}
)
HEADINGS = {f"h{level}": level for level in range(1, 7)}
_DOCTYPE = re.compile(r"<!doctype", re.IGNORECASE)


def without_internal_subset(markup: str) -> str:
    """``markup`` without its DOCTYPE's internal subset, which declares entities: the HTML
    parser never expands them, but would show the declarations' tail ("]>") as text. Only the
    first DOCTYPE counts (a parser ignores any other), and it is found in one pass."""
    opening = _DOCTYPE.search(markup)
    if opening is None:
        return markup
    bracket = markup.find("[", opening.end())
    closing = markup.find(">", opening.end())
    if bracket < 0 or 0 <= closing < bracket:
        return markup
    end = markup.find("]", bracket)
    closing = -1 if end < 0 else markup.find(">", end)
    return markup[: opening.start()] + ("" if closing < 0 else markup[closing + 1 :])
