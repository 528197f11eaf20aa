"""A PDF read in parts (sandbox/pages.py): split, pages OCR'd in several children, merged.

Every document goes through the real sandbox: the split, page and merge children, pypdf,
PDFium and tesseract. The single ``pdf`` job on the same runner is the reference, byte for
byte and error for error.
"""

from __future__ import annotations

import io
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest
from PIL import Image, ImageDraw, ImageFont
from pypdf import PdfReader, PdfWriter

from sandbox import pages
from sandbox.errors import (
    CeilingExceeded,
    CpuLimitExceeded,
    MalformedAnswer,
    SplitRequired,
    UnreadableInput,
)
from sandbox.extractor import SandboxExtractor
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import ExtractionResult, SandboxRunner
from tests.pdf_builders import (
    JBIG2_DATA,
    joined,
    pdf,
    pdf_of_tiny_scans,
    pdf_with_image,
    pdf_with_jpx_image,
    stream,
)
from tests.scanned_pdfs import scanned_pdf

LIMITS = ParseLimits(max_pages=30, max_text_chars=200_000)


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(SandboxLimits()) as sandbox:
        yield sandbox


def _in_pages(
    runner: SandboxRunner,
    limits: ParseLimits = LIMITS,
    on_progress: Callable[[int, int], None] | None = None,
) -> SandboxExtractor:
    return SandboxExtractor(
        parse_limits=replace(limits, fan_out_pages=1),
        runner=runner,
        on_progress=on_progress,
        page_workers=2,
    )


def _single(runner: SandboxRunner, payload: bytes, limits: ParseLimits = LIMITS) -> str:
    return runner.run("pdf", pages.PDF_MEDIA_TYPE, payload, limits).text


def _plan(runner: SandboxRunner, payload: bytes, fan_out_pages: int = 1) -> pages.Plan:
    limits = ParseLimits(max_pages=LIMITS.max_pages, ocr=False, fan_out_pages=fan_out_pages)
    answer = runner.run(
        pages.SPLIT_KIND,
        pages.PDF_MEDIA_TYPE,
        payload,
        limits,
        output_bytes=pages.answer_allowance(pages.SPLIT_KIND, len(payload)),
    )
    return pages.read_plan(answer.text, LIMITS.max_pages)


@pytest.mark.parametrize("text_page", [None, "A page with a text layer of its own"])
def test_a_scan_read_in_pages_is_the_single_jobs_text_byte_for_byte(
    runner: SandboxRunner, corpus_dir: Path, text_page: str | None
) -> None:
    payload = scanned_pdf(corpus_dir, 5, text_page=text_page)
    plan = _plan(runner, payload)
    assert plan.pages == 5 and len(plan.scans) == (4 if text_page else 5)
    heard: list[tuple[int, int]] = []
    text = _in_pages(runner, on_progress=lambda done, total: heard.append((done, total))).extract(
        "pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=LIMITS.max_pages
    )
    assert text == _single(runner, payload)
    assert "Docling bundles PDF document conversion" in text
    assert [done for done, _ in heard] == sorted({done for done, _ in heard})
    assert heard[-1] == (5, 5)


def test_a_document_within_the_threshold_is_not_split(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    assert _plan(runner, scanned_pdf(corpus_dir, 3), fan_out_pages=3).parts is None
    assert _plan(runner, scanned_pdf(corpus_dir, 4), fan_out_pages=3).parts is not None


def test_the_page_ceiling_refuses_the_whole_document_before_any_split(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    payload = scanned_pdf(corpus_dir, 4)
    with pytest.raises(CeilingExceeded, match="4 pages exceeds the 3-page ceiling"):
        _in_pages(runner).extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=3)


def _shared_image_pages(count: int) -> bytes:
    """``count`` pages drawing one shared 1.5 MB image (light noise: no ink, nothing to OCR)."""
    noise = Image.effect_noise((1400, 1400), 40).point(lambda value: min(255, value + 150))
    buffer = io.BytesIO()
    noise.convert("L").save(buffer, format="PDF", resolution=150.0)
    one = PdfReader(io.BytesIO(buffer.getvalue()))
    writer = PdfWriter()
    for _ in range(count):
        writer.add_page(one.pages[0])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_pages_sharing_one_large_resource_are_not_multiplied_by_a_split(
    runner: SandboxRunner,
) -> None:
    """Each one-page PDF would carry its own copy of the shared image: ten copies of a
    document's bulk. The split declines, and the single job reads the document."""
    payload = _shared_image_pages(10)
    assert len(payload) < 3 * 1024 * 1024  # the image is stored once
    assert _plan(runner, payload).parts is None
    text = _in_pages(runner).extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=30)
    assert text == _single(runner, payload)


