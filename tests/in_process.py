"""Extractors called in this process, for tests and benches that check or time a parser
without a child: their document as words (what the parser read, without airlock's markers) or
rendered (what the parent makes of a child's answer)."""

from __future__ import annotations

from collections.abc import Callable

from sandbox.document import Document, words
from sandbox.extractors.registry import Extractor
from sandbox.limits import ParseLimits
from sandbox.render import render

InProcess = Callable[[str, bytes, ParseLimits], str]


def _document(extract: Extractor, media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    answer = extract(media_type, payload, limits)
    assert isinstance(answer, Document), f"the parser answered {type(answer).__name__}"
    return answer


def words_of(extract: Extractor) -> InProcess:
    """``extract``, answering its document's words: one line per block or table row."""
    return lambda media_type, payload, limits: words(
        _document(extract, media_type, payload, limits)
    )


def rendered_by(extract: Extractor) -> InProcess:
    """``extract``, answering its document as the sandbox's parent renders it."""
    return lambda media_type, payload, limits: render(
        _document(extract, media_type, payload, limits)
    )
