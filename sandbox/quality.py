"""Whether extracted text is readable, judged in the child after every extractor.

Unreadable text is refused as ``unreadable_text``, or with ``admit_unreadable`` handed on
under a first line that says so (:data:`FLAG_PREFIX`); an unreadable page of a document of
pages is left out or flagged alone. See docs/sandbox.md, "Text quality".
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sandbox import codes, ocr_languages, scripts
from sandbox.document import Block, Document, Notice, OcrText, PageBreak, words
from sandbox.extractors.registry import Refusal
from sandbox.extractors.text import allowance
from sandbox.limits import ParseLimits
from sandbox.misdecoding import SAMPLE_CHARS, UTF8, Misdecoding, misdecoding

#: The first line of admitted unreadable text; the reasons follow, then "]".
FLAG_PREFIX = "[airlock: text quality low: "
#: What stands in place of a page left out as unreadable, after its page marker.
LEFT_OUT_PREFIX = "[airlock: this page is left out, its text quality is low: "
#: Fewer pages than this are judged as one text.
_MIN_PAGES = 2
#: The least of a page the misdecoding check reads, however many pages share its sample.
_MIN_PAGE_SAMPLE_CHARS = 400
#: A page's shares of broken characters and script changes are taken over at least this many
#: characters: five symbol-font bullets (private-use code points) on a short checklist page
#: must not leave it out. What the pages keep is judged together at :data:`_MIN_SAMPLE`, so
#: junk spread thin is still refused.
_MIN_PAGE_SAMPLE = 100
#: A page's OCR is judged alone from this many words: a signature or a stamp is left to the
#: judgment of what the pages keep.
_MIN_PAGE_WORDS = 20

# Shares are taken over at least this many characters (or letter pairs), so one broken glyph in
# a three-word text does not decide it; a text made only of broken characters still does.
_MIN_SAMPLE = 20
# Replacement, private-use, unassigned and surrogate code points among non-space characters.
# Corpus: at most 0.4% in text with real content; 11.6% in pypdf's reading of
# pdfminer_jo-japanese.pdf (the PDF extractor now reads that page with PDFium).
_MAX_BROKEN_SHARE = 0.10
# Letters side by side (nothing but combining marks between them) whose scripts are not
# written together (:data:`_WRITTEN_TOGETHER`); everywhere else a word changes script only at a
# space or a sign. Corpus: at most 0.7% (Korean and Arabic with Latin words);
# 29% in pypdf's reading of pdfminer_jo-japanese.pdf, whose glyphs map to twenty scripts.
_MAX_SCRIPT_CHANGE_SHARE = 0.15
# OCR'd letters outside every script of the OCR language.
_MAX_FOREIGN_SHARE = 0.5
# tesseract's mean word confidence (0-100). Corpus, read with the right language: 85 (Hindi,
# hin) to 96; with the wrong one: 22 to 56 (Hindi, Korean, Japanese, Arabic pages read with
# eng; English read with hin or kor).
_MIN_CONFIDENCE = 65

_BROKEN_CATEGORIES = frozenset({"Co", "Cn", "Cs"})
_REPLACEMENT = "\ufffd"
#: Pairs of scripts real writing puts side by side, besides any script beside one written
#: without spaces (CJK, Thai: "PythonでAPIを書く", a Korean lesson's "Я는 나"): Latin and
#: Greek in formulas ("Δt"); Latin inside Cyrillic words, as Ossetian writes æ, Chuvash ă ĕ ç,
#: Ukrainian typists i, and Russian slang "iPhoneы".
_WRITTEN_TOGETHER = (
    frozenset({scripts.LATIN, scripts.GREEK}),
    frozenset({scripts.LATIN, scripts.CYRILLIC}),
)


@dataclass(frozen=True)
class OcrReading:
    """What the quality check needs from one tesseract run: counts, not the text."""

    language: str
    words: int
    confidence_sum: float
    letters: int
    #: Letters outside every script of ``language``; None when its scripts are not known.
    foreign_letters: int | None
    #: The script tesseract's script detection saw, when it was asked.
    detected_script: str | None


_readings: list[OcrReading] = []


def start_job() -> None:
    """Forget the readings of anything run before this job (warm-up, an in-process caller)."""
    _readings.clear()


def readings() -> tuple[OcrReading, ...]:
    """This job's tesseract runs so far, for a page read apart from its document."""
    return tuple(_readings)