def test_a_document_of_tiny_pages_is_read_by_one_child_not_split(runner: SandboxRunner) -> None:
    """Issue 20: a few KB of 20 tiny pages (200 points square, 0.69 MP each to read) made 20
    page tasks, each costing about what its OCR does. The split declines, one child reads the
    document whole, as the single job does; the same pages at letter width are split: the
    pixels to read decide, not the page count the file chooses."""
    tiny = pdf_of_tiny_scans(20)
    assert _plan(runner, tiny, fan_out_pages=8).parts is None
    assert len(_plan(runner, pdf_of_tiny_scans(20, side=612), fan_out_pages=8).scans) == 20
    extractor, watched = _watched_extractor(runner)
    text = extractor.extract("pdf", pages.PDF_MEDIA_TYPE, tiny, max_pages=30)
    assert watched.kinds == ["pdf", pages.SPLIT_KIND, "pdf"]
    assert text == _single(runner, tiny) and text.count("PAGE") == 20


def test_a_scan_over_one_childs_budget_is_read_in_pages_by_one_page_worker(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """Issue 19: a 60-page scan was answered through the queue, whose page tasks have a budget
    each, and failed ``MemoryLimitExceeded`` in the embedded path's one child. Here a 10-page
    scan under a 3 CPU-second budget (about 6 CPU-seconds of OCR, none of its pages over one):
    one child for the whole document is killed at the budget; the extractor with its default
    settings and one page worker reads it in pages, to the text one child gives it under a
    budget the whole fits."""
    payload = scanned_pdf(corpus_dir, 10)
    with SandboxRunner(SandboxLimits(cpu_seconds=3)) as tight:
        with pytest.raises(CpuLimitExceeded):
            _single(tight, payload)
        text = SandboxExtractor(runner=tight).extract(
            "pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=LIMITS.max_pages
        )
    assert text == _single(runner, payload)


def _jpx_page_between_scans(corpus_dir: Path) -> bytes:
    return joined(scanned_pdf(corpus_dir, 1), pdf_with_jpx_image(), scanned_pdf(corpus_dir, 1))


def _small_jpx_page_before_a_large_jbig2_one(corpus_dir: Path) -> bytes:
    """Pages are read largest first, so page 2 (a large JBIG2 image) fails before page 1 (a
    small JPEG 2000 one) is read: the document is still failed naming page 1, as the single
    job, which meets page 1 first, fails it."""
    large_jbig2 = pdf_with_image(JBIG2_DATA + bytes(200_000), b"/JBIG2Decode")
    return joined(pdf_with_jpx_image(), large_jbig2, scanned_pdf(corpus_dir, 1))


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (_jpx_page_between_scans, "page 2 of 3"),
        (_small_jpx_page_before_a_large_jbig2_one, "page 1 of 3"),
    ],
)
def test_a_page_that_fails_fails_the_document_naming_the_first_that_fails(
    runner: SandboxRunner,
    corpus_dir: Path,
    document: Callable[[Path], bytes],
    named: str,
) -> None:
    payload = document(corpus_dir)
    with pytest.raises(UnreadableInput) as single:
        _single(runner, payload)
    with pytest.raises(UnreadableInput, match=f"^{named}: ") as in_pages:
        _in_pages(runner).extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=30)
    assert str(in_pages.value) == f"{named}: {single.value}"


def test_pages_are_counted_as_they_end_not_in_page_order(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """Page 1 is the smallest, so it is read last: counted in page order, nothing was told
    until every page had ended (an HTTP job showed 0 of 0, then 12 of 12)."""
    payload = joined(pdf_of_tiny_scans(1, side=400), scanned_pdf(corpus_dir, 2))
    started: list[str] = []
    told: list[int] = []
    run = runner.run

    def counting(kind: str, *args: Any, **kwargs: Any) -> ExtractionResult:
        started.append(kind)
        return run(kind, *args, **kwargs)

    def progress(done: int, total: int) -> None:
        told.append(started.count(pages.PAGE_KIND))

    extractor = SandboxExtractor(
        parse_limits=replace(LIMITS, fan_out_pages=1), runner=runner, on_progress=progress
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "run", counting)
        text = extractor.extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=30)
    assert text == _single(runner, payload)
    assert started.count(pages.PAGE_KIND) == 3
    assert told[0] < 3  # the first page's end was told before the last page started


