"""Uploads declared as the wrong kind, through real workers: the queued selection equals the
embedded one byte for byte, a scan declared as text taking the OCR hand-off on the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import gather
from tests.integration.conftest import WorkerFactory
from tests.integration.refs import local_selection

pytestmark = [pytest.mark.integration, pytest.mark.redis]

LIMITS = ExtractionLimits(max_pages=30)


def test_misdeclared_uploads_are_read_as_what_they_are_on_the_queue_as_embedded(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    start_worker()
    refs = [
        # (A PDF declared as DOCX never reaches a worker: the spec's archive guard refuses a
        # DOCX that is not a ZIP in the bridge, on both paths alike.)
        AttachmentRef(
            "report.pdf",
            "pdf",
            "application/pdf",
            (corpus_dir / "docling_word_sample.docx").read_bytes(),
        ),
        AttachmentRef(
            "scan.txt",
            "text",
            "text/plain",
            (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes(),
        ),
        AttachmentRef(
            "photo.pdf",
            "pdf",
            "application/pdf",
            (corpus_dir / "tesseract_phototest.tif").read_bytes(),
        ),
        AttachmentRef(
            "budget.docx",
            "docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            (corpus_dir / "xlsx2csv_utf8.xlsx").read_bytes(),
        ),
        AttachmentRef(
            "old.txt", "text", "text/plain", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)
        ),
    ]
    queued = gather(refs, client, limits=LIMITS, deadline=120, use_cache=False)
    assert queued == local_selection(refs, LIMITS)
    assert "[airlock: declared as a DOCX package, read as an Excel workbook]" in queued.text
    assert "[airlock: declared as text, read as a PDF]" in queued.text
    assert "[airlock: declared as a PDF, read as a TIFF image]" in queued.text
    assert "[airlock: declared as a PDF, read as a DOCX package]" in queued.text
    [(label, reason)] = queued.dropped
    assert label == "old.txt" and "an OLE2 compound file" in reason
