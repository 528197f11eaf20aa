"""With OCR off a job that needs tesseract is answered "needs OCR", and nothing else changes.

The light queue runs this way, so a scanned PDF never holds a light worker for the minutes its
pages take to OCR; the answer must be a typed outcome the worker can hand on, not a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.errors import OcrRequired
from sandbox.limits import ParseLimits
from sandbox.runner import SandboxRunner

NO_OCR = ParseLimits(ocr=False)


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(warm_children=1) as runner:
        yield runner


@pytest.mark.parametrize(
    ("name", "kind", "media_type"),
    [
        ("docling_ocr_test-scanned.pdf", "pdf", "application/pdf"),
        ("tesseract_phototest.tif", "image", "image/tiff"),
    ],
)
def test_a_job_that_needs_ocr_is_answered_as_such(
    runner: SandboxRunner, corpus_dir: Path, name: str, kind: str, media_type: str
) -> None:
    with pytest.raises(OcrRequired, match="OCR"):
        runner.run(kind, media_type, (corpus_dir / name).read_bytes(), NO_OCR)


def test_a_text_layer_is_read_with_ocr_off(runner: SandboxRunner, corpus_dir: Path) -> None:
    payload = (corpus_dir / "docling_multi_page.pdf").read_bytes()
    without_ocr = runner.run("pdf", "application/pdf", payload, NO_OCR)
    assert without_ocr.text == runner.run("pdf", "application/pdf", payload).text
    assert "The Evolution of the Word Processor" in without_ocr.text
