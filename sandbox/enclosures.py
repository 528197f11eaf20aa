"""The files an e-mail or a ZIP archive carries, unpacked in a jailed child for the parent.

An attachment is a document of its own: it must meet the same guards, ceilings and sandbox as
an upload, in a child of its own, and be cited by its own name. Decoding it (base64, quoted-
printable, inflate) is parsing the container, so a child does that and answers the files as
bytes; the trusted side decides what each is and reads it apart
(bridge/knowledge/enclosures.py). What the child could not or would not hand back is named
with the reason, so nothing a container holds goes unsaid. See docs/sandbox.md, "Attachments".
"""

from __future__ import annotations

import math
from typing import Annotated

import msgspec

from sandbox.errors import MalformedAnswer

#: The internal kind that unpacks each container kind the bridge declares.
UNPACK_KINDS = {"email": "email-unpack", "archive": "archive-unpack"}
#: A member's name as the container gives it (a path inside an archive): long enough for any
#: real one, short enough that a name cannot carry a page of text into a reason.
MAX_NAME_CHARS = 1000
MAX_REASON_CHARS = 1000
_MAX_MEDIA_TYPE_CHARS = 255
# The answer's JSON around the members' base64: names, types and reasons of every member.
_ANSWER_SLACK_BYTES = 1024 * 1024

_Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]
_Reason = Annotated[str, msgspec.Meta(max_length=MAX_REASON_CHARS)]
_MediaType = Annotated[str, msgspec.Meta(max_length=_MAX_MEDIA_TYPE_CHARS)]
_Count = Annotated[int, msgspec.Meta(ge=0)]


class File(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A file the container holds, with the media type the container declares: its decoded
    ``data``, or None and the ``reason`` the child did not hand it back (encrypted, past a
    ceiling, a link), with the ``ExtractionLimits`` setting that would admit it, if one would."""

    name: _Name
    media_type: _MediaType
    data: bytes | None
    reason: _Reason = ""
    ceiling: _Name | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (not self.reason):
            raise ValueError("a file is either handed back or left out with a reason")


class Unpacked(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A container's files in its own order, at most ``max_members`` of them handed back or
    named; ``unlisted`` counts the rest (10,000 names would bury the reasons)."""

    files: list[File]
    unlisted: _Count = 0


def encode(unpacked: Unpacked) -> str:
    """The unpacking child's answer (bytes travel as base64)."""
    return msgspec.json.encode(unpacked).decode("utf-8")


def answer_allowance(max_unpacked_bytes: int) -> int:
    """Answer bytes an unpacking needs: its files' bytes in base64, and their descriptions."""
    return math.ceil(max_unpacked_bytes * 4 / 3) + _ANSWER_SLACK_BYTES


def read_unpacked(untrusted_text: str, max_members: int, max_unpacked_bytes: int) -> Unpacked:
    """An unpacking child's answer, checked against the ceilings it was given: a child that
    hands back more files or bytes than it was allowed is malformed, not believed."""
    try:
        unpacked = msgspec.json.decode(untrusted_text, type=Unpacked)
    except msgspec.ValidationError as exc:
        raise MalformedAnswer(f"the unpacking's answer is malformed: {exc}") from None
    except msgspec.DecodeError as exc:
        raise MalformedAnswer(f"the unpacking's answer is not JSON: {exc}") from None
    if len(unpacked.files) > max_members:
        raise MalformedAnswer(
            f"the unpacking answers {len(unpacked.files)} files, over the {max_members} it may"
        )
    decoded = sum(len(file.data) for file in unpacked.files if file.data is not None)
    if decoded > max_unpacked_bytes:
        raise MalformedAnswer(
            f"the unpacking answers {decoded:,} decoded bytes, over the "
            f"{max_unpacked_bytes:,} it may"
        )
    return unpacked


class Packing:
    """A container's files as its unpacking child gathers them, under the job's ceilings:
    the first ``max_members`` files (handed back or named), and no more than
    ``max_unpacked_bytes`` decoded in all."""

    def __init__(self, max_members: int, max_unpacked_bytes: int) -> None:
        self._max_members = max_members
        self._room = max_unpacked_bytes
        self._max_unpacked_bytes = max_unpacked_bytes
        self._files: list[File] = []
        self._unlisted = 0

    def admits(self, name: str, size: int) -> bool:
        """Whether a file of ``size`` decoded bytes fits; one that does not is named as left
        out, with the ceiling to raise, before anything is decoded."""
        if self._full():
            return False
        if size > self._room:
            self.leave_out(
                name,
                f"its {size:,} bytes would take the files unpacked past "
                f"{self._max_unpacked_bytes:,} bytes",
                "max_uncompressed_bytes",
            )
            return False
        return True

    def add(self, name: str, media_type: str, data: bytes) -> None:
        """A file, decoded; one that no longer fits is left out as :meth:`admits` says."""
        if self.admits(name, len(data)):
            self._room -= len(data)
            self._files.append(File(_cut(name), media_type[:_MAX_MEDIA_TYPE_CHARS], data))

    def leave_out(self, name: str, reason: str, ceiling: str | None = None) -> None:
        if not self._full():
            self._files.append(File(_cut(name), "", None, reason[:MAX_REASON_CHARS], ceiling))

    def _full(self) -> bool:
        """Whether ``max_members`` files are answered, handed back or named: the rest are
        counted (10,000 links or oversized files must not bury the reasons either)."""
        if len(self._files) < self._max_members:
            return False
        self._unlisted += 1
        return True

    def answer(self) -> str:
        return encode(Unpacked(self._files, self._unlisted))


def _cut(name: str) -> str:
    return name[:MAX_NAME_CHARS]
