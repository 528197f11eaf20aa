"""The error codes a jailed child may answer with: the one table of them, as plain strings.

A leaf module: the child names its failures with these and never sees an exception class; each
class in ``sandbox/errors.py`` carries one of them. See docs/sandbox.md, "Outcomes".
"""

from __future__ import annotations

PARSER = "parser"
MEMORY = "memory"
NO_EXTRACTOR = "no_extractor"
CEILING = "ceiling"
UNREADABLE = "unreadable"
NEEDS_OCR = "needs_ocr"
NEEDS_SPLIT = "needs_split"
UNREADABLE_TEXT = "unreadable_text"

#: The codes an extractor may refuse a document with (``Refusal.code``); a refusal with any
#: other code is answered as ``PARSER``, so a typo cannot invent a verdict.
REFUSALS = frozenset({CEILING, UNREADABLE, NEEDS_OCR, NEEDS_SPLIT, UNREADABLE_TEXT})

#: Every code the parent accepts in an answer; anything else makes the answer malformed.
ALL = REFUSALS | {PARSER, MEMORY, NO_EXTRACTOR}
