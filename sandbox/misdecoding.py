"""Whether a text is another encoding's bytes read through a Windows or ISO code page.

The classic ways a program garbles text: UTF-8 read as cp1252 ("cafÃ©"), Shift-JIS read as
cp1252 ("ƒOƒŒƒbƒv" for グレップ), cp1251 read as cp1252 ("Ïðèâåò" for Привет). Every garbled
character is one the reading code page has, so the text is turned back into the bytes it was
read from and each encoding it could have been is tried on them; the text is misdecoded when
one of them turns most of its non-ASCII characters into plain writing. Real text turns into
nothing plausible: a French "café" read back as cp1251 is "cafй", a lone Cyrillic letter among
Latin ones. See docs/sandbox.md, "Text quality".
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from sandbox import scripts

#: The code pages a garbling program read the bytes through; each one's undefined bytes come out
#: as the Latin-1 character of the same value, as Windows' and browsers' conversions make them.
_READERS = ("cp1252", "latin-1", "iso8859_2", "cp1250")
#: The readers legacy encodings are tried through: the classic mistake is Western software
#: reading them; a Central European reader of Thai or Shift-JIS bytes is not one, and trying it
#: found Thai in Polish capitals.
_WESTERN_READERS = frozenset({"cp1252", "latin-1"})
#: The legacy encodings of one byte per character: their garbling is a word of the reader's
#: letters ("Ïðèâåò"), not of its symbols and digits ("×²×³" is maths, not Cyrillic), so at
#: least this share of a run's bytes must show as letters.
_SINGLE_BYTE = frozenset({"cp1251", "koi8_r", "cp1253", "cp1255", "cp1256", "tis_620"})
_MIN_LETTER_BYTES = 0.5
#: Letters a run that touches Latin letters must hold to count ("NESTLÉ®" read as TIS-620 is
#: "NESTL" and two Thai letters; French "Téléphone" read as GBK "T", two ideographs, "phone").
_MIN_TOUCHING_LETTERS = 4
#: What the bytes really were: UTF-8, and the legacy encodings of the scripts it would garble.
_LEGACY_SOURCES = (
    "shift_jis",
    "gbk",
    "big5",
    "euc_kr",
    "cp1251",
    "koi8_r",
    "cp1253",
    "cp1255",
    "cp1256",
    "tis_620",
)
#: A text is called misdecoded when more than this share of its non-ASCII characters is undone.
MIN_SHARE = 0.5
#: Garbled text is the reader's characters through and through: a text of which more than this
#: share of non-ASCII characters the reader has no byte for is real writing ("çé漢字").
_MAX_FOREIGN_TO_READER = 0.1
#: Of a candidate's letters outside Latin, the share that must stand in runs of two or more of
#: their script: a real text's letters do, while the lone Cyrillic or Han letter a real Latin
#: text's accented letter turns into stands among ASCII ones.
_MIN_WORDED = 0.8
#: Replacement characters a candidate may hold, as a share of its non-ASCII characters: real
#: multi-byte text read back decodes cleanly, a Latin text read as Shift-JIS or GBK does not.
_MAX_INVALID = 0.02

#: Characters of a candidate judged: a share taken over this many decides as well as one over
#: all of a long text's, at a bounded cost.
_MAX_RUN_CHARS = 20_000
_MARK = "mark"
_CONTROL = "control"
_NOT_LETTERS = frozenset({"", _MARK, _CONTROL})
#: Characters a reading back makes of real text, not of mojibake: the IPA and spacing modifier
#: letters two Latin capitals and a sign are as UTF-8 ("NESTLÉ®" has É® = ɮ, "CZĘŚĆ" ĘŚ = ʦ),
#: and half-width katakana (real Shift-JIS text writes full-width).
_NOT_WRITING = (("\u0250", "\u02ff"), ("\uff61", "\uff9f"))
#: A long text is judged on this many slices of this many characters, spread over it.
_SAMPLE_SLICES = 8
_SLICE_CHARS = 2500
_MIN_SLICE_CHARS = 200
#: The most characters one text's check reads: a document judged page by page shares it out.
SAMPLE_CHARS = _SAMPLE_SLICES * _SLICE_CHARS

UTF8 = "UTF-8"

_NON_ASCII = re.compile("[^\x00-\x7f]")
_RUN = re.compile("[^\x00-\x7f\ufffd]+")


@dataclass(frozen=True)
class Misdecoding:
    """The share of a text's non-ASCII characters that is another encoding's text read through
    ``reader``: UTF-8's alone, or one of the legacy ``sources``. Several code pages can undo
    the same garbling (a run of Latin-1 letters is Cyrillic in cp1251 and Hebrew in cp1255)
    and which one it was takes knowing the language: each that undoes enough is named, the
    one that undoes most first, the true one among them."""

    sources: tuple[str, ...]
    reader: str
    share: float


@lru_cache(maxsize=16384)
def _byte_of(char: str, reader: str) -> int | None:
    """The byte ``reader`` turned into ``char``, or None when it turns none into it."""
    try:
        encoded = char.encode(reader)
    except UnicodeEncodeError:
        encoded = b""
    if len(encoded) == 1:
        return encoded[0]
    if "\x80" <= char <= "\xff" and _undefined_in(ord(char), reader):
        return ord(char)  # a byte the code page leaves undefined, read as Latin-1
    return None


def _undefined_in(byte: int, reader: str) -> bool:
    try:
        bytes([byte]).decode(reader)
    except UnicodeDecodeError:
        return True
    return False


def misdecoding(text: str, min_sample: int, sample_chars: int = SAMPLE_CHARS) -> Misdecoding | None:
    """The way ``text`` was misdecoded, or None when no reading undoes most of it; shares are
    taken over at least ``min_sample`` characters, so two odd characters decide nothing, and
    over at most ``sample_chars`` of the text."""
    sample = _sample(text, sample_chars)
    counts = Counter(_NON_ASCII.findall(sample))
    non_ascii = sum(counts.values())
    if not non_ascii:
        return None
    whole = max(non_ascii, min_sample)
    found: Misdecoding | None = None
    for reader in _READERS:
        raw = _read_back(sample, reader, counts)
        if raw is None:
            continue
        undone = _undone(raw, non_ascii, reader)
        if not undone:
            continue
        best = max(undone.values())
        share = best / whole
        if share > MIN_SHARE and (found is None or share > found.share):
            ranked = sorted(undone.items(), key=lambda item: -item[1])
            sources = tuple(source for source, count in ranked if count / whole > MIN_SHARE)
            found = Misdecoding(sources, reader, share)
    return found


def _sample(text: str, sample_chars: int) -> str:
    """``text``, or of a long one up to :data:`_SAMPLE_SLICES` slices spread over it,
    ``sample_chars`` in all: a share taken over them decides as one taken over the whole text
    does, at a bounded cost (the check ran 2.6 times as long as the rest of the quality check
    on 200,000 characters of French)."""
    if len(text) <= sample_chars:
        return text
    # Fewer slices of a small sample, so that no slice is too short to hold a garbled word.
    slices = max(1, min(_SAMPLE_SLICES, sample_chars // _MIN_SLICE_CHARS))
    step, width = len(text) // slices, sample_chars // slices
    return "\n".join(text[i * step : i * step + width] for i in range(slices))


def _read_back(text: str, reader: str, counts: Counter[str]) -> bytes | None:
    """The bytes ``reader`` read ``text`` from, a character it has no byte for kept as a space
    (it parts words, as it parts the garbling); None when it is not the reader's text."""
    table: dict[int, str] = {}
    foreign = 0
    for char, count in counts.items():
        value = _byte_of(char, reader)
        if value is None:
            foreign += count
        table[ord(char)] = " " if value is None else chr(value)
    if foreign > _MAX_FOREIGN_TO_READER * sum(counts.values()):
        return None
    return text.translate(table).encode("latin-1", errors="replace")


