"""A PDF read in parts: split into pages, its scanned pages OCR'd apart, merged back in order.

One large scan takes minutes of tesseract on one core; split, its pages can be read by every
core or worker at once. Three internal kinds, all run in jailed children: ``pdf-split`` (the
text of each page, and each page that needs OCR as a one-page PDF), ``pdf-page`` (the OCR of
one such page, with tesseract's word counts for the quality check) and ``pdf-merge`` (the
pages in order, under the document's text budget and quality check). The merged text is the
text the single ``pdf`` job gives, byte for byte. This module holds their wire shapes and the
parent's strict reading of what the children answer. See docs/queue.md, "Fan-out OCR".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Protocol, TypeVar

import msgspec

from sandbox import enclosures, quality
from sandbox.document import PageLabel
from sandbox.errors import MalformedAnswer
from sandbox.limits import ParseLimits
from sandbox.quality import OcrReading

SPLIT_KIND = "pdf-split"
PAGE_KIND = "pdf-page"
MERGE_KIND = "pdf-merge"
#: The kinds that answer parts of a document (their JSON, as text) for the parent to put
#: together, not a document: the quality check judges the document once merged, never a part,
#: and a child answering any other kind with text is malformed. A container's unpacking
#: answers its files (sandbox/enclosures.py), each judged when it is read.
PARTS_KINDS = frozenset({SPLIT_KIND, PAGE_KIND, *enclosures.UNPACK_KINDS.values()})
PDF_MEDIA_TYPE = "application/pdf"
#: Split a scanned PDF of more pages than this. Below it the split's fixed cost (one child to
#: split, one to merge, a task per page) buys too little: docs/operations.md, "Fan-out OCR".
DEFAULT_FAN_OUT_PAGES = 8

#: The pixels a page task must carry on average for a split to pay: its fixed cost (a child, a
#: message and its Redis records, 22-30 ms of CPU: docs/operations.md, "Fan-out OCR") stays
#: about an eighth of the OCR of 2 MP (an A6 page at 300 dpi, ~0.2 s at the 0.1 s per megapixel
#: the corpus's scanned letter page takes). A document of tiny pages (20 of them in a few KB
#: made 20 page tasks) is read by one child instead: the page count alone no longer decides.
MIN_PIXELS_PER_PAGE_TASK = 2_000_000

#: The one-page PDFs of a split may hold this many times the document's bytes (plus a MiB):
#: pages that share one large resource each carry a copy of it, and a document built to
#: multiply that way is read in one job instead of split.
SPLIT_GROWTH = 2
_SPLIT_SLACK_BYTES = 1024 * 1024
#: A page is read once, by one tesseract run (a script detection is part of that run's reading).
_MAX_READINGS_PER_PAGE = 1
_MAX_LANGUAGE_CHARS = 200

_Language = Annotated[str, msgspec.Meta(max_length=_MAX_LANGUAGE_CHARS)]
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Confidence = Annotated[int, msgspec.Meta(ge=0, le=100)]


class TextPart(
    msgspec.Struct, tag="text", forbid_unknown_fields=True, frozen=True, omit_defaults=True
):
    """A page whose text layer is read as it is; ``notice`` says when PDFium read it, ``label``
    is the page's printed label. Fields left at their defaults are not written: a worker of
    the release before them reads the plan while both run (docs/queue.md, "Upgrades")."""

    text: str
    notice: str | None = None
    label: PageLabel | None = None


class ScanPart(
    msgspec.Struct, tag="scan", forbid_unknown_fields=True, frozen=True, omit_defaults=True
):
    """A page that needs OCR, as a one-page PDF; ``fallback`` is its text layer's text, kept
    when OCR reads nothing (a stamp such as "CONFIDENTIAL" on a scan)."""

    pdf: bytes
    fallback: str
    label: PageLabel | None = None


class ReadPart(msgspec.Struct, tag="read", forbid_unknown_fields=True, frozen=True):
    """A scanned page after OCR, as the merge takes it, with tesseract's mean confidence."""

    text: str
    fallback: str
    confidence: _Confidence | None
    label: PageLabel | None


