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
_READERS = ("cp1252", "iso8859_2", "cp1250")
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
#: A text is called misdecoded when at least this share of its non-ASCII characters is undone.
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

#: Runs of non-ASCII characters judged in a candidate: a share, taken over this many, decides
#: as well as over all of a long text's, at a bounded cost.
_MAX_RUNS = 2000
_MARK = "mark"
#: A long text is judged on this many slices of this many characters, spread over it.
_SAMPLE_SLICES = 8
_SLICE_CHARS = 2500

UTF8 = "UTF-8"

_NON_ASCII = re.compile("[^\x00-\x7f]")
_NON_ASCII_RUN = re.compile("[^\x00-\x7f]+")
_HIGH_BYTES = re.compile(b"[\x80-\xff]+")


@dataclass(frozen=True)
class Misdecoding:
    """The share of a text's non-ASCII characters that is another encoding's text read through
    ``reader``: UTF-8's alone, or one of the legacy ``sources``. Several code pages can undo
    the same garbling (a run of Latin-1 letters is Cyrillic in cp1251 and Hebrew in cp1255)
    and which one it was takes knowing the language: each is named, the true one among them."""

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
    if "\x80" <= char <= "\xff":
        return ord(char)  # a byte the code page leaves undefined, read as Latin-1
    return None


def misdecoding(text: str, min_sample: int) -> Misdecoding | None:
    """The way ``text`` was misdecoded, or None when no reading undoes most of it; shares are
    taken over at least ``min_sample`` characters, so two odd characters decide nothing."""
    sample = _sample(text)
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
        undone = _undone(raw, non_ascii)
        if not undone:
            continue
        best = max(undone.values())
        share = best / whole
        if share >= MIN_SHARE and (found is None or share > found.share):
            sources = tuple(source for source, count in undone.items() if count == best)
            found = Misdecoding(sources, reader, share)
    return found


def _sample(text: str) -> str:
    """``text``, or of a long one :data:`_SAMPLE_SLICES` slices spread over it: a share taken
    over them decides as one taken over the whole text does, at a bounded cost (the check ran
    2.6 times as long as the rest of the quality check on 200,000 characters of French)."""
    if len(text) <= _SAMPLE_SLICES * _SLICE_CHARS:
        return text
    step = len(text) // _SAMPLE_SLICES
    return "\n".join(text[i * step : i * step + _SLICE_CHARS] for i in range(_SAMPLE_SLICES))


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


def _undone(raw: bytes, non_ascii: int) -> dict[str, int]:
    """The source encodings that turn back any of the ``non_ascii`` characters, with how many.

    UTF-8 first: its validity is the stronger evidence, and the legacy code pages are tried
    only on what it does not explain."""
    utf8 = _utf8_undone(raw)
    if utf8 >= non_ascii * MIN_SHARE:
        return {UTF8: utf8}
    legacy = {
        source: non_ascii
        for source in _LEGACY_SOURCES
        if _plausible(raw.decode(source, errors="replace"))
    }
    return legacy or ({UTF8: utf8} if utf8 else {})


def _utf8_undone(raw: bytes) -> int:
    """How many non-ASCII characters (one byte each, read back) form valid multi-byte UTF-8
    sequences."""
    undone = 0
    for run in _HIGH_BYTES.findall(raw):
        decoded = run.decode("utf-8", errors="replace")
        undone += sum(len(char.encode()) for char in decoded if char != "\ufffd")
    return undone


def _plausible(candidate: str) -> bool:
    """Whether ``candidate`` reads as writing: nearly nothing invalid, most of its non-ASCII
    characters letters outside Latin, and those standing in runs of their own script."""
    if candidate.count("\ufffd") > _MAX_INVALID * len(candidate):
        return False  # a quick bound first: the exact one is taken over the runs judged
    runs = _NON_ASCII_RUN.findall(candidate)[:_MAX_RUNS]
    non_ascii = sum(len(run) for run in runs)
    invalid = sum(run.count("\ufffd") for run in runs)
    if not non_ascii or invalid > _MAX_INVALID * non_ascii:
        return False
    foreign = worded = 0
    for run in runs:
        family = ""
        letters = latin = marks = 0
        mixed = False
        for char in run:
            kind = _family_of(char)
            if kind == _MARK:
                marks += 1
            elif kind == scripts.LATIN:
                latin += 1
            elif kind:
                letters += 1
                mixed = mixed or family not in (kind, "")
                family = kind
        foreign += letters
        if letters and not mixed and not latin and letters + marks > 1:
            worded += letters
    return foreign >= non_ascii * MIN_SHARE and worded >= foreign * _MIN_WORDED


@lru_cache(maxsize=16384)
def _family_of(char: str) -> str:
    """A letter's script family; :data:`_MARK` for a combining mark, "" for anything else."""
    if unicodedata.category(char).startswith("M"):
        return _MARK
    script = scripts.script_of(char)
    return "" if script is None else scripts.family(script)
