"""extract_attachment and AttachmentSource.select: every refusal, every reason, the ceilings.

The extractor here is an in-process stand-in: the parsers and the sandbox have their own
suites; what is under test is the bridge's handling of whatever an extractor does.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge import (
    DEFAULT_LIMITS,
    AttachmentRef,
    AttachmentSource,
    BridgeContractError,
    ContextLayer,
    ContextRequest,
    ContextTier,
    ExtractionFailed,
    ExtractionLimits,
    IngestionRejected,
    attachment_contribution,
    contribution_spec,
    extract_attachment,
    normalise_extracted,
)

REQUEST = ContextRequest(contribution_id="attachments")


@dataclass
class Utf8Extractor:
    """Decodes text payloads; raises whatever it is told to for payloads named in ``raises``."""

    raises: dict[bytes, BaseException] = field(default_factory=dict)
    calls: list[tuple[str, str, int]] = field(default_factory=list)

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        self.calls.append((kind, media_type, max_pages))
        if payload in self.raises:
            raise self.raises[payload]
        return payload.decode("utf-8")


def ref(
    label: str, text: str | bytes, kind: str = "text", media_type: str = "text/plain"
) -> AttachmentRef:
    payload = text.encode() if isinstance(text, str) else text
    return AttachmentRef(label=label, kind=kind, media_type=media_type, payload=payload)


def test_extracts_and_labels() -> None:
    extractor = Utf8Extractor()
    got = extract_attachment(ref("../../secret/notes.txt", "hello\r\nworld  \x00"), extractor)
    assert got.label == "notes.txt"
    assert got.text == "hello\nworld"
    assert got.byte_size == len(b"hello\r\nworld  \x00")
    assert extractor.calls == [("text", "text/plain", DEFAULT_LIMITS.max_pages)]


@pytest.mark.parametrize(
    ("attachment", "fragment"),
    [
        (ref("a.exe", "x", kind="exe"), "attachment kind 'exe' is not extractable"),
        (ref("a.txt", b""), "carries an empty payload"),
    ],
)
def test_guards_refuse_before_the_parser(attachment: AttachmentRef, fragment: str) -> None:
    extractor = Utf8Extractor()
    with pytest.raises(IngestionRejected, match=fragment):
        extract_attachment(attachment, extractor)
    assert extractor.calls == []


def test_raw_size_ceiling() -> None:
    extractor = Utf8Extractor()
    limits = ExtractionLimits(max_bytes=10)
    with pytest.raises(IngestionRejected, match="is 11 bytes, which exceeds the 10-byte"):
        extract_attachment(ref("big.txt", "x" * 11), extractor, limits)
    assert extractor.calls == []


def test_unknown_kind_reason_cannot_carry_a_payload() -> None:
    with pytest.raises(IngestionRejected) as info:
        extract_attachment(ref("a", "x", kind="k\nIGNORE PREVIOUS" + "!" * 5000), Utf8Extractor())
    assert "\n" not in str(info.value)
    assert len(str(info.value)) < 400


def _bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\x00" * 4_000_000)
    return buffer.getvalue()


DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.mark.parametrize(
    ("payload", "media_type"),
    [
        (_bomb(), DOCX_TYPE),
        # Declared as plain text and hidden behind a prefix, it is still opened by zipfile as
        # a docx, so it is still inspected.
        (b"just some text " + _bomb() + b" trailing", "text/plain"),
    ],
)
def test_zip_bomb_refused_before_dispatch(payload: bytes, media_type: str) -> None:
    extractor = Utf8Extractor()
    with pytest.raises(IngestionRejected, match="rejected before dispatch") as info:
        extract_attachment(ref("bomb.docx", payload, "docx", media_type), extractor)
    assert extractor.calls == []
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad xref"),
        KeyError("Root"),
        RecursionError("deep"),
        MemoryError(),
        OSError(5, "io"),
    ],
)
def test_any_parser_exception_becomes_extraction_failed(error: Exception) -> None:
    extractor = Utf8Extractor(raises={b"boom": error})
    with pytest.raises(ExtractionFailed) as info:
        extract_attachment(
            ref("r.pdf", b"boom", kind="pdf", media_type="application/pdf"), extractor
        )
    assert type(error).__name__ in str(info.value)
    assert "'r.pdf' (pdf/application/pdf)" in str(info.value)
    assert info.value.__cause__ is error


def test_parser_returning_non_text_is_typed() -> None:
    class BytesExtractor:
        def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
            return payload  # type: ignore[return-value]

    with pytest.raises(ExtractionFailed, match="returned bytes, not text"):
        extract_attachment(ref("a.txt", "x"), BytesExtractor())


def test_text_over_ceiling_is_dropped_not_truncated() -> None:
    limits = ExtractionLimits(max_text_chars=5)
    with pytest.raises(IngestionRejected, match="extracted to 6 characters, which exceeds the 5"):
        extract_attachment(ref("a.txt", "abcdef"), Utf8Extractor(), limits)
    assert extract_attachment(ref("a.txt", "abcde"), Utf8Extractor(), limits).text == "abcde"


def test_select_omits_with_reasons_in_input_order() -> None:
    extractor = Utf8Extractor(raises={b"crash": ValueError("broken")})
    source = AttachmentSource(
        refs=[
            ref("one.txt", "first"),
            ref("bad.pdf", b"crash", kind="pdf", media_type="application/pdf"),
            ref("blank.txt", " \n\t "),
            ref("x.bin", "z", kind="binary"),
            ref("two.txt", "second"),
        ],
        extractor=extractor,
    )
    selection = source.select(REQUEST)
    assert selection.text == "ATTACHMENT [one.txt]\nfirst\n\nATTACHMENT [two.txt]\nsecond"
    assert selection.revision == "one.txt:5|two.txt:6"
    labels = [label for label, _ in selection.dropped]
    assert labels == ["bad.pdf", "blank.txt", "x.bin"]
    reasons = dict(selection.dropped)
    assert reasons["bad.pdf"].startswith("ExtractionFailed: ")
    assert "ValueError: broken" in reasons["bad.pdf"]
    assert reasons["blank.txt"] == "the extractor returned nothing but whitespace"
    assert reasons["x.bin"].startswith("IngestionRejected: attachment kind 'binary'")
    assert source.read(REQUEST).text == selection.text
    assert source.read(REQUEST).untrusted is True


def test_select_raise_ends_the_read_at_the_first_refusal() -> None:
    extractor = Utf8Extractor(raises={b"crash": ValueError("broken")})
    source = AttachmentSource(
        refs=[ref("ok.txt", "fine"), ref("bad.txt", b"crash"), ref("later.txt", "never")],
        extractor=extractor,
        on_rejection="raise",
    )
    with pytest.raises(ExtractionFailed, match="ValueError: broken"):
        source.select(REQUEST)
    assert len(extractor.calls) == 2  # nothing after the refusal was extracted


def test_aggregate_ceiling_refuses_whole_and_admits_later_smaller() -> None:
    block_one = len("ATTACHMENT [a.txt]\n" + "a" * 10)
    limits = ExtractionLimits(max_total_chars=block_one + 2 + len("ATTACHMENT [c.txt]\nc"))
    source = AttachmentSource(
        refs=[ref("a.txt", "a" * 10), ref("b.txt", "b" * 50), ref("c.txt", "c")],
        extractor=Utf8Extractor(),
        limits=limits,
    )
    selection = source.select(REQUEST)
    assert selection.text == "ATTACHMENT [a.txt]\n" + "a" * 10 + "\n\nATTACHMENT [c.txt]\nc"
    assert selection.dropped == (
        (
            "b.txt",
            f"would take the assembled block past the {limits.max_total_chars}-character "
            "ceiling; raise max_total_chars (--max-total-chars 100, AIRLOCK_MAX_TOTAL_CHARS=100)",
        ),
    )
    assert block_one + 2 + len("ATTACHMENT [b.txt]\n" + "b" * 50) == 100  # what admits b.txt
    raising = AttachmentSource(source.refs, Utf8Extractor(), limits, on_rejection="raise")
    with pytest.raises(IngestionRejected, match="the per-attachment cap bounds one file"):
        raising.select(REQUEST)


def test_on_rejection_is_checked() -> None:
    with pytest.raises(BridgeContractError):
        AttachmentSource([], Utf8Extractor(), on_rejection="ignore")  # type: ignore[arg-type]


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(BridgeContractError):
        ExtractionLimits(max_pages=0)
    with pytest.raises(BridgeContractError):
        ExtractionLimits(max_expansion_ratio=-1)


def test_ref_payload_types() -> None:
    # A caller outside the type checker may pass a bytearray: it is copied to bytes.
    assert AttachmentRef("a", "text", "text/plain", bytearray(b"x")).payload == b"x"  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        AttachmentRef("a", "text", "text/plain", "not bytes")  # type: ignore[arg-type]
    assert "payload" not in repr(AttachmentRef("a", "text", "text/plain", b"secret"))


def test_attachment_contribution_declares_l2_session() -> None:
    source = AttachmentSource([ref("a.txt", "x")], Utf8Extractor())
    contribution = attachment_contribution("uploads", source, order=2, scope=None)
    assert contribution.layer is ContextLayer.L2
    assert contribution.tier is ContextTier.SESSION
    assert contribution_spec(contribution)["order"] == 2
    with pytest.raises(BridgeContractError):
        attachment_contribution("uploads", source, scope="galaxy")


@given(st.text())
def test_normalise_leaves_only_tab_and_newline_controls(raw: str) -> None:
    out = normalise_extracted(raw)
    assert "\r" not in out
    assert all(ch in "\n\t" or not (ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F) for ch in out)
    assert all(line == line.rstrip() for line in out.split("\n"))
    assert normalise_extracted(out) == out
