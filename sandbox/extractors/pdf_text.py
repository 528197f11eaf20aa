"""Repairs to a PDF page's text layer as pypdf reads it, and the measure of a broken one.

Ligatures spelled out, line-end hyphens joined, unmapped glyphs counted.
See docs/sandbox.md, "Parsers" and "Notes by module".
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
# The hyphen is matched first, the letter before it looked behind at: anchoring on letters
# would retry the pattern inside every word.
_BROKEN_WORD = re.compile(r"(?<=[^\W\d_])[-\u00ad]\n([^\W\d_]+)([ \t]+|(?=\n)|$)")
# Characters no script uses: control characters other than the whitespace ones, surrogates,
# private use, U+FFFD; and (checked by category, outside ASCII only) unassigned code points.
_NOT_TEXT = re.compile(
    "[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff\ue000-\uf8ff\ufffd\U000f0000-\U0010ffff]"
)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


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
    tail, after = match.groups()
    if not tail[0].islower():
        return match.group()
    return tail + ("\n" if after else "")


def unmapped_share(text: str) -> float:
    """The share of non-space characters that are not text in any script (0.0 for no text).

    Counted with regular expressions, and by category only outside ASCII, because it runs on
    every page: a loop over every character cost 7% of a text page's extraction.
    """
    visible = len("".join(text.split()))
    if not visible:
        return 0.0
    unassigned = sum(1 for char in _NON_ASCII.findall(text) if unicodedata.category(char) == "Cn")
    return (len(_NOT_TEXT.findall(text)) + unassigned) / visible
