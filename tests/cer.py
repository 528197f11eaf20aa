"""Character error rate of extracted text against a corpus ground truth.

Normalisation follows the corpus's SOURCES.md ("How to score"), after airlock's own lines (page
markers, notices) are left out: Markdown markup is stripped
(heading marks, table pipes and rule rows, ``**``, HTML comments, backslash escapes), Unicode is
normalised (NFC; NFKC where SOURCES.md asks for it) and whitespace runs collapse to one space.
The distance is Levenshtein's, computed bit-parallel (Myers/Hyyrö) on Python integers: one pass
over the longer string with a few big-integer operations per character, so a 20k-character
document costs milliseconds instead of the 400M cells of the textbook table.
"""

from __future__ import annotations

import re
import unicodedata

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TABLE_RULE_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$", re.M)
_HEADING_MARK = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.M)
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|])")
# airlock's own lines: page markers and its notices (a page read by PDFium, the quality flag).
_AIRLOCK_LINE = re.compile(r'^(\[page \d+(, printed "[^"]*")?\]|\[airlock: .*\])$', re.M)


def normalise(text: str, form: str = "NFC") -> str:
    """Strip Markdown markup, apply Unicode normalisation ``form``, collapse whitespace."""
    text = _AIRLOCK_LINE.sub(" ", text)
    text = _HTML_COMMENT.sub(" ", text)
    text = _TABLE_RULE_ROW.sub(" ", text)
    text = _HEADING_MARK.sub("", text)
    text = _ESCAPE.sub(r"\1", text)
    text = text.replace("**", "").replace("|", " ")
    text = unicodedata.normalize(form, text)  # type: ignore[arg-type]  # callers name NFC or NFKC
    return " ".join(text.split())


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute; all cost 1) between ``a`` and ``b``."""
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return len(a)
    masks: dict[str, int] = {}
    for index, char in enumerate(b):
        masks[char] = masks.get(char, 0) | (1 << index)
    full = (1 << m) - 1
    top = 1 << (m - 1)
    vp, vn, score = full, 0, m
    for char in a:
        eq = masks.get(char, 0)
        xv = eq | vn
        xh = (((eq & vp) + vp) ^ vp) | eq
        hp = vn | (~(xh | vp) & full)
        hn = vp & xh
        if hp & top:
            score += 1
        elif hn & top:
            score -= 1
        hp = ((hp << 1) | 1) & full
        hn = (hn << 1) & full
        vp = hn | (~(xv | hp) & full)
        vn = hp & xv
    return score


def cer(expected: str, actual: str, form: str = "NFC") -> float:
    """Levenshtein distance over the normalised expected length (1.0 if nothing is expected)."""
    want, got = normalise(expected, form), normalise(actual, form)
    if not want:
        return 0.0 if not got else 1.0
    return levenshtein(want, got) / len(want)