def test_the_text_ceiling_applies_to_the_merged_document_as_to_the_single_job(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """The budget runs over the whole document in page order: the merged text is refused with
    the single job's words, never cut to fit."""
    payload = scanned_pdf(corpus_dir, 4)
    small = ParseLimits(max_pages=30, max_text_chars=150)
    with pytest.raises(CeilingExceeded) as single:
        _single(runner, payload, small)
    with pytest.raises(CeilingExceeded) as in_pages:
        _in_pages(runner, small).extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=30)
    assert str(in_pages.value) == str(single.value)
    assert "150-character ceiling" in str(single.value)


def _words_image(words: str) -> bytes:
    """An image XObject of ``words`` in black on white, big enough for tesseract."""
    picture = Image.new("L", (1200, 400), 255)
    ImageDraw.Draw(picture).text((40, 150), words, fill=0, font=ImageFont.load_default(size=48))
    return stream(
        zlib.compress(picture.tobytes()),
        b"/Type /XObject /Subtype /Image /Width 1200 /Height 400 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode ",
    )


def _layered(catalog: bytes, group: bytes) -> bytes:
    """Two pages, each drawing one image always and one inside optional content ``/oc``."""
    return pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R %s >>" % catalog,
            b"<< /Type /Pages /Kids [3 0 R 3 0 R] /Count 2 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 400] /Contents 4 0 R /Resources "
            b"<< /XObject << /Im0 5 0 R /Im1 6 0 R >> /Properties << /oc %s >> >> >>" % group,
            stream(
                b"q 600 0 0 200 0 200 cm /Im0 Do Q /OC /oc BDC q 600 0 0 200 0 0 cm /Im1 Do Q EMC"
            ),
            _words_image("VISIBLE WORDS HERE"),
            _words_image("SECRET HIDDEN LAYER"),
            b"<< /Type /OCG /Name (layer) >>",
            b"<< /Type /OCMD /OCGs [7 0 R] /P /AllOff >>",
        ]
    )


_LAYER_OFF = b"/OCProperties << /OCGs [7 0 R] /D << /OFF [7 0 R] >> >>"


@pytest.mark.parametrize(
    ("catalog", "group", "shown", "hidden"),
    [
        # A layer the document hides: text planted for the model, never shown to a reader.
        (_LAYER_OFF, b"7 0 R", "VISIBLE", "SECRET"),
        # Content shown only while that layer is off: it must not vanish either.
        (_LAYER_OFF, b"8 0 R", "SECRET", "NOTHING"),
        (
            b"/OCProperties << /OCGs [7 0 R] /D << /BaseState /OFF >> >>",
            b"7 0 R",
            "VISIBLE",
            "SECRET",
        ),
    ],
)
def test_layers_the_document_hides_stay_hidden_in_its_pages(
    runner: SandboxRunner, catalog: bytes, group: bytes, shown: str, hidden: str
) -> None:
    """A one-page PDF carries the document's layer settings: PDFium would otherwise draw
    every layer, and OCR read what the document hides."""
    payload = _layered(catalog, group)
    assert _plan(runner, payload).scans
    text = _in_pages(runner).extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=30)
    assert text == _single(runner, payload)
    assert shown in text and hidden not in text


def test_a_page_tree_pypdf_and_pdfium_count_differently_is_read_as_pypdf_counts_it(
    runner: SandboxRunner,
) -> None:
    """/Count says two pages, the tree holds four. PDFium never opens the upload, in the
    single job or in pages: each page it draws is pypdf's copy of pypdf's page, so both read
    the four pages pypdf counts, byte for byte alike."""
    four_pages = _layered(_LAYER_OFF, b"7 0 R").replace(
        b"/Kids [3 0 R 3 0 R] /Count 2", b"/Kids [3 0 R 3 0 R 3 0 R 3 0 R] /Count 2"
    )
    single = _single(runner, four_pages)
    assert _in_pages(runner).extract("pdf", pages.PDF_MEDIA_TYPE, four_pages, max_pages=30) == (
        single
    )
    assert single.count("VISIBLE") == 4 and "SECRET" not in single


_PLAN = {
    "pages": 2,
    "parts": [{"type": "text", "text": "a"}, {"type": "scan", "pdf": "", "fallback": ""}],
}


@pytest.mark.parametrize(
    ("forged", "why"),
    [
        ({**_PLAN, "pages": 31}, "over the 30-page ceiling"),
        ({**_PLAN, "pages": 3}, "counts 3 pages but describes 2"),
        ({**_PLAN, "extra": 1}, "malformed"),
        ({**_PLAN, "parts": [{"type": "shell", "text": "a"}]}, "malformed"),
        ({**_PLAN, "pages": -1}, "malformed"),
        (
            {"pages": 1, "parts": [{"type": "scan", "pdf": "not base64!", "fallback": ""}]},
            "malformed",
        ),
    ],
)
def test_a_forged_split_answer_is_refused(forged: object, why: str) -> None:
    with pytest.raises(MalformedAnswer, match=why):
        pages.read_plan(msgspec.json.encode(forged).decode(), 30)


