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


def _section(marker: str, body: str) -> Section:
    try:
        entry = json.loads(marker)
        path = tuple(entry["path"])
        size = entry["bytes"]
        if not all(isinstance(name, str) for name in path) or not (
            size is None or (isinstance(size, int) and size >= 0)
        ):
            raise TypeError("a section's path or size is malformed")
        if "error" in entry:
            return Section(path, size, error=str(entry["error"]), reason=str(entry["reason"]))
        return Section(path, size, str(entry["kind"]), str(entry["type"]), body)
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedSections(f"a section marker is malformed: {exc}") from exc


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
