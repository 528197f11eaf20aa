"""Page progress travels from the child as frames ahead of the answer, and is checked like one.

Progress is what lets a caller tell a long OCR job from a stuck one; it also comes from the
child, so a parser that forges or floods progress frames must end in a typed outcome.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.errors import MalformedAnswer, OutputTooLarge
from sandbox.limits import MIB, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.sandbox.probes import PROBE_MODULES

LIMITS = SandboxLimits(
    memory_bytes=512 * MIB, cpu_seconds=10, wall_seconds=30.0, output_bytes=16384
)


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(LIMITS, warm_children=1, modules=PROBE_MODULES) as sandbox:
        yield sandbox


def _frame(body: object) -> bytes:
    encoded = json.dumps(body).encode()
    return struct.pack("!I", len(encoded)) + encoded


def test_pdf_pages_are_reported_in_order(runner: SandboxRunner, corpus_dir: Path) -> None:
    heard: list[tuple[int, int]] = []
    payload = (corpus_dir / "docling_multi_page.pdf").read_bytes()
    result = runner.run(
        "pdf", "application/pdf", payload, on_progress=lambda d, t: heard.append((d, t))
    )
    assert heard == [(done, 5) for done in range(1, 6)]
    assert result.pages == 5


def test_an_ocr_frame_is_reported(runner: SandboxRunner, corpus_dir: Path) -> None:
    heard: list[tuple[int, int]] = []
    payload = (corpus_dir / "tesseract_phototest.tif").read_bytes()
    result = runner.run(
        "image", "image/tiff", payload, on_progress=lambda d, t: heard.append((d, t))
    )
    assert heard == [(1, 1)] and result.pages == 1
    assert "The quick brown dog" in result.text


@pytest.mark.parametrize(
    "forged",
    [
        {"progress": [3, 2]},  # done past total
        {"progress": [1, 2], "ok": True},  # extra key
        {"progress": [-1, 2]},
        {"progress": [1.0, 2]},
        {"progress": "1/2"},
    ],
)
def test_a_forged_progress_frame_is_malformed(runner: SandboxRunner, forged: object) -> None:
    answer = _frame({"ok": True, "text": "after", "pages": None})
    with pytest.raises(MalformedAnswer):
        runner.run("probe-raw-answer", "x", _frame(forged) + answer)


def test_a_flood_of_progress_frames_hits_the_output_cap(runner: SandboxRunner) -> None:
    flood = _frame({"progress": [1, 2]}) * 2000
    with pytest.raises(OutputTooLarge):
        runner.run("probe-raw-answer", "x", flood + _frame({"ok": True, "text": "t", "pages": 1}))


def test_valid_progress_before_a_raw_answer_is_heard(runner: SandboxRunner) -> None:
    heard: list[tuple[int, int]] = []
    frames = _frame({"progress": [1, 2]}) + _frame({"ok": True, "text": "done", "pages": 2})
    result = runner.run(
        "probe-raw-answer", "x", frames, on_progress=lambda d, t: heard.append((d, t))
    )
    assert heard == [(1, 2)] and result.text == "done" and result.pages == 2
