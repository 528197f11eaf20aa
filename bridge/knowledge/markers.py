"""Keeps an untrusted body from forging the structure of the text it is rendered into.

A body line that reads as a block heading or a role line gets one more ``>`` in front
(mboxrd-style, reversible), so an attachment cannot open a second block or speak as SYSTEM.
Folding and reverse: docs/spec-decisions.md, Foundation, "body lines that read as markers".
"""

from __future__ import annotations

import re
import unicodedata

#: What is put before a body line that reads as a marker: a quote mark, as in mail.
MARKER_ESCAPE = ">"

#: Words that open a block in the selections the bridges render (``ATTACHMENT [x]``,
#: ``DOCUMENT [x] (id: y)``, ``SOURCE [x]: y``).
BLOCK_HEADINGS = ("attachment", "document", "source")

#: Speaker names of the chat formats models are trained on; a line starting with one of them
#: and a colon reads as a turn, not as a quote from a file.
ROLE_NAMES = ("system", "developer", "user", "assistant", "human", "ai", "model", "tool")

_MARKER = re.compile(
    r"[\s>#*_\[<]*(?:"
    rf"(?:{'|'.join(BLOCK_HEADINGS)})\s*\["
    rf"|(?:{'|'.join(ROLE_NAMES)})\s*[:\]>]"
    r")"
)


def reads_as_marker(line: str) -> bool:
    """True when ``line`` could be taken for a block heading or a role line, escaped or not."""
    visible = "".join(ch for ch in line if unicodedata.category(ch) != "Cf")
    folded = unicodedata.normalize("NFKC", visible.lstrip(MARKER_ESCAPE)).casefold()
    return _MARKER.match(folded) is not None


def escape_markers(body: str) -> str:
    """``body`` with :data:`MARKER_ESCAPE` before every line that reads as a marker.

    Lines are split wherever :meth:`str.splitlines` splits (a reader or a model may break a
    line at U+2028 as readily as at ``\\n``), and the separators are kept as they were.
    """
    return "".join(
        MARKER_ESCAPE + line if reads_as_marker(line) else line
        for line in body.splitlines(keepends=True)
    )