def _undone(raw: bytes, non_ascii: int, reader: str) -> dict[str, int]:
    """The source encodings that turn back some of the ``non_ascii`` characters, with how many
    (as bytes read back, one per garbled character).

    UTF-8 first: its validity is the stronger evidence, and the legacy code pages are tried
    only on what it does not explain."""
    utf8 = _credible(raw.decode("utf-8", errors="replace"), "utf-8", any_letters=True)
    if utf8.undone >= non_ascii * MIN_SHARE or reader not in _WESTERN_READERS:
        return {UTF8: utf8.undone} if utf8.undone else {}
    legacy = {}
    for source in _LEGACY_SOURCES:
        candidate = raw.decode(source, errors="replace")
        if candidate.count("\ufffd") > _MAX_INVALID * non_ascii:
            continue  # a Latin text read as Shift-JIS or GBK: next to nothing is valid
        letters = _letter_bytes(reader) if source in _SINGLE_BYTE else None
        reading = _credible(candidate, source, any_letters=False, letter_bytes=letters)
        if reading.foreign and reading.worded >= reading.foreign * _MIN_WORDED:
            legacy[source] = reading.undone
    return legacy or ({UTF8: utf8.undone} if utf8.undone else {})


@dataclass(frozen=True)
class _Credibility:
    #: Bytes read back whose characters stand in credible runs.
    undone: int
    #: Letters outside Latin, and those of them in credible runs.
    foreign: int
    worded: int


