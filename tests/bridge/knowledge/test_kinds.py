"""What a file on disk is declared as when only its name and first bytes are known."""

from __future__ import annotations

import pytest

from bridge.knowledge.kinds import BINARY, guess_kind

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.mark.parametrize(
    ("name", "head", "declared"),
    [
        ("Report.PDF", b"", ("pdf", "application/pdf")),
        ("scan.tiff", b"", ("image", "image/tiff")),
        ("letter.docx", b"", ("docx", DOCX)),
        ("blob", b"%PDF-1.7\n", ("pdf", "application/pdf")),
        ("blob", b"\x89PNG\r\n\x1a\n\x00\x00", ("image", "image/png")),
        ("blob", b"RIFF\x10\x00\x00\x00WEBPVP8 ", ("image", "image/webp")),
        ("blob", b"PK\x03\x04\x14\x00", ("docx", DOCX)),
        ("notes", b"plain words", ("text", "text/plain")),
        ("notes", b"\xff\xfeh\x00i\x00", ("text", "text/plain")),  # UTF-16 with its mark
        ("tool.exe", b"MZ\x90\x00\x03\x00", BINARY),  # NUL bytes and no mark: not text
    ],
)
def test_guess_kind(name: str, head: bytes, declared: tuple[str, str]) -> None:
    assert guess_kind(name, head) == declared
