"""Multimodal parts: the media-type allowlist, and the two wire formats."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from bridge.knowledge.errors import OutboundRejected
from bridge.knowledge.multimodal import (
    ContentPart,
    media_part,
    text_part,
    to_anthropic_blocks,
    to_openai_blocks,
)

PNG = b"\x89PNG\r\n\x1a\n fake"
PDF = b"%PDF-1.7 fake"


def test_text_part_strips() -> None:
    assert text_part("  hello \n") == ContentPart(part_type="text", text="hello")


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_refused(text: str) -> None:
    # An empty block spends a request slot and says nothing.
    with pytest.raises(OutboundRejected, match="text part is empty"):
        text_part(text)


@pytest.mark.parametrize(
    ("media_type", "kind"),
    [
        ("image/png", "image"),
        ("image/jpeg", "image"),
        ("image/gif", "image"),
        ("image/webp", "image"),
        ("application/pdf", "document"),
    ],
)
def test_allowed_media_types(media_type: str, kind: str) -> None:
    part = media_part(kind, media_type, b"payload")
    assert part.part_type == kind
    assert part.media_type == media_type
    assert base64.b64decode(part.data_b64) == b"payload"


@pytest.mark.parametrize(
    ("kind", "media_type", "attack"),
    [
        ("image", "image/svg+xml", "SVG carries script and external references"),
        ("image", "image/tiff", "a decoder outside the provider's supported set"),
        ("image", "image/PNG", "case variant the provider may dispatch differently"),
        ("image", "image/png; charset=utf-8", "parameters smuggled after the type"),
        ("image", " image/png", "whitespace variant"),
        ("image", "image/jpg", "unregistered alias"),
        ("image", "application/pdf", "document type declared for an image"),
        ("document", "text/plain", "plain text belongs in a text part"),
        ("document", "text/html", "markup into the provider's document parser"),
        ("document", "application/vnd.ms-excel", "office format to a PDF-only decoder"),
        ("document", "image/png", "image type declared for a document"),
        ("document", "application/pdf\nX-Injected: 1", "header-like injection"),
    ],
)
def test_media_types_outside_the_allowlist_are_refused(
    kind: str, media_type: str, attack: str
) -> None:
    with pytest.raises(OutboundRejected, match="outside the allowlist"):
        media_part(kind, media_type, PNG)


@pytest.mark.parametrize("kind", ["text", "video", "audio", "Image", ""])
def test_unknown_kinds_are_refused(kind: str) -> None:
    with pytest.raises(OutboundRejected, match="no media wire representation"):
        media_part(kind, "image/png", PNG)


def test_empty_payload_is_refused() -> None:
    with pytest.raises(OutboundRejected, match="empty payload"):
        media_part("image", "image/png", b"")


def test_missing_media_type_is_refused() -> None:
    with pytest.raises(OutboundRejected, match="declares no media type"):
        media_part("document", "", PDF)


@pytest.mark.parametrize(
    ("fields", "reason", "attack"),
    [
        ({"part_type": "video"}, "no wire representation", "unknown part type"),
        (
            {"part_type": "image", "media_type": "text/html", "data_b64": "AAAA"},
            "outside the allowlist",
            "bypassing media_part by building the part directly",
        ),
        (
            {"part_type": "image", "media_type": "image/png", "data_b64": "AA==;x,<script>"},
            "base64",
            "text spliced into the data: URL after the checked type",
        ),
        (
            {"part_type": "image", "media_type": "image/png", "data_b64": "AAA"},
            "base64",
            "unpadded data",
        ),
        (
            {"part_type": "text", "text": "hi", "media_type": "image/png"},
            "text part carries a media type",
            "fields a formatter would drop silently",
        ),
        (
            {"part_type": "image", "text": "hi", "media_type": "image/png", "data_b64": "AAAA"},
            "part carries text",
            "text on a media part a formatter would drop silently",
        ),
        ({"part_type": "text"}, "text part is empty", "empty text built directly"),
    ],
)
def test_direct_construction_is_held_to_the_same_rules(
    fields: dict[str, str], reason: str, attack: str
) -> None:
    with pytest.raises(OutboundRejected, match=reason):
        ContentPart(**fields)  # type: ignore[arg-type]


def test_non_string_fields_are_type_errors() -> None:
    with pytest.raises(TypeError):
        ContentPart(part_type="text", text=b"bytes")  # type: ignore[arg-type]


def test_parts_are_frozen() -> None:
    part = text_part("hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.text = "changed"  # type: ignore[misc]


def test_anthropic_blocks() -> None:
    image = media_part("image", "image/png", PNG)
    document = media_part("document", "application/pdf", PDF)
    assert to_anthropic_blocks([text_part("see"), image, document]) == [
        {"type": "text", "text": "see"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": image.data_b64},
        },
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": document.data_b64,
            },
        },
    ]


def test_openai_blocks() -> None:
    image = media_part("image", "image/webp", PNG)
    assert to_openai_blocks([text_part("see"), image]) == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": f"data:image/webp;base64,{image.data_b64}"}},
    ]


def test_openai_refuses_documents() -> None:
    # OpenAI chat content has no document block; a PDF in an image data: URL is misread.
    with pytest.raises(OutboundRejected, match="no document block"):
        to_openai_blocks([text_part("see"), media_part("document", "application/pdf", PDF)])


def test_empty_sequences_render_empty() -> None:
    assert to_anthropic_blocks([]) == []
    assert to_openai_blocks(()) == []