def last_confidence() -> int | None:
    """:func:`mean_confidence` of this job's latest tesseract run: what a page read by OCR
    says of itself."""
    return mean_confidence(_readings[-1]) if _readings else None


def mean_confidence(reading: OcrReading) -> int | None:
    """The run's mean word confidence, 0 to 100; None when it read no word. Counts a page job
    reported are taken as given, so a sum that is no finite number gives None, not an error."""
    mean = reading.confidence_sum / reading.words if reading.words else math.nan
    return min(100, max(0, round(mean))) if math.isfinite(mean) else None


def add_readings(earlier: Iterable[OcrReading]) -> None:
    """Count tesseract runs made in other children (a document's pages read apart) as this
    job's own, so the assembled document is judged on every page's reading."""
    _readings.extend(earlier)


def word_confidence(words: Sequence[tuple[float, str]]) -> float | None:
    """tesseract's mean word confidence over one image's words; None when it read none."""
    return sum(confidence for confidence, _ in words) / len(words) if words else None


def doubtful(words: Sequence[tuple[float, str]]) -> bool:
    """True when one image's words, each with its confidence, would fail the confidence check."""
    confidence = word_confidence(words)
    return confidence is not None and confidence < _MIN_CONFIDENCE


def record_ocr(
    language: str, words: Iterable[tuple[float, str]], detected_script: str | None = None
) -> None:
    """Note one tesseract run: the language it read with, each word with its confidence, and
    the script detection saw if it ran."""
    expected = scripts.language_scripts(language)
    count = letters = foreign = 0
    confidence = 0.0
    for word_confidence, word in words:
        count += 1
        confidence += word_confidence
        for char in word:
            script = scripts.script_of(char)
            if script is not None:
                letters += 1
                foreign += expected is not None and script not in expected
    _readings.append(
        OcrReading(
            language,
            count,
            confidence,
            letters,
            None if expected is None else foreign,
            detected_script,
        )
    )