def _credible(
    candidate: str, source: str, *, any_letters: bool, letter_bytes: frozenset[int] | None = None
) -> _Credibility:
    """How much of ``candidate`` (the bytes read back, decoded as ``source``) reads as writing.

    A run of non-ASCII characters holding letters outside Latin is credible when they are of
    one script, two or more different ones (:data:`_MIN_TOUCHING_LETTERS` when the run touches
    a Latin letter, which only a script written without spaces may), and, given
    ``letter_bytes``, read from bytes the reader mostly shows as letters. With ``any_letters``
    (UTF-8, whose validity is evidence itself) a run of Latin letters, punctuation or symbols
    is credible too. Not credible, so: a letter repeated (a row of em dashes read as GBK is one
    Han character over and over), a lone letter inside a Latin word (a real "informação" read
    as cp1251 is "informaзгo"), a run of combining marks, controls or :data:`_NOT_WRITING`.
    """
    undone = foreign = worded = 0
    for match in _RUN.finditer(candidate):
        run = match.group()
        kinds = [_family_of(char) for char in run]
        families = set(kinds)
        letters = [char for char, kind in zip(run, kinds, strict=True) if kind not in _NOT_LETTERS]
        others = families - _NOT_LETTERS - {scripts.LATIN}
        if others:
            foreign += len(letters)
            family = next(iter(others))
            beside_latin = _touches_latin(candidate, match.start(), match.end())
            least = _MIN_TOUCHING_LETTERS if beside_latin else 2
            ok = (
                len(others) == 1
                and scripts.LATIN not in families
                and len(set(letters)) >= least
                and (family in scripts.UNSPACED or not beside_latin)
                and (letter_bytes is None or _mostly_letters(run.encode(source), letter_bytes))
            )
            worded += len(letters) if ok else 0
        else:
            ok = any_letters and not families <= {_MARK, _CONTROL}
        if ok:
            undone += sum(_high_bytes(char, source) for char in run)
        if match.start() > _MAX_RUN_CHARS:
            break
    return _Credibility(undone, foreign, worded)


def _mostly_letters(run: bytes, letter_bytes: frozenset[int]) -> bool:
    """Whether at least :data:`_MIN_LETTER_BYTES` of ``run`` shows as the reader's letters (a
    word may hold one that shows as a sign: cp1251's "ч" is cp1252's "÷")."""
    return sum(byte in letter_bytes for byte in run) >= _MIN_LETTER_BYTES * len(run)


@lru_cache(maxsize=8)
def _letter_bytes(reader: str) -> frozenset[int]:
    """The high bytes ``reader`` shows as letters."""
    return frozenset(
        byte
        for byte in range(0x80, 0x100)
        if not _undefined_in(byte, reader) and bytes([byte]).decode(reader).isalpha()
    )


def _touches_latin(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    return (before.isascii() and before.isalpha()) or (after.isascii() and after.isalpha())


@lru_cache(maxsize=16384)
def _high_bytes(char: str, source: str) -> int:
    """How many bytes of ``char`` in ``source`` are high bytes: garbled characters it undoes."""
    return sum(byte >= 0x80 for byte in char.encode(source, errors="ignore"))


@lru_cache(maxsize=16384)
def _family_of(char: str) -> str:
    """A letter's script family; :data:`_MARK` for a combining mark, :data:`_CONTROL` for a
    control, format or half-width katakana character, "" for anything else."""
    category = unicodedata.category(char)
    if category.startswith("M"):
        return _MARK
    if category in ("Cc", "Cf") or any(low <= char <= high for low, high in _NOT_WRITING):
        return _CONTROL
    script = scripts.script_of(char)
    return "" if script is None else scripts.family(script)
