"""The failure value: what an extractor raised becomes one, and a worded refusal keeps it."""

from __future__ import annotations

from typing import ClassVar

import pytest

from bridge.knowledge.attachments import (
    AttachmentRef,
    extract_attachment,
    extraction_failure,
    extraction_outcome,
)
from bridge.knowledge.errors import ExtractionFailed, IngestionRejected
from bridge.knowledge.failures import Failure

REF = AttachmentRef("a.pdf", "pdf", "application/pdf", b"%PDF-1.7")


class _HostDown(Exception):
    """Names itself as the sandbox's verdicts do: what a caller reads, and if the host failed."""

    reported_as: ClassVar[str] = "SandboxUnavailable"
    transient: ClassVar[bool] = True


class _Raises:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        raise self.error


def test_an_exception_is_named_by_its_class_unless_it_names_itself() -> None:
    assert Failure.of(KeyError("/Root")) == Failure("KeyError", "'/Root'")
    assert Failure.of(_HostDown("the fork server died")) == Failure(
        "SandboxUnavailable", "the fork server died", transient=True
    )


def test_the_worded_failure_carries_the_value_it_was_worded_from() -> None:
    error = _HostDown("the fork server died")
    with pytest.raises(ExtractionFailed) as failed:
        extract_attachment(REF, _Raises(error))
    assert failed.value.__cause__ is error
    assert failed.value.failure == Failure.of(error)
    assert str(failed.value) == str(extraction_failure(REF, Failure.of(error)))


def test_a_refusal_is_a_failure_whose_words_are_its_reason() -> None:
    refused = extraction_outcome(AttachmentRef("a.exe", "exe", "x", b"MZ"), _Raises(ValueError()))
    assert isinstance(refused, IngestionRejected)
    assert refused.failure == Failure("IngestionRejected", str(refused))
    assert (refused.failure.refused, refused.failure.error) == (True, "IngestionRejected")
    assert Failure("ParserError", "x").error == "ExtractionFailed"


def test_a_failure_worded_elsewhere_is_its_own_words() -> None:
    assert ExtractionFailed("returned bytes, not text.").failure == Failure(
        "ExtractionFailed", "returned bytes, not text."
    )
