"""Which writing system a letter belongs to, and which ones a tesseract language reads.

For the text-quality check. See docs/sandbox.md, "Text quality" and "Notes by module".
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

LATIN = "Latin"
GREEK = "Greek"
CYRILLIC = "Cyrillic"
ARABIC = "Arabic"
HEBREW = "Hebrew"
DEVANAGARI = "Devanagari"
HANGUL = "Hangul"
HAN = "Han"
HIRAGANA = "Hiragana"
KATAKANA = "Katakana"
#: A script named by its letters' names (see :func:`script_of`).
THAI = "THAI"

# Unicode-name prefixes of each script's letters, compatibility forms included.
_NAME_PREFIXES: tuple[tuple[str, str], ...] = (
    ("LATIN ", LATIN),
    ("FULLWIDTH LATIN ", LATIN),
    ("GREEK ", GREEK),
    ("CYRILLIC ", CYRILLIC),
    ("ARABIC ", ARABIC),
    ("HEBREW ", HEBREW),
    ("DEVANAGARI ", DEVANAGARI),
    ("HANGUL ", HANGUL),
    ("HALFWIDTH HANGUL ", HANGUL),
    ("CJK UNIFIED IDEOGRAPH", HAN),
    ("CJK COMPATIBILITY IDEOGRAPH", HAN),
    ("IDEOGRAPHIC ", HAN),  # 〆 (closing mark), 〇 (number zero): written among kanji
    ("MASU ", HIRAGANA),  # 〼
    ("HENTAIGANA ", HIRAGANA),
    ("COPTIC ", GREEK),  # Coptic letters of the Greek block, written among Greek ones
    ("HIRAGANA ", HIRAGANA),
    ("KATAKANA ", KATAKANA),
    ("HALFWIDTH KATAKANA ", KATAKANA),
)

#: Letters that are signs: the micro sign and the ordinal indicators, then the Letterlike
#: Symbols (ℓ, Ω, K, Å, ℝ, ℏ) and the Mathematical Alphanumeric Symbols (𝑓, 𝒽, 𝔘, 𝕏).
_SIGN_LETTERS = frozenset("\u00b5\u00aa\u00ba")
_SIGN_BLOCKS = (("\u2100", "\u214f"), ("\U0001d400", "\U0001d7ff"))

_LATIN_LANGUAGES = (
    "afr cat ces cym dan deu eng est eus fin fra gle glg hrv hun ind isl ita lav lit msa nld "
    "nor pol por ron slk slv spa sqi swa swe tgl tur vie"
)
_JAPANESE = frozenset({HAN, HIRAGANA, KATAKANA})
#: The family of the scripts East Asian writing mixes inside its words (:func:`family`).
CJK = "CJK"
_CJK_SCRIPTS = frozenset({HAN, HIRAGANA, KATAKANA, HANGUL, "BOPOMOFO"})
#: Families written without spaces between words, so a word of another script touches them.
UNSPACED = frozenset({CJK, THAI, "LAO", "KHMER", "MYANMAR", "TIBETAN"})

#: The scripts documents in each tesseract language are written in, for the language packs an
#: image can install (Dockerfile OCR_LANGUAGES). A language not listed is not script-checked.
LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    **{name: frozenset({LATIN}) for name in _LATIN_LANGUAGES.split()},
    **{name: frozenset({CYRILLIC}) for name in ("rus", "ukr", "bel", "bul", "mkd", "srp")},
    "ell": frozenset({GREEK}),
    "ara": frozenset({ARABIC}),
    "fas": frozenset({ARABIC}),
    "urd": frozenset({ARABIC}),
    "heb": frozenset({HEBREW}),
    "hin": frozenset({DEVANAGARI}),
    "mar": frozenset({DEVANAGARI}),
    "nep": frozenset({DEVANAGARI}),
    "kor": frozenset({HANGUL, HAN}),
    "jpn": _JAPANESE,
    "jpn_vert": _JAPANESE,
    "chi_sim": frozenset({HAN}),
    "chi_sim_vert": frozenset({HAN}),
    "chi_tra": frozenset({HAN}),
    "chi_tra_vert": frozenset({HAN}),
    # tesseract's script models (sandbox.ocr_languages.SCRIPT_MODELS), as Debian names them.
    **{name: frozenset({HAN}) for name in ("HanS", "HanS_vert", "HanT", "HanT_vert")},
    "Japanese": _JAPANESE,
    "Japanese_vert": _JAPANESE,
    "Hangul": frozenset({HANGUL, HAN}),
    "Hangul_vert": frozenset({HANGUL, HAN}),
    "Latin": frozenset({LATIN}),
    "Cyrillic": frozenset({CYRILLIC}),
    "Greek": frozenset({GREEK}),
    "Arabic": frozenset({ARABIC}),
    "Hebrew": frozenset({HEBREW}),
    "Devanagari": frozenset({DEVANAGARI}),
    "Thai": frozenset({THAI}),
}

# The script names tesseract's orientation and script detection (--psm 0) prints, for the
# scripts above. It names a Korean or Japanese page by the language when it sees the mix.
_OSD_SCRIPTS = {
    "Latin": LATIN,
    "Fraktur": LATIN,
    "Greek": GREEK,
    "Cyrillic": CYRILLIC,
    "Arabic": ARABIC,
    "Hebrew": HEBREW,
    "Devanagari": DEVANAGARI,
    "Hangul": HANGUL,
    "Korean": HANGUL,
    "Han": HAN,
    "HanS": HAN,
    "HanT": HAN,
    "Japanese": HIRAGANA,
    "Hiragana": HIRAGANA,
    "Katakana": KATAKANA,
    "Thai": THAI,
}


@lru_cache(maxsize=65536)
def script_of(char: str) -> str | None:
    """The script of a letter, or None for any other character.

    Modifier letters (category Lm: the Japanese prolonged-sound mark, the Latin apostrophe-like
    letters) belong to no one script and are treated like punctuation; so are the letters that
    are signs (µ, Ω as the ohm, ℓ, ℝ, ª, º, the mathematical alphabets of 𝑓(𝑥)), which every
    script's units, maths and abbreviations use.

    A letter of a script not named here is its name's first word ("THAI", "ARMENIAN"): enough to
    tell scripts apart, which is all the checks need.
    """
    category = unicodedata.category(char)
    if not category.startswith("L") or category == "Lm" or _is_sign(char):
        return None
    name = unicodedata.name(char, "")
    for prefix, script in _NAME_PREFIXES:
        if name.startswith(prefix):
            return script
    return name.split(" ", 1)[0] or "UNNAMED"


def _is_sign(char: str) -> bool:
    return char in _SIGN_LETTERS or any(low <= char <= high for low, high in _SIGN_BLOCKS)


def family(script: str) -> str:
    """Japanese mixes Han and kana, Korean Hangul and Han, inside words: one family each."""
    return CJK if script in _CJK_SCRIPTS else script


def language_scripts(language: str) -> frozenset[str] | None:
    """The scripts of a tesseract language spec ("eng", "eng+hin"), or None when any part of it
    is a language this table does not know (its text is then not script-checked)."""
    scripts: set[str] = set()
    for name in language.split("+"):
        known = LANGUAGE_SCRIPTS.get(name)
        if known is None:
            return None
        scripts |= known
    return frozenset(scripts)


def made_for(language: str, script: str) -> bool:
    """Whether ``script`` is what ``language`` is made to read, not one it also reads: Han for
    a Chinese model, but kana for a Japanese one and Hangul for a Korean one (which read Han
    too), and any script of a single-script language."""
    known = language_scripts(language)
    if known is None or script not in known:
        return False
    return len(known) == 1 or script in (HIRAGANA, KATAKANA, HANGUL)


def osd_script(name: str) -> str | None:
    """The script tesseract's script detection names, or None for one no language here uses."""
    return _OSD_SCRIPTS.get(name)
