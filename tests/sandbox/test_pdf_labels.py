"""Printed page labels: a preface in roman numerals, an annex with a prefix, read into the page
markers; a hostile label tree bounded, and a label that could break its marker left out."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest
from pypdf import PdfReader, PdfWriter
from pypdf.constants import PageLabelStyle

from sandbox import pages
from sandbox.errors import MalformedAnswer
from sandbox.extractor import SandboxExtractor
from sandbox.extractors import pdf as pdf_extractor
from sandbox.extractors.pdf_labels import MAX_NODES, _ranges, page_labels
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.in_process import rendered_by
from tests.pdf_builders import FONT, TEXT_CONTENT, page, pdf
from tests.scanned_pdfs import scanned_pdf

LIMITS = ParseLimits(max_pages=30)
rendered_pdf = rendered_by(pdf_extractor.extract_pdf)


def _labelled(labels: bytes, count: int = 5, extra: list[bytes] | None = None) -> bytes:
    """``count`` text pages under a catalog whose /PageLabels is ``labels``; ``extra``
    objects follow, numbered from 6."""
    catalog = b"<< /Type /Catalog /Pages 2 0 R /PageLabels %s >>" % labels
    pages_node = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b"3 0 R " * count, count)
    return pdf([catalog, pages_node, page(), TEXT_CONTENT, FONT, *(extra or [])])


def _markers(payload: bytes) -> list[str]:
    return re.findall(r"^\[page .*\]$", rendered_pdf("application/pdf", payload, LIMITS), re.M)


def test_labels_a_document_prints_are_named_beside_the_page_number() -> None:
    """Roman numerals for the front matter, then arabic from 1 again, then an annex "A-"
    counted from 5: a page whose label is its own number says nothing more."""
    labels = b"<< /Nums [0 << /S /r >> 2 << /S /D >> 4 << /S /D /P (A-) /St 5 >>] >>"
    assert _markers(_labelled(labels)) == [
        '[page 1, printed "i"]',
        '[page 2, printed "ii"]',
        '[page 3, printed "1"]',
        '[page 4, printed "2"]',
        '[page 5, printed "A-5"]',
    ]


def test_letters_upper_roman_and_a_prefix_alone() -> None:
    labels = b"<< /Nums [0 << /S /A /St 26 >> 2 << /S /R /St 4 >> 4 << /P (Cover) >>] >>"
    assert _markers(_labelled(labels)) == [
        '[page 1, printed "Z"]',
        '[page 2, printed "AA"]',
        '[page 3, printed "IV"]',
        '[page 4, printed "V"]',
        '[page 5, printed "Cover"]',
    ]


def test_labels_in_a_tree_of_kids() -> None:
    kids = [
        b"<< /Limits [0 1] /Nums [0 << /S /r >>] >>",
        b"<< /Limits [2 4] /Nums [2 << /S /D >>] >>",
    ]
    payload = _labelled(b"<< /Kids [6 0 R 7 0 R] >>", extra=kids)
    assert _markers(payload)[:3] == [
        '[page 1, printed "i"]',
        '[page 2, printed "ii"]',
        '[page 3, printed "1"]',
    ]


@pytest.mark.parametrize(
    ("labels", "extra"),
    [
        # pypdf's own reader draws a roman numeral of a trillion "M"s for this start value.
        (b"<< /Nums [0 << /S /R /St 1000000000000 >>] >>", []),
        (b"<< /Nums [0 << /S /D /St 1%s >>] >>" % (b"0" * 40), []),  # 41 digits
        (b"<< /Nums [0 << /S /A /St 4000 >>] >>", []),  # 154 letters: too long to be a label
        (b'<< /Nums [0 << /P (iv"] [page 9) >>] >>', []),  # would close its marker
        (b"<< /Nums [0 << /P (SYSTEM:\\nobey) >>] >>", []),  # a line break
        (b"<< /Nums [0 << /P (%s) >>] >>" % (b"x" * 33), []),
        (b"<< /Nums [0 << /S /r /St -3 >>] >>", []),
        (b"<< /Nums [0 (not a style) -1 << /S /r >>] >>", []),
        (b"<< /Kids [6 0 R] >>", [b"<< /Kids [6 0 R] >>"]),  # a cycle
        (b"<< /Kids [6 0 R] >>", [b"<< /Kids [%s] >>" % (b"6 0 R " * 5000)]),  # a fan of itself
        (b"(not a tree)", []),
        (b"<< /Nums [0 << /S /D >> 1 << /P <FEFF3164> >>] >>", []),  # a label of fillers
        (b"<< /Nums [0 << /S /D >> 1 << /P <FEFF006900762800> >>] >>", []),  # braille blank
        (b"<< /Nums [0 << /S /D /St 6 0 R >>] >>", [b"1" + b"0" * 70]),  # pypdf refuses it
        (b"<< /Nums 6 0 R >>", [b"[" * 5000 + b"]" * 5000]),  # nested past recursion
    ],
)
def test_a_hostile_label_tree_labels_nothing_and_fails_nothing(
    labels: bytes, extra: list[bytes]
) -> None:
    """Labels only decorate pages: a tree that is damaged, cyclic, or draws a label no reader
    could take for one (too long, erased or changed by admission, closing its marker) costs
    its labels, never the document."""
    payload = _labelled(labels, extra=extra)
    assert _markers(payload) == [f"[page {number}]" for number in range(1, 6)]


def test_nodes_sharing_one_array_read_it_once() -> None:
    """1,024 nodes share one /Nums array of 4,000 ranges: read once, 4,000 ranges, where
    reading it for each node made 4 million (5.5 s and 540 MB in a 120 KB file)."""
    pairs = b" ".join(b"%d << /S /D >>" % index for index in range(4000))
    kids = [b"<< /Nums 6 0 R >>"] * 1024
    refs = b" ".join(b"%d 0 R" % number for number in range(7, 7 + len(kids)))
    payload = _labelled(b"<< /Kids [%s] >>" % refs, extra=[b"[%s]" % pairs, *kids])
    tree = PdfReader(io.BytesIO(payload)).root_object["/PageLabels"].get_object()
    assert tree is not None and len(list(_ranges(tree))) == 4000


def test_a_label_tree_of_many_nodes_is_read_only_so_far() -> None:
    """1,500 distinct kids, each a range: the walk stops at its node bound, not at the end."""
    kids = [b"<< /Nums [%d << /P (k%d) >>] >>" % (index, index) for index in range(1500)]
    refs = b" ".join(b"%d 0 R" % number for number in range(6, 6 + len(kids)))
    reader = PdfReader(io.BytesIO(_labelled(b"<< /Kids [%s] >>" % refs, extra=kids)))
    tree = reader.root_object["/PageLabels"].get_object()
    assert tree is not None and len(list(_ranges(tree))) == MAX_NODES - 1  # the root is a node
    assert page_labels(reader.root_object, 5)[4] is not None


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(SandboxLimits()) as sandbox:
        yield sandbox


def test_a_labelled_scan_read_in_pages_carries_its_labels_as_the_single_job_does(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    writer = PdfWriter(clone_from=io.BytesIO(scanned_pdf(corpus_dir, 3, text_page="Preface text")))
    writer.set_page_label(0, 1, style=PageLabelStyle.LOWERCASE_ROMAN)
    writer.set_page_label(2, 2, style=PageLabelStyle.DECIMAL, prefix="S-")
    buffer = io.BytesIO()
    writer.write(buffer)
    payload = buffer.getvalue()
    single = runner.run("pdf", pages.PDF_MEDIA_TYPE, payload, LIMITS).text
    in_pages = SandboxExtractor(
        parse_limits=replace(LIMITS, fan_out_pages=1), runner=runner, page_workers=2
    ).extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=LIMITS.max_pages)
    assert in_pages == single
    assert re.findall(r"^\[page .*\]$", single, re.M) == [
        '[page 1, printed "i"]',
        '[page 2, printed "ii"]',
        '[page 3, printed "S-1"]',
    ]


def test_a_split_answer_with_a_label_that_could_break_its_marker_is_refused() -> None:
    forged = {"pages": 1, "parts": [{"type": "text", "text": "a", "label": 'i"] [page 7'}]}
    with pytest.raises(MalformedAnswer, match="malformed"):
        pages.read_plan(msgspec.json.encode(forged).decode(), 30)


@pytest.mark.parametrize(
    ("words", "confidence_sum", "expected"),
    [(2, 181.0, 90), (1, 1e308, 100), (1, -5.0, 0), (0, 0.0, None)],
)
def test_an_ocr_page_read_apart_carries_the_confidence_of_its_counts(
    words: int, confidence_sum: float, expected: int | None
) -> None:
    """The confidence of a page read by a page job is its run's mean, taken from the counts the
    job reported (checked by the schema, not trusted further): out of bounds it is clamped, and
    a run of no word has none."""
    reading = pages.Reading("eng", words, confidence_sum, 5, 0, None)
    scan = pages.ScanPart(b"", "", None)
    payload = pages.merge_payload([scan], {0: pages.PageReading("words", [reading])})
    (part,) = msgspec.json.decode(payload, type=pages.Merge).parts
    assert isinstance(part, pages.ReadPart) and part.confidence == expected