@pytest.mark.parametrize(
    "forged",
    [
        "not json",
        '{"text": "a", "readings": [], "more": 1}',
        '{"text": 1, "readings": []}',
        '{"text": "a", "readings": [{"language": "eng", "words": -1, "confidence_sum": 0, '
        '"letters": 0, "foreign_letters": null, "detected_script": null}]}',
    ],
)
def test_a_forged_page_answer_is_refused(forged: str) -> None:
    with pytest.raises(MalformedAnswer):
        pages.read_page(forged)


def test_a_page_answer_claiming_more_tesseract_runs_than_a_page_makes_is_refused() -> None:
    reading = {
        "language": "eng",
        "words": 1,
        "confidence_sum": 99.0,
        "letters": 1,
        "foreign_letters": 0,
        "detected_script": None,
    }
    forged = msgspec.json.encode({"text": "a", "readings": [reading, reading]}).decode()
    with pytest.raises(MalformedAnswer, match="malformed"):
        pages.read_page(forged)


def test_a_page_job_reads_one_page_and_answers_its_text_with_its_tesseract_run(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """A page job given a whole document is refused: it reads one page, never a document."""
    with pytest.raises(UnreadableInput, match="exactly one page"):
        runner.run(pages.PAGE_KIND, pages.PDF_MEDIA_TYPE, scanned_pdf(corpus_dir, 2), LIMITS)
    (_, scan), _ = _plan(runner, scanned_pdf(corpus_dir, 2)).scans
    answer = runner.run(pages.PAGE_KIND, pages.PDF_MEDIA_TYPE, scan.pdf, LIMITS)
    reading = pages.read_page(answer.text)
    assert "Docling" in reading.text and len(reading.readings) == 1


class _Watched:
    """A real runner that notes each job's kind and how many run at once."""

    def __init__(self, runner: SandboxRunner) -> None:
        self._runner = runner
        self._lock = threading.Lock()
        self.kinds: list[str] = []
        self.running = self.most = 0

    def run(self, kind: str, *args: Any, **options: Any) -> ExtractionResult:
        with self._lock:
            self.kinds.append(kind)
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            return self._runner.run(kind, *args, **options)
        finally:
            with self._lock:
                self.running -= 1


def _watched_extractor(runner: SandboxRunner) -> tuple[SandboxExtractor, _Watched]:
    watched = _Watched(runner)
    extractor = SandboxExtractor(
        parse_limits=replace(LIMITS, fan_out_pages=1),
        runner=watched,  # type: ignore[arg-type]  # runs real jobs, watched
        page_workers=2,
    )
    return extractor, watched


def test_a_long_pdf_of_text_is_read_by_one_child_never_split(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """Only a page to OCR makes the child answer ``SplitRequired``: a document of text alone
    costs one child however many pages it has, as a short one does."""
    payload = (corpus_dir / "docling_multi_page.pdf").read_bytes()
    extractor, watched = _watched_extractor(runner)
    text = extractor.extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=30)
    assert watched.kinds == ["pdf"]
    assert text == _single(runner, payload)


def test_files_extracted_at_once_share_the_page_workers_children(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """Three large scans at once on one extractor of two page workers: never more than two
    children, not two per file."""
    payload = scanned_pdf(corpus_dir, 4)
    extractor, watched = _watched_extractor(runner)
    with ThreadPoolExecutor(3) as files:
        texts = list(
            files.map(
                lambda _: extractor.extract("pdf", pages.PDF_MEDIA_TYPE, payload, max_pages=30),
                range(3),
            )
        )
    assert texts == [_single(runner, payload)] * 3
    assert watched.kinds.count(pages.PAGE_KIND) == 12
    assert watched.most == 2


def test_the_light_pass_hands_on_a_scan_long_enough_to_split_before_rendering_it(
    runner: SandboxRunner, corpus_dir: Path
) -> None:
    """Its page jobs check and render each page; the light pass doing it first for one page
    would only hold them all back. The page a JPEG 2000 image makes unreadable shows it: the
    light pass of a short document refuses it, of a long one hands it on unopened."""
    payload = joined(pdf_with_jpx_image(), scanned_pdf(corpus_dir, 1))
    light = ParseLimits(max_pages=30, ocr=False)
    with pytest.raises(UnreadableInput):
        runner.run("pdf", pages.PDF_MEDIA_TYPE, payload, light)
    with pytest.raises(SplitRequired):
        runner.run("pdf", pages.PDF_MEDIA_TYPE, payload, replace(light, fan_out_pages=1))