class Reading(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One tesseract run's counts, as :class:`sandbox.quality.OcrReading` holds them."""

    language: _Language
    words: _Count
    confidence_sum: float
    letters: _Count
    foreign_letters: _Count | None
    detected_script: _Language | None

    def counted(self) -> OcrReading:
        return OcrReading(
            self.language,
            self.words,
            self.confidence_sum,
            self.letters,
            self.foreign_letters,
            self.detected_script,
        )


def reading_of(reading: OcrReading) -> Reading:
    return Reading(
        reading.language,
        reading.words,
        reading.confidence_sum,
        reading.letters,
        reading.foreign_letters,
        reading.detected_script,
    )


class Plan(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """What a split found: the page count, and each page's part (None: not split)."""

    pages: _Count
    parts: list[TextPart | ScanPart] | None

    @property
    def scans(self) -> list[tuple[int, ScanPart]]:
        """The pages to OCR with their index in the document, largest first: the longest jobs
        start while every worker is still free, so no big page started last holds the
        document up (the merge takes the pages by index, whatever order they were read in)."""
        scans = [
            (index, part)
            for index, part in enumerate(self.parts or ())
            if isinstance(part, ScanPart)
        ]
        return sorted(scans, key=lambda scan: len(scan[1].pdf), reverse=True)


class PageReading(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """What a page job answers: the OCR'd text of its page and the run's counts."""

    text: str
    readings: Annotated[list[Reading], msgspec.Meta(max_length=_MAX_READINGS_PER_PAGE)]


class Merge(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The merge job's payload: every page in order, and the OCR'd pages' readings in order."""

    parts: list[TextPart | ReadPart]
    readings: list[Reading]


def splits(page_count: int, limits: ParseLimits) -> bool:
    """Whether a document of ``page_count`` pages is read in parts under ``limits``."""
    return 0 < limits.fan_out_pages < page_count


def worth_splitting(scan_pixels: Sequence[int]) -> bool:
    """Whether pages to OCR that render to ``scan_pixels`` (one count per page) are worth a
    page task each: on average at least :data:`MIN_PIXELS_PER_PAGE_TASK`. An average, not a
    floor per page: the tasks' cost against the document's OCR is what must stay small, and a
    short page among full ones rides along."""
    return sum(scan_pixels) >= MIN_PIXELS_PER_PAGE_TASK * len(scan_pixels)


def split_allowance(payload_bytes: int) -> int:
    """The most bytes a split's one-page PDFs may add up to for a document of this size."""
    return SPLIT_GROWTH * payload_bytes + _SPLIT_SLACK_BYTES


def answer_allowance(kind: str, payload_bytes: int) -> int:
    """Answer bytes a job of ``kind`` may need beyond the usual cap: a split carries its pages
    (base64, a third larger), so its cap grows with the document; other kinds need none."""
    if kind != SPLIT_KIND:
        return 0
    return math.ceil(split_allowance(payload_bytes) * 4 / 3) + _SPLIT_SLACK_BYTES


def encode(value: msgspec.Struct) -> str:
    """A part's JSON as the child answers it (bytes travel as base64)."""
    return msgspec.json.encode(value).decode("utf-8")


_T = TypeVar("_T")


def _decode(untrusted_text: str, shape: type[_T], what: str) -> _T:
    try:
        return msgspec.json.decode(untrusted_text, type=shape)
    except msgspec.ValidationError as exc:
        raise MalformedAnswer(f"the {what} is malformed: {exc}") from None
    except msgspec.DecodeError as exc:
        raise MalformedAnswer(f"the {what} is not JSON: {exc}") from None


def read_plan(untrusted_text: str, max_pages: int) -> Plan:
    """A split child's answer, checked: its parts must be its pages, within the page ceiling."""
    plan = _decode(untrusted_text, Plan, "split's answer")
    if plan.pages > max_pages:
        raise MalformedAnswer(
            f"the split counts {plan.pages} pages, over the {max_pages}-page ceiling it was "
            "given (the ceiling is checked before any split)"
        )
    if plan.parts is not None and len(plan.parts) != plan.pages:
        raise MalformedAnswer(
            f"the split counts {plan.pages} pages but describes {len(plan.parts)}"
        )
    return plan


def read_page(untrusted_text: str) -> PageReading:
    """A page child's answer, checked."""
    return _decode(untrusted_text, PageReading, "page's answer")


def read_merge(payload: bytes) -> Merge:
    """The merge payload, as the merge child reads it."""
    return msgspec.json.decode(payload, type=Merge)


class Scanned(Protocol):
    """A page that was OCR'd, however the caller keeps it (with its PDF, or its claim check)."""

    @property
    def fallback(self) -> str: ...

    @property
    def label(self) -> str | None: ...


def merge_payload(parts: Sequence[TextPart | Scanned], read: Mapping[int, PageReading]) -> bytes:
    """The merge job's payload: the pages in order, each scan replaced by its reading.

    ``read`` holds one reading per scanned page, by page index; readings are taken in page
    order, the order the single job makes them in, so the quality check sees the same runs.
    """
    merged: list[TextPart | ReadPart] = []
    readings: list[Reading] = []
    for index, part in enumerate(parts):
        if isinstance(part, TextPart):
            merged.append(part)
            continue
        page = read[index]
        runs = page.readings
        confidence = quality.mean_confidence(runs[-1].counted()) if page.text and runs else None
        merged.append(ReadPart(page.text, part.fallback, confidence, part.label))
        readings.extend(page.readings)
    return msgspec.json.encode(Merge(merged, readings))
