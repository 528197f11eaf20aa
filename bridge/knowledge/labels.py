"""Untrusted names become display labels, never identifiers.

Everything that could end a delimiter early (``ATTACHMENT [label]``, ``SOURCE [name]:``),
start a new line or name a path is taken out here, once, for every caller
(docs/spec-decisions.md, Foundation (labels, contracts, attachments)).
"""

from __future__ import annotations

import re
import unicodedata

#: What a label becomes when nothing usable is left of it. An empty label would tempt a caller
#: to fall back to the raw name, which is the very string this module exists to keep out.
FALLBACK_LABEL = "attachment"

#: Long enough for any real filename (most filesystems stop at 255 bytes), short enough that a
#: label cannot smuggle a paragraph of instructions into the prompt's delimiter line.
MAX_LABEL_CHARS = 128

#: A source name is read by people ("Employee Handbook 2024"), so it gets more room than a
#: filename, but still one short line.
MAX_SOURCE_CHARS = 200

# Categories removed from every name: C0/C1 controls (Cc), invisible formatting such as bidi
# overrides and zero-width characters (Cf: U+202E makes "fdp.exe" display as "exe.pdf"), and the
# Unicode line and paragraph separators (Zl, Zp) that split a delimiter line as \n does.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})

# A label keeps letters, marks and digits of any script plus a few filename punctuation marks;
# anything else (brackets, quotes, colons, separators) becomes "_" so the label cannot close
# the ``[...]`` around it or read as markup.
_LABEL_PUNCTUATION = frozenset(" .,_+=@#&~-")
_LABEL_CATEGORY_PREFIXES = ("L", "M", "N")

# Every bracket-like character a reader (or a model) might take for a delimiter, ASCII and not.
_SOURCE_DISALLOWED = re.compile(
    "[\\[\\](){}<>"
    "\u2039\u203a\u00ab\u00bb"  # ‹ › « »
    "\u2045\u2046\u2329\u232a"  # ⁅ ⁆ 〈 〉
    "\u27e6-\u27ef\u2983-\u2998\u29fc\u29fd"  # mathematical brackets
    "\u3008-\u3011\u3014-\u301b"  # CJK angle, corner, lenticular, tortoise-shell brackets
    "\ufe59-\ufe5e\uff08\uff09\uff3b\uff3d\uff5b\uff5d\uff5f\uff60\uff62\uff63\uff1c\uff1e"
    "]"
)

_WHITESPACE_RUN = re.compile(r"\s+")


def strip_invisible(raw: str) -> str:
    """Remove control, formatting and line-separator characters from an untrusted name."""
    return "".join(ch for ch in raw if unicodedata.category(ch) not in _INVISIBLE_CATEGORIES)


def _label_char(ch: str) -> str:
    if ch in _LABEL_PUNCTUATION or unicodedata.category(ch).startswith(_LABEL_CATEGORY_PREFIXES):
        return ch
    return "_"


def safe_label(raw: str) -> str:
    """Turn an uploaded filename into an opaque label safe to show in a delimiter.

    The path is dropped, not escaped, and on both separators: a POSIX host must still refuse
    ``..\\..\\boot.ini``. Whatever reduces to nothing, ``.`` or ``..`` becomes
    :data:`FALLBACK_LABEL` so no caller is ever handed an empty label to "fix" with the original.
    """
    cleaned = strip_invisible(raw)
    basename = cleaned.replace("\\", "/").rpartition("/")[2].strip()
    if basename in ("", ".", ".."):
        return FALLBACK_LABEL
    label = "".join(_label_char(ch) for ch in basename)[:MAX_LABEL_CHARS].strip()
    if label in ("", ".", ".."):
        return FALLBACK_LABEL
    return label


def safe_source(raw: str) -> str:
    """Turn a citation source name into text that cannot end or forge ``SOURCE [x]:``.

    Spaces stay because people read source names; brackets of every script go, because a name
    containing ``]`` decides where the delimiter around it ends. May return ``""``: callers
    that number sources skip empty names rather than cite nothing.
    """
    # Whitespace first, so "Employee\nHandbook" stays two words instead of being welded.
    spaced = _WHITESPACE_RUN.sub(" ", raw)
    cleaned = _SOURCE_DISALLOWED.sub("", strip_invisible(spaced))
    return _WHITESPACE_RUN.sub(" ", cleaned).strip()[:MAX_SOURCE_CHARS].strip()
