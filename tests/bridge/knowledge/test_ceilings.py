"""Every refusal by a ceiling names the setting, the flag and the variable that raise it, and
the value that admits the file where it is known.

The sandbox's reasons are produced here by the real extractors (in-process), so a change in
their wording that the bridge no longer recognises fails this suite instead of silently
dropping the hint. The CLI tests (tests/worker/test_cli.py) show the named flags admitting the
file through the real sandbox.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

import pytest
from PIL import Image

from bridge.knowledge.attachments import (
    AttachmentRef,
    ExtractionLimits,
    check_before_dispatch,
    extraction_failure,
)
from bridge.knowledge.ceilings import (
    EXTRACTION_SETTINGS,
    PIXELS,
    SANDBOX_SETTINGS,
    explain_sandbox_ceiling,
)
from bridge.knowledge.errors import IngestionRejected
from bridge.knowledge.failures import Failure
from sandbox.errors import ALL_ERRORS, OutputTooLarge
from sandbox.extractors import image as image_extractor
from sandbox.extractors import pdf as pdf_extractor
from sandbox.extractors.ocr import check_pixels, decoding_under
from sandbox.extractors.registry import Refusal
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.helpers import zipped
from tests.image_builders import distinct_frames, encoded
from tests.in_process import words_of
from tests.pdf_builders import pdf_of_pages
from tests.sandbox.probes import PROBE_MODULES

extract_image = words_of(image_extractor.extract_image)
extract_pdf = words_of(pdf_extractor.extract_pdf)

LIMITS = ParseLimits(max_pages=20, max_text_chars=10, max_pixels=1000)


def _decode_over_the_ceiling(limits: ParseLimits) -> None:
    """A 50x40 PNG opened under a 1,000-pixel ceiling: Pillow's own check refuses it."""
    with decoding_under(limits):
        Image.open(io.BytesIO(encoded(Image.new("L", (50, 40), 255), "PNG")))


def _refusal(action: Callable[[], object]) -> str:
    with pytest.raises(Refusal) as refused:
        action()
    assert refused.value.code == "ceiling"
    return refused.value.reason


def _tiff(frames: int) -> bytes:
    first, *rest = distinct_frames(frames)
    return encoded(first, "TIFF", save_all=True, append_images=rest)


@pytest.mark.parametrize(
    ("refuse", "hint"),
    [
        (
            lambda: extract_pdf("application/pdf", pdf_of_pages(117), LIMITS),
            "; raise max_pages (--max-pages 117, AIRLOCK_MAX_PAGES=117)",
        ),
        (
            lambda: extract_image("image/tiff", _tiff(25), LIMITS),
            "; raise max_pages to at least 21 (--max-pages 21, AIRLOCK_MAX_PAGES=21)",
        ),
        (
            lambda: TextBudget(LIMITS).spend("x" * 41),
            "; raise max_text_chars to at least 41 (--max-text-chars 41, "
            "AIRLOCK_MAX_TEXT_CHARS=41)",
        ),
        (
            lambda: check_pixels((50, 40), LIMITS),
            "; raise max_pixels (--max-pixels 2000, AIRLOCK_MAX_PIXELS=2000)",
        ),
        (
            # Pillow's own bomb check, reworded with airlock's ceiling and the image's size.
            lambda: _decode_over_the_ceiling(LIMITS),
            "; raise max_pixels (--max-pixels 2000, AIRLOCK_MAX_PIXELS=2000)",
        ),
    ],
)
def test_sandbox_ceiling_reasons_end_with_what_raises_them(
    refuse: Callable[[], object], hint: str
) -> None:
    reason = _refusal(refuse)
    assert explain_sandbox_ceiling(reason) == hint
    ref = AttachmentRef("book.pdf", "pdf", "application/pdf", b"%PDF")
    assert str(extraction_failure(ref, Failure("CeilingExceeded", reason))).endswith(
        f"{reason}{hint}"
    )


def test_a_sandbox_limit_names_its_variable() -> None:
    """A kernel-enforced limit hit by a real child: no value is known to suffice, so N."""
    limits = SandboxLimits(output_bytes=64 * 1024)
    with (
        SandboxRunner(limits, warm_children=1, modules=PROBE_MODULES) as sandbox,
        pytest.raises(OutputTooLarge) as exceeded,
    ):
        sandbox.run("probe-big-answer", "text/plain", b"200000")
    ref = AttachmentRef("a.txt", "text", "text/plain", b"200000")
    failure = extraction_failure(ref, Failure.of(exceeded.value))
    assert str(failure).endswith("; raise output_bytes (AIRLOCK_SANDBOX_OUTPUT_BYTES=N)")


