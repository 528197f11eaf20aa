"""Plain text: decoding bytes of unknown encoding, and the character budget every extractor uses.

Deterministic: a byte-order mark, then strict UTF-8, then charset_normalizer, Windows-1252
preferred where it fits as well; the declared charset is ignored. The declared media type picks
the reading: CSV and TSV as tables (delimited.py), a notebook's cells (notebook.py), code and
data files fenced in their language (code.py), anything else one paragraph. See docs/sandbox.md,
"Parsers" and "Notes by module".
"""

from __future__ import annotations

import codecs

from charset_normalizer import from_bytes

from sandbox import codes
from sandbox.document import Document, Paragraph
from sandbox.extractors import code, delimited, notebook
from sandbox.extractors.registry import Refusal, extractor
from sandbox.limits import ParseLimits

# UTF-32 before UTF-16: the UTF-32-LE mark begins with the UTF-16-LE one.
_BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

#: The code page read among those the detector finds equally likely.
_WESTERN = "cp1252"
#: How much messier than the detector's best a guess may be and still be weighed by how well
#: its letters fit a language.
_MESS_SLACK = 0.1

# Extraction stops once text runs this many times past max_text_chars. Not at 1x: the bridge
# measures text after normalising it (collapsing whitespace, dropping layout padding), which
# can shrink it, so refusing at 1x could refuse a document the bridge would accept. Past 4x the
# document is refused anyway, and stopping there bounds the work and the answer's size.
_CEILING_MARGIN = 4


def allowance(limits: ParseLimits) -> int:
    """The most characters an extractor may produce before the document is refused."""
    return limits.max_text_chars * _CEILING_MARGIN


class TextBudget:
    """Counts the characters an extractor produces and refuses the document once they run far
    past the text ceiling, so a page bomb or a table that repeats a merged cell a million
    times ends in a refusal instead of a string the size of the memory limit."""

    def __init__(self, limits: ParseLimits) -> None:
        self._ceiling = limits.max_text_chars
        self._allowance = allowance(limits)
        self._spent = 0

    def spend(self, text: str) -> str:
        """Count ``text`` against the budget and return it unchanged."""
        self.charge(len(text))
        return text

    @property
    def allowance(self) -> int:
        """The most characters the extractor may produce."""
        return self._allowance

    def charge(self, characters: int, where: str = "") -> int:
        """Count ``characters`` (output that is not text: an empty table cell) against the
        budget and return the count; ``where`` is said in the refusal, when given."""
        self._spent += characters
        if self._spent > self._allowance:
            raise self.exceeded(where)
        return characters

    def exceeded(self, where: str = "") -> Refusal:
        """The refusal of text over the allowance; ``where`` says where, when known."""
        return Refusal(
            codes.CEILING,
            f"more than {self._allowance} characters of text exceeds the "
            f"{self._ceiling}-character ceiling{where}",
        )


@extractor("text")
def extract_text(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    text = decode_text(payload)
    if "\x00" in text:
        # Text files never contain NUL; bytes full of them are binary that happens to be valid
        # UTF-8 (or a wrong guess), and handing them on would label noise as a document.
        raise Refusal(
            codes.UNREADABLE, "the payload decodes to NUL characters: it is binary, not text"
        )
    budget = TextBudget(limits)
    if delimited.is_delimited(media_type):
        return Document(delimited.table(media_type, text, budget))
    if media_type == notebook.MEDIA_TYPE:
        return Document(notebook.blocks(text, budget))
    if code.is_code(media_type):
        return Document(code.blocks(media_type, text, budget))
    return Document([Paragraph(budget.spend(text))])


def decode_text(payload: bytes) -> str:
    """Decode ``payload`` by byte-order mark, else as UTF-8, else by charset detection."""
    for mark, codec in _BYTE_ORDER_MARKS:
        if payload.startswith(mark):
            try:
                return payload.decode(codec)
            except UnicodeDecodeError as exc:
                raise Refusal(
                    codes.UNREADABLE, f"the payload starts with a {codec} byte-order mark but {exc}"
                ) from exc
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if b"\x00" in payload:
        # Without a byte-order mark only UTF-16/32 would hold NUL bytes, and a detector that
        # guesses those turns any binary (an executable, an image) into plausible "text".
        raise Refusal(
            codes.UNREADABLE, "the payload holds NUL bytes and no byte-order mark: binary"
        )
    matches = from_bytes(payload)
    best = matches.best()
    if best is None or best.encoding.startswith(("utf_16", "utf_32")):
        raise Refusal(
            codes.UNREADABLE, "the payload is not text in any encoding the detector trusts"
        )
    # The detector ranks by its mess score first, which a typographic apostrophe or a « » in
    # short French tips towards cp1257 ("reēu" for "reçu"), and short Western text fits
    # several code pages equally ("Café crème brûlée" in Latin-1 came out as "crčme brűlée").
    # Windows-1252 (what browsers read Latin-1 as, the most common) is read instead of the
    # best guess when it is about as clean and its letters fit a language better, or as well
    # when the best guess fits none (a tie is the detector's order, which put Farsi, cp1006,
    # first for "größte Straße"). The detector folds equivalent code pages into one guess:
    # cp1252 may be one that "could be" a guess named cp1250.
    western = next((m for m in matches if _WESTERN in m.could_be_from_charset), None)
    if western is None or western.chaos > best.chaos + _MESS_SLACK:
        return str(best)
    fits_better = western.coherence > best.coherence
    as_well_unknown = western.coherence == best.coherence and (
        best.language == "Unknown" or not best.coherence
    )
    return str(western if fits_better or as_well_unknown else best)
