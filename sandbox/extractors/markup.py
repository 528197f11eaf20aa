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
#: A DOCTYPE at the start of a document (after a byte-order mark, white space, an XML
#: declaration or other instruction, comments, HTML's abrupt ``<!-->`` among them; the
#: possessive ``*+`` never re-reads a comment as a longer one) whose internal subset holds
#: declarations alone, none with a ``>`` inside: an HTML parser ends the DOCTYPE at its first
#: ``>`` and reads each later declaration as a comment, so all it shows of the subset is "]>".
_DOCTYPE_WITH_SUBSET = re.compile(
    r"(\ufeff?(?:[ \t\n\r\f]|<\?[^>]*>|<!--(?:-?>|.*?--!?>))*+)"
    r"<!doctype[^>\[]*\[(?:[ \t\n\r\f]|<![^>]*>|<\?[^>]*>)*\][ \t\n\r\f]*>",
    re.IGNORECASE | re.DOTALL,
)


def without_internal_subset(markup: str) -> str:
    """``markup`` without its DOCTYPE when that declares entities in an internal subset: the
    HTML parser never expands them but would show the subset's closing "]>" as text, and the
    XML parser is never given them to expand.

    Only the document's own DOCTYPE, at its start, is cut: a ``<!doctype [`` inside an
    attribute, a comment or an instruction is text, and cutting from it to the next ``]``
    cut the page's text. A subset holding anything but declarations is left to the parsers
    (a browser shows it as text; lxml keeps its entities unexpanded and loads nothing)."""
    doctype = _DOCTYPE_WITH_SUBSET.match(markup)
    if doctype is None:
        return markup
    return doctype.group(1) + markup[doctype.end() :]
