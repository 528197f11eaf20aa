"""A request's own OCR languages, read by real workers: the single OCR job, a scan spread over
the pages queue, the result cache, and the embedded path, which must all answer alike.

Hindi is the request's language here (the suite installs ``tesseract-ocr-hin``): the corpus's
English and French scans read with it are refused as not text in that language, so an answer
shows which language read it, where the workers' own (``eng,scripts``) reads them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bridge.knowledge.attachments import AttachmentRef, AttachmentSource, ExtractionLimits
from bridge.knowledge.contracts import ContextRequest, IngestSelection
from bridge.knowledge.enclosures import Unpacking
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import gather
from sandbox import ocr_languages
from sandbox.extractor import SandboxExtractor
from sandbox.limits import ParseLimits
from tests.integration.conftest import WorkerFactory
from tests.scanned_pdfs import scanned_pdf

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

LIMITS = ExtractionLimits(max_pages=30)
#: Every scan of more than one page is split, so its pages are read by page tasks.
FAN_OUT = {"AIRLOCK_FAN_OUT_PAGES": "1", "AIRLOCK_OCR_LANGUAGE": "eng,scripts"}
_NOT_HINDI = "the image is not text in the OCR language (hin)"


def _refs(corpus_dir: Path) -> list[AttachmentRef]:
    letter = (corpus_dir / "tesseract_eurotext.tif").read_bytes()
    return [
        AttachmentRef("eurotext.tif", "image", "image/tiff", letter),
        AttachmentRef("scan.pdf", "pdf", "application/pdf", scanned_pdf(corpus_dir, 3)),
        AttachmentRef("note.txt", "text", "text/plain", b"text needs no OCR language"),
    ]


def _embedded(refs: list[AttachmentRef], ocr_language: str) -> IngestSelection:
    """The embedded path with the same language, as the worker's settings would give it."""
    parse = ParseLimits(ocr_language=ocr_language, max_text_chars=LIMITS.max_text_chars)
    extractor = Unpacking(SandboxExtractor(parse_limits=parse), LIMITS)
    return AttachmentSource(refs, extractor, LIMITS).select(ContextRequest("attachments"))


def test_a_requests_ocr_language_reads_its_scans_on_every_path_and_keys_the_cache(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    start_worker(concurrency=2, env=FAN_OUT)
    refs = _refs(corpus_dir)
    # The cache on throughout: an answer read with one language is never another's.
    in_hindi = gather(refs, client, limits=LIMITS, deadline=180, ocr_language="hin")
    own = gather(refs, client, limits=LIMITS, deadline=180)
    again_in_hindi = gather(refs, client, limits=LIMITS, deadline=180, ocr_language="hin")

    assert in_hindi == again_in_hindi == _embedded(refs, "hin")
    dropped = dict(in_hindi.dropped)
    assert _NOT_HINDI in dropped["eurotext.tif"]
    assert _NOT_HINDI in dropped["scan.pdf"]  # its pages, read by page tasks, in Hindi
    assert "ATTACHMENT [note.txt]\ntext needs no OCR language" in in_hindi.text

    assert not own.dropped
    assert "ATTACHMENT [scan.pdf]\n[page 1]\nDocling bundles" in own.text, own
    assert "The (quick) [brown] {fox} jumps!" in own.text, own
    assert own == _embedded(refs, ocr_languages.expanded("eng,scripts"))


def test_a_language_the_workers_lack_fails_only_the_files_that_need_ocr_naming_its_package(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    start_worker(env=FAN_OUT)
    refs = _refs(corpus_dir)
    selection = gather(
        refs, client, limits=LIMITS, deadline=180, use_cache=False, ocr_language="deu"
    )
    dropped = dict(selection.dropped)
    assert set(dropped) == {"eurotext.tif", "scan.pdf"}
    missing = (
        "OCR language 'deu' is not installed on this host; install the Debian package: "
        "apt-get install tesseract-ocr-deu"
    )
    assert dropped["eurotext.tif"].endswith(f"ParserError: parser raised OcrFailed: {missing}")
    page_failed = rf"ParserError: page \d of 3: parser raised OcrFailed: {re.escape(missing)}"
    assert re.search(page_failed, dropped["scan.pdf"])
    assert "text needs no OCR language" in selection.text


def test_workers_hold_request_languages_to_their_operators_list(
    start_worker: WorkerFactory, client: CeleryQueue
) -> None:
    """AIRLOCK_OCR_REQUEST_LANGUAGES is the workers' to set: a job naming a model outside it
    is refused before its payload is read, with the rule in its reason; one within it, and
    one naming none, are read."""
    start_worker(env={"AIRLOCK_OCR_REQUEST_LANGUAGES": "eng,hin"})
    note = AttachmentRef("note.txt", "text", "text/plain", b"a short note")
    refused = gather([note], client, limits=LIMITS, deadline=60, ocr_language="eng+deu")
    [(label, reason)] = refused.dropped
    assert label == "note.txt" and not refused.text
    assert reason == (
        "IngestionRejected: OCR language 'deu' is not one a request may name here "
        "(AIRLOCK_OCR_REQUEST_LANGUAGES: eng, hin)"
    )
    for admitted in ("hin,eng", None):
        read = gather([note], client, limits=LIMITS, deadline=60, ocr_language=admitted)
        assert read.text == "ATTACHMENT [note.txt]\na short note" and not read.dropped
