"""Provider-neutral message parts, and the two wire formats they render to (AS-NET-3).

A media type picks the provider's decoder, so every part is checked against one allowlist when
it is built, and the formatters take nothing but parts (docs/spec-decisions.md,
Multimodal parts (`bridge.knowledge.multimodal`)).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

from bridge.knowledge.attachments import quoted
from bridge.knowledge.errors import OutboundRejected

PartType = Literal["text", "image", "document"]

_PART_TYPES = frozenset(get_args(PartType))

# The media types each wire-capable kind may declare, compared exactly: no case folding and no
# parameters. What is compared is what is sent, so a spelling such as "image/PNG" or
# "image/png; q=1" could only pass if this module rewrote it, and a rewritten type is one a
# provider might dispatch differently from the bytes' real format. text/plain is not a document
# type: the wire format here sends documents as base64 sources, which providers accept for PDF
# only; plain text belongs in a text part.
_ALLOWED_MEDIA_TYPES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "image": frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"}),
        "document": frozenset({"application/pdf"}),
    }
)

_MEDIA_KINDS = frozenset(_ALLOWED_MEDIA_TYPES)

# Standard base64 with padding, as b64encode emits it. A part built by hand with anything else
# would put arbitrary text inside the OpenAI "data:" URL, after the checked media type.
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


@dataclass(frozen=True)
class ContentPart:
    """One provider-neutral piece of a multimodal message.

    Checked on construction, so a part that exists is a part that may be sent: building one
    directly is held to the same allowlist as :func:`media_part`, and the formatters do not
    need to check again.
    """

    part_type: PartType
    text: str = ""
    media_type: str = ""
    data_b64: str = ""

    def __post_init__(self) -> None:
        for name in ("text", "media_type", "data_b64"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"ContentPart.{name} must be a str")
        if self.part_type not in _PART_TYPES:
            raise OutboundRejected(
                f"part type {quoted(repr(self.part_type))} has no wire representation; "
                f"permitted types are {sorted(_PART_TYPES)}."
            )
        if self.part_type == "text":
            self._check_text()
        else:
            self._check_media()

    def _check_text(self) -> None:
        if self.media_type or self.data_b64:
            raise OutboundRejected(
                "a text part carries a media type or data; the formatters would drop them "
                "silently, so they are refused instead."
            )
        if not self.text.strip():
            raise OutboundRejected(
                "a text part is empty; an empty block spends a request slot and says nothing."
            )

    def _check_media(self) -> None:
        kind = self.part_type
        if self.text:
            raise OutboundRejected(
                f"the {kind} part carries text; the formatters would drop it silently, so it "
                "is refused instead."
            )
        if not self.data_b64:
            raise OutboundRejected(f"the {kind} part carries an empty payload.")
        if not self.media_type:
            raise OutboundRejected(f"the {kind} part declares no media type.")
        allowed = _ALLOWED_MEDIA_TYPES[kind]
        if self.media_type not in allowed:
            raise OutboundRejected(
                f"{kind} media type {quoted(repr(self.media_type))} is outside the allowlist "
                f"{sorted(allowed)}. The provider picks its decoder by this string, so an "
                "uploader's choice of it is an injection into the provider's parser; a "
                "document's media type is exactly as untrusted as an image's."
            )
        if len(self.data_b64) % 4 or not _BASE64.fullmatch(self.data_b64):
            raise OutboundRejected(
                f"the {kind} part's data is not padded standard base64; anything else would "
                "be spliced into the provider request after the checked media type."
            )


def text_part(text: str) -> ContentPart:
    """A text part, stripped of surrounding whitespace. Whitespace-only text is refused."""
    return ContentPart(part_type="text", text=text.strip())


def media_part(kind: str, media_type: str, payload: bytes) -> ContentPart:
    """Base64-encode ``payload`` as an image or document part, under the media-type allowlist."""
    if kind not in _MEDIA_KINDS:
        raise OutboundRejected(
            f"part kind {quoted(repr(kind))} has no media wire representation; permitted kinds "
            f"are {sorted(_MEDIA_KINDS)}."
        )
    part_type: PartType = "image" if kind == "image" else "document"
    return ContentPart(
        part_type=part_type,
        media_type=media_type,
        data_b64=base64.b64encode(payload).decode("ascii"),
    )


def to_anthropic_blocks(parts: Sequence[ContentPart]) -> list[dict[str, object]]:
    """Render parts as Anthropic content blocks: text, or a base64 image/document source."""
    blocks: list[dict[str, object]] = []
    for part in parts:
        if part.part_type == "text":
            blocks.append({"type": "text", "text": part.text})
            continue
        blocks.append(
            {
                "type": part.part_type,
                "source": {"type": "base64", "media_type": part.media_type, "data": part.data_b64},
            }
        )
    return blocks


def to_openai_blocks(parts: Sequence[ContentPart]) -> list[dict[str, object]]:
    """Render parts as OpenAI chat content blocks; a document part is refused.

    OpenAI's chat content has no document block. Approximating one (a PDF inside an image
    ``data:`` URL) yields a request the provider rejects at best and misreads at worst, so the
    caller is told to extract the document to text instead.
    """
    blocks: list[dict[str, object]] = []
    for part in parts:
        if part.part_type == "text":
            blocks.append({"type": "text", "text": part.text})
            continue
        if part.part_type == "document":
            raise OutboundRejected(
                "the OpenAI chat content schema has no document block; extract the document "
                "to text and send a text part instead of inventing a wire shape."
            )
        blocks.append(
            {
                "type": "image_url",
                "image_url": {"url": f"data:{part.media_type};base64,{part.data_b64}"},
            }
        )
    return blocks
