"""Repairs to a PDF page's text layer as pypdf reads it, and the measure of a broken one.

A PDF stores glyphs, not words: typesetters draw "fi" as one ligature glyph and break words at
line ends with a hyphen, and a font whose character map is missing or wrong yields characters
no script uses. A language model reading "eﬃcient" or "exam-\nple" sees tokens that are not
the word; one reading unassigned code points sees nothing at all and cannot tell.
"""

from __future__ import annotations

import re
import unicodedata

# The Latin and Armenian ligature presentation forms (U+FB00-FB06, U+FB13-FB17). NFKC maps each
# to the letters it joins and nothing else, so the repair loses nothing; NFKC on the whole text
# would also fold superscripts, fractions and full-width forms, which carry meaning.
_LIGATURES = re.compile("[\ufb00-\ufb06\ufb13-\ufb17]")
# A word broken at a line end: letters, a hyphen (or a soft hyphen), the line break, and the
# rest of the word in lower case on the next line, then the space or line end after it.
_BROKEN_WORD = re.compile(r"([^\W\d_]+)[-\u00ad]\n([^\W\d_]+)([ \t]+|(?=\n)|$)")
# Characters no script uses: unassigned code points, private use, surrogates, U+FFFD, and
# control characters other than the whitespace ones.
_UNMAPPED_CATEGORIES = frozenset({"Cn", "Co", "Cs"})
_REPLACEMENT = "\ufffd"


def repair(text: str) -> str:
    """Spell out ligatures and join words hyphenated at a line end."""
    text = _LIGATURES.sub(lambda match: unicodedata.normalize("NFKC", match.group()), text)
    return _BROKEN_WORD.sub(_join_broken_word, text)


def _join_broken_word(match: re.Match[str]) -> str:
    """Join ``exam-`` and ``ple`` into ``example`` and keep the line break after the word.

    Only when the continuation starts in lower case: ``Jean-\\nPierre`` or a hyphen before a
    capitalised line is more often a real hyphen than a break, and keeping a break costs less
    than merging two words.
    """
    head, tail, after = match.groups()
    if not tail[0].islower():
        return match.group()
    return head + tail + ("\n" if after else "")


def unmapped_share(text: str) -> float:
    """The share of non-space characters that are not text in any script (0.0 for no text)."""
    visible = [char for char in text if not char.isspace()]
    if not visible:
        return 0.0
    unmapped = sum(1 for char in visible if _unmapped(char))
    return unmapped / len(visible)


def _unmapped(char: str) -> bool:
    category = unicodedata.category(char)
    return char == _REPLACEMENT or category in _UNMAPPED_CATEGORIES or category == "Cc"