def judged(document: Document, limits: ParseLimits) -> tuple[str | None, Document]:
    """The line that flags ``document`` as unreadable (None when it is readable), and the
    document as judged; an unreadable document is refused unless the job admits unreadable
    text, when the line is to stand first in the answer.

    A document of pages is judged page by page: a page whose text or OCR is unreadable is left
    out, its page marker kept and a notice saying why in its place (flagged instead, when the
    job admits unreadable text), so one junk scan or one page of a broken font no longer
    refuses the whole document. What is kept is then judged as one text, as a document without
    pages is: junk spread thin over many pages, each too little to judge alone, is refused as
    before. So is a document whose every page with text is unreadable, and one whose OCR'd
    letters as a whole are foreign to the OCR language.

    Only the first :func:`allowance` characters are judged (~0.2 s here at the default): no
    extractor produces more, and a parser that returns 100 MB must meet the output cap, not
    spend its CPU budget in this check.
    """
    pages = _pages(document.blocks)
    if len(pages) < _MIN_PAGES:
        problems = _text_problems(words(document)[: allowance(limits)])
        return _flag(problems + _ocr_problems(_readings), limits), document
    budget = allowance(limits)
    # The misdecoding check reads a sample of each page, the pages' samples together about one
    # text's: read whole, 50 pages of 4,000 characters cost 4.6 times the check of one text.
    sample_chars = max(_MIN_PAGE_SAMPLE_CHARS, SAMPLE_CHARS // len(pages))
    texts, tallies, verdicts = [], [], []
    for page in pages:
        text = words(Document(page.blocks))[:budget]
        budget -= len(text)
        tally = _tally(text)
        texts.append(text)
        tallies.append(tally)
        verdicts.append(
            _tally_problems(tally, _MIN_PAGE_SAMPLE)
            + _misread(text, _MIN_SAMPLE, sample_chars)
            + _confidence_of(page.blocks, _MIN_PAGE_WORDS)
        )
    kept = [index for index, verdict in enumerate(verdicts) if not verdict]
    kept_text = "\n".join(texts[index] for index in kept)
    whole = (
        _tally_problems(sum((tallies[index] for index in kept), _Tally()), _MIN_SAMPLE)
        + _misread(kept_text, _MIN_SAMPLE)
        + _foreign_problems(_readings)
        + _confidence_of([block for index in kept for block in pages[index].blocks], 0)
        + _unplaced_ocr_problems(document.blocks)
    )
    # A page of a few characters (a page number, a footer) cannot vouch for the document.
    substantial = [
        verdict
        for verdict, tally in zip(verdicts, tallies, strict=True)
        if tally.characters >= _MIN_SAMPLE
    ]
    if whole or all(substantial):
        problems = whole + [problem for verdict in verdicts for problem in verdict]
        return _flag(list(dict.fromkeys(problems)), limits), document
    blocks: list[Block] = []
    for page, verdict in zip(pages, verdicts, strict=True):
        blocks.append(page.start)
        reasons = "; ".join(verdict)
        if not verdict:
            blocks += page.blocks
        elif limits.admit_unreadable:
            blocks += [Notice(f"{FLAG_PREFIX}{reasons}]"), *page.blocks]
        else:
            blocks.append(Notice(f"{LEFT_OUT_PREFIX}{reasons}]"))
    return None, Document(blocks)


def _flag(problems: list[str], limits: ParseLimits) -> str | None:
    if not problems:
        return None
    reasons = "; ".join(problems)
    if not limits.admit_unreadable:
        raise Refusal(codes.UNREADABLE_TEXT, reasons)
    return f"{FLAG_PREFIX}{reasons}]"


@dataclass(frozen=True)
class _Page:
    #: The page's marker.
    start: PageBreak
    #: What follows it up to the next page.
    blocks: list[Block]


def _pages(blocks: list[Block]) -> list[_Page]:
    """The document's pages; empty when anything stands before its first page marker (a
    document not made of pages, or one whose opening lines belong to no page)."""
    if not blocks or not isinstance(blocks[0], PageBreak):
        return []
    pages: list[_Page] = []
    for block in blocks:
        if isinstance(block, PageBreak):
            pages.append(_Page(block, []))
        else:
            pages[-1].blocks.append(block)
    return pages


def _share(part: int, whole: int) -> float:
    return part / max(whole, _MIN_SAMPLE)


def _percent(share: float) -> str:
    return f"{round(share * 100)}%"


def _written_together(first: str, second: str) -> bool:
    """Whether letters of the two script families stand side by side in real writing."""
    pair = {first, second}
    return len(pair) == 1 or pair in _WRITTEN_TOGETHER or bool(pair & scripts.UNSPACED)


def _text_problems(text: str) -> list[str]:
    """The reasons ``text``, judged as one, is unreadable (bench/text_quality.py runs it)."""
    return _tally_problems(_tally(text), _MIN_SAMPLE) + _misread(text, _MIN_SAMPLE)


@dataclass(frozen=True)
class _Tally:
    """What the shares of a text are taken from; the tallies of pages add up to their text's."""

    characters: int = 0
    broken: int = 0
    pairs: int = 0
    changes: int = 0

    def __add__(self, other: _Tally) -> _Tally:
        return _Tally(
            self.characters + other.characters,
            self.broken + other.broken,
            self.pairs + other.pairs,
            self.changes + other.changes,
        )


def _tally(text: str) -> _Tally:
    characters = broken = pairs = changes = 0
    previous: str | None = None
    for char in text:
        if char.isspace():
            previous = None
            continue
        characters += 1
        category = unicodedata.category(char)
        if char == _REPLACEMENT or category in _BROKEN_CATEGORIES:
            broken += 1
        if category.startswith("M"):
            continue  # a combining mark belongs to the letter before it
        script = scripts.script_of(char)
        family = None if script is None else scripts.family(script)
        if family is not None and previous is not None:
            pairs += 1
            changes += not _written_together(family, previous)
        previous = family  # a sign or digit between two letters parts them
    return _Tally(characters, broken, pairs, changes)


def _tally_problems(tally: _Tally, floor: int) -> list[str]:
    """Shares taken over at least ``floor`` characters (or letter pairs)."""
    problems = []
    broken_share = tally.broken / max(tally.characters, floor)
    if broken_share > _MAX_BROKEN_SHARE:
        problems.append(
            f"{_percent(broken_share)} of characters are replacement, private-use or "
            "unassigned code points (glyphs without a usable text mapping)"
        )
    change_share = tally.changes / max(tally.pairs, floor)
    if change_share > _MAX_SCRIPT_CHANGE_SHARE:
        problems.append(
            f"the script changes between {_percent(change_share)} of adjacent letters "
            "(mojibake: glyphs mapped to the wrong characters)"
        )
    return problems


def _misread(text: str, floor: int, sample_chars: int = SAMPLE_CHARS) -> list[str]:
    misread = misdecoding(text, floor, sample_chars)
    return [] if misread is None else [_misdecoding_reason(misread)]


def _misdecoding_reason(misread: Misdecoding) -> str:
    share = _percent(misread.share)
    if misread.sources == (UTF8,):
        example = "'Ã©' for 'é'" if misread.reader == "cp1252" else "'Ă©' for 'é'"
        return (
            f"{share} of non-ASCII characters are UTF-8 read as {misread.reader} "
            f"(mojibake such as {example})"
        )
    return (
        f"{share} of non-ASCII characters are another encoding's text read as "
        f"{misread.reader} ({' or '.join(misread.sources)} undoes it)"
    )


def _ocr_problems(readings: list[OcrReading]) -> list[str]:
    confidence = _pooled_confidence(readings)
    if confidence is None:
        return []
    return _foreign_problems(readings) + _confidence_problems(confidence, readings)


def _pooled_confidence(readings: list[OcrReading]) -> float | None:
    """The mean word confidence of the runs, every word counted; None when they read none."""
    words = sum(reading.words for reading in readings)
    return sum(reading.confidence_sum for reading in readings) / words if words else None


def _foreign_problems(readings: list[OcrReading]) -> list[str]:
    checked = [reading for reading in readings if reading.foreign_letters is not None]
    foreign_share = _share(
        sum(reading.foreign_letters or 0 for reading in checked),
        sum(reading.letters for reading in checked),
    )
    if foreign_share <= _MAX_FOREIGN_SHARE:
        return []
    return [
        f"{_percent(foreign_share)} of OCR'd letters are not in any script of the "
        f"document's language ({_languages(readings)})"
    ]


def _unplaced_ocr_problems(blocks: list[Block]) -> list[str]:
    """The OCR runs judged as a whole when no page says what it read (no picture's confidence
    is in the document): a document read by OCR cannot pass for one that was not."""
    if any(isinstance(block, OcrText) and block.confidence is not None for block in blocks):
        return []
    confidence = _pooled_confidence(_readings)
    return [] if confidence is None else _confidence_problems(confidence, _readings)


def _confidence_of(blocks: list[Block], least_words: int) -> list[str]:
    """The OCR'd pictures among ``blocks`` judged by their word confidences, each picture's
    mean weighted by its words; nothing to judge under ``least_words`` words."""
    read = [
        (block.confidence, len(block.text.split()))
        for block in blocks
        if isinstance(block, OcrText) and block.confidence is not None
    ]
    count = sum(words for _, words in read)
    if not count or count < least_words:
        return []
    return _confidence_problems(sum(c * words for c, words in read) / count, _readings)


def _confidence_problems(confidence: float, readings: list[OcrReading]) -> list[str]:
    if confidence >= _MIN_CONFIDENCE:
        return []
    return [
        f"tesseract's mean word confidence is {confidence:.0f} of 100, under "
        f"{_MIN_CONFIDENCE}: the image is not text in the OCR language ({_languages(readings)})"
        + _unread_scripts(readings)
    ]


def _languages(readings: list[OcrReading]) -> str:
    return ", ".join(dict.fromkeys(reading.language for reading in readings))


def _unread_scripts(readings: list[OcrReading]) -> str:
    """Name the scripts detection saw that the language read with does not: the pack to add."""
    unread = set()
    for reading in readings:
        known = scripts.language_scripts(reading.language)
        if reading.detected_script is not None and known is not None:
            unread |= {reading.detected_script} - known
    if not unread:
        return ""
    packages = sorted({package for s in unread if (package := ocr_languages.script_package(s))})
    install = f" (its model: apt-get install {' '.join(packages)})" if packages else ""
    return f"; tesseract's script detection sees {', '.join(sorted(unread))}{install}"
