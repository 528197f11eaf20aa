"""Real text in many scripts, and the mojibake the classic decoding mistakes make of it.

The real texts are tests/data/real_text/ (SOURCES.md there says where each came from); each is
cut into samples of about a paragraph, as a short upload or one page would hold. The mistakes
are made with Python's own codecs, the way a program that guessed the wrong encoding makes
them, so every sample of mojibake has a real text it was made from. Used by the text-quality
tests and by bench/text_quality.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REAL_TEXT_DIR = Path(__file__).resolve().parent / "data" / "real_text"
#: About a short message or a page of prose.
SAMPLE_CHARS = 600


@dataclass(frozen=True)
class Sample:
    source: str
    text: str


def real_samples() -> Iterator[Sample]:
    """Every real text, cut at line ends into samples of about :data:`SAMPLE_CHARS`."""
    for path in sorted(REAL_TEXT_DIR.glob("*.txt")):
        lines = path.read_text(encoding="utf-8").split("\n")
        chunk: list[str] = []
        size = 0
        for line in lines:
            chunk.append(line)
            size += len(line) + 1
            if size >= SAMPLE_CHARS:
                yield Sample(path.stem, "\n".join(chunk).strip("\n"))
                chunk, size = [], 0
        if "".join(chunk).strip():
            yield Sample(path.stem, "\n".join(chunk).strip("\n"))


def read_as(encoded: bytes, codec: str) -> str:
    """``encoded`` read one byte at a time in ``codec``; a byte the codec leaves undefined is
    read as Latin-1, as browsers and Windows' own conversions do."""
    return "".join(_byte_as(byte, codec) for byte in encoded)


def _byte_as(byte: int, codec: str) -> str:
    raw = bytes([byte])
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _as_cids(text: str) -> str:
    """A CJK font's character ids read as code points, as a PDF reader does when the font has
    no ToUnicode map: each distinct character gets an id in the range CJK fonts use for their
    ideographs (Adobe-Japan1's kanji start near 600), in order of first use."""
    ids: dict[str, int] = {}
    out = []
    for char in text:
        if char.isspace() or char.isascii():
            out.append(char)
            continue
        cid = ids.setdefault(char, 0x0250 + (len(ids) * 37) % 0x1C00)
        out.append(chr(cid))
    return "".join(out)


@dataclass(frozen=True)
class Mistake:
    name: str
    #: The real texts (by source file stem) it applies to: those written in what it encodes.
    applies: Callable[[str], bool]
    make: Callable[[str], str]


def _encoded_then_read(encoding: str, reader: str) -> Callable[[str], str]:
    return lambda text: read_as(text.encode(encoding, errors="replace"), reader)


def _sources(*languages: str) -> Callable[[str], bool]:
    return lambda source: source.rsplit("-", 1)[-1] in languages


def _any_non_ascii(source: str) -> bool:
    return True


MISTAKES = (
    Mistake("UTF-8 read as cp1252", _any_non_ascii, _encoded_then_read("utf-8", "cp1252")),
    Mistake("UTF-8 read as Latin-1", _any_non_ascii, _encoded_then_read("utf-8", "latin-1")),
    Mistake("UTF-8 read as Latin-2", _any_non_ascii, _encoded_then_read("utf-8", "iso8859_2")),
    Mistake("UTF-8 read as cp1250", _any_non_ascii, _encoded_then_read("utf-8", "cp1250")),
    Mistake("Shift-JIS read as cp1252", _sources("ja"), _encoded_then_read("shift_jis", "cp1252")),
    Mistake("GBK read as cp1252", _sources("zh_CN"), _encoded_then_read("gbk", "cp1252")),
    Mistake("Big5 read as cp1252", _sources("zh_TW"), _encoded_then_read("big5", "cp1252")),
    Mistake("EUC-KR read as cp1252", _sources("ko"), _encoded_then_read("euc_kr", "cp1252")),
    Mistake(
        "cp1251 read as cp1252",
        _sources("ru", "uk", "bg", "sr"),
        _encoded_then_read("cp1251", "cp1252"),
    ),
    Mistake("KOI8-R read as cp1252", _sources("ru"), _encoded_then_read("koi8_r", "cp1252")),
    Mistake("cp1253 read as cp1252", _sources("el"), _encoded_then_read("cp1253", "cp1252")),
    Mistake("cp1255 read as cp1252", _sources("he"), _encoded_then_read("cp1255", "cp1252")),
    Mistake("cp1256 read as cp1252", _sources("ar", "fa"), _encoded_then_read("cp1256", "cp1252")),
    Mistake("TIS-620 read as cp1252", _sources("th"), _encoded_then_read("tis_620", "cp1252")),
    Mistake("CJK font without ToUnicode", _sources("ja", "zh_CN", "zh_TW", "ko"), _as_cids),
)


def mojibake_samples() -> Iterator[tuple[Mistake, Sample]]:
    """Each mistake made of each real sample it applies to, where it changes the text."""
    for sample in real_samples():
        for mistake in MISTAKES:
            if not mistake.applies(sample.source):
                continue
            garbled = mistake.make(sample.text)
            if garbled != sample.text:
                yield mistake, Sample(sample.source, garbled)