def test_every_sandbox_setting_is_keyed_by_an_error_the_sandbox_reports() -> None:
    # A misspelt key would never match a failure's code, and its hint would silently vanish.
    reported = {cls.reported_as for cls in ALL_ERRORS}
    assert set(SANDBOX_SETTINGS) <= reported, set(SANDBOX_SETTINGS) - reported


def test_a_ceiling_no_setting_raises_gets_no_hint() -> None:
    reason = "the PDF exceeds a parser safety limit: too many objects"
    assert explain_sandbox_ceiling(reason) == ""
    ref = AttachmentRef("a.pdf", "pdf", "application/pdf", b"%PDF")
    # The same words from another error type are not a ceiling and get no hint either.
    failure = extraction_failure(
        ref, Failure("ParserError", "117 pages exceeds the 20-page ceiling")
    )
    assert str(failure).endswith("ParserError: 117 pages exceeds the 20-page ceiling")


def test_the_hint_is_computed_from_the_whole_message_not_the_quoted_one() -> None:
    reason = "117 pages exceeds the 20-page ceiling" + " padding" * 100
    ref = AttachmentRef("a.pdf", "pdf", "application/pdf", b"%PDF")
    assert str(extraction_failure(ref, Failure("CeilingExceeded", reason))).endswith(
        "…; raise max_pages (--max-pages 117, AIRLOCK_MAX_PAGES=117)"
    )


def test_the_raw_size_ceiling_names_the_size_that_admits_the_file() -> None:
    ref = AttachmentRef("big.txt", "text", "text/plain", b"x" * 11)
    with pytest.raises(IngestionRejected) as refused:
        check_before_dispatch(ref, ExtractionLimits(max_bytes=10))
    assert str(refused.value).endswith(
        "To admit it, raise max_bytes (--max-bytes 11, AIRLOCK_MAX_BYTES=11)."
    )


@pytest.mark.parametrize(
    ("payload", "limits", "hint"),
    [
        (
            zipped({f"m{index}": b"x" for index in range(5)}),
            ExtractionLimits(max_members=4),
            "; raise max_members to at least 5 (--max-members 5, AIRLOCK_MAX_MEMBERS=5)",
        ),
        (
            zipped({"a": b"a" * 600, "b": b"b" * 500}, zipfile.ZIP_STORED),
            ExtractionLimits(max_uncompressed_bytes=1000),
            "; raise max_uncompressed_bytes to at least 1100 (--max-uncompressed-bytes 1100, "
            "AIRLOCK_MAX_UNCOMPRESSED_BYTES=1100)",
        ),
        (
            zipped({"inner.zip": zipped({"x": b"x"}, zipfile.ZIP_STORED)}, zipfile.ZIP_STORED),
            ExtractionLimits(),
            "; raise max_nesting_depth to at least 2 (--max-nesting-depth 2, "
            "AIRLOCK_MAX_NESTING_DEPTH=2)",
        ),
    ],
)
def test_archive_ceilings_name_the_value_that_admits_the_archive(
    payload: bytes, limits: ExtractionLimits, hint: str
) -> None:
    ref = AttachmentRef("a.zip", "docx", "application/zip", payload)
    with pytest.raises(IngestionRejected) as refused:
        check_before_dispatch(ref, limits)
    assert str(refused.value).endswith(hint)


def test_the_expansion_ratio_hint_admits_the_steepest_member() -> None:
    payload = zipped({"flat": bytes(range(256)) * 4, "steep": b"\0" * 100_000, "mild": b"ab" * 500})
    ref = AttachmentRef("a.zip", "docx", "application/zip", payload)
    with pytest.raises(IngestionRejected) as refused:
        check_before_dispatch(ref, ExtractionLimits(max_expansion_ratio=2))
    reason = str(refused.value)
    needed = float(reason.rsplit("AIRLOCK_MAX_EXPANSION_RATIO=", 1)[1].rstrip(")"))
    check_before_dispatch(ref, ExtractionLimits(max_expansion_ratio=needed))  # admitted


def test_settings_names_follow_one_rule() -> None:
    assert EXTRACTION_SETTINGS["max_pages"].flag == "--max-pages"
    assert EXTRACTION_SETTINGS["max_pages"].variable == "AIRLOCK_MAX_PAGES"
    assert set(EXTRACTION_SETTINGS) == set(ExtractionLimits.__dataclass_fields__)
    assert PIXELS.to_admit() == "raise max_pixels (--max-pixels N, AIRLOCK_MAX_PIXELS=N)"
