"""The text of a container read with its files: its own text, then one section per file.

A container's files are read where it is read (bridge/knowledge/enclosures.py), and what the
cache keeps and the queue carries is one string; this module writes and reads its shape. Each
section opens with a marker line holding the file's path in the container and either its kind,
type and size or the refusal that left it out, as JSON. The JSON is ASCII (anything else
escaped), so a marker is one line that no normalisation of the text changes, and a line of a
file's text that opens as a marker does is quoted before it is written, so only the writer
opens a section. See docs/spec-decisions.md, "Attachments inside attachments".
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from bridge.knowledge.labels import FALLBACK_LABEL, safe_label

_PREFIX = "[airlock: enclosed "
_MARKER = re.compile(r"^\[airlock: enclosed (\{[ -~]*\})\]$", re.M)
_READS_AS_MARKER = re.compile(r"^(?=\[airlock: enclosed )", re.M)
# A quote mark, as the selection quotes a body line that reads as a block heading.
_QUOTE = ">"
_PATH_SEPARATORS = re.compile(r"[/\\]")


class MalformedSections(ValueError):
    """A marker line that this module did not write: a bug, or text that was not admitted."""


@dataclass(frozen=True)
class Section:
    """One file of a container: its ``path`` (names, outermost first, as the containers give
    them); read, its ``kind``, ``media_type``, ``byte_size`` and ``text``; left out, the
    ``error`` class name and ``reason``."""

    path: tuple[str, ...]
    byte_size: int | None
    kind: str = ""
    media_type: str = ""
    text: str = ""
    error: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Sections:
    own: str
    files: tuple[Section, ...]


def marker_bytes(depth: int) -> int:
    """The most bytes one marker takes for a file ``depth`` containers deep: each name up to
    255 characters and a reason up to 400, six bytes for a character escaped in JSON."""
    return 6 * (255 * depth + 400) + 256


def quote_markers(text: str) -> str:
    """``text`` with every line that opens as a marker quoted: a file's own words can never
    open a section."""
    return _READS_AS_MARKER.sub(_QUOTE, text)


def write(own: str, files: Sequence[Section]) -> str:
    """The container's text: ``own`` (already quoted), then each file's section."""
    lines = [own]
    for section in files:
        entry: dict[str, object] = {"path": list(section.path), "bytes": section.byte_size}
        if section.error:
            entry |= {"error": section.error, "reason": section.reason}
        else:
            entry |= {"kind": section.kind, "type": section.media_type}
        marker = json.dumps(entry, ensure_ascii=True, separators=(",", ":"))
        lines.append(f"{_PREFIX}{marker}]")
        if section.text:
            lines.append(section.text)
    return "\n".join(lines)


def read(text: str) -> Sections:
    """The container's own text and its files' sections, as :func:`write` wrote them."""
    markers = list(_MARKER.finditer(text))
    if not markers:
        return Sections(text, ())
    own = text[: markers[0].start()].removesuffix("\n")
    files = []
    for index, marker in enumerate(markers):
        end = markers[index + 1].start() - 1 if index + 1 < len(markers) else len(text)
        body = text[marker.end() + 1 : end] if marker.end() < end else ""
        files.append(_section(marker.group(1), body))
    return Sections(own, tuple(files))


class _Marker(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A marker's JSON, decoded strictly: it crosses the queue inside a stored answer."""

    path: list[str]
    bytes: Annotated[int, msgspec.Meta(ge=0)] | None
    kind: str = ""
    type: str = ""
    error: Literal["", "IngestionRejected", "ExtractionFailed"] = ""
    reason: str = ""


def _section(marker: str, body: str) -> Section:
    try:
        entry = msgspec.json.decode(marker, type=_Marker)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise MalformedSections(f"a section marker is malformed: {exc}") from None
    if entry.error:
        return Section(tuple(entry.path), entry.bytes, error=entry.error, reason=entry.reason)
    if not entry.path:
        # Only a refusal speaks for the container itself (its own text, its uncounted files).
        raise MalformedSections("a section marker names no file")
    return Section(tuple(entry.path), entry.bytes, entry.kind, entry.type, body)


def member_label(container: str, path: Sequence[str]) -> str:
    """The label a file is cited by: the container's label, then each name on its path, each
    step made safe as a label is (an archive's own folders kept as steps)."""
    if not path:
        return container
    steps = [
        safe_label(step)
        for name in path
        for step in _PATH_SEPARATORS.split(name)
        if step.strip() not in ("", ".", "..")
    ]
    return "/".join([container, *(steps or [FALLBACK_LABEL])])
