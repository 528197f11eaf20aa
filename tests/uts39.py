"""The UTS #39 confusable skeleton, computed by ICU's spoof checker (libicu, a Debian package).

The suite's strict selection parser reads lines through it, and the generator of
bridge/knowledge/fold_tables.py takes its data from it: ICU is a maintained implementation of
UTS #39 whose data is Unicode's confusables.txt, so neither depends on a hand-made list of
look-alikes, and the parser does not share the bridge's folding code.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
import unicodedata
from dataclasses import dataclass

# UTF-16 code units per character at most, and the longest skeleton one character has in
# confusables.txt is a few characters: a small fixed buffer per call, grown on overflow.
_START_CAPACITY = 64
_U_BUFFER_OVERFLOW_ERROR = 15


@dataclass(frozen=True)
class Icu:
    """The two ICU libraries, their symbol suffix (ICU versions its C symbols: ``_72``) and
    an open spoof checker."""

    i18n: ctypes.CDLL
    common: ctypes.CDLL
    suffix: str
    checker: int

    def function(self, library: ctypes.CDLL, name: str) -> ctypes._NamedFuncPointer:
        return getattr(library, f"{name}_{self.suffix}")  # type: ignore[no-any-return]

    @property
    def version(self) -> str:
        """ICU's own version, e.g. ``72.1``."""
        return self._version_of("u_getVersion")

    @property
    def unicode_version(self) -> str:
        """The Unicode version of ICU's data, and so of the confusables it applies."""
        return self._version_of("u_getUnicodeVersion")

    def _version_of(self, name: str) -> str:
        parts = (ctypes.c_uint8 * 4)()
        self.function(self.common, name)(parts)
        fields = list(parts)
        while len(fields) > 2 and fields[-1] == 0:
            fields.pop()
        return ".".join(str(part) for part in fields)


@functools.cache
def icu() -> Icu:
    """Load ICU and open a spoof checker once per process; OSError when libicu is missing."""
    i18n_name = ctypes.util.find_library("icui18n")
    common_name = ctypes.util.find_library("icuuc")
    if i18n_name is None or common_name is None:
        raise OSError("libicu (Debian package libicu72) is not installed")
    found = re.search(r"\.so\.(\d+)", i18n_name)
    if found is None:
        raise OSError(f"cannot tell the ICU version of {i18n_name}")
    i18n, common = ctypes.CDLL(i18n_name), ctypes.CDLL(common_name)
    suffix = found.group(1)
    open_checker = getattr(i18n, f"uspoof_open_{suffix}")
    open_checker.restype = ctypes.c_void_p
    open_checker.argtypes = [ctypes.POINTER(ctypes.c_int)]
    status = ctypes.c_int(0)
    checker = open_checker(ctypes.byref(status))
    if status.value > 0 or not checker:
        raise OSError(f"uspoof_open failed with ICU error {status.value}")
    skeleton_function = getattr(i18n, f"uspoof_getSkeleton_{suffix}")
    skeleton_function.restype = ctypes.c_int32
    skeleton_function.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_char_p,
        ctypes.c_int32,
        ctypes.c_char_p,
        ctypes.c_int32,
        ctypes.POINTER(ctypes.c_int),
    ]
    return Icu(i18n, common, suffix, checker)


def skeleton(text: str) -> str:
    """UTS #39 ``skeleton(text)``: NFD, every character replaced by its confusables.txt
    prototype, NFD again. Text without surrogates only (ICU works on valid UTF-16)."""
    library = icu()
    function = library.function(library.i18n, "uspoof_getSkeleton")
    source = text.encode("utf-16-le")
    capacity = max(_START_CAPACITY, len(text) * 8)
    while True:
        target = ctypes.create_string_buffer(capacity * 2)
        status = ctypes.c_int(0)
        units = function(
            library.checker, 0, source, len(source) // 2, target, capacity, ctypes.byref(status)
        )
        if status.value == _U_BUFFER_OVERFLOW_ERROR:
            capacity = units
            continue
        if status.value > 0:
            raise ValueError(f"uspoof_getSkeleton failed with ICU error {status.value}")
        return target.raw[: units * 2].decode("utf-16-le")


# Characters that render as nothing or as a blank: a reader reads through them, so the judge
# does too. Hangul fillers and the braille blank are letters or symbols by category, which is
# why the disguises used them in place of a space.
FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_IGNORED_CATEGORIES = frozenset({"Mn", "Me", "Cf", "Cn", "Co", "Cs"})
_SMALL_CAPITAL = re.compile(r"LATIN LETTER SMALL CAPITAL ([A-Z])")


def ignored(char: str) -> bool:
    """True for a character a reader does not see: combining marks (variation selectors and the
    combining grapheme joiner among them), format characters (tag characters among them),
    unassigned, private-use and surrogate code points, control characters other than
    whitespace, and the fillers."""
    category = unicodedata.category(char)
    return (
        category in _IGNORED_CATEGORIES
        or (category == "Cc" and not char.isspace())
        or char in FILLERS
    )


def visible(text: str) -> str:
    """``text`` in compatibility decomposition, with every :func:`ignored` character gone."""
    return "".join(char for char in unicodedata.normalize("NFKD", text) if not ignored(char))


def is_letter(char: str) -> bool:
    """Whether ``char`` shows a letter (``ⓢ`` does: its compatibility form is ``s``)."""
    return any(unicodedata.category(part).startswith("L") for part in visible(char))


def _small_capitals(text: str) -> str:
    # UTS #39 keeps small capitals apart from the letters they are ("ꜱʏꜱᴛᴇᴍ" has the skeleton
    # "sysᴛᴇʍ"), though a reader reads them as those letters; their names say which.
    def letter(char: str) -> str:
        named = _SMALL_CAPITAL.fullmatch(unicodedata.name(char, ""))
        return named.group(1).lower() if named else char

    return "".join(letter(char) for char in text)


def fold(text: str) -> str:
    """What a reader takes ``text`` for: :func:`visible`, small capitals read as their
    letters, the UTS #39 skeleton, case folded, and :func:`visible` again (a skeleton or a
    case folding may bring back marks)."""
    shown = _small_capitals(visible(text))
    if not shown:
        return ""
    return visible(_small_capitals(skeleton(shown)).casefold())
