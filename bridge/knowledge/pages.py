"""Where each page of an attachment's text lies: the page map a citation can name a page by.

Read from the page markers the sandbox renders (``[page 12]``, ``[page 3, printed "iv"]``)
after the text is normalised and escaped, so the offsets are those of the text a caller
holds. A marker line is the renderer's own: it quotes every line of a document that reads as
one (sandbox/render.py), so a file cannot move a page or forge one. An in-process extractor a
deployment plugs in instead is trusted to keep the same rule. See docs/spec-decisions.md,
"Pages".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bridge.knowledge.contracts import BLOCK_SEPARATOR

#: A page marker line exactly as the sandbox renders it.
PAGE_MARKER = re.compile(r'^\[page ([1-9][0-9]{0,6})(?:, printed "([^"\[\]\n]{1,32})")?\]$', re.M)
# The heading that opens an attachment's block in a selection; escape_markers quotes any body
# line that reads as one, so every line that is exactly this opens a block.
_ATTACHMENT_HEADING = re.compile(r"^ATTACHMENT \[(.*)\]$", re.M)


@dataclass(frozen=True)
class PageSpan:
    """Page ``number`` (printed as ``printed`` where the document labels it otherwise): its
    text is ``text[start:end]``, after its marker line and without the blank line that ends
    it."""

    number: int
    printed: str | None
    start: int
    end: int


@dataclass(frozen=True)
class AttachmentPages:
    """One attachment's block of a selection and its pages, in the selection's offsets."""

    label: str
    pages: tuple[PageSpan, ...]


def page_map(text: str, start: int = 0, end: int | None = None) -> tuple[PageSpan, ...]:
    """The pages marked in ``text[start:end]``, in order; none for a text without markers (a
    DOCX, an image of one frame, plain text)."""
    stop = len(text) if end is None else end
    markers = list(PAGE_MARKER.finditer(text, start, stop))
    spans = []
    for index, marker in enumerate(markers):
        after = min(marker.end() + 1, stop)  # the marker's line break
        limit = markers[index + 1].start() if index + 1 < len(markers) else stop
        body = text[after:limit].rstrip("\n")
        spans.append(PageSpan(int(marker.group(1)), marker.group(2), after, after + len(body)))
    return tuple(spans)


def selection_pages(text: str) -> tuple[AttachmentPages, ...]:
    """Each attachment block of a selection's ``text`` with its pages, in the selection's own
    offsets (blocks without pages included, with none)."""
    headings = list(_ATTACHMENT_HEADING.finditer(text))
    found = []
    for index, heading in enumerate(headings):
        end = (
            headings[index + 1].start() - len(BLOCK_SEPARATOR)
            if index + 1 < len(headings)
            else len(text)
        )
        found.append(AttachmentPages(heading.group(1), page_map(text, heading.end(), end)))
    return tuple(found)
